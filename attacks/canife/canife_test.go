package canife

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train/model"
)

// pool draws n samples of dim features of which only the first used are nonzero.
func pool(rng *rand.Rand, n, dim, used, classes int) []datasets.Sample {
	out := make([]datasets.Sample, n)
	for i := range out {
		f := make([]float32, dim)
		for j := 0; j < used; j++ {
			f[j] = float32(rng.Float64())
		}
		out[i] = datasets.Sample{Features: f, Label: int32(rng.IntN(classes))}
	}
	return out
}

func randomParams(rng *rand.Rand, d int) []float64 {
	w := make([]float64, d)
	for i := range w {
		w[i] = 0.3 * rng.NormFloat64()
	}
	return w
}

// The gradient of J in x is the mixed Hessian-vector product: it agrees with central
// differences of J (step 1e-6, on an MLP in float64: truncation about 1e-12, rounding about
// 1e-16 / 1e-6 relative to J's scale, so 1e-6 absolute is ample).
func TestObjectiveGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := hostmodel.New(model.Config{Kind: "mlp", Hidden: []int{5}, Activation: "tanh"}, nil, 6, 3)
	if err != nil {
		t.Fatal(err)
	}
	w := randomParams(rng, m.NumParams())
	c := &crafter{grads: &flatGrads{wk: hostmodel.NewWork(m), w: w, hw: make([]float64, len(w))}, d: len(w), y: 1, lambda: 0.05}
	c.basis = c.span(pool(rng, 4, 6, 6, 3))
	checkObjectiveGradient(t, c, rng, 6, 1e-6)
}

