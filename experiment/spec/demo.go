package spec

import (
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// Demo is the built-in default experiment behind `audit demo`: synthetic data, a small tanh
// MLP trained by Noisy-FedAvg, a Dirac canary replacing one sample of client 0, and the informed
// adversary's statistics recorded, sized to finish in well under two minutes on two cores.
func Demo() *Config {
	cfg := &Config{
		Name:  "demo",
		Seed:  20261122,
		Pairs: 500,
		Data: DataConfig{
			Source:      "synthetic",
			Synthetic:   SyntheticConfig{Dim: 16, Classes: 4, Separation: 3, Noise: 1},
			Clients:     5,
			PerClient:   16,
			Split:       "iid",
			TestSamples: 200,
		},
		Adjacency: AdjacencyConfig{Kind: "replace", Client: 0, Index: 0, Canary: "dirac"},
		Train: train.Config{
			Algorithm:    algo.FedAvg,
			Model:        model.Config{Kind: "mlp", Hidden: []int{16}, Activation: "tanh"},
			Rounds:       20,
			LocalSteps:   2,
			LearningRate: 0.1,
			Schedule:     "constant",
			ClipNorm:     1,
			NoiseStd:     0.05,
			Batching:     "full",
			Checkpoints:  []int{1, 2, 5, 10, 20},
			Informed:     true,
		},
		Audit: AuditConfig{Smoothness: 1},
	}
	cfg.FillDefaults()
	return cfg
}
