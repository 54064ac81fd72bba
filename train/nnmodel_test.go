package train

import (
	"context"
	"github.com/fedaudit/fedaudit/compute"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

// imageWorlds splits synthetic images (classes prototypes plus noise, c x h x w) into m clients
// of n samples; in C' the target sample is replaced by a blank image of another class.
func imageWorlds(t *testing.T, m, n, c, h, w, classes int, target TargetInfo) (wc, wcp []*datasets.Dataset) {
	t.Helper()
	all, err := datasets.SyntheticImages(datasets.SyntheticImageConfig{N: m * n, Classes: classes, Channels: c, Height: h, Width: w, Blobs: 2, Noise: 0.1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < m; i++ {
		idx := make([]int, n)
		for j := range idx {
			idx[j] = i*n + j
		}
		wc = append(wc, all.Subset("client", idx))
	}
	for i, ds := range wc {
		if i != target.Client {
			wcp = append(wcp, ds)
			continue
		}
		alt := ds.Clone()
		alt.Labels[target.Index] = (alt.Labels[target.Index] + 1) % int32(classes)
		clear(alt.Features[target.Index*alt.Dim() : (target.Index+1)*alt.Dim()])
		wcp = append(wcp, alt)
	}
	return wc, wcp
}

// tinyCNN is a sequential CNN on 1x8x8 images with 3 classes (about 150 parameters).
func tinyCNN() Config {
	return Config{
		Algorithm: algo.FedAvg,
		Model: model.Config{Kind: "sequential", Input: []int{1, 8, 8}, Layers: []nn.LayerSpec{
			{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, {Kind: "relu"}, {Kind: "maxpool", Kernel: 2},
			{Kind: "conv2d", Out: 4, Kernel: 3}, {Kind: "tanh"}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}},
		Rounds: 2, LocalSteps: 2, LearningRate: 0.2, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.05,
		Batching: "fixed", BatchSize: 4, Seed: 7, Checkpoints: []int{1, 2}, Informed: true,
		RecordParams: true, RecordUpload: true,
	}
}

// LeNet-5 on synthetic 28x28 images learns: the mean training loss of every replica falls over
// the rounds (noise small against the steps).
func TestLeNet5Trains(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 1}
	c, cp := imageWorlds(t, 3, 20, 1, 28, 28, 4, tgt)
	cfg := Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "lenet5"},
		Rounds: 6, LocalSteps: 4, LearningRate: 0.3, Schedule: "constant", ClipNorm: 5, NoiseStd: 0.001,
		Batching: "fixed", BatchSize: 8, Seed: 3, Checkpoints: []int{0, 6},
	}
	cps := run(t, cfg, c, cp, tgt, PairRange{0, 1})
	if len(cps) != 2 {
		t.Fatalf("%d checkpoints, want 2", len(cps))
	}
	for r := range cps[0].Replicas {
		l0, l1 := cps[0].Replicas[r].TrainLoss, cps[1].Replicas[r].TrainLoss
		t.Logf("replica %d: train loss %.4f -> %.4f", r, l0, l1)
		if !(l1 < 0.9*l0) || math.IsNaN(l1) {
			t.Errorf("replica %d: train loss %g -> %g: want a decrease of at least 10%%", r, l0, l1)
		}
	}
}

// CNN results are bit-identical for any thread count, grouping of pairs and shard split, in the
// direct form with whole-gradient clipping (fedavg, a sequential spec and a tiny ResNet) and
// with per-example clipping (dpsgd, Poisson batches).
func TestCNNInvariance(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 0}
	c, cp := imageWorlds(t, 3, 6, 1, 8, 8, 3, tgt)
	seq := tinyCNN()
	seq.Participants = 2
	res := tinyCNN()
	res.Model = model.Config{Kind: "resnet", Blocks: 1, Width: 4, Groups: 2, Input: []int{1, 8, 8}}
	c1, cp1 := imageWorlds(t, 1, 12, 1, 8, 8, 3, TargetInfo{Client: 0, Index: 3})
	dp := tinyCNN()
	dp.Algorithm, dp.Batching, dp.BatchSize, dp.LearningRate = algo.DPSGD, "poisson", 4, 0.1
	cases := []struct {
		name  string
		cfg   Config
		c, cp []*datasets.Dataset
		tgt   TargetInfo
	}{{"sequential-fedavg", seq, c, cp, tgt}, {"resnet-fedavg", res, c, cp, tgt},
		{"sequential-dpsgd", dp, c1, cp1, TargetInfo{Client: 0, Index: 3}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Threads = 2
			ref := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 5})
			last := ref[len(ref)-1].Replicas
			if slices.Equal(last[0].Params, last[1].Params) || slices.Equal(last[0].Params, last[2].Params) {
				t.Fatal("worlds or pairs gave identical parameters: the test would not see a layout bug")
			}
			// Many-core thread counts too: a pool bug that shows only with 3 or more helpers (a
			// helper running one job twice) crashed every real machine while 2 cores stayed green.
			for _, v := range []struct{ threads, group int }{{1, 1}, {3, 2}, {1, 0}, {8, 2}, {16, 0}, {64, 1}} {
				cfg.Threads, cfg.GroupPairs = v.threads, v.group
				got := sortedReplicas(run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 5}))
				want := sortedReplicas(ref)
				if len(got) != len(want) {
					t.Fatalf("threads %d groups %d: %d states, want %d", v.threads, v.group, len(got), len(want))
				}
				for i := range got {
					a, b := got[i].rs, want[i].rs
					if got[i].round != want[i].round || a.Pair != b.Pair || a.World != b.World ||
						!slices.Equal(a.Params, b.Params) || !slices.Equal(a.Upload, b.Upload) || !slices.Equal(a.Stats, b.Stats) ||
						a.TrainLoss != b.TrainLoss || a.TargetLoss != b.TargetLoss || a.TargetMargin != b.TargetMargin {
						t.Fatalf("threads %d groups %d: round %d pair %d world %d differs", v.threads, v.group, got[i].round, a.Pair, a.World)
					}
				}
			}
			// Shards: pairs 0..1 and 2..4 run apart give the whole run's rows.
			cfg.Threads, cfg.GroupPairs = 1, 0
			a := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 2})
			b := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{2, 3})
			for k := range ref {
				parts := append(slices.Clone(a[k].Replicas), b[k].Replicas...)
				for r, rs := range ref[k].Replicas {
					if !slices.Equal(rs.Params, parts[r].Params) || rs.TargetLoss != parts[r].TargetLoss {
						t.Fatalf("round %d replica %d differs between the whole run and the shards", ref[k].Round, r)
					}
				}
			}
		})
	}
}