// The same on a small CNN (conv, tanh, average pooling, dense on 1 x 5 x 6 inputs), whose
// mixed product is a central difference in parameter space (relative error about 1e-9 by
// fdStep's bound): within 1e-5 of central differences of J in x.
func TestObjectiveGradientCNN(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	spec := model.Config{Kind: "sequential", Input: []int{1, 5, 6}, Layers: []nn.LayerSpec{
		{Kind: "conv2d", Out: 2, Kernel: 3}, {Kind: "tanh"}, {Kind: "avgpool", Kernel: 2}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}}
	m, err := hostmodel.New(spec, []int{1, 5, 6}, 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	w := randomParams(rng, m.NumParams())
	nm := m.Acquire()
	defer m.Release(nm)
	c := &crafter{grads: newCNNGrads(nm, w, 30), d: len(w), y: 2, lambda: 0.05}
	c.basis = c.span(pool(rng, 5, 30, 30, 3))
	checkObjectiveGradient(t, c, rng, 30, 1e-5)
}

// checkObjectiveGradient compares dJ/dx at a random point of [0, 1]^dim with central
// differences of J (step 1e-6), to tol absolute.
func checkObjectiveGradient(t *testing.T, c *crafter, rng *rand.Rand, dim int, tol float64) {
	t.Helper()
	x := make([]float64, dim)
	for i := range x {
		x[i] = rng.Float64()
	}
	gx := make([]float64, dim)
	c.objective(x, gx)
	const h = 1e-6
	for i := range x {
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		_, _, jp := c.objective(xp, nil)
		_, _, jm := c.objective(xm, nil)
		if fd := (jp - jm) / (2 * h); math.Abs(fd-gx[i]) > tol {
			t.Errorf("dJ/dx_%d: %g, central difference %g", i, gx[i], fd)
		}
	}
}

// Known answer on softmax regression: a sample's gradient is (p - e_y) [x; 1], so when the
// pool's inputs use only the first 4 of 12 features, the pool's gradients span the whole
// space of class-centred [x_used; 1] parts (10 dimensions, reached by 30 generic samples, or
// by the 12 of them a PoolSize of 12 keeps), and a canary's share inside their span is
// exactly its bias part's, 1/(1 + ||x||^2) with x its unused features (its used ones in the
// span too): at least 1/9, reached at the box's corner. The crafted canary must reach that
// (within 0.01, the optimizer's slack) and never go below it (1e-9: rounding of the
// projection), from random starts whose share is far above it.
func TestCraftLeavesTheSpanOnSoftmax(t *testing.T) {
	const dim, used, classes = 12, 4, 3
	bound := 1.0 / (1 + float64(dim-used))
	for _, poolSize := range []int{0, 12} {
		rng := rand.New(rand.NewPCG(3, 4))
		m, err := hostmodel.New(model.Config{Kind: "softmax"}, nil, dim, classes)
		if err != nil {
			t.Fatal(err)
		}
		w := randomParams(rng, m.NumParams())
		// A negligible norm weight: the bound is about the share alone.
		res, err := Craft(context.Background(), m, w, pool(rng, 30, dim, used, classes), 2, 0, 1, Config{NormWeight: 1e-9, Iterations: 1000, PoolSize: poolSize}, rand.New(rand.NewPCG(5, 6)))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pool size %d: share %.4f (start %.4f), bound %.4f, gradient norm %.3f", poolSize, res.Share, res.StartShare, bound, res.GradNorm)
		if res.Share > bound+0.01 || res.Share < bound-1e-9 {
			t.Errorf("pool size %d: crafted share %.6f, the least reachable is %.6f", poolSize, res.Share, bound)
		}
		if !(res.StartShare > 1.5*bound) {
			t.Errorf("random start's share %.4f: the fixture does not test the crafting", res.StartShare)
		}
		for i, v := range res.Features {
			if v < 0 || v > 1 {
				t.Fatalf("feature %d = %g outside the box [0, 1]", i, v)
			}
		}
	}
}

// Craft keeps the best of its restarts: the starts are drawn in order, so a run of four
// restarts begins with the one run of one restart does, and can only end at or below its
// objective (here, with a negligible norm weight, its share). A short budget leaves the
// restarts apart.
func TestCraftKeepsTheBestRestart(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m, err := hostmodel.New(model.Config{Kind: "mlp", Hidden: []int{4}, Activation: "tanh"}, nil, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	w, p := randomParams(rng, m.NumParams()), pool(rng, 20, 8, 8, 3)
	craft := func(restarts int) Result {
		res, err := Craft(context.Background(), m, w, p, 1, 0, 1, Config{NormWeight: 1e-9, Iterations: 20, Restarts: restarts}, rand.New(rand.NewPCG(21, 12)))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one, four := craft(1), craft(4)
	t.Logf("share after 20 iterations: one restart %.4f, best of four %.4f", one.Share, four.Share)
	if four.Share > one.Share+1e-12 {
		t.Errorf("best of four restarts %.6f above the first restart alone %.6f", four.Share, one.Share)
	}
	if four.Share == one.Share {
		t.Errorf("the four restarts kept the first one's share %.6f: the fixture does not tell them apart", one.Share)
	}
}

// smallCNN is a convolutional model of 1x5x6 inputs and 3 classes.
func smallCNN(t *testing.T) *hostmodel.Model {
	t.Helper()
	spec := model.Config{Kind: "sequential", Input: []int{1, 5, 6}, Layers: []nn.LayerSpec{
		{Kind: "conv2d", Out: 2, Kernel: 3}, {Kind: "tanh"}, {Kind: "avgpool", Kernel: 2}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}}
	m, err := hostmodel.New(spec, []int{1, 5, 6}, 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A CNN's canary (mixed products by central differences) lowers the share of its random start
// and stays in the box.
func TestCraftCNN(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	m := smallCNN(t)
	res, err := Craft(context.Background(), m, randomParams(rng, m.NumParams()), pool(rng, 8, 30, 30, 3), 0, 0, 1, Config{Iterations: 60, Restarts: 2}, rand.New(rand.NewPCG(15, 16)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CNN: share %.4f from %.4f", res.Share, res.StartShare)
	if !(res.Share < res.StartShare) {
		t.Errorf("crafted share %.4f not below its start's %.4f", res.Share, res.StartShare)
	}
	for i, v := range res.Features {
		if v < 0 || v > 1 {
			t.Fatalf("feature %d = %g outside the box [0, 1]", i, v)
		}
	}
}

// Models without a softmax over classes, bad boxes, labels and pool samples are refused.
func TestCraftRefuses(t *testing.T) {
	q, err := hostmodel.New(model.Config{Kind: "quadratic", Curvature: 1}, nil, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	s, err := hostmodel.New(model.Config{Kind: "softmax"}, nil, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	w := make([]float64, s.NumParams())
	for _, c := range []struct {
		name string
		m    *hostmodel.Model
		w    []float64
		pool []datasets.Sample
		y    int
		lo   float64
	}{
		{"the quadratic model", q, make([]float64, 3), nil, 0, 0},
		{"an empty box", s, w, nil, 0, 1},
		{"parameters of the wrong length", s, make([]float64, 2), nil, 0, 0},
		{"a label out of range", s, w, nil, 2, 0},
		{"a pool sample of the wrong size", s, w, []datasets.Sample{{Features: make([]float32, 4)}}, 0, 0},
		{"a pool label out of range", s, w, []datasets.Sample{{Features: make([]float32, 3), Label: 5}}, 0, 0},
	} {
		if _, err := Craft(context.Background(), c.m, c.w, c.pool, c.y, c.lo, 1, Config{}, rng); err == nil {
			t.Errorf("%s was accepted", c.name)
		}
	}
}

// A crafting cancelled while it runs stops within an iteration of each restart and reports the
// cancellation, not a half-optimised canary.
func TestCraftStopsWhenCancelled(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	m := smallCNN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	// 10^7 iterations would take hours: only the cancellation ends it.
	_, err := Craft(ctx, m, randomParams(rng, m.NumParams()), pool(rng, 8, 30, 30, 3), 0, 0, 1, Config{Iterations: 10_000_000, Restarts: 2}, rand.New(rand.NewPCG(15, 16)))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled crafting: %v, want %v", err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled crafting returned after %v", d)
	}
}
