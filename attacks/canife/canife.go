// Package canife crafts input canaries whose gradient stays out of the span of the other
// clients' gradients, after Maddock, Sablayrolles and Stock, "CANIFE: Crafting canaries for
// empirical privacy measurement in federated learning" (ICLR 2023). An auditor who may only
// insert a sample (not craft its gradient, as a gradient canary does) chooses its input so
// that its gradient at the model the training starts from points where the rest of the data's
// gradients do not: the canary's contribution to every step is then not cancelled or masked by
// the other samples', and a final-model test along it sees more of it.
//
// The crafting is ours, built on the host model's exact mixed Hessian-vector products
// (hostmodel.Work): it minimizes, over the input x in the data's box, the share of the
// canary's gradient g(x) = grad_w loss(w_0; x, y) inside the span S of the pool's gradients,
//
//	J(x) = ||P_S g(x)||^2 / ||g(x)||^2 - lambda log ||g(x)||^2,
//
// the second term keeping the gradient from vanishing (a canary the model already fits moves
// nothing). Its gradient in x is H_xw v with v = dJ/dg = 2 (P_S g - f g - lambda g) / ||g||^2
// (f the share), one mixed Hessian-vector product per step, minimized by Adam from seeded
// restarts. It imports neither the trainer nor the experiment.
package canife

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/datasets"
)

// Config is the crafting's budget; zero fields take the defaults (WithDefaults).
type Config struct {
	// Iterations of Adam per restart (default 300) and Restarts (default 4).
	Iterations, Restarts int
	// LearningRate of Adam, as a share of the box's width (default 0.02).
	LearningRate float64
	// NormWeight is lambda, the weight of -log ||g||^2 (default 0.05).
	NormWeight float64
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.Iterations == 0 {
		c.Iterations = 300
	}
	if c.Restarts == 0 {
		c.Restarts = 4
	}
	if c.LearningRate == 0 {
		c.LearningRate = 0.02
	}
	if c.NormWeight == 0 {
		c.NormWeight = 0.05
	}
	return c
}

// Result is a crafted canary: its features, the share of its gradient's squared norm inside
// the span of the pool's gradients (0: orthogonal to all of them), and that gradient's norm;
// StartShare is the share at the best restart's starting point, for comparison.
type Result struct {
	Features   []float64
	Share      float64
	GradNorm   float64
	StartShare float64
}

// Craft crafts the canary of label y against the pool's samples at parameters w of m (a flat
// model with a softmax: softmax regression or an MLP), each feature in [lo, hi], with restarts
// drawn from rng.
func Craft(m *hostmodel.Model, w []float64, pool []datasets.Sample, y int, lo, hi float64, cfg Config, rng *rand.Rand) (Result, error) {
	cfg = cfg.WithDefaults()
	switch {
	case m == nil || m.IsCNN() || !m.HasClasses():
		return Result{}, errors.New("canife: needs a flat model with a softmax over classes (softmax regression or an MLP)")
	case len(w) != m.NumParams():
		return Result{}, fmt.Errorf("canife: %d parameters for a model of %d", len(w), m.NumParams())
	case !(hi > lo):
		return Result{}, fmt.Errorf("canife: empty feature box [%g, %g]", lo, hi)
	case cfg.Iterations < 1 || cfg.Restarts < 1 || !(cfg.LearningRate > 0) || !(cfg.NormWeight >= 0):
		return Result{}, fmt.Errorf("canife: bad budget %+v", cfg)
	}
	c := &crafter{m: m, w: w, y: y, wk: hostmodel.NewWork(m), lambda: cfg.NormWeight}
	c.basis = span(m, w, pool)
	best := Result{Share: math.Inf(1)}
	bestJ := math.Inf(1)
	dim := m.Dim()
	for r := 0; r < cfg.Restarts; r++ {
		x := make([]float64, dim)
		for i := range x {
			x[i] = lo + (hi-lo)*rng.Float64()
		}
		startShare, _, _ := c.objective(x, nil)
		x, j := c.minimize(x, lo, hi, cfg)
		if j < bestJ {
			share, norm, _ := c.objective(x, nil)
			bestJ = j
			best = Result{Features: x, Share: share, GradNorm: norm, StartShare: startShare}
		}
	}
	return best, nil
}

