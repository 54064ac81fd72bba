package paritytest

import (
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// Grouping clients' local steps into one launch of hidden_step (Options.ClientBatch,
// train/grouped.go) computes every block as alone and a group's products element by element as
// the clients' own calls, so whole runs must give the bits of the same backend running a client
// at a time (ClientBatch 1), whatever the launch shape, where the device's products sum in
// order (cuda.InOrderGemmer: the shim); on a GPU cuBLAS may round the group's larger products
// differently (as an H100 did), and the runs must agree within compareRuns' tolerances.
// Noisy-FedAvg and FedProx in the deferred form, 6 clients with the target in the middle
// (groups before and after it), under the default launch and a tiny one (blocks of 7 threads,
// grids of 3 blocks looping over the grouped replicas).
func testClientGroupsKeepBits(t *testing.T, f Factory) {
	base := train.Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"},
		Rounds: 3, LocalSteps: 2, LearningRate: 0.3, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.05,
		Batching: "fixed", BatchSize: 4, Seed: 7, Checkpoints: []int{1, 3}, Informed: true,
		RecordParams: true, RecordUpload: true, EvalBatch: 5,
	}
	fedprox := base
	fedprox.Algorithm, fedprox.ProxAlpha, fedprox.Participants = algo.FedProx, 0.3, 4
	wc, wcp := worlds(6, 9, 7, 3)
	// The worlds differ in client 0: moved to position 2, so that groups form on both sides.
	for _, w := range [][]*datasets.Dataset{wc, wcp} {
		w[0], w[1], w[2] = w[1], w[2], w[0]
	}
	inOrder := gemmInOrder(t, f)
	for _, c := range []struct {
		name string
		cfg  train.Config
	}{{"fedavg", base}, {"fedprox-partial", fedprox}} {
		for _, o := range []cuda.Options{{}, {Block: 7, MaxGrid: 3}} {
			t.Run(c.name+"/"+cfgName(o), func(t *testing.T) {
				job := train.Job{Config: c.cfg, WorldC: wc, WorldCPrime: wcp, Target: train.TargetInfo{Client: 2, Index: 0}, Pairs: train.PairRange{First: 0, Count: 2}}
				one := o
				one.ClientBatch = 1
				want := trainOnKernels(t, f, one, job, nil)
				got := trainOnKernels(t, f, o, job, nil)
				if inOrder {
					SameRunBits(t, got, want)
				} else {
					compareRuns(t, want, got)
				}
			})
		}
	}
}

// gemmInOrder reports whether f's backends sum their products in order (cuda.Ops.GemmInOrder).
func gemmInOrder(t *testing.T, f Factory) bool {
	be := f(t, cuda.Options{})
	defer be.Close()
	g, ok := be.(interface{ GemmInOrder() bool })
	return ok && g.GemmInOrder()
}
