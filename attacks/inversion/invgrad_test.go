package inversion

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/train/model"
)

var invgradModels = []model.Config{
	{Kind: "softmax"},
	{Kind: "mlp", Hidden: []int{7, 5}, Activation: "tanh"},
	{Kind: "mlp", Hidden: []int{6}, Activation: "softplus"},
	{Kind: "mlp", Hidden: []int{6}, Activation: "relu"},
}

// TestInvgradObjectiveGradient checks the gradient of the objective through K unrolled steps
// (with and without clipping, FedProx's term and the TV prior) against central differences with
// h = 1e-6. The objective is smooth except where a TV difference or a relu pre-activation crosses
// 0 or the gradient norm crosses the clip norm, none of which happens within h at random points
// (checked implicitly: a crossing would show as an O(1) error). Tolerance: 1e-5 relative to the
// largest component, against truncation ~ h^2 and rounding ~ 1e-16/h = 1e-10.
func TestInvgradObjectiveGradient(t *testing.T) {
	const h, tol = 1e-6, 1e-5
	for _, cfg := range invgradModels {
		for _, tc := range []struct {
			name        string
			K           int
			clip, alpha float64
			img         Image
		}{
			{"K1", 1, 0, 0, Image{}},
			{"K3", 3, 0, 0, Image{}},
			{"K3-clip-prox-tv", 3, 0.05, 0.3, Image{1, 2, 3}},
		} {
			t.Run(cfg.Kind+cfg.Activation+"/"+tc.name, func(t *testing.T) {
				const dim, classes = 6, 3
				m, err := hostmodel.New(cfg, nil, dim, classes)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(3, uint64(tc.K)))
				etas := make([]float64, tc.K)
				for k := range etas {
					etas[k] = 0.3 / float64(k+1)
				}
				p := &invProblem{m: m, w0: randomVec(rng, m.NumParams(), 0.5), u: randomVec(rng, m.NumParams(), 0.1),
					y: 1, etas: etas, clip: tc.clip, alpha: tc.alpha, img: tc.img, tvWeight: 0.05}
				if tc.img.C == 0 {
					p.tvWeight = 0
				}
				if !p.init() {
					t.Fatal("init refused a nonzero update")
				}
				x := make([]float64, dim)
				for i := range x {
					x[i] = rng.Float64()
				}
				g := make([]float64, dim)
				p.objective(x, g)
				if tc.clip > 0 && p.clipFactor(0) == 1 {
					t.Fatalf("clip norm %g does not act (|g| = %g): the case tests nothing", tc.clip, p.gnorm[0])
				}
				want := make([]float64, dim)
				for i := range want {
					e := make([]float64, dim)
					e[i] = 1
					want[i] = (p.objective(axpy(x, h, e), nil) - p.objective(axpy(x, -h, e), nil)) / (2 * h)
				}
				if d := maxRelDiff(g, want); d > tol {
					t.Errorf("relative error %g > %g: got %v, want %v", d, tol, g, want)
				}
			})
		}
	}
}

func TestPickRestart(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		objs []float64
		want int
	}{
		{[]float64{0.3, 0.1, 0.2}, 1},
		{[]float64{nan, 0.5, 0.4}, 2},
		{[]float64{-inf, inf, 2}, 2},
		{[]float64{nan, nan}, -1},
		{[]float64{0.1, 0.1}, 0},
	} {
		if got := pickRestart(tc.objs); got != tc.want {
			t.Errorf("pickRestart(%v) = %d, want %d", tc.objs, got, tc.want)
		}
	}
}
