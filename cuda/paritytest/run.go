package paritytest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

type memRecorder struct{ cps []*checkpoint.Checkpoint }

func (m *memRecorder) Checkpoint(_ context.Context, cp *checkpoint.Checkpoint) error {
	m.cps = append(m.cps, cp)
	return nil
}

// imageWorlds is worlds for images of the given shape [C, H, W] with pixels in [0, 1]: a
// class's images are bright in a band of rows of their own, plus noise.
func imageWorlds(m, n int, shape []int, classes int) (c, cp []*datasets.Dataset) {
	rng := rand.New(rand.NewPCG(7, 8))
	dim := shape[0] * shape[1] * shape[2]
	img := func(y int, dst []float32) {
		for q := range dst {
			row := q / shape[2] % shape[1]
			v := 0.2 + 0.2*rng.NormFloat64()
			if row%classes == y {
				v += 0.5
			}
			dst[q] = float32(min(max(v, 0), 1))
		}
	}
	for i := 0; i < m; i++ {
		ds := &datasets.Dataset{Name: fmt.Sprint("client", i), Shape: shape, Classes: classes,
			Features: make([]float32, n*dim), Labels: make([]int32, n)}
		for j := 0; j < n; j++ {
			y := rng.IntN(classes)
			ds.Labels[j] = int32(y)
			img(y, ds.Features[j*dim:(j+1)*dim])
		}
		c = append(c, ds)
	}
	cp = append(cp, c...)
	alt := *c[0]
	alt.Features = append([]float32(nil), c[0].Features...)
	alt.Labels = append([]int32(nil), c[0].Labels...)
	alt.Labels[0] = (alt.Labels[0] + 1) % int32(classes)
	img(int(alt.Labels[0]), alt.Features[:dim])
	cp[0] = &alt
	return c, cp
}

// worlds builds m clients of n samples around class means, and C' with sample 0 of client 0
// replaced.
func worlds(m, n, dim, classes int) (c, cp []*datasets.Dataset) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < m; i++ {
		ds := &datasets.Dataset{Name: fmt.Sprint("client", i), Shape: []int{dim}, Classes: classes,
			Features: make([]float32, n*dim), Labels: make([]int32, n)}
		for j := 0; j < n; j++ {
			y := rng.IntN(classes)
			ds.Labels[j] = int32(y)
			for q := 0; q < dim; q++ {
				mu := 0.0
				if q%classes == y {
					mu = 1
				}
				ds.Features[j*dim+q] = float32(mu + 0.5*rng.NormFloat64())
			}
		}
		c = append(c, ds)
	}
	cp = append(cp, c...)
	alt := *c[0]
	alt.Features = append([]float32(nil), c[0].Features...)
	alt.Labels = append([]int32(nil), c[0].Labels...)
	alt.Labels[0] = (alt.Labels[0] + 1) % int32(classes)
	for q := 0; q < dim; q++ {
		alt.Features[q] = float32(2 * rng.NormFloat64())
	}
	cp[0] = &alt
	return c, cp
}

// runCase is one whole-run configuration of testRunsMatchCPU: base edited, on m clients of
// the given classes (images of shape, or flat features when nil), for the pairs.
type runCase struct {
	name    string
	edit    func(*train.Config)
	m       int
	classes int
	pairs   train.PairRange
	shape   []int // an image shape [C, H, W] for convolutional models; nil: flat features
}

