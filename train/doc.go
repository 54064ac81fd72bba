// Package train is the training engine of fedaudit: it trains the coupled pairs of runs of a
// privacy audit (Noisy-FedAvg, Noisy-FedProx, DP-SGD on adjacent datasets C and C') with all
// replicas of a shard batched together, and hands every checkpoint to a Recorder.
//
// Computation goes through the Backend interface (batched GEMM and a few kernels over device
// buffers); CPU is its pure-Go implementation. Randomness is counter-based (Philox4x32-10), so
// a run's results never depend on the replica count, shard layout, thread count or backend.
// docs/training.md defines every algorithm exactly as implemented.
package train
