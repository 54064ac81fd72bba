package inversion

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train/model"
)

// tinyCNNs are small sequential specs on 1 x 5 x 6 inputs with 3 classes: a smooth one (tanh,
// average pooling), a ReLU/max-pool one, and an MLP written as a spec (flatten, dense, tanh,
// dense), whose parameters are laid out as the host MLP's.
var tinyCNNs = map[string]model.Config{
	"tanh-avgpool": {Kind: "sequential", Input: []int{1, 5, 6}, Layers: []nn.LayerSpec{
		{Kind: "conv2d", Out: 2, Kernel: 3}, {Kind: "tanh"}, {Kind: "avgpool", Kernel: 2}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}},
	"relu-maxpool": {Kind: "sequential", Input: []int{1, 5, 6}, Layers: []nn.LayerSpec{
		{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, {Kind: "relu"}, {Kind: "maxpool", Kernel: 2}, {Kind: "flatten"}, {Kind: "dense", Out: 3}}},
	"mlp-as-spec": {Kind: "sequential", Input: []int{1, 5, 6}, Layers: []nn.LayerSpec{
		{Kind: "flatten"}, {Kind: "dense", Out: 4}, {Kind: "tanh"}, {Kind: "dense", Out: 3}}},
}

func tinyCNN(t *testing.T, name string) *hostmodel.Model {
	t.Helper()
	m, err := hostmodel.New(tinyCNNs[name], []int{1, 5, 6}, 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// cnnProblem is a reconstruction problem on a tiny CNN: random w_0 and update, K steps.
func cnnProblem(t *testing.T, m *hostmodel.Model, P, K int, clip, alpha float64, img Image, seed uint64) *cnnInvProblem {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(K)))
	etas := make([]float64, K)
	for k := range etas {
		etas[k] = 0.3 / float64(k+1)
	}
	p := &cnnInvProblem{h: m, w0: randomVec(rng, m.NumParams(), 0.5), u: randomVec(rng, m.NumParams(), 0.1),
		y: []int32{1}, etas: etas, clip: clip, alpha: alpha, img: img, tvWeight: 0.05, P: P}
	if img.C == 0 {
		p.tvWeight = 0
	}
	if !p.init() {
		t.Fatal("init refused a nonzero update")
	}
	t.Cleanup(p.release)
	return p
}

// TestCNNInvgradObjectiveGradient checks the CNN objective's gradient in x (finite differences
// in parameter space for the Hessian products, cnnFDStep) against central differences of the
// objective in x (h = 1e-6), through K = 1 and 3 steps, with clipping, FedProx and TV, for two
// restarts at once. Tolerance 1e-6 relative to the largest component (measured: at most 4.3e-8;
// a gradient 0.1% off fails every case): the x differences carry truncation ~h^2 and rounding
// ~1e-16/h = 1e-10, the parameter differences about 1e-9 (see cnnFDStep). The ReLU/max-pool net is evaluated at random points, where no kink lies within
// either step with probability ~1 (a crossing would show as an O(1) error).
func TestCNNInvgradObjectiveGradient(t *testing.T) {
	const h, tol = 1e-6, 1e-6
	for _, name := range []string{"tanh-avgpool", "relu-maxpool", "mlp-as-spec"} {
		for _, tc := range []struct {
			name        string
			K           int
			clip, alpha float64
			img         Image
		}{
			{"K1", 1, 0, 0, Image{}},
			{"K3", 3, 0, 0, Image{}},
			{"K3-clip-prox-tv", 3, 0.05, 0.3, Image{1, 5, 6}},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				const P, dim = 2, 30
				m := tinyCNN(t, name)
				p := cnnProblem(t, m, P, tc.K, tc.clip, tc.alpha, tc.img, 3)
				rng := rand.New(rand.NewPCG(8, 8))
				xs := make([]float64, P*dim)
				for i := range xs {
					xs[i] = rng.Float64()
				}
				g := make([]float64, P*dim)
				objs := make([]float64, P)
				if err := p.objective(xs, g, objs); err != nil {
					t.Fatal(err)
				}
				if tc.clip > 0 && p.clipFactor(0, 0) == 1 {
					t.Fatalf("clip norm %g does not act (|g| = %g): the case tests nothing", tc.clip, p.gnorm[0][0])
				}
				want := make([]float64, P*dim)
				op, om := make([]float64, P), make([]float64, P)
				for i := 0; i < dim; i++ {
					e := make([]float64, P*dim)
					for r := 0; r < P; r++ {
						e[r*dim+i] = 1 // perturbs coordinate i of every replica: each objective sees its own
					}
					if err := p.objective(axpy(xs, h, e), nil, op); err != nil {
						t.Fatal(err)
					}
					if err := p.objective(axpy(xs, -h, e), nil, om); err != nil {
						t.Fatal(err)
					}
					for r := 0; r < P; r++ {
						want[r*dim+i] = (op[r] - om[r]) / (2 * h)
					}
				}
				d := maxRelDiff(g, want)
				t.Logf("relative error %.2g", d)
				if d > tol {
					t.Errorf("relative error %g > %g: got %v, want %v", d, tol, g, want)
				}
			})
		}
	}
}

// TestCNNInvgradMatchesExactAdjoints: on the MLP written as a spec, the CNN problem's objective
// equals the MLP problem's (1e-12) and its gradient, built from finite-difference Hessian
// products, agrees with the MLP's exact forward-over-reverse products within 1e-8 relative
// (measured 4.9e-10: the differences' rounding), through 3 steps with clipping and FedProx.
func TestCNNInvgradMatchesExactAdjoints(t *testing.T) {
	c := tinyCNN(t, "mlp-as-spec")
	mlp, err := hostmodel.New(model.Config{Kind: "mlp", Hidden: []int{4}, Activation: "tanh"}, nil, 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	img := Image{1, 5, 6}
	p := cnnProblem(t, c, 1, 3, 0.05, 0.3, img, 11)
	q := &invProblem{m: mlp, w0: p.w0, u: p.u, y: 1, etas: p.etas, clip: p.clip, alpha: p.alpha, img: img, tvWeight: p.tvWeight}
	if !q.init() {
		t.Fatal("init")
	}
	rng := rand.New(rand.NewPCG(2, 2))
	x := make([]float64, 30)
	for i := range x {
		x[i] = rng.Float64()
	}
	gc, gm := make([]float64, 30), make([]float64, 30)
	objs := make([]float64, 1)
	if err := p.objective(x, gc, objs); err != nil {
		t.Fatal(err)
	}
	om := q.objective(x, gm)
	d := maxRelDiff(gc, gm)
	t.Logf("objective %v vs %v; gradient relative difference %.2g", objs[0], om, d)
	if math.Abs(objs[0]-om) > 1e-12 || d > 1e-8 {
		t.Errorf("objective %v vs exact %v, gradient relative difference %g > 1e-8", objs[0], om, d)
	}
}
