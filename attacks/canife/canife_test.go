package canife

import (
	"math"
	"math/rand/v2"
	"testing"

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
	c := &crafter{grads: &flatGrads{wk: hostmodel.NewWork(m), w: w, hw: make([]float64, len(w))}, w: w, y: 1, lambda: 0.05}
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
	c := &crafter{grads: newCNNGrads(nm, w, 30), w: w, y: 2, lambda: 0.05}
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
// pool's inputs use only the first 4 of 12 features, a canary on the other 8 has a weight part
// orthogonal to every pool gradient and only its bias part, 1/(1 + ||x||^2) of its squared
// norm, can lie in their span: share <= 1/9 at the box's corner. The crafted canary must reach
// that (within 0.01, the optimizer's slack), from random starts whose share is far above it.
func TestCraftLeavesTheSpanOnSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const dim, used, classes = 12, 4, 3
	m, err := hostmodel.New(model.Config{Kind: "softmax"}, nil, dim, classes)
	if err != nil {
		t.Fatal(err)
	}
	w := randomParams(rng, m.NumParams())
	// A negligible norm weight: the bound is about the share alone.
	res, err := Craft(m, w, pool(rng, 30, dim, used, classes), 2, 0, 1, Config{NormWeight: 1e-9, Iterations: 1000}, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	bound := 1.0 / (1 + float64(dim-used))
	t.Logf("share %.4f (start %.4f), bound %.4f, gradient norm %.3f", res.Share, res.StartShare, bound, res.GradNorm)
	if res.Share > bound+0.01 {
		t.Errorf("crafted share %.4f above the reachable %.4f", res.Share, bound)
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

// Models without a softmax over classes, and bad boxes, are refused.
func TestCraftRefuses(t *testing.T) {
	q, _ := hostmodel.New(model.Config{Kind: "quadratic", Curvature: 1}, nil, 3, 2)
	s, _ := hostmodel.New(model.Config{Kind: "softmax"}, nil, 3, 2)
	rng := rand.New(rand.NewPCG(1, 1))
	if _, err := Craft(q, make([]float64, 3), nil, 0, 0, 1, Config{}, rng); err == nil {
		t.Error("the quadratic model was accepted")
	}
	if _, err := Craft(s, make([]float64, s.NumParams()), nil, 0, 1, 1, Config{}, rng); err == nil {
		t.Error("an empty box was accepted")
	}
	if _, err := Craft(s, make([]float64, 2), nil, 0, 0, 1, Config{}, rng); err == nil {
		t.Error("parameters of the wrong length were accepted")
	}
}