// Mistakes in a CNN configuration are reported at Check time (before any data), naming the
// field, or the layer and its shapes.
func TestCNNConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*model.Config)
		want string
	}{
		{"dense on an image", func(m *model.Config) {
			m.Layers = []nn.LayerSpec{{Kind: "conv2d", Out: 2, Kernel: 3}, {Kind: "dense", Out: 3}}
		}, "layer 2 (dense): input 2x6x6"},
		{"kernel too large", func(m *model.Config) {
			m.Layers = []nn.LayerSpec{{Kind: "conv2d", Out: 2, Kernel: 9}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}
		}, "layer 1 (conv2d): input 1x8x8: kernel 9"},
		{"no layers", func(m *model.Config) { m.Layers = nil }, "model.layers: sequential needs at least one layer"},
		{"bad input", func(m *model.Config) { m.Input = []int{8, 8} }, "model.input: want [channels, height, width]"},
		{"sequential without input", func(m *model.Config) { m.Input = nil }, ""},
		{"resnet groups", func(m *model.Config) { *m = model.Config{Kind: "resnet", Blocks: 1, Width: 6, Groups: 4} }, "model.groups: groups 4 must divide width 6"},
		{"resnet missing", func(m *model.Config) { *m = model.Config{Kind: "resnet"} }, "resnet needs blocks >= 1"},
		{"classic on resnet", func(m *model.Config) {
			*m = model.Config{Kind: "resnet", Blocks: 1, Width: 4, Groups: 2, Classic: true}
		}, "only lenet5 takes classic"},
		{"hidden on lenet5", func(m *model.Config) { *m = model.Config{Kind: "lenet5", Hidden: []int{3}} }, "lenet5 takes no hidden"},
		{"layers on lenet5", func(m *model.Config) { *m = model.Config{Kind: "lenet5", Layers: []nn.LayerSpec{{Kind: "relu"}}} }, "only sequential takes layers"},
		{"lenet5 on a small input", func(m *model.Config) { *m = model.Config{Kind: "lenet5", Input: []int{1, 8, 8}} }, "layer 4 (conv2d)"},
		{"unknown kind", func(m *model.Config) { *m = model.Config{Kind: "vgg"} }, `"vgg" is not softmax, mlp, quadratic, lenet5, resnet, sequential or external`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyCNN()
			tc.mod(&cfg.Model)
			err := cfg.Check(3, 6, 3)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// Against the data: a sequential spec without input takes the data's shape; an input that
	// does not match the data is refused.
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := imageWorlds(t, 2, 4, 1, 8, 8, 3, tgt)
	cfg := tinyCNN()
	cfg.Model.Input = nil
	run(t, cfg, c, cp, tgt, PairRange{0, 1})
	cfg.Model.Layers[len(cfg.Model.Layers)-1].Out = 5
	err := Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "the last layer has 5 outputs, the data has 3 classes") {
		t.Fatalf("wrong classes: error %v", err)
	}
	cfg.Model.Layers[len(cfg.Model.Layers)-1].Out = 3
	cfg.Model.Input = []int{1, 9, 9}
	err = Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "model.input: [1 9 9] is 81 values per sample, the data's samples have 64") {
		t.Fatalf("mismatched input: error %v", err)
	}
}

