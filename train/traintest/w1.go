package traintest

import (
	"context"
	"fmt"
	"time"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// W1 (defined in docs/training.md): Noisy-FedAvg, m = 10 clients x 600 samples of 784 features
// (class-conditional Gaussians), 10 classes, MLP 784-64-10 tanh, T = 20, K = 5, B = 32, eta =
// 0.05, V = 1, sigma = 0.01; replicas are half on C, half on C' (client 0's sample 0 replaced).
const (
	w1Clients, W1PerClient, w1Dim, w1Classes, w1Hidden = 10, 600, 784, 10, 64
)

// W1Result is the outcome of one W1 run.
type W1Result struct {
	Replicas, Rounds int
	Seconds          float64
	// ReplicaRoundsPerSec is Replicas * Rounds / Seconds, the benchmark's metric.
	ReplicaRoundsPerSec float64
	// GEMMGFlops is the rate of the dense-layer products counted as the reference does
	// (forward, weight gradient and hidden-layer input gradient: about 4.02 B d per client step).
	GEMMGFlops float64
}

func (r W1Result) String() string {
	return fmt.Sprintf("W1 replicas=%d rounds=%d seconds=%.3f replica_rounds_per_s=%.2f gemm_GFLOP/s=%.2f",
		r.Replicas, r.Rounds, r.Seconds, r.ReplicaRoundsPerSec, r.GEMMGFlops)
}

// W1Config is the training configuration of W1.
func W1Config() train.Config {
	return train.Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{w1Hidden}, Activation: "tanh"},
		Rounds: 20, LocalSteps: 5, LearningRate: 0.05, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.01,
		Batching: "fixed", BatchSize: 32, Seed: 1,
	}
}

// W1Data returns W1's two worlds: C and C' differ in sample 0 of client 0.
func W1Data() (c, cp []*datasets.Dataset, target train.TargetInfo) {
	means := make([]float32, w1Classes*w1Dim)
	philox.AddGaussian(means, 0, 0, 0, 0, 0.1)
	z := make([]float32, w1Dim)
	for i := 0; i < w1Clients; i++ {
		ds := &datasets.Dataset{Name: fmt.Sprintf("w1-client%d", i), Shape: []int{w1Dim}, Classes: w1Classes,
			Features: make([]float32, W1PerClient*w1Dim), Labels: make([]int32, W1PerClient)}
		rng := philox.NewRand(0, 1, uint32(i), philox.DomainInit, 1)
		for j := 0; j < W1PerClient; j++ {
			y := rng.Below(w1Classes)
			ds.Labels[j] = int32(y)
			clear(z)
			philox.AddGaussian(z, 0, 2+uint32(i), uint32(j), 0, 1)
			for q := range z {
				ds.Features[j*w1Dim+q] = means[y*w1Dim+q] + z[q]
			}
		}
		c = append(c, ds)
	}
	cp = append(cp, c...)
	alt := &datasets.Dataset{Name: "w1-client0'", Shape: c[0].Shape, Classes: w1Classes,
		Features: append([]float32(nil), c[0].Features...), Labels: append([]int32(nil), c[0].Labels...)}
	alt.Labels[0] = (c[0].Labels[0] + 1) % w1Classes
	clear(z)
	philox.AddGaussian(z, 0, 1000, 0, 0, 1)
	for q := range z {
		alt.Features[q] = means[int(alt.Labels[0])*w1Dim+q] + z[q]
	}
	cp[0] = alt
	return c, cp, train.TargetInfo{Client: 0, Index: 0}
}

type discard struct{}

func (discard) Checkpoint(context.Context, *checkpoint.Checkpoint) error { return nil }

// RunW1 runs benchmark W1 with the given (even) number of replicas on the CPU backend, after a
// one-round warm-up, and returns its timing.
func RunW1(ctx context.Context, replicas int) (W1Result, error) {
	if replicas < 2 || replicas%2 != 0 {
		return W1Result{}, fmt.Errorf("w1: need an even replica count >= 2, got %d", replicas)
	}
	c, cp, tgt := W1Data()
	cfg := W1Config()
	warm := cfg
	warm.Rounds = 1
	pairs := train.PairRange{First: 0, Count: replicas / 2}
	if err := train.Train(ctx, train.Job{Config: warm, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: discard{}}); err != nil {
		return W1Result{}, fmt.Errorf("w1 warm-up: %w", err)
	}
	start := time.Now()
	if err := train.Train(ctx, train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: discard{}}); err != nil {
		return W1Result{}, fmt.Errorf("w1: %w", err)
	}
	sec := time.Since(start).Seconds()
	b := float64(cfg.BatchSize)
	gemmPerStep := 2 * b * (2*(w1Hidden*w1Dim+w1Classes*w1Hidden) + w1Classes*w1Hidden)
	steps := float64(replicas * cfg.Rounds * w1Clients * cfg.LocalSteps)
	return W1Result{
		Replicas: replicas, Rounds: cfg.Rounds, Seconds: sec,
		ReplicaRoundsPerSec: float64(replicas*cfg.Rounds) / sec,
		GEMMGFlops:          steps * gemmPerStep / sec / 1e9,
	}, nil
}