// runCases lists testRunsMatchCPU's configurations: one per algorithm, model and batching mode,
// the mechanisms, the gradient canary, and the convolutional models.
func runCases() []runCase {
	cases := []runCase{
		{"fedavg-mlp-tanh-fixed", func(*train.Config) {}, 3, 3, train.PairRange{First: 0, Count: 3}, nil},
		{"fedavg-one-pair", func(*train.Config) {}, 3, 3, train.PairRange{First: 4, Count: 1}, nil},
		{"fedprox-softplus-full-participants", func(c *train.Config) {
			c.Algorithm, c.ProxAlpha, c.Model.Activation, c.Batching = algo.FedProx, 0.5, "softplus", "full"
			c.Participants = 2
		}, 3, 3, train.PairRange{First: 0, Count: 2}, nil},
		// FedProx with fixed minibatches: the deferred form, so compute.HiddenStepper's step with
		// its pull towards the anchor and the shrinking of the earlier factors.
		{"fedprox-deferred-hidden-step", func(c *train.Config) {
			c.Algorithm, c.ProxAlpha = algo.FedProx, 0.5 // (K-1) B = 4 <= 7 inputs: deferred
		}, 3, 3, train.PairRange{First: 0, Count: 2}, nil},
		// The exact samplers of the non-Gaussian mechanisms: drawn on the device by a
		// compute.NoiseSampler, on the host by the CPU backend (the same bits).
		{"fedavg-laplace-uploads", func(c *train.Config) {
			c.Mechanism, c.Informed = algo.Laplace, false
		}, 3, 3, train.PairRange{First: 0, Count: 2}, nil},
		{"fedprox-stairunCase-participants", func(c *train.Config) {
			c.Algorithm, c.ProxAlpha, c.Mechanism, c.StaircaseEpsilon, c.Informed = algo.FedProx, 0.3, algo.Staircase, 2, false
			c.Participants = 2
		}, 3, 3, train.PairRange{First: 1, Count: 2}, nil},
		{"dpfedavg-stairunCase-server", func(c *train.Config) {
			c.Algorithm, c.NoiseStd, c.ClipNorm, c.RecordUpload = algo.DPFedAvg, 0, 0, false
			c.SamplingRate, c.NoiseMultiplier, c.UpdateClip, c.ServerLR = 0.7, 0.8, 0.5, 1
			c.Mechanism, c.StaircaseEpsilon = algo.Staircase, 1
		}, 3, 3, train.PairRange{First: 0, Count: 2}, nil},
		{"fedavg-relu-poisson-two-layers", func(c *train.Config) {
			c.Model.Activation, c.Model.Hidden, c.Batching = "relu", []int{5, 4}, "poisson"
		}, 2, 4, train.PairRange{First: 1, Count: 2}, nil},
		{"dpsgd-softmax", func(c *train.Config) {
			c.Algorithm, c.Model = algo.DPSGD, model.Config{Kind: "softmax"}
			c.Batching, c.ClipNorm, c.Informed, c.RecordUpload = "poisson", 0.5, false, false
		}, 1, 3, train.PairRange{First: 0, Count: 2}, nil},
		{"dpsgd-mlp", func(c *train.Config) {
			c.Algorithm, c.ClipNorm, c.Informed, c.RecordUpload = algo.DPSGD, 0.5, false, false
		}, 1, 3, train.PairRange{First: 0, Count: 2}, nil},
		{"fedavg-gradient-canary-gaussian", func(c *train.Config) {
			c.GradientCanary = &canary.Gradient{Norm: 6, Direction: canary.GaussianDirection}
		}, 3, 3, train.PairRange{First: 0, Count: 2}, nil},
		{"fedprox-gradient-canary-dirac-poisson", func(c *train.Config) {
			c.Algorithm, c.ProxAlpha, c.Batching = algo.FedProx, 0.3, "poisson"
			c.GradientCanary = &canary.Gradient{Norm: 6, Coordinate: -2, Opposite: true}
		}, 3, 3, train.PairRange{First: 1, Count: 2}, nil},
		{"fedavg-gradient-canaries-full", func(c *train.Config) {
			c.Batching = "full"
			c.Canaries = &canary.Config{Count: 4, Kind: canary.Gradients, Norm: 3, Client: 1, Orthogonal: true}
		}, 3, 3, train.PairRange{First: 0, Count: 2}, nil},
		{"dpsgd-gradient-canaries-full", func(c *train.Config) {
			c.Algorithm, c.Model, c.Batching, c.ClipNorm, c.Informed, c.RecordUpload = algo.DPSGD, model.Config{Kind: "softmax"}, "full", 0.5, false, false
			c.Canaries = &canary.Config{Count: 3, Kind: canary.Gradients, Norm: 2}
		}, 1, 3, train.PairRange{First: 0, Count: 2}, nil},
		{"quadratic-full", func(c *train.Config) {
			c.Model = model.Config{Kind: "quadratic", Curvature: 0.5}
			c.Batching, c.ClipNorm = "full", 100
		}, 3, 2, train.PairRange{First: 0, Count: 2}, nil},
	}
	// Convolutional models (package nn through compute.Convolver) on image data: LeNet-5 on
	// 28x28, a small ResNet (two stages, GroupNorm) on 3x8x8, and DP-SGD's per-example path
	// on a small sequential CNN.
	cnn := func(mc model.Config) func(*train.Config) {
		return func(c *train.Config) { c.Model, c.Informed = mc, false }
	}
	cases = append(cases,
		runCase{"fedavg-lenet5", cnn(model.Config{Kind: "lenet5"}), 2, 3, train.PairRange{First: 0, Count: 2}, []int{1, 28, 28}},
		runCase{"fedavg-resnet-small", cnn(model.Config{Kind: "resnet", Stages: 2, Blocks: 1, Width: 4, Groups: 2}), 2, 3, train.PairRange{First: 1, Count: 1}, []int{3, 8, 8}},
		runCase{"dpsgd-sequential-cnn", func(c *train.Config) {
			cnn(model.Config{Kind: "sequential", Layers: []nn.LayerSpec{{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, {Kind: "tanh"},
				{Kind: "avgpool", Kernel: 2}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}})(c)
			c.Algorithm, c.Batching, c.ClipNorm, c.RecordUpload = algo.DPSGD, "poisson", 0.5, false
		}, 1, 3, train.PairRange{First: 0, Count: 2}, []int{2, 6, 6}},
	)
	return cases
}

// Whole runs on the shim against the CPU backend, one configuration per algorithm, model
// and batching mode (the convolutional models included). The two differ only by GEMM summation order and the C library's math
// functions, a few float32 ulps per operation, which training amplifies by at most the
// product of the steps' Lipschitz constants (below 2 per step at these learning rates, over
// at most 3 x 2 x 3 steps): parameters, uploads and losses must agree to 2e-4 absolute
// (relative to values of order 1), the informed statistics to 2e-3 relative to their scale.
// Diverged flags, pairs, worlds and seeds must be equal.
func testRunsMatchCPU(t *testing.T, f Factory) {
	for _, c := range runCases() {
		t.Run(c.name, func(t *testing.T) { runBoth(t, f, c.job()) })
	}
}

// job is the case's training: a small MLP's Noisy-FedAvg edited by the case, on its worlds.
func (c runCase) job() train.Job {
	cfg := train.Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"},
		Rounds: 3, LocalSteps: 2, LearningRate: 0.3, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.05,
		Batching: "fixed", BatchSize: 4, Seed: 7, Checkpoints: []int{0, 1, 3}, Informed: true,
		RecordParams: true, RecordUpload: true, EvalBatch: 5,
	}
	c.edit(&cfg)
	var wc, wcp []*datasets.Dataset
	if c.shape != nil {
		wc, wcp = imageWorlds(c.m, 9, c.shape, c.classes)
	} else {
		wc, wcp = worlds(c.m, 9, 7, c.classes)
	}
	return train.Job{Config: cfg, WorldC: wc, WorldCPrime: wcp, Target: train.TargetInfo{Client: 0, Index: 0}, Pairs: c.pairs}
}