// plainBackend has compute.Backend's operations only (it delegates to the CPU backend).
type plainBackend struct{ compute.Backend }

// A CNN on a backend without image operations is refused with an error saying why.
func TestCNNRefusesBackendsWithoutImageOps(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := imageWorlds(t, 2, 4, 1, 8, 8, 3, tgt)
	cb := cpu.New(1)
	defer cb.Close()
	err := TrainOn(context.Background(), plainBackend{cb}, Job{Config: tinyCNN(), WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "needs a backend with image operations") {
		t.Fatalf("error %v, want a refusal naming the missing image operations", err)
	}
}

// The memory estimate of a CNN counts its parameters and grows with the batch.
func TestCNNMemory(t *testing.T) {
	cfg := tinyCNN()
	s := memory.DataSizes{Dim: 64, Shape: []int{1, 8, 8}, Classes: 3, Clients: 3, MaxSamples: 6}
	m, err := MemoryOf(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.ParamCountShape(cfg.Model, []int{1, 8, 8}, 3)
	if err != nil || m.Params != d || d != (3*9+3)+(4*3*9+4)+(4*2*2*3+3) {
		t.Fatalf("params %d, ParamCountShape %d (%v)", m.Params, d, err)
	}
	cfg.EvalBatch = 1024
	m2, err := MemoryOf(cfg, s)
	if err != nil || m2.PerPair <= m.PerPair {
		t.Fatalf("per pair %d with eval batch 1024, %d with 256 (%v)", m2.PerPair, m.PerPair, err)
	}
	cfg.Model.Input = nil
	if _, err := MemoryOf(cfg, memory.DataSizes{Dim: 1, Classes: 3, Clients: 3, MaxSamples: 6}); err == nil || !strings.Contains(err.Error(), "model.input") {
		t.Fatalf("sequential without input nor data shape: error %v", err)
	}
}
