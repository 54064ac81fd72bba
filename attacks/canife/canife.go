// Package canife crafts input canaries whose gradient stays out of the span of the other
// clients' gradients, after Maddock, Sablayrolles and Stock, "CANIFE: Crafting canaries for
// empirical privacy measurement in federated learning" (ICLR 2023). An auditor who may only
// insert a sample (not craft its gradient, as a gradient canary does) chooses its input so
// that its gradient at the model the training starts from points where the rest of the data's
// gradients do not: the canary's contribution to every step is then not cancelled or masked by
// the other samples', and a final-model test along it sees more of it.
//
// The crafting is ours, built on the host model's mixed Hessian-vector products (exact on flat
// models through hostmodel.Work; central differences in parameter space of the exact input
// gradients on package nn's CNNs, as attacks/inversion does): it minimizes, over the input x in the data's box, the share of the
// canary's gradient g(x) = grad_w loss(w_0; x, y) inside the span S of the pool's gradients,
//
//	J(x) = ||P_S g(x)||^2 / ||g(x)||^2 - lambda log ||g(x)||^2,
//
// the second term keeping the gradient from vanishing (a canary the model already fits moves
// nothing). Its gradient in x is H_xw v with v = dJ/dg = 2 (P_S g - f g - lambda g) / ||g||^2
// (f the share), one mixed Hessian-vector product per step, minimized by Adam from seeded
// restarts, which run in parallel. It imports neither the trainer nor the experiment.
package canife

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/nn"
	"gonum.org/v1/gonum/floats"
)

