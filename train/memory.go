package train

import (
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/train/memory"
)

// MemoryOf estimates the engine's memory for cfg on data of the given sizes. It mirrors the
// allocations of newEngine, the model workspaces, the deferred first-layer state and a
// checkpoint, rounding up where they depend on the round (Poisson batches). It never allocates,
// so it can refuse a model far too large to build.
func MemoryOf(cfg Config, s memory.DataSizes) (memory.Memory, error) {
	return MemoryOn(cfg, s, memory.Host)
}

// MemoryOn is MemoryOf for the allocations of a given backend. On a device an nn model's
// workspace is counted by running its passes on a backend that only counts
// (nn.DeviceMemory): the GPU holds every replica's convolution patches at once, which the
// CPU makes a chunk at a time.
func MemoryOn(cfg Config, s memory.DataSizes, on memory.Backend) (memory.Memory, error) {
	return memory.Estimate(cfg.memoryTraining(), s, on)
}

// memoryTraining is what the memory estimate needs of cfg.
func (c *Config) memoryTraining() memory.Training {
	return memory.Training{Model: c.Model, Algorithm: c.Algorithm, Batching: c.Batching, BatchSize: c.BatchSize,
		LocalSteps: c.LocalSteps, EvalBatch: c.EvalBatch, Informed: c.Informed, RecordUpload: c.RecordUpload,
		RecordParams: c.RecordParams, NonGaussian: c.mechanism() != algo.Gaussian, ClientDP: c.IsClientDP(),
		PoissonMixture: usesPoissonMixture(*c, TargetInfo{}), Canaries: c.Canaries}
}
