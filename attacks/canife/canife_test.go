package canife

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/datasets"
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
	c := &crafter{m: m, w: w, y: 1, wk: hostmodel.NewWork(m), lambda: 0.05}
	c.basis = span(m, w, pool(rng, 4, 6, 6, 3))
	x := make([]float64, 6)
	for i := range x {
		x[i] = rng.Float64()
	}
	gx := make([]float64, 6)
	c.objective(x, gx)
	const h = 1e-6
	for i := range x {
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		_, _, jp := c.objective(xp, nil)
		_, _, jm := c.objective(xm, nil)
		if fd := (jp - jm) / (2 * h); math.Abs(fd-gx[i]) > 1e-6 {
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