type crafter struct {
	m      *hostmodel.Model
	w      []float64
	y      int
	wk     *hostmodel.Work
	basis  [][]float64 // orthonormal basis of the pool's gradients
	lambda float64
}

// span returns an orthonormal basis of the pool's gradients at w (modified Gram-Schmidt; a
// gradient whose remainder is below 1e-10 of its norm adds nothing).
func span(m *hostmodel.Model, w []float64, pool []datasets.Sample) [][]float64 {
	wk := hostmodel.NewWork(m)
	var basis [][]float64
	x := make([]float64, m.Dim())
	for _, s := range pool {
		for i, v := range s.Features {
			x[i] = float64(v)
		}
		g := make([]float64, len(w))
		wk.Forward(w, x)
		wk.Gradient(w, int(s.Label), g)
		n0 := math.Sqrt(dot(g, g))
		for _, b := range basis {
			axpy(-dot(b, g), b, g)
		}
		if n := math.Sqrt(dot(g, g)); n > 1e-10*n0 && n > 0 {
			for i := range g {
				g[i] /= n
			}
			basis = append(basis, g)
		}
	}
	return basis
}

// objective returns the share f of g(x) inside the span, ||g(x)||, and J(x); with gx not nil
// it also stores dJ/dx there.
func (c *crafter) objective(x, gx []float64) (share, norm, j float64) {
	g := make([]float64, len(c.w))
	c.wk.Forward(c.w, x)
	c.wk.Gradient(c.w, c.y, g)
	gg := dot(g, g)
	if gg == 0 {
		if gx != nil {
			clear(gx)
		}
		return 0, 0, math.Inf(1)
	}
	a := make([]float64, len(g)) // P_S g
	for _, b := range c.basis {
		axpy(dot(b, g), b, a)
	}
	share = dot(a, g) / gg
	j = share - c.lambda*math.Log(gg)
	if gx != nil {
		v := make([]float64, len(g))
		for i := range v {
			v[i] = 2 * (a[i] - (share+c.lambda)*g[i]) / gg
		}
		hw := make([]float64, len(g))
		c.wk.HessianVector(c.w, c.y, v, hw, gx)
	}
	return share, math.Sqrt(gg), j
}

// minimize runs Adam from x, projecting onto the box after every step, and returns the best
// point seen and its J.
func (c *crafter) minimize(x []float64, lo, hi float64, cfg Config) ([]float64, float64) {
	const b1, b2, eps = 0.9, 0.999, 1e-12
	lr := cfg.LearningRate * (hi - lo)
	mom, vel, gx := make([]float64, len(x)), make([]float64, len(x)), make([]float64, len(x))
	best, bestJ := append([]float64(nil), x...), math.Inf(1)
	for it := 1; it <= cfg.Iterations; it++ {
		_, _, j := c.objective(x, gx)
		if j < bestJ {
			bestJ = j
			copy(best, x)
		}
		c1, c2 := 1-math.Pow(b1, float64(it)), 1-math.Pow(b2, float64(it))
		for i := range x {
			mom[i] = b1*mom[i] + (1-b1)*gx[i]
			vel[i] = b2*vel[i] + (1-b2)*gx[i]*gx[i]
			x[i] -= lr * (mom[i] / c1) / (math.Sqrt(vel[i]/c2) + eps)
			x[i] = min(hi, max(lo, x[i]))
		}
	}
	if _, _, j := c.objective(x, nil); j < bestJ {
		bestJ = j
		copy(best, x)
	}
	return best, bestJ
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(alpha float64, x, y []float64) {
	for i := range x {
		y[i] += alpha * x[i]
	}
}