// Config is the crafting's budget; zero fields take the defaults (WithDefaults).
type Config struct {
	// Iterations of Adam per restart (default 200) and Restarts (default 4).
	Iterations, Restarts int
	// LearningRate of Adam, as a share of the box's width (default 0.02).
	LearningRate float64
	// NormWeight is lambda, the weight of -log ||g||^2 (default 0.05).
	NormWeight float64
	// PoolSize caps the pool whose gradients span S (default 128): a larger pool is
	// subsampled with the restarts' rng, so a CNN's basis stays PoolSize x d (the projections
	// onto it are most of the crafting's work).
	PoolSize int
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.Iterations == 0 {
		c.Iterations = 200
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
	if c.PoolSize == 0 {
		c.PoolSize = 128
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

// Craft crafts the canary of label y against the pool's samples at parameters w of m (a model
// with a softmax over classes: softmax regression, an MLP or a CNN of package nn), each
// feature in [lo, hi], with restarts drawn from rng.
func Craft(ctx context.Context, m *hostmodel.Model, w []float64, pool []datasets.Sample, y int, lo, hi float64, cfg Config, rng *rand.Rand) (Result, error) {
	cfg = cfg.WithDefaults()
	switch {
	case m == nil || !m.HasClasses():
		return Result{}, errors.New("canife: needs a model with a softmax over classes (softmax regression, an MLP or a CNN)")
	case len(w) != m.NumParams():
		return Result{}, fmt.Errorf("canife: %d parameters for a model of %d", len(w), m.NumParams())
	case !(hi > lo):
		return Result{}, fmt.Errorf("canife: empty feature box [%g, %g]", lo, hi)
	case cfg.Iterations < 1 || cfg.Restarts < 1 || cfg.PoolSize < 1 || !(cfg.LearningRate > 0) || !(cfg.NormWeight >= 0):
		return Result{}, fmt.Errorf("canife: bad budget %+v", cfg)
	case y < 0 || y >= m.Classes():
		return Result{}, fmt.Errorf("canife: label %d of a model of %d classes", y, m.Classes())
	}
	for i, s := range pool {
		if len(s.Features) != m.Dim() || s.Label < 0 || int(s.Label) >= m.Classes() {
			return Result{}, fmt.Errorf("canife: pool sample %d has %d features and label %d, the model takes %d and %d classes",
				i, len(s.Features), s.Label, m.Dim(), m.Classes())
		}
	}
	if len(pool) > cfg.PoolSize {
		pool = slices.Clone(pool)
		for i := 0; i < cfg.PoolSize; i++ {
			j := i + rng.IntN(len(pool)-i)
			pool[i], pool[j] = pool[j], pool[i]
		}
		pool = pool[:cfg.PoolSize]
	}
	newCrafter := func() (*crafter, func()) {
		c := &crafter{d: len(w), y: y, lambda: cfg.NormWeight}
		if m.IsCNN() {
			nm := m.Acquire()
			c.grads = newCNNGrads(nm, w, m.Dim())
			return c, func() { m.Release(nm) }
		}
		c.grads = &flatGrads{wk: hostmodel.NewWork(m), w: w, hw: make([]float64, len(w))}
		return c, func() {}
	}
	c0, release := newCrafter()
	defer release()
	basis := c0.span(pool)
	// The starts are drawn in order before any restart runs, so the restarts may run at once
	// (each with its own workspace over the shared basis) and the result not depend on it.
	starts := make([][]float64, cfg.Restarts)
	for r := range starts {
		starts[r] = make([]float64, m.Dim())
		for i := range starts[r] {
			starts[r][i] = lo + (hi-lo)*rng.Float64()
		}
	}
	results := make([]Result, cfg.Restarts)
	objs := make([]float64, cfg.Restarts)
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for r := range starts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, release := c0, func() {}
			if r > 0 {
				c, release = newCrafter()
			}
			defer release()
			c.basis = basis
			startShare, _, _ := c.objective(starts[r], nil)
			x, j := c.minimize(ctx, starts[r], lo, hi, cfg)
			share, norm, _ := c.objective(x, nil)
			results[r], objs[r] = Result{Features: x, Share: share, GradNorm: norm, StartShare: startShare}, j
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, err // the restarts stopped early: their results are not the crafting's
	}
	best := 0
	for r := range objs {
		if objs[r] < objs[best] {
			best = r
		}
	}
	return results[best], nil
}

type crafter struct {
	grads
	d      int // the model's parameters
	y      int
	basis  [][]float64 // orthonormal basis of the pool's gradients
	lambda float64
	// g, proj and v are objective's workspace (the canary's gradient, its projection onto
	// the span, dJ/dg), made on first use: one crafter per restart.
	g, proj, v []float64
}

// grads computes, at the crafter's parameters, a sample's gradient in w and the mixed product
// H_xw v, the gradient in x of <v, grad_w loss(w; x, y)>.
type grads interface {
	gradient(x []float64, y int, g []float64)
	mixed(x []float64, y int, v, hx []float64)
}

// flatGrads are a flat model's, exact (hostmodel.Work).
type flatGrads struct {
	wk    *hostmodel.Work
	w, hw []float64
}

func (f *flatGrads) gradient(x []float64, y int, g []float64) {
	f.wk.Forward(f.w, x)
	f.wk.Gradient(f.w, y, g)
}

func (f *flatGrads) mixed(x []float64, y int, v, hx []float64) {
	f.wk.Forward(f.w, x)
	f.wk.HessianVector(f.w, y, v, f.hw, hx)
}

// fdStep is the relative step of the central differences in parameter space for CNNs: w +- t v
// moves w by fdStep max(1, |w|), as attacks/inversion's cnnFDStep (whose comment bounds the
// error: about 1e-9 relative for gradients of order one).
const fdStep = 1e-7

// cnnGrads are a CNN's: its gradients exact (nn), the mixed product a central difference of
// exact input gradients, H_xw v ~ (dx(w + t v) - dx(w - t v)) / 2t, one nn pass over two
// replicas.
type cnnGrads struct {
	nm            *nn.Model[float64]
	w             []float64
	pm, gpm, dxpm []float64
	loss          []float64
	normW         float64
}

func newCNNGrads(nm *nn.Model[float64], w []float64, dim int) *cnnGrads {
	d := len(w)
	return &cnnGrads{nm: nm, w: w, pm: make([]float64, 2*d), gpm: make([]float64, 2*d), dxpm: make([]float64, 2*dim),
		loss: make([]float64, 2), normW: math.Sqrt(dot(w, w))}
}

func (c *cnnGrads) gradient(x []float64, y int, g []float64) {
	if err := c.nm.LossGrad(c.w, 1, x, []int32{int32(y)}, g, c.loss[:1]); err != nil {
		panic(fmt.Sprintf("canife: nn gradient: %v", err)) // sizes fixed by Craft
	}
}

func (c *cnnGrads) mixed(x []float64, y int, v, hx []float64) {
	d := len(c.w)
	nv := math.Sqrt(dot(v, v))
	if nv == 0 {
		clear(hx)
		return
	}
	t := fdStep * max(1, c.normW) / nv
	for i := range c.w {
		c.pm[i], c.pm[d+i] = c.w[i]+t*v[i], c.w[i]-t*v[i]
	}
	if err := c.nm.LossGradInput(c.pm, 2, x, []int32{int32(y)}, c.gpm, c.dxpm, c.loss); err != nil {
		panic(fmt.Sprintf("canife: nn input gradient: %v", err))
	}
	n := len(hx)
	for i := range hx {
		hx[i] = (c.dxpm[i] - c.dxpm[n+i]) / (2 * t)
	}
}

// span returns an orthonormal basis of the pool's gradients at w (modified Gram-Schmidt; a
// gradient whose remainder is below 1e-10 of its norm adds nothing).
func (c *crafter) span(pool []datasets.Sample) [][]float64 {
	var basis [][]float64
	for _, s := range pool {
		x := make([]float64, len(s.Features))
		for i, v := range s.Features {
			x[i] = float64(v)
		}
		g := make([]float64, c.d)
		c.gradient(x, int(s.Label), g)
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
	if c.g == nil {
		c.g, c.proj, c.v = make([]float64, c.d), make([]float64, c.d), make([]float64, c.d)
	}
	g, a := c.g, c.proj // a: P_S g
	c.gradient(x, c.y, g)
	gg := dot(g, g)
	if gg == 0 {
		if gx != nil {
			clear(gx)
		}
		return 0, 0, math.Inf(1)
	}
	clear(a)
	for _, b := range c.basis {
		axpy(dot(b, g), b, a)
	}
	share = dot(a, g) / gg
	j = share - c.lambda*math.Log(gg)
	if gx != nil {
		v := c.v
		for i := range v {
			v[i] = 2 * (a[i] - (share+c.lambda)*g[i]) / gg
		}
		c.mixed(x, c.y, v, gx)
	}
	return share, math.Sqrt(gg), j
}

// minimize runs Adam from x, projecting onto the box after every step, and returns the best
// point seen and its J.
func (c *crafter) minimize(ctx context.Context, x []float64, lo, hi float64, cfg Config) ([]float64, float64) {
	const b1, b2, eps = 0.9, 0.999, 1e-12
	lr := cfg.LearningRate * (hi - lo)
	mom, vel, gx := make([]float64, len(x)), make([]float64, len(x)), make([]float64, len(x))
	best, bestJ := append([]float64(nil), x...), math.Inf(1)
	for it := 1; it <= cfg.Iterations; it++ {
		if ctx.Err() != nil {
			break // Craft reports the cancellation
		}
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

// dot and axpy are gonum's (assembly kernels where the platform has them): the projections
// onto a CNN's basis are most of the crafting's work.
func dot(a, b []float64) float64 { return floats.Dot(a, b) }

func axpy(alpha float64, x, y []float64) { floats.AddScaled(y, alpha, x) }
