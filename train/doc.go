// Package train is the training engine of fedaudit: it trains the coupled pairs of runs of a
// privacy audit (Noisy-FedAvg, Noisy-FedProx, DP-SGD and the DP-FedAvg family on adjacent
// datasets C and C') with all replicas of a shard batched together, and hands every checkpoint
// to a Recorder.
//
// It owns the algorithms: a round strategy per family (round.go; dpfedavg.go, which follows
// the DP-FedAvg privacy plans of train/privacy), the local-step forms chosen once per engine
// (steps.go: direct, fused, deferred.go), the configuration and its validation, the memory
// estimate and the observers of a run (the informed adversary's statistics, checkpoints, the
// canaries). Its sub-packages hold what stands apart from the engine: the models with their
// backward passes and their configuration (train/model), the privacy plans (train/privacy),
// the canaries' configuration (train/canary), the mechanisms' noise (train/noise), the memory
// estimate's units (train/memory) and what a checkpoint records (train/checkpoint).
// Computation goes through compute.Backend: package cpu is the CPU implementation, package
// cuda the GPU one. Randomness is counter-based (internal/philox), so a run's results never
// depend on the replica count, shard layout, thread count or backend. docs/training.md defines
// every algorithm exactly as implemented.
package train
