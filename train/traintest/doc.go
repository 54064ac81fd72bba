// Package traintest holds the fixtures of the training benchmarks, outside the engine: W1
// (bench/README.md), its configuration and data, and RunW1, which times it on the CPU backend.
// The GPU backend's parity suite and kit (cuda/) run the same fixture.
package traintest
