package attacks

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

// invgradAttack reconstructs the target client's sample by optimization, in the style of
// Inverting Gradients (Geiping et al. 2020): it looks for the x in the box [0, 1]^d whose
// simulated local training from w_{T-1} produces an update pointing the way the observed update
// u = upload - w_{T-1} points. The client is modelled as holding one sample (x, y) and taking K
// full-batch steps w_{k+1} = w_k - eta_k (clip(grad loss(w_k; x, y)) + alpha (w_k - w_0)) (alpha
// is FedProx's, 0 otherwise); the noise is unknown and ignored. The objective is
//
//	1 - cos(w_K - w_0, u) + lambda_TV TV(x)
//
// with TV the anisotropic total variation when Env.Shape describes an image and no prior for flat
// inputs. Its gradient in x runs through the K unrolled steps: each step's adjoint needs the
// Hessian-vector products H_ww r and H_xw r of the loss, which invgradWork computes exactly by
// reverse mode over a forward-mode (tangent) pass of the MLP. The label is the iDLG rule of the
// label attack (the argmax of its estimated label histogram). Signed Adam with step decay
// minimizes the objective from several seeded random starts, and the start of least objective
// wins: the ground truth is never consulted before the reconstruction is fixed.
//
// Its score is ||x^ - epsilon'|| - ||x^ - epsilon|| (or -||x^ - epsilon|| without epsilon'), and
// its metrics are those of the analytic inversion attack.
type invgradAttack struct {
	cfg invgradConfig
}

// invgradConfig is the optimizer's budget; zero fields take the defaults below.
type invgradConfig struct {
	iterations int     // signed-Adam iterations per restart
	restarts   int     // random starts
	step       float64 // Adam's initial step size, decayed by 10 at 3/8, 5/8 and 7/8 of the budget
	tv         float64 // lambda_TV for image-shaped inputs
}

const (
	invgradIterations = 400
	invgradRestarts   = 2
	invgradStep       = 0.05
	invgradTV         = 1e-4
	// invgradSalt separates the restart stream from other users of Env.Seed.
	invgradSalt = 0x696e7667726164
)

func (c invgradConfig) withDefaults() invgradConfig {
	if c.iterations <= 0 {
		c.iterations = invgradIterations
	}
	if c.restarts <= 0 {
		c.restarts = invgradRestarts
	}
	if !(c.step > 0) {
		c.step = invgradStep
	}
	if c.tv == 0 {
		c.tv = invgradTV
	}
	if c.tv < 0 {
		c.tv = 0
	}
	return c
}

func (invgradAttack) Info() Info {
	return Info{Name: "invgrad", Threat: runs.ThreatUploads,
		Needs:   Needs{Upload: true, Target: true, Model: true, Classes: true, LastDense: true},
		Metrics: []string{MetricMSE, MetricPSNR, MetricSSIM, MetricL2},
		Summary: "Inverting-Gradients reconstruction: cosine matching of the update through K unrolled local steps, TV prior, box [0,1], signed Adam, restarts; score = ||x^-epsilon'|| - ||x^-epsilon||"}
}

func (a invgradAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	x, _, err := a.reconstruct(env, obs)
	if err != nil {
		return Observed{}, err
	}
	nan := math.NaN()
	if x == nil {
		return Observed{Score: nan, Metrics: []float64{nan, nan, nan, nan}}, nil
	}
	score := -math.Sqrt(sqDist(x, to64(env.Target.Features)))
	if env.TargetPrime.Present() {
		score += math.Sqrt(sqDist(x, to64(env.TargetPrime.Features)))
	}
	metrics := []float64{nan, nan, nan, nan}
	truth := env.Target
	if obs.World == runs.WorldCPrime {
		truth = env.TargetPrime
	}
	if truth.Present() {
		metrics = reconstructionMetrics(x, to64(truth.Features), imageShape(env.Shape, env.Dim))
	}
	return Observed{Score: score, Metrics: metrics, Reconstruction: x}, nil
}

// pairCap implements pairCapped: Options.InvgradPairs, defaulting to DefaultInvgradPairsCNN
// pairs for a CNN (a LeNet-5 reconstruction takes seconds) and every pair for the host MLPs.
func (invgradAttack) pairCap(env *Env, opts Options) int {
	switch {
	case opts.InvgradPairs < 0:
		return 0
	case opts.InvgradPairs > 0:
		return opts.InvgradPairs
	case env.model != nil && env.model.kind == "cnn":
		return DefaultInvgradPairsCNN
	}
	return 0
}

