//go:build cgo

package hostshim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// orderWorlds is clients datasets of n samples of the given shape with random features and
// labels, and the same with client 0's first label changed.
func orderWorlds(seed uint64, clients, n int, shape []int, classes int) (wc, wcp []*datasets.Dataset) {
	rng := rand.New(rand.NewPCG(seed, 2))
	dim := 1
	for _, s := range shape {
		dim *= s
	}
	for i := range clients {
		ds := &datasets.Dataset{Name: fmt.Sprint(i), Shape: slices.Clone(shape), Classes: classes, Features: make([]float32, n*dim), Labels: make([]int32, n)}
		for j := range ds.Features {
			ds.Features[j] = float32(rng.Float64())
		}
		for j := range ds.Labels {
			ds.Labels[j] = int32(rng.IntN(classes))
		}
		wc = append(wc, ds)
	}
	wcp = slices.Clone(wc)
	alt := wc[0].Clone()
	alt.Labels[0] = (alt.Labels[0] + 1) % int32(classes)
	wcp[0] = alt
	return wc, wcp
}

// Every kernel's threads must be independent of each other within a launch (a GPU runs them in
// no order), so whole runs give the same bits whatever order the shim runs a launch's threads
// in: ascending, descending, and odd threads first. A kernel in which a thread reads what
// another writes would give other bits in another order. The cases cover the image kernels of
// the direct convolutions (9 and 17 input channels: two channel tiles), Winograd's transforms
// and GroupNorm (a small ResNet), pooling with and without kept indices, the MLP's step and
// clipping kernels, FedProx and Poisson batches.
func TestThreadOrderKeepsBits(t *testing.T) {
	base := train.Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"},
		Rounds: 2, LocalSteps: 2, LearningRate: 0.1, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.05,
		Batching: "fixed", BatchSize: 3, Seed: 5, Checkpoints: []int{2}, RecordParams: true, RecordUpload: true, Informed: true}
	cases := []struct {
		name  string
		edit  func(*train.Config)
		shape []int
		opt   cuda.Options
	}{
		{"mlp", func(*train.Config) {}, []int{7}, cuda.Options{Block: 32}},
		{"mlp-fedprox-poisson", func(c *train.Config) {
			c.Algorithm, c.ProxAlpha, c.Batching, c.Participants = algo.FedProx, 0.3, algo.Poisson, 2
		}, []int{7}, cuda.Options{Block: 32}},
		{"lenet5", func(c *train.Config) { c.Model, c.Informed = model.Config{Kind: "lenet5"}, false }, []int{1, 28, 28}, cuda.Options{}},
		{"resnet-winograd", func(c *train.Config) {
			c.Model, c.Informed = model.Config{Kind: "resnet", Stages: 2, Blocks: 1, Width: 16, Groups: 4}, false
		}, []int{3, 8, 8}, cuda.Options{}},
		{"sequential-direct", func(c *train.Config) {
			c.Informed = false
			c.Model = model.Config{Kind: "sequential", Layers: []nn.LayerSpec{
				{Kind: "conv2d", Out: 9, Kernel: 3, Padding: 1}, {Kind: "relu"}, {Kind: "conv2d", Out: 17, Kernel: 3, Stride: 2, Padding: 1}, {Kind: "relu"},
				{Kind: "conv2d", Out: 5, Kernel: 3, Padding: 1}, {Kind: "maxpool", Kernel: 2}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}}
		}, []int{3, 9, 7}, cuda.Options{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			wc, wcp := orderWorlds(3, 3, 6, tc.shape, 3)
			run := func(o ThreadOrder) []*checkpoint.Checkpoint {
				dev := device(t)
				dev.SetOrder(o)
				ops := cuda.NewOps(dev, tc.opt)
				defer ops.Close()
				rec := &memRec{}
				job := train.Job{Config: cfg, WorldC: wc, WorldCPrime: wcp, Pairs: train.PairRange{Count: 2}, Recorder: cuda.CheckRecorder(ops, rec)}
				if err := train.TrainOn(context.Background(), ops, job); err != nil {
					t.Fatal(err)
				}
				if err := ops.Err(); err != nil {
					t.Fatal(err)
				}
				return rec.cps
			}
			want := run(Ascending)
			for _, o := range []ThreadOrder{Descending, DescendingOddFirst} {
				t.Run(fmt.Sprint("order ", o), func(t *testing.T) { paritytest.SameRunBits(t, run(o), want) })
			}
		})
	}
}
