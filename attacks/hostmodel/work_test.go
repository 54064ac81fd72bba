package hostmodel

import (
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/train/model"
)

var workModels = []model.Config{
	{Kind: "softmax"},
	{Kind: "mlp", Hidden: []int{7, 5}, Activation: "tanh"},
	{Kind: "mlp", Hidden: []int{6}, Activation: "softplus"},
	{Kind: "mlp", Hidden: []int{6}, Activation: "relu"},
}

// TestWorkDerivatives checks the workspace's gradient against the host model's and its
// Hessian-vector products against central differences of that gradient: H_ww v against
// (g(w + h v) - g(w - h v)) / 2h, H_xw v against the central difference of <v, g(w; x)> along
// each input coordinate. With h = 1e-5 the truncation error is O(h^2 |third derivative|) ~ 1e-10
// and rounding ~ 1e-16 / h ~ 1e-11, so a relative tolerance of 1e-6 has ample room; relu is
// evaluated away from its kink (no pre-activation within h of 0 with probability ~1).
func TestWorkDerivatives(t *testing.T) {
	const h, tol = 1e-5, 1e-6
	for _, cfg := range workModels {
		t.Run(cfg.Kind+cfg.Activation, func(t *testing.T) {
			const dim, classes, y = 5, 3, 2
			m, err := newFlat(cfg, dim, classes)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			w := randomVec(rng, m.NumParams(), 0.7)
			x := randomVec(rng, dim, 1)
			v := randomVec(rng, m.NumParams(), 1)
			wk := NewWork(m)
			g := make([]float64, m.NumParams())
			wk.Forward(w, x)
			wk.Gradient(w, y, g)
			if d := maxRelDiff(g, m.gradient(w, x, y)); d > 1e-12 {
				t.Errorf("gradient differs from the host model's by %g", d)
			}
			hw := make([]float64, m.NumParams())
			hx := make([]float64, dim)
			wk.Forward(w, x)
			wk.HessianVector(w, y, v, hw, hx)
			wantW := make([]float64, m.NumParams())
			gp := m.gradient(axpy(w, h, v), x, y)
			gm := m.gradient(axpy(w, -h, v), x, y)
			for i := range wantW {
				wantW[i] = (gp[i] - gm[i]) / (2 * h)
			}
			if d := maxRelDiff(hw, wantW); d > tol {
				t.Errorf("H_ww v: relative error %g > %g", d, tol)
			}
			wantX := make([]float64, dim)
			for i := range wantX {
				e := make([]float64, dim)
				e[i] = 1
				wantX[i] = (dot(v, m.gradient(w, axpy(x, h, e), y)) - dot(v, m.gradient(w, axpy(x, -h, e), y))) / (2 * h)
			}
			if d := maxRelDiff(hx, wantX); d > tol {
				t.Errorf("H_xw v: relative error %g > %g (got %v, want %v)", d, tol, hx, wantX)
			}
		})
	}
}