// reconstruct returns the reconstruction of the best restart and its objective, or a nil x when
// the update is degenerate (zero or non-finite) or every restart diverged. It builds the problem
// from the update, w_{T-1}, the training config and the input shape only: Env.Target and
// Env.TargetPrime do not reach it.
func (a invgradAttack) reconstruct(env *Env, obs *Observation) ([]float64, float64, error) {
	u, err := update(obs)
	if err != nil {
		return nil, 0, err
	}
	if err := checkParamLen(env, u); err != nil {
		return nil, 0, err
	}
	lo, hi := env.model.lastBias()
	// The label attack's histogram; for a one-sample client it is iDLG's sign rule.
	counts := estimateLabelCounts(env, obs, u[lo:hi])
	y := 0
	for c, n := range counts {
		if n > counts[y] {
			y = c
		}
	}
	etas, err := localRates(&env.Config, int(obs.Round)-1)
	if err != nil {
		return nil, 0, err
	}
	cfg := a.cfg
	if cfg.iterations == 0 {
		cfg.iterations = env.invgrad.iterations
	}
	cfg = cfg.withDefaults()
	var alpha float64
	if env.Config.Algorithm == algo.FedProx {
		alpha = env.Config.ProxAlpha
	}
	img, tv := imageShape(env.Shape, env.Dim), cfg.tv
	if img.c == 0 {
		tv = 0
	}
	rng := rand.New(rand.NewPCG(env.Seed^invgradSalt, uint64(obs.RunID)*0x9e3779b97f4a7c15^uint64(obs.Round)))
	w0 := to64(obs.Prev.Params)
	if env.model.kind == "cnn" {
		p := &cnnInvProblem{h: env.model.cnn, w0: w0, u: u, y: []int32{int32(y)}, etas: etas,
			clip: env.Config.ClipNorm, alpha: alpha, img: img, tvWeight: tv, P: cfg.restarts}
		return a.reconstructCNN(env, p, rng, cfg)
	}
	p := &invProblem{m: env.model, w0: w0, u: u, y: y, etas: etas,
		clip: env.Config.ClipNorm, alpha: alpha, img: img, tvWeight: tv}
	if !p.init() {
		return nil, 0, nil
	}
	xs := make([][]float64, cfg.restarts)
	objs := make([]float64, cfg.restarts)
	for r := range xs {
		start := make([]float64, env.Dim)
		for i := range start {
			start[i] = rng.Float64()
		}
		xs[r], objs[r] = p.minimize(start, cfg)
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

// localRates returns eta_{t,k} for the K local steps of round t.
func localRates(c *train.Config, t int) ([]float64, error) {
	K := max(c.LocalSteps, 1)
	if c.Schedule == "table" && (t < 0 || t >= len(c.ScheduleTable) || len(c.ScheduleTable[t]) < K) {
		return nil, fmt.Errorf("learning-rate table has no row of %d steps for round %d", K, t)
	}
	etas := make([]float64, K)
	for k := range etas {
		etas[k] = c.LearningRateAt(t, k)
	}
	return etas, nil
}

// image is the layout of an input as c channels of h x w pixels, c = 0 for flat inputs.
type image struct{ c, h, w int }

// imageShape reads Env.Shape as channels... x height x width (the last two dimensions are the
// image's, the leading ones multiply into channels). Shapes of fewer than two dimensions, with a
// side of 1 or that do not match the input dimension are flat.
func imageShape(shape []int, dim int) image {
	if len(shape) < 2 {
		return image{}
	}
	h, w := shape[len(shape)-2], shape[len(shape)-1]
	c := 1
	for _, s := range shape[:len(shape)-2] {
		c *= s
	}
	if h < 2 || w < 2 || c < 1 || c*h*w != dim {
		return image{}
	}
	return image{c, h, w}
}

// totalVariation returns the anisotropic total variation of x, the sum of the absolute
// differences of vertically and horizontally neighbouring pixels divided by the number of
// pixels, and adds scale times its (sub)gradient to grad when grad is not nil.
func totalVariation(img image, x []float64, scale float64, grad []float64) float64 {
	n := float64(img.c * img.h * img.w)
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
	for c := 0; c < img.c; c++ {
		base := c * img.h * img.w
		for i := 0; i < img.h; i++ {
			for j := 0; j < img.w; j++ {
				p := base + i*img.w + j
				if i+1 < img.h {
					add(p, p+img.w)
				}
				if j+1 < img.w {
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
	m        *hostModel
	w0, u    []float64
	y        int
	etas     []float64
	clip     float64 // whole-gradient clip norm V, 0 for none
	alpha    float64 // FedProx's alpha
	img      image
	tvWeight float64

	normU float64
	work  *invgradWork
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
	K, d := len(p.etas), p.m.numParams()
	p.work = newInvgradWork(p.m)
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
	p.hxr = make([]float64, p.m.sizes[0])
	return true
}

// objective returns 1 - cos(w_K - w_0, u) + lambda_TV TV(x) and, when gx is not nil, stores its
// gradient in x there (reverse mode through the K steps).
func (p *invProblem) objective(x, gx []float64) float64 {
	K := len(p.etas)
	copy(p.wk[0], p.w0)
	for k := 0; k < K; k++ {
		w, g, next := p.wk[k], p.gk[k], p.wk[k+1]
		p.work.forward(w, x)
		p.work.gradient(w, p.y, g)
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
			p.work.forward(p.wk[k], x) // the buffers hold step K-1's pass
		}
		p.work.hessianVector(p.wk[k], p.y, p.r, p.hr, p.hxr)
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
func (p *invProblem) minimize(start []float64, cfg invgradConfig) ([]float64, float64) {
	const beta1, beta2, epsAdam = 0.9, 0.999, 1e-8
	x := start
	n := len(x)
	g := make([]float64, n)
	m1 := make([]float64, n)
	m2 := make([]float64, n)
	best := make([]float64, n)
	bestObj := math.NaN()
	b1t, b2t := 1.0, 1.0
	for it := 0; it <= cfg.iterations; it++ {
		last := it == cfg.iterations
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
		lr := cfg.step
		for _, frac := range [...]float64{3.0 / 8, 5.0 / 8, 7.0 / 8} {
			if float64(it) >= frac*float64(cfg.iterations) {
				lr /= 10
			}
		}
		b1t *= beta1
		b2t *= beta2
		for i, gi := range g {
			s := 0.0
			switch {
			case gi > 0:
				s = 1
			case gi < 0:
				s = -1
			}
			m1[i] = beta1*m1[i] + (1-beta1)*s
			m2[i] = beta2*m2[i] + (1-beta2)*s*s
			step := lr * (m1[i] / (1 - b1t)) / (math.Sqrt(m2[i]/(1-b2t)) + epsAdam)
			x[i] = math.Min(math.Max(x[i]-step, 0), 1)
		}
	}
	return best, bestObj
}

// invgradWork evaluates an MLP (softmax regression included) with the host model's parameter
// layout in preallocated buffers: the loss gradient in w and the second-order products the
// unrolled steps need.
type invgradWork struct {
	m *hostModel
	// a[l] is layer l's input (a[0] = x), z[l] its pre-activation; ad and zd their tangents.
	a, z, ad, zd [][]float64
	// Adjoints of a, z, ad and zd in the reverse pass.
	abar, zbar, adbar, zdbar [][]float64
	p                        []float64
}

func newInvgradWork(m *hostModel) *invgradWork {
	L := m.layers()
	w := &invgradWork{m: m}
	for _, bufs := range []*[][]float64{&w.a, &w.ad, &w.abar, &w.adbar} {
		*bufs = make([][]float64, L)
		for l := range *bufs {
			(*bufs)[l] = make([]float64, m.sizes[l])
		}
	}
	for _, bufs := range []*[][]float64{&w.z, &w.zd, &w.zbar, &w.zdbar} {
		*bufs = make([][]float64, L)
		for l := range *bufs {
			(*bufs)[l] = make([]float64, m.sizes[l+1])
		}
	}
	w.p = make([]float64, m.sizes[L])
	return w
}

// activation2 returns the first and second derivatives of the activation at pre-activation v
// with activation value h.
func (m *hostModel) activation2(v, h float64) (d1, d2 float64) {
	switch m.act {
	case "softplus":
		s := 1 / (1 + math.Exp(-v))
		return s, s * (1 - s)
	case "relu":
		if v <= 0 {
			return 0, 0
		}
		return 1, 0
	}
	return 1 - h*h, -2 * h * (1 - h*h)
}

// forward evaluates the network at (w, x) and the softmax of its logits.
func (wk *invgradWork) forward(w, x []float64) {
	m := wk.m
	L := m.layers()
	copy(wk.a[0], x)
	for l := 0; l < L; l++ {
		nin := m.sizes[l]
		in, pre := wk.a[l], wk.z[l]
		for o := range pre {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			s := w[m.boff[l]+o]
			for i, v := range row {
				s += v * in[i]
			}
			pre[o] = s
		}
		if l+1 < L {
			for o, v := range pre {
				wk.a[l+1][o] = m.activate(v)
			}
		}
	}
	mx := math.Inf(-1)
	for _, v := range wk.z[L-1] {
		mx = math.Max(mx, v)
	}
	var s float64
	for j, v := range wk.z[L-1] {
		wk.p[j] = math.Exp(v - mx)
		s += wk.p[j]
	}
	for j := range wk.p {
		wk.p[j] /= s
	}
}

// gradient stores the gradient in w of the cross-entropy of label y in g, after forward.
func (wk *invgradWork) gradient(w []float64, y int, g []float64) {
	m := wk.m
	L := m.layers()
	delta := wk.zbar[L-1]
	copy(delta, wk.p)
	delta[y]--
	for l := L - 1; l >= 0; l-- {
		nin := m.sizes[l]
		in := wk.a[l]
		for o, dv := range delta {
			gr := g[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			for i, v := range in {
				gr[i] = dv * v
			}
			g[m.boff[l]+o] = dv
		}
		if l == 0 {
			break
		}
		prev := wk.zbar[l-1]
		clear(prev)
		for o, dv := range delta {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			for i, v := range row {
				prev[i] += dv * v
			}
		}
		for i := range prev {
			prev[i] *= m.activateGrad(wk.z[l-1][i], wk.a[l][i])
		}
		delta = prev
	}
}

// hessianVector stores H_ww v in hw and H_xw v in hx, the gradients in w and in x of
// s(w, x) = <v, grad_w loss(w; x, y)>, after forward at (w, x). It pushes the tangent of the
// forward pass in direction v (in w) to get s = <p - e_y, dz_L>, then runs reverse mode through
// both the primal and the tangent pass.
func (wk *invgradWork) hessianVector(w []float64, y int, v, hw, hx []float64) {
	m := wk.m
	L := m.layers()
	// Tangent pass: ad_0 = 0, dz_l = V_l a_l + W_l ad_l + c_l, ad_{l+1} = act'(z_l) dz_l.
	clear(wk.ad[0])
	for l := 0; l < L; l++ {
		nin := m.sizes[l]
		in, din, dz := wk.a[l], wk.ad[l], wk.zd[l]
		for o := range dz {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			vrow := v[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			s := v[m.boff[l]+o]
			for i := range row {
				s += vrow[i]*in[i] + row[i]*din[i]
			}
			dz[o] = s
		}
		if l+1 < L {
			for o, dv := range dz {
				d1, _ := m.activation2(wk.z[l][o], wk.a[l+1][o])
				wk.ad[l+1][o] = d1 * dv
			}
		}
	}
	// Reverse pass. s = <p - e_y, dz_L>: its adjoint in dz_L is p - e_y, in z_L the softmax
	// Jacobian (diag p - p p^T) applied to dz_L.
	zL, dzL := wk.zbar[L-1], wk.zdbar[L-1]
	var pd float64
	for j, pj := range wk.p {
		pd += pj * wk.zd[L-1][j]
	}
	for j, pj := range wk.p {
		dzL[j] = pj
		zL[j] = pj * (wk.zd[L-1][j] - pd)
	}
	dzL[y]--
	for l := L - 1; l >= 0; l-- {
		nin := m.sizes[l]
		in, din := wk.a[l], wk.ad[l]
		zb, zdb := wk.zbar[l], wk.zdbar[l]
		ab, adb := wk.abar[l], wk.adbar[l]
		clear(ab)
		clear(adb)
		for o := range zb {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			vrow := v[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			gr := hw[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			zo, zdo := zb[o], zdb[o]
			for i := range row {
				gr[i] = zo*in[i] + zdo*din[i]
				ab[i] += row[i]*zo + vrow[i]*zdo
				adb[i] += row[i] * zdo
			}
			hw[m.boff[l]+o] = zo
		}
		if l == 0 {
			copy(hx, ab)
			break
		}
		pz, pzd := wk.zbar[l-1], wk.zdbar[l-1]
		for i := range pz {
			d1, d2 := m.activation2(wk.z[l-1][i], in[i])
			pz[i] = d1*ab[i] + d2*wk.zd[l-1][i]*adb[i]
			pzd[i] = d1 * adb[i]
		}
	}
}