// Whole runs with every product of depth 16 or more computed in depth slices
// (Options.SplitK; slices of at least 8): the convolutional cases, whose weight gradients sum
// over every pixel and sample, and the first MLP case, against the CPU backend with
// testRunsMatchCPU's tolerances (the slices change only the order of the float32 sums).
func testSplitKRunsMatchCPU(t *testing.T, f Factory) {
	for i, c := range runCases() {
		if c.shape == nil && i > 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			runBothWith(t, f, c.job(), cuda.Options{Block: 32, SplitK: true, SplitKDepth: 8})
		})
	}
}

// Whole runs of the convolutional cases with every convolution computed by its patches
// (Options.PatchConv: im2col, cuBLAS, col2im) instead of by the direct kernels that
// testRunsMatchCPU's default takes for their small convolutions, against the CPU backend with
// the same tolerances (the direct kernels sum in the patch form's order; only cuBLAS's and
// the CPU's GEMM orders differ from theirs).
func testPatchConvRunsMatchCPU(t *testing.T, f Factory) {
	for _, c := range runCases() {
		if c.shape == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			runBothWith(t, f, c.job(), cuda.Options{Block: 32, PatchConv: true})
		})
	}
}

// Whole runs of a ResNet wide enough for Winograd's forms (width 16: its first stage's two
// convolutions and its second stage's second, compute.WinogradFits), by F(4x4, 3x3) (the
// default), by F(2x2, 3x3) (Options.Winograd2) and by patches (Options.PatchConv), against
// the CPU backend's patch form with testRunsMatchCPU's tolerances: the forms' results differ by
// the rounding of different sums, a few float32 ulps per operation as between cuBLAS's and the
// CPU's products (F(4x4, 3x3) some tens: cuda/paritytest/winograd.go), which the same bound
// covers.
func testWinogradRunsMatchCPU(t *testing.T, f Factory) {
	win := compute.Window{Size: 3, Stride: 1, Pad: 1}
	if !compute.WinogradFits(16, compute.Images{C: 16, N: 1, H: 8, W: 8, BatchStride: 1}, win) {
		t.Fatal("a convolution of 16 channels at stride 1 no longer takes Winograd's form: this test would compare nothing new")
	}
	mc := model.Config{Kind: "resnet", Stages: 2, Blocks: 1, Width: 16, Groups: 4}
	for _, batching := range []algo.Batching{algo.Fixed, algo.Poisson} { // Poisson: a batch size that changes every step
		c := runCase{"fedavg-resnet-winograd", func(c *train.Config) { c.Model, c.Informed, c.Batching = mc, false, batching }, 2, 3,
			train.PairRange{First: 0, Count: 1}, []int{3, 8, 8}}
		t.Run(string(batching), func(t *testing.T) { runBothWith(t, f, c.job(), cuda.Options{Block: 32}) })
		t.Run(string(batching)+"-2x2", func(t *testing.T) { runBothWith(t, f, c.job(), cuda.Options{Block: 32, Winograd2: true}) })
		t.Run(string(batching)+"-patches", func(t *testing.T) { runBothWith(t, f, c.job(), cuda.Options{Block: 32, PatchConv: true}) })
	}
}

