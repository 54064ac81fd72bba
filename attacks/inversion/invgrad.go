package inversion

import (
	"context"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
)

// Config is the optimizer's budget; zero fields take the defaults below (WithDefaults).
type Config struct {
	Iterations int     // signed-Adam iterations per restart
	Restarts   int     // random starts
	Step       float64 // Adam's initial step size, decayed by 10 at 3/8, 5/8 and 7/8 of the budget
	TV         float64 // lambda_TV for image-shaped inputs; negative for none
}

const (
	invgradIterations = 400
	invgradRestarts   = 2
	invgradStep       = 0.05
	invgradTV         = 1e-4
)

// WithDefaults returns c with its zero fields set to the defaults: 400 iterations, 2 restarts,
// step 0.05, lambda_TV 1e-4 (a negative TV becomes 0).
func (c Config) WithDefaults() Config {
	if c.Iterations <= 0 {
		c.Iterations = invgradIterations
	}
	if c.Restarts <= 0 {
		c.Restarts = invgradRestarts
	}
	if !(c.Step > 0) {
		c.Step = invgradStep
	}
	if c.TV == 0 {
		c.TV = invgradTV
	}
	if c.TV < 0 {
		c.TV = 0
	}
	return c
}

// Problem is one reconstruction problem: what the server knows of one upload of a client
// modelled as holding one sample (x, Label) and taking K = len(Etas) full-batch steps
// w_{k+1} = w_k - eta_k (clip(grad loss(w_k; x, y)) + Alpha (w_k - w_0)) from W0. It holds no
// ground truth.
type Problem struct {
	Model *hostmodel.Model
	W0    []float64 // w_{T-1}, the start of the client's local training
	U     []float64 // the observed update, upload - w_{T-1}
	Label int       // the label the sample is assumed to have
	Etas  []float64 // the K local steps' learning rates
	Clip  float64   // whole-gradient clip norm V, 0 for none
	Alpha float64   // FedProx's alpha, 0 otherwise
	Image Image     // the input's layout; the TV prior applies to images only
}

// Reconstruct minimizes 1 - cos(w_K(x) - w_0, u) + lambda_TV TV(x) over x in [0, 1]^d by signed
// Adam from cfg.Restarts random starts drawn from rng (uniform on the box, one start after the
// other) and returns the reconstruction of least objective with its value, or a nil x when the
// update is degenerate (zero or non-finite) or every restart diverged. cfg takes its defaults
// (Config.WithDefaults) first. The MLPs' gradient in x runs through the K unrolled steps with
// exact Hessian-vector products (hostmodel.Work); a CNN's with finite-difference products, its
// restarts minimized at once. It returns ctx's error as soon as ctx is done: one reconstruction
// of a CNN runs for seconds to minutes, and an interrupted attack stage waited for every one
// under way (Slurm's SIGKILL comes 30 s after its SIGTERM).
func Reconstruct(ctx context.Context, p Problem, cfg Config, rng *rand.Rand) ([]float64, float64, error) {
	cfg = cfg.WithDefaults()
	tv := cfg.TV
	if p.Image.C == 0 {
		tv = 0
	}
	if p.Model.IsCNN() {
		q := &cnnInvProblem{h: p.Model, w0: p.W0, u: p.U, y: []int32{int32(p.Label)}, etas: p.Etas,
			clip: p.Clip, alpha: p.Alpha, img: p.Image, tvWeight: tv, P: cfg.Restarts}
		return reconstructCNN(ctx, q, rng, cfg)
	}
	q := &invProblem{m: p.Model, w0: p.W0, u: p.U, y: p.Label, etas: p.Etas,
		clip: p.Clip, alpha: p.Alpha, img: p.Image, tvWeight: tv}
	if !q.init() {
		return nil, 0, nil
	}
	xs := make([][]float64, cfg.Restarts)
	objs := make([]float64, cfg.Restarts)
	for r := range xs {
		start := make([]float64, p.Model.Dim())
		for i := range start {
			start[i] = rng.Float64()
		}
		var err error
		if xs[r], objs[r], err = q.minimize(ctx, start, cfg); err != nil {
			return nil, 0, err
		}
	}
	best := pickRestart(objs)
	if best < 0 {
		return nil, 0, nil
	}
	return xs[best], objs[best], nil
}

// pickRestart returns the index of the least finite objective value, or -1 when none is finite.
// It is the only place a restart is chosen, and it sees objective values alone.
func pickRestart(objs []float64) int {
	best := -1
	for i, v := range objs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if best < 0 || v < objs[best] {
			best = i
		}
	}
	return best
}

