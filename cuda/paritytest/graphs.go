package paritytest

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// grapher is a backend that counts its CUDA graphs (cuda.Ops).
type grapher interface {
	GraphStats() cuda.GraphStats
}

// Running each batch as a CUDA graph (Options.Graphs) issues the same launches in the same
// order, so whole runs must give the bits of the same backend without graphs; and from the
// second round on, batches repeat (the noise's round is staged, the parameter buffers swap
// every round), so graphs must be replayed, not only captured. Configurations: Noisy-FedAvg
// in the deferred form (the fused hidden step), FedProx with staircase noise and partial
// participation, DP-FedAvg with Laplace server noise and informed statistics, and LeNet-5.
func testGraphsKeepBits(t *testing.T, f Factory) {
	base := train.Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"},
		Rounds: 4, LocalSteps: 2, LearningRate: 0.3, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.05,
		Batching: "fixed", BatchSize: 4, Seed: 7, Checkpoints: []int{2, 4}, Informed: true,
		RecordParams: true, RecordUpload: true, EvalBatch: 5,
	}
	cases := []struct {
		name  string
		edit  func(*train.Config)
		image bool
	}{
		{"fedavg-deferred", func(*train.Config) {}, false},
		{"fedprox-staircase", func(c *train.Config) {
			c.Algorithm, c.ProxAlpha, c.Mechanism, c.StaircaseEpsilon, c.Informed, c.Participants = algo.FedProx, 0.3, algo.Staircase, 2, false, 2
		}, false},
		{"dpfedavg-laplace", func(c *train.Config) {
			c.Algorithm, c.NoiseStd, c.ClipNorm, c.RecordUpload = algo.DPFedAvg, 0, 0, false
			c.SamplingRate, c.NoiseMultiplier, c.UpdateClip, c.ServerLR, c.Mechanism = 0.7, 0.8, 0.5, 1, algo.Laplace
		}, false},
		{"lenet5", func(c *train.Config) {
			c.Model, c.Informed, c.Rounds, c.Checkpoints = model.Config{Kind: "lenet5"}, false, 5, []int{5}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			c.edit(&cfg)
			var wc, wcp []*datasets.Dataset
			if c.image {
				wc, wcp = imageWorlds(2, 9, []int{1, 28, 28}, 3)
			} else {
				wc, wcp = worlds(3, 9, 7, 3)
			}
			job := train.Job{Config: cfg, WorldC: wc, WorldCPrime: wcp, Target: train.TargetInfo{Client: 0, Index: 0}, Pairs: train.PairRange{First: 0, Count: 2}}
			run := func(opt cuda.Options) ([]*checkpoint.Checkpoint, cuda.GraphStats) {
				var st cuda.GraphStats
				cps := trainOnKernels(t, f, opt, job, func(be Backend) {
					if g, ok := be.(grapher); ok {
						st = g.GraphStats()
					}
				})
				return cps, st
			}
			want, _ := run(cuda.Options{Block: 32})
			got, st := run(cuda.Options{Graphs: true, Block: 32})
			if st.Captured == 0 {
				t.Skip("the device runs no graphs")
			}
			t.Logf("%d graphs captured, %d replayed", st.Captured, st.Replayed)
			if st.Replayed == 0 {
				t.Errorf("no graph was replayed in %d rounds (%d captured)", cfg.Rounds, st.Captured)
			}
			SameRunBits(t, got, want)
		})
	}
}

// trainOnKernels trains job on the backend f makes with opt and returns its checkpoints; after,
// when not nil, sees the backend before it is closed.
func trainOnKernels(t *testing.T, f Factory, opt cuda.Options, job train.Job, after func(Backend)) []*checkpoint.Checkpoint {
	t.Helper()
	be := f(t, opt)
	defer be.Close()
	var rec memRecorder
	job.Recorder = cuda.CheckRecorder(be, &rec)
	if err := train.TrainOn(context.Background(), be, job); err != nil {
		t.Fatal(err)
	}
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	if after != nil {
		after(be)
	}
	return rec.cps
}

// SameRunBits fails unless every recorded value of got has want's bits.
func SameRunBits(t *testing.T, got, want []*checkpoint.Checkpoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d checkpoints, want %d", len(got), len(want))
	}
	f64 := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	for i, w := range want {
		g := got[i]
		if len(g.Replicas) != len(w.Replicas) {
			t.Fatalf("checkpoint %d: %d replicas, want %d", i, len(g.Replicas), len(w.Replicas))
		}
		for r, wr := range w.Replicas {
			gr := g.Replicas[r]
			ok := gr.Diverged == wr.Diverged && f64(gr.TrainLoss, wr.TrainLoss) && slices.EqualFunc(gr.Stats, wr.Stats, f64) &&
				f64(gr.TargetLoss[0], wr.TargetLoss[0]) && f64(gr.TargetLoss[1], wr.TargetLoss[1]) &&
				f64(gr.TargetMargin[0], wr.TargetMargin[0]) && f64(gr.TargetMargin[1], wr.TargetMargin[1])
			same32 := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
			ok = ok && slices.EqualFunc(gr.Params, wr.Params, same32) && slices.EqualFunc(gr.Upload, wr.Upload, same32)
			if !ok {
				t.Fatalf("round %d replica %d: the recorded values differ in their bits", w.Round, r)
			}
		}
	}
}
