package hostmodel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/model"
)

// CertifiedSmoothness returns a proven upper bound on the smoothness constant L of the model's
// loss on every sample of the given worlds, and false for a model without one (the MLP, whose
// L can only be given or estimated). For the quadratic model L = |a|. For softmax regression
// with cross-entropy the Hessian of a sample's loss is (diag(p) - p p^T) (x) x~ x~^T with
// x~ = (x, 1), and the first factor has spectral norm at most 1/2, so L = max_i ||x~_i||^2 / 2
// over every sample bounds every batch average.
func CertifiedSmoothness(mc model.Config, worlds ...[]*datasets.Dataset) (float64, bool) {
	switch mc.Kind {
	case "quadratic":
		return math.Abs(mc.Curvature), true
	case "softmax":
		var certified float64
		for _, world := range worlds {
			for _, d := range world {
				for i := 0; i < d.Len(); i++ {
					s := 1.0
					for _, x := range d.Row(i) {
						s += float64(x) * float64(x)
					}
					certified = math.Max(certified, s/2)
				}
			}
		}
		return certified, true
	}
	return 0, false
}

// SmoothnessEstimate estimates the smoothness constant L of a model's mean loss over the given
// samples at the point params: the largest |eigenvalue| of the Hessian, by power iteration on
// Hessian-vector products, each the central difference of two exact gradients. It is an
// estimate at one point, not a bound over all points: the convergent bound computed from it is
// an estimate too. iters power-iteration steps are taken from a seeded random start.
func SmoothnessEstimate(mc model.Config, dim, classes int, params []float32, xs [][]float32, ys []int32, iters int, seed uint64) (float64, error) {
	m, err := newFlat(mc, dim, classes)
	if err != nil {
		return 0, err
	}
	if len(params) != m.NumParams() {
		return 0, fmt.Errorf("smoothness: %d parameters, the model has %d", len(params), m.NumParams())
	}
	if len(xs) == 0 || len(xs) != len(ys) {
		return 0, errors.New("smoothness: no samples, or features and labels of different counts")
	}
	if iters < 1 {
		return 0, fmt.Errorf("smoothness: %d iterations", iters)
	}
	w := to64(params)
	x64 := make([][]float64, len(xs))
	for i, x := range xs {
		x64[i] = to64(x)
	}
	scale := 1 / float64(len(xs))
	grad := func(at []float64) []float64 {
		g := make([]float64, len(at))
		for i, x := range x64 {
			m.LossGrad(at, x, int(ys[i]), scale, g)
		}
		return g
	}
	var wn float64
	for _, v := range w {
		wn += v * v
	}
	// The step balances truncation (O(h^2) third derivatives) against the cancellation of two
	// gradients (O(eps/h)); 1e-5 relative to the parameter scale suits float64.
	h := 1e-5 * (1 + math.Sqrt(wn))
	rng := rand.New(rand.NewPCG(seed, 0x736d6f6f7468))
	v := make([]float64, len(w))
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	normalize := func(u []float64) float64 {
		var s float64
		for _, x := range u {
			s += x * x
		}
		s = math.Sqrt(s)
		if s > 0 {
			for i := range u {
				u[i] /= s
			}
		}
		return s
	}
	normalize(v)
	plus, minus := make([]float64, len(w)), make([]float64, len(w))
	var lambda float64
	for it := 0; it < iters; it++ {
		for i := range w {
			plus[i], minus[i] = w[i]+h*v[i], w[i]-h*v[i]
		}
		gp, gm := grad(plus), grad(minus)
		for i := range v {
			v[i] = (gp[i] - gm[i]) / (2 * h)
		}
		lambda = normalize(v)
		if lambda == 0 {
			return 0, nil
		}
	}
	return lambda, nil
}