// runBoth trains job on the CPU backend and on the kernels of f and compares the runs
// (compareRuns); job's Recorder is replaced.
func runBoth(t *testing.T, f Factory, job train.Job) {
	t.Helper()
	runBothWith(t, f, job, cuda.Options{Block: 32})
}

// runBothWith is runBoth with the kernels' options.
func runBothWith(t *testing.T, f Factory, job train.Job, opt cuda.Options) {
	t.Helper()
	var want memRecorder
	job.Recorder = &want
	if err := train.Train(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	compareRuns(t, want.cps, trainOnKernels(t, f, opt, job, nil))
}

// The DP-FedAvg family with a crafted canary client (train.Config.CraftedUpdate) under
// remove-client adjacency: C' has one client fewer, client 0 of C sends clip u in the rounds
// it is sampled, and the informed replay does the same. Tolerances as testRunsMatchCPU's.
func testCraftedUpdateMatchesCPU(t *testing.T, f Factory) {
	cfg := train.Config{
		Algorithm: algo.DPFedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"},
		Rounds: 3, LocalSteps: 2, LearningRate: 0.3, Schedule: "constant", Batching: "fixed", BatchSize: 4,
		Seed: 7, Checkpoints: []int{0, 1, 3}, Informed: true, RecordParams: true, EvalBatch: 5,
		SamplingRate: 0.7, NoiseMultiplier: 0.8, UpdateClip: 0.5, ServerLR: 1,
		CraftedUpdate: &canary.Update{Direction: canary.GaussianDirection},
	}
	wc, _ := worlds(4, 9, 7, 3)
	tgt := train.TargetInfo{Client: 0, Index: 0, WholeClient: true, Absent: true}
	runBoth(t, f, train.Job{Config: cfg, WorldC: wc, WorldCPrime: wc[1:], Target: tgt, Pairs: train.PairRange{First: 0, Count: 2}})
}

func compareRuns(t *testing.T, want, got []*checkpoint.Checkpoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d checkpoints, want %d", len(got), len(want))
	}
	closeTo := func(what string, a, b, tol float64) {
		t.Helper()
		if !(math.Abs(a-b) <= tol) && !(math.IsNaN(a) && math.IsNaN(b)) {
			t.Errorf("%s: kernels %v, cpu %v, difference above %g", what, b, a, tol)
		}
	}
	for i, w := range want {
		g := got[i]
		if g.Round != w.Round || len(g.Replicas) != len(w.Replicas) {
			t.Fatalf("checkpoint %d: round %d with %d replicas, want round %d with %d", i, g.Round, len(g.Replicas), w.Round, len(w.Replicas))
		}
		for r, wr := range w.Replicas {
			gr := g.Replicas[r]
			where := fmt.Sprintf("round %d replica %d", w.Round, r)
			if gr.Pair != wr.Pair || gr.World != wr.World || gr.Seed != wr.Seed || gr.Diverged != wr.Diverged {
				t.Fatalf("%s: identity %d/%d/%x/%v, want %d/%d/%x/%v", where, gr.Pair, gr.World, gr.Seed, gr.Diverged, wr.Pair, wr.World, wr.Seed, wr.Diverged)
			}
			closeTo(where+" train loss", wr.TrainLoss, gr.TrainLoss, 2e-4)
			for k := 0; k < 2; k++ {
				closeTo(where+" target loss", wr.TargetLoss[k], gr.TargetLoss[k], 2e-4)
				closeTo(where+" target margin", wr.TargetMargin[k], gr.TargetMargin[k], 2e-4)
			}
			if len(gr.Stats) != len(wr.Stats) || len(gr.Params) != len(wr.Params) || len(gr.Upload) != len(wr.Upload) {
				t.Fatalf("%s: %d stats, %d params, %d upload values; want %d, %d, %d", where, len(gr.Stats), len(gr.Params), len(gr.Upload), len(wr.Stats), len(wr.Params), len(wr.Upload))
			}
			for k, v := range wr.Stats {
				closeTo(fmt.Sprintf("%s stat %d", where, k), v, gr.Stats[k], 2e-3*(1+math.Abs(v)))
			}
			for k, v := range wr.Params {
				closeTo(fmt.Sprintf("%s param %d", where, k), float64(v), float64(gr.Params[k]), 2e-4)
			}
			for k, v := range wr.Upload {
				closeTo(fmt.Sprintf("%s upload %d", where, k), float64(v), float64(gr.Upload[k]), 2e-4)
			}
		}
	}
}
