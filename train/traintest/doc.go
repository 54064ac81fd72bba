// Package traintest holds the fixtures of the training benchmarks, outside the engine: W1
// and W2 (defined in docs/training.md), their configurations and data, and RunW1 and RunW2,
// which time them.
// The GPU backend's parity suite and kit (cuda/) run the same fixture.
package traintest