// Image is the layout of an input as C channels of H x W pixels, C = 0 for flat inputs.
type Image struct{ C, H, W int }

// ImageShape reads an input's shape (attacks.Env.Shape) as channels... x height x width (the
// last two dimensions are the image's, the leading ones multiply into channels). Shapes of fewer than two dimensions, with a
// side of 1 or that do not match the input dimension are flat.
func ImageShape(shape []int, dim int) Image {
	if len(shape) < 2 {
		return Image{}
	}
	h, w := shape[len(shape)-2], shape[len(shape)-1]
	c := 1
	for _, s := range shape[:len(shape)-2] {
		c *= s
	}
	if h < 2 || w < 2 || c < 1 || c*h*w != dim {
		return Image{}
	}
	return Image{c, h, w}
}

// totalVariation returns the anisotropic total variation of x, the sum of the absolute
// differences of vertically and horizontally neighbouring pixels divided by the number of
// pixels, and adds scale times its (sub)gradient to grad when grad is not nil.
func totalVariation(img Image, x []float64, scale float64, grad []float64) float64 {
	n := float64(img.C * img.H * img.W)
	var tv float64
	add := func(a, b int) {
		d := x[b] - x[a]
		tv += math.Abs(d)
		if grad != nil && d != 0 {
			s := scale / n
			if d < 0 {
				s = -s
			}
			grad[b] += s
			grad[a] -= s
		}
	}
	for c := 0; c < img.C; c++ {
		base := c * img.H * img.W
		for i := 0; i < img.H; i++ {
			for j := 0; j < img.W; j++ {
				p := base + i*img.W + j
				if i+1 < img.H {
					add(p, p+img.W)
				}
				if j+1 < img.W {
					add(p, p+1)
				}
			}
		}
	}
	return tv / n
}

// invProblem is one reconstruction problem: what the server knows of one upload. It holds no
// ground truth.
type invProblem struct {
	m        *hostmodel.Model
	w0, u    []float64
	y        int
	etas     []float64
	clip     float64 // whole-gradient clip norm V, 0 for none
	alpha    float64 // FedProx's alpha
	img      Image
	tvWeight float64

	normU float64
	work  *hostmodel.Work
	wk    [][]float64 // w_0..w_K of the last evaluation
	gk    [][]float64 // the unclipped gradients at w_0..w_{K-1}
	gnorm []float64
	wbar  []float64
	r     []float64
	hr    []float64
	hxr   []float64
}

// init allocates the workspace and reports whether the update can be matched (finite, nonzero).
func (p *invProblem) init() bool {
	var s float64
	for _, v := range p.u {
		s += v * v
	}
	p.normU = math.Sqrt(s)
	if !(p.normU > 0) || math.IsInf(p.normU, 0) {
		return false
	}
	K, d := len(p.etas), p.m.NumParams()
	p.work = hostmodel.NewWork(p.m)
	p.wk = make([][]float64, K+1)
	for k := range p.wk {
		p.wk[k] = make([]float64, d)
	}
	p.gk = make([][]float64, K)
	for k := range p.gk {
		p.gk[k] = make([]float64, d)
	}
	p.gnorm = make([]float64, K)
	p.wbar = make([]float64, d)
	p.r = make([]float64, d)
	p.hr = make([]float64, d)
	p.hxr = make([]float64, p.m.Dim())
	return true
}

