package hostmodel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/model"
)

// Known answers: the quadratic model's Hessian is a I exactly; softmax regression's Hessian is
// bounded by max ||(x, 1)||^2 / 2 (the certified constant), so the estimate must not exceed it;
// and the MLP estimate must agree with an independent dense Hessian built from finite
// differences of gradients, column by column.
func TestSmoothnessEstimate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const dim, classes, n = 5, 3, 12
	xs := make([][]float32, n)
	ys := make([]int32, n)
	var maxSq float64
	for i := range xs {
		xs[i] = make([]float32, dim)
		s := 1.0
		for j := range xs[i] {
			xs[i][j] = float32(rng.NormFloat64())
			s += float64(xs[i][j]) * float64(xs[i][j])
		}
		maxSq = math.Max(maxSq, s)
		ys[i] = int32(rng.IntN(classes))
	}
	randParams := func(d int) []float32 {
		p := make([]float32, d)
		for i := range p {
			p[i] = float32(0.5 * rng.NormFloat64())
		}
		return p
	}

	quad := model.Config{Kind: "quadratic", Curvature: -0.7}
	L, err := SmoothnessEstimate(quad, dim, classes, randParams(dim), xs, ys, 30, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(L-0.7) > 1e-6 {
		t.Errorf("quadratic: estimate %.8f, want |a| = 0.7", L)
	}

	soft := model.Config{Kind: "softmax"}
	d, err := model.ParamCount(soft, dim, classes)
	if err != nil {
		t.Fatal(err)
	}
	L, err = SmoothnessEstimate(soft, dim, classes, randParams(d), xs, ys, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !(L > 0 && L <= maxSq/2*(1+1e-6)) {
		t.Errorf("softmax: estimate %.6g outside (0, certified %.6g]", L, maxSq/2)
	}

	mlp := model.Config{Kind: "mlp", Hidden: []int{4}, Activation: "tanh"}
	d, err = model.ParamCount(mlp, dim, classes)
	if err != nil {
		t.Fatal(err)
	}
	params := randParams(d)
	L, err = SmoothnessEstimate(mlp, dim, classes, params, xs, ys, 300, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Independent reference: the dense Hessian's spectral radius.
	m, _ := newFlat(mlp, dim, classes)
	ref := denseSpectralRadius(m, to64(params), xs, ys)
	// Power iteration converges geometrically in the eigenvalue gap; 1e-3 relative leaves room
	// for a slow gap while still catching a wrong Hessian-vector product.
	if math.Abs(L-ref) > 1e-3*ref {
		t.Errorf("mlp: estimate %.6g, dense-Hessian reference %.6g", L, ref)
	}
}

// denseSpectralRadius is the independent reference of TestSmoothnessEstimate: the dense
// Hessian of the mean loss over (xs, ys) at w by central differences of gradients, then its
// spectral radius by power iteration on the explicit matrix (a different code path from
// Hessian-vector products on the fly).
func denseSpectralRadius(m *Model, w []float64, xs [][]float32, ys []int32) float64 {
	d, n := len(w), len(xs)
	grad := func(at []float64) []float64 {
		g := make([]float64, d)
		for i, x := range xs {
			m.LossGrad(at, to64(x), int(ys[i]), 1/float64(n), g)
		}
		return g
	}
	H := make([][]float64, d)
	const h = 1e-5
	for j := 0; j < d; j++ {
		p, q := append([]float64(nil), w...), append([]float64(nil), w...)
		p[j] += h
		q[j] -= h
		gp, gq := grad(p), grad(q)
		H[j] = make([]float64, d)
		for i := range H[j] {
			H[j][i] = (gp[i] - gq[i]) / (2 * h)
		}
	}
	v := make([]float64, d)
	for i := range v {
		v[i] = 1 / math.Sqrt(float64(d)) * float64(1+i%3)
	}
	var ref float64
	for it := 0; it < 2000; it++ {
		u := make([]float64, d)
		for i := range u {
			for j := range v {
				u[i] += H[j][i] * v[j]
			}
		}
		var s float64
		for _, x := range u {
			s += x * x
		}
		ref = math.Sqrt(s)
		for i := range u {
			v[i] = u[i] / ref
		}
	}
	return ref
}

// The certified constant is |a| for the quadratic model, max ||(x, 1)||^2 / 2 over every sample
// of every world for softmax regression, and none for the MLP.
func TestCertifiedSmoothness(t *testing.T) {
	c := []*datasets.Dataset{{Shape: []int{2}, Classes: 2, Features: []float32{1, 0, 0, 2}, Labels: []int32{0, 1}}}
	cp := []*datasets.Dataset{{Shape: []int{2}, Classes: 2, Features: []float32{3, 0}, Labels: []int32{1}}}
	for _, tc := range []struct {
		name string
		mc   model.Config
		want float64
		ok   bool
	}{
		{"quadratic", model.Config{Kind: "quadratic", Curvature: -0.5}, 0.5, true},
		{"softmax", model.Config{Kind: "softmax"}, (1 + 9) / 2.0, true},
		{"mlp", model.Config{Kind: "mlp", Hidden: []int{4}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := CertifiedSmoothness(tc.mc, c, cp)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("got (%v, %v), want (%v, %v)", got, ok, tc.want, tc.ok)
			}
		})
	}
}