// objective returns 1 - cos(w_K - w_0, u) + lambda_TV TV(x) and, when gx is not nil, stores its
// gradient in x there (reverse mode through the K steps).
func (p *invProblem) objective(x, gx []float64) float64 {
	K := len(p.etas)
	copy(p.wk[0], p.w0)
	for k := 0; k < K; k++ {
		w, g, next := p.wk[k], p.gk[k], p.wk[k+1]
		p.work.Forward(w, x)
		p.work.Gradient(w, p.y, g)
		p.gnorm[k] = math.Sqrt(dot(g, g))
		cf := p.clipFactor(k)
		eta := p.etas[k]
		for i := range next {
			next[i] = w[i] - eta*(cf*g[i]+p.alpha*(w[i]-p.w0[i]))
		}
	}
	wK := p.wk[K]
	var aa, au float64
	for i, v := range wK {
		a := v - p.w0[i]
		aa += a * a
		au += a * p.u[i]
	}
	na := math.Sqrt(aa)
	cos := 0.0
	if na > 0 {
		cos = au / (na * p.normU)
	}
	obj := 1 - cos
	if p.tvWeight > 0 {
		obj += p.tvWeight * totalVariation(p.img, x, 0, nil)
	}
	if gx == nil {
		return obj
	}
	clear(gx)
	if p.tvWeight > 0 {
		totalVariation(p.img, x, p.tvWeight, gx)
	}
	if !(na > 0) {
		return obj
	}
	// d(1 - cos)/da = -(u/|u| - cos a/|a|) / |a| with a = w_K - w_0.
	for i, v := range wK {
		p.wbar[i] = -(p.u[i]/p.normU - cos*(v-p.w0[i])/na) / na
	}
	for k := K - 1; k >= 0; k-- {
		eta, g := p.etas[k], p.gk[k]
		// r = eta J_clip^T wbar; the clip's Jacobian is (V/|g|)(I - g g^T/|g|^2) when it acts.
		cf := p.clipFactor(k)
		if cf < 1 {
			gw := dot(g, p.wbar) / (p.gnorm[k] * p.gnorm[k])
			for i := range p.r {
				p.r[i] = eta * cf * (p.wbar[i] - gw*g[i])
			}
		} else {
			for i := range p.r {
				p.r[i] = eta * p.wbar[i]
			}
		}
		if k != K-1 {
			p.work.Forward(p.wk[k], x) // the buffers hold step K-1's pass
		}
		p.work.HessianVector(p.wk[k], p.y, p.r, p.hr, p.hxr)
		for i, v := range p.hxr {
			gx[i] -= v
		}
		if k > 0 {
			for i := range p.wbar {
				p.wbar[i] = p.wbar[i]*(1-eta*p.alpha) - p.hr[i]
			}
		}
	}
	return obj
}

// clipFactor is min(1, V/|g_k|).
func (p *invProblem) clipFactor(k int) float64 {
	if p.clip > 0 && p.gnorm[k] > p.clip {
		return p.clip / p.gnorm[k]
	}
	return 1
}

// minimize runs signed Adam (Adam fed the sign of the gradient, as Geiping et al. do) from
// start, projecting onto [0, 1] after every step, and returns the iterate of least objective
// seen with its value (NaN when the objective stopped being finite before any finite value).
func (p *invProblem) minimize(ctx context.Context, start []float64, cfg Config) ([]float64, float64, error) {
	x := start
	n := len(x)
	g := make([]float64, n)
	opt := newSignedAdam(n, cfg)
	best := make([]float64, n)
	bestObj := math.NaN()
	for it := 0; it <= cfg.Iterations; it++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		last := it == cfg.Iterations
		var obj float64
		if last {
			obj = p.objective(x, nil)
		} else {
			obj = p.objective(x, g)
		}
		if math.IsNaN(obj) || math.IsInf(obj, 0) {
			break
		}
		if math.IsNaN(bestObj) || obj < bestObj {
			bestObj = obj
			copy(best, x)
		}
		if last {
			break
		}
		lr := opt.next(it)
		opt.update(x, g, 0, n, lr)
	}
	return best, bestObj, nil
}

// signedAdam is the optimizer of Inverting Gradients (Geiping et al. 2020): Adam fed the sign
// of each gradient entry, its step decayed by 10 at 3/8, 5/8 and 7/8 of the budget, the iterate
// projected onto the box [0, 1] after every step.
type signedAdam struct {
	m1, m2     []float64
	b1t, b2t   float64
	step       float64
	iterations int
}

const adamBeta1, adamBeta2, adamEps = 0.9, 0.999, 1e-8

func newSignedAdam(n int, cfg Config) *signedAdam {
	return &signedAdam{m1: make([]float64, n), m2: make([]float64, n), b1t: 1, b2t: 1, step: cfg.Step, iterations: cfg.Iterations}
}

// next advances the bias corrections to iteration it and returns its step size.
func (a *signedAdam) next(it int) float64 {
	lr := a.step
	for _, frac := range [...]float64{3.0 / 8, 5.0 / 8, 7.0 / 8} {
		if float64(it) >= frac*float64(a.iterations) {
			lr /= 10
		}
	}
	a.b1t *= adamBeta1
	a.b2t *= adamBeta2
	return lr
}

// update takes one step of entries lo..hi-1 of x along the signs of g.
func (a *signedAdam) update(x, g []float64, lo, hi int, lr float64) {
	for i := lo; i < hi; i++ {
		s := 0.0
		switch {
		case g[i] > 0:
			s = 1
		case g[i] < 0:
			s = -1
		}
		a.m1[i] = adamBeta1*a.m1[i] + (1-adamBeta1)*s
		a.m2[i] = adamBeta2*a.m2[i] + (1-adamBeta2)*s*s
		step := lr * (a.m1[i] / (1 - a.b1t)) / (math.Sqrt(a.m2[i]/(1-a.b2t)) + adamEps)
		x[i] = math.Min(math.Max(x[i]-step, 0), 1)
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
