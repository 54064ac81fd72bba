package inversion

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/nn"
)

// Inverting Gradients against a CNN of package nn (invgrad.go has the MLP version and
// the model of the client). The problem is the same, min over x in [0, 1]^d of
//
//	1 - cos(w_K(x) - w_0, u) + lambda_TV TV(x),
//
// with w_K(x) the client's K simulated local steps from w_0 = w_{T-1}; only the second
// derivatives differ. Reverse mode through the K steps needs at every step k the products
// H_ww r and H_xw r of the loss's Hessian with the step's adjoint r, and nn has no second-order
// pass: they are central differences in parameter space of gradients that nn computes exactly,
//
//	H_ww r ~ (g(w + t r, x) - g(w - t r, x)) / 2t,   H_xw r ~ (dx(w + t r, x) - dx(w - t r, x)) / 2t,
//
// g the loss's gradient in w and dx in x (one LossGradInput call for both, at 2P replicas).
// t = cnnFDStep max(1, |w|) / |r|, so the parameters move by a relative 1e-7 (see cnnFDStep for
// the error). The P restarts run as P replicas of every pass.

// cnnFDStep is the relative size of the central differences' step in parameter space:
// w +- t r moves w by cnnFDStep max(1, |w|). The truncation error of a central difference is
// O(t^2 |third derivative|) (negligible: about 1e-14 relative here); the rounding error is about
// (machine epsilon) |g| / t, 1e-9 relative to |H r| for gradients of order one. A ReLU or
// max-pool network's gradient is discontinuous where a unit's pre-activation (or a window's
// maximum) changes sides; a step straddling such a point gives a wrong product for that step
// and iteration. Moving the parameters by 1e-7 of their norm moves pre-activations by about
// that much, so such crossings are rare; signed Adam uses only the signs of the gradient, and
// the restart is chosen by the objective, which is evaluated exactly. Measured on tiny CNNs
// (TestCNNInvgradObjectiveGradient, against central differences of the objective in x): the
// objective's gradient through 1 and 3 steps is within 4.3e-8 relative of them for tanh with
// average pooling and for ReLU with max pooling; the same spec as an MLP agrees with the exact
// adjoints of invgrad.go to 4.9e-10 (TestCNNInvgradMatchesExactAdjoints).
const cnnFDStep = 1e-7

// cnnInvProblem is one CNN reconstruction problem, all restarts at once: what the server knows
// of one upload. It holds no ground truth.
type cnnInvProblem struct {
	h        *hostmodel.Model // a CNN
	m        *nn.Model[float64]
	w0, u    []float64
	y        []int32
	etas     []float64
	clip     float64 // whole-gradient clip norm V, 0 for none
	alpha    float64 // FedProx's alpha
	img      Image
	tvWeight float64
	P        int // restarts, the replicas of every pass

	d, dim int
	normU  float64
	wk     [][]float64 // w_0..w_K of the last evaluation, P x d each
	gk     [][]float64 // the unclipped gradients at w_0..w_{K-1}, P x d each
	gnorm  [][]float64 // K x P
	wbar   []float64   // P x d
	r      []float64   // P x d
	pm     []float64   // 2P x d: w + t r, w - t r per replica
	gpm    []float64   // 2P x d: their gradients
	xpm    []float64   // 2P x dim: the inputs, each twice
	dxpm   []float64   // 2P x dim
	loss   []float64   // 2P
	steps  []float64   // P: t of each replica
	cos    []float64   // P: cos(w_K - w_0, u) of the last evaluation
	na     []float64   // P: |w_K - w_0|
	dead   []bool      // P: replicas whose objective stopped being finite
}

// init allocates the workspace and reports whether the update can be matched (finite,
// nonzero). The caller returns p.m to the pool with release.
func (p *cnnInvProblem) init() bool {
	p.normU = math.Sqrt(dot(p.u, p.u))
	if !(p.normU > 0) || math.IsInf(p.normU, 0) {
		return false
	}
	K, P := len(p.etas), p.P
	p.d, p.dim = p.h.NumParams(), p.h.Dim()
	d := p.d
	p.wk = make([][]float64, K+1)
	for k := range p.wk {
		p.wk[k] = make([]float64, P*d)
	}
	p.gk = make([][]float64, K)
	p.gnorm = make([][]float64, K)
	for k := range p.gk {
		p.gk[k] = make([]float64, P*d)
		p.gnorm[k] = make([]float64, P)
	}
	p.wbar = make([]float64, P*d)
	p.r = make([]float64, P*d)
	p.pm = make([]float64, 2*P*d)
	p.gpm = make([]float64, 2*P*d)
	p.xpm = make([]float64, 2*P*p.dim)
	p.dxpm = make([]float64, 2*P*p.dim)
	p.loss = make([]float64, 2*P)
	p.steps = make([]float64, P)
	p.cos = make([]float64, P)
	p.na = make([]float64, P)
	p.dead = make([]bool, P)
	p.m = p.h.Acquire()
	return true
}

func (p *cnnInvProblem) release() {
	if p.m != nil {
		p.h.Release(p.m)
		p.m = nil
	}
}

// clipFactor is min(1, V/|g|) of replica r at step k.
func (p *cnnInvProblem) clipFactor(k, r int) float64 {
	if n := p.gnorm[k][r]; p.clip > 0 && n > p.clip {
		return p.clip / n
	}
	return 1
}

// objective evaluates every replica's objective at its input (xs, P x dim) into objs and, when
// gx is not nil, stores the gradients in x there (P x dim).
func (p *cnnInvProblem) objective(xs, gx, objs []float64) error {
	K, P, d, dim := len(p.etas), p.P, p.d, p.dim
	for r := 0; r < P; r++ {
		copy(p.wk[0][r*d:(r+1)*d], p.w0)
	}
	for k := 0; k < K; k++ {
		w, g, next := p.wk[k], p.gk[k], p.wk[k+1]
		if err := p.m.LossGrad(w, P, xs, p.y, g, p.loss[:P]); err != nil {
			return err
		}
		eta := p.etas[k]
		for r := 0; r < P; r++ {
			gr := g[r*d : (r+1)*d]
			p.gnorm[k][r] = math.Sqrt(dot(gr, gr))
			cf := p.clipFactor(k, r)
			wr, nr := w[r*d:(r+1)*d], next[r*d:(r+1)*d]
			for i := range nr {
				nr[i] = wr[i] - eta*(cf*gr[i]+p.alpha*(wr[i]-p.w0[i]))
			}
		}
	}
	cos, na := p.cos, p.na
	for r := 0; r < P; r++ {
		cos[r] = 0
		wK := p.wk[K][r*d : (r+1)*d]
		var aa, au float64
		for i, v := range wK {
			a := v - p.w0[i]
			aa += a * a
			au += a * p.u[i]
		}
		na[r] = math.Sqrt(aa)
		if na[r] > 0 {
			cos[r] = au / (na[r] * p.normU)
		}
		objs[r] = 1 - cos[r]
		if p.tvWeight > 0 {
			objs[r] += p.tvWeight * totalVariation(p.img, xs[r*dim:(r+1)*dim], 0, nil)
		}
	}
	if gx == nil {
		return nil
	}
	clear(gx)
	for r := 0; r < P; r++ {
		if p.tvWeight > 0 {
			totalVariation(p.img, xs[r*dim:(r+1)*dim], p.tvWeight, gx[r*dim:(r+1)*dim])
		}
		wbar, wK := p.wbar[r*d:(r+1)*d], p.wk[K][r*d:(r+1)*d]
		if !(na[r] > 0) {
			clear(wbar) // the simulated update vanished: no gradient through it
			continue
		}
		// d(1 - cos)/da = -(u/|u| - cos a/|a|) / |a| with a = w_K - w_0.
		for i, v := range wK {
			wbar[i] = -(p.u[i]/p.normU - cos[r]*(v-p.w0[i])/na[r]) / na[r]
		}
	}
	for k := K - 1; k >= 0; k-- {
		if err := p.stepAdjoint(k, xs, gx); err != nil {
			return err
		}
	}
	return nil
}

// stepAdjoint moves the adjoint wbar of w_{k+1} to w_k and adds step k's part of the gradient
// in x to gx: with r = eta J_clip^T wbar, gx -= H_xw r and wbar <- wbar (1 - eta alpha) - H_ww r,
// both products by central differences at w_k +- t r.
func (p *cnnInvProblem) stepAdjoint(k int, xs, gx []float64) error {
	P, d, dim := p.P, p.d, p.dim
	eta, w, g := p.etas[k], p.wk[k], p.gk[k]
	for r := 0; r < P; r++ {
		wbar, rr, gr := p.wbar[r*d:(r+1)*d], p.r[r*d:(r+1)*d], g[r*d:(r+1)*d]
		// The clip's Jacobian is (V/|g|)(I - g g^T/|g|^2) where it acts.
		cf := p.clipFactor(k, r)
		if cf < 1 {
			gw := dot(gr, wbar) / (p.gnorm[k][r] * p.gnorm[k][r])
			for i := range rr {
				rr[i] = eta * cf * (wbar[i] - gw*gr[i])
			}
		} else {
			for i := range rr {
				rr[i] = eta * wbar[i]
			}
		}
		wr := w[r*d : (r+1)*d]
		nr := math.Sqrt(dot(rr, rr))
		t := 0.0
		if nr > 0 && !math.IsInf(nr, 0) {
			t = cnnFDStep * math.Max(1, math.Sqrt(dot(wr, wr))) / nr
		}
		p.steps[r] = t
		plus, minus := p.pm[2*r*d:(2*r+1)*d], p.pm[(2*r+1)*d:(2*r+2)*d]
		for i, v := range wr {
			plus[i] = v + t*rr[i]
			minus[i] = v - t*rr[i]
		}
		x := xs[r*dim : (r+1)*dim]
		copy(p.xpm[2*r*dim:], x)
		copy(p.xpm[(2*r+1)*dim:], x)
	}
	if err := p.m.LossGradInput(p.pm, 2*P, p.xpm, p.y, p.gpm, p.dxpm, p.loss); err != nil {
		return err
	}
	for r := 0; r < P; r++ {
		t := p.steps[r]
		if t == 0 {
			continue // r = 0: this step adds nothing, and wbar is already 0 from here on
		}
		s := 1 / (2 * t)
		dxp, dxm := p.dxpm[2*r*dim:(2*r+1)*dim], p.dxpm[(2*r+1)*dim:(2*r+2)*dim]
		gxr := gx[r*dim : (r+1)*dim]
		for i := range gxr {
			gxr[i] -= (dxp[i] - dxm[i]) * s
		}
		if k == 0 {
			continue
		}
		gp, gm := p.gpm[2*r*d:(2*r+1)*d], p.gpm[(2*r+1)*d:(2*r+2)*d]
		wbar := p.wbar[r*d : (r+1)*d]
		for i := range wbar {
			wbar[i] = wbar[i]*(1-eta*p.alpha) - (gp[i]-gm[i])*s
		}
	}
	return nil
}

// minimize runs signed Adam on every replica at once from starts (P x dim), as invProblem's
// minimize does for one: the sign of each gradient entry fed to Adam, the step decayed by 10 at
// 3/8, 5/8 and 7/8 of the budget, projection onto [0, 1] after every step. It returns each
// replica's iterate of least objective seen (P x dim) with its value (NaN when its objective
// was never finite); a replica whose objective stops being finite stops there.
func (p *cnnInvProblem) minimize(ctx context.Context, starts []float64, cfg Config) ([]float64, []float64, error) {
	P, dim := p.P, p.dim
	x := starts
	n := len(x)
	g := make([]float64, n)
	opt := newSignedAdam(n, cfg)
	best := make([]float64, n)
	objs := make([]float64, P)
	bestObj := make([]float64, P)
	for r := range bestObj {
		bestObj[r] = math.NaN()
	}
	for it := 0; it <= cfg.Iterations; it++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		last := it == cfg.Iterations
		gx := g
		if last {
			gx = nil
		}
		if err := p.objective(x, gx, objs); err != nil {
			return nil, nil, err
		}
		alive := false
		for r, v := range objs {
			if p.dead[r] {
				continue
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				p.dead[r] = true
				continue
			}
			alive = true
			if math.IsNaN(bestObj[r]) || v < bestObj[r] {
				bestObj[r] = v
				copy(best[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim])
			}
		}
		if last || !alive {
			break
		}
		lr := opt.next(it)
		for r := 0; r < P; r++ {
			if !p.dead[r] {
				opt.update(x, g, r*dim, (r+1)*dim, lr)
			}
		}
	}
	return best, bestObj, nil
}

// reconstructCNN is Reconstruct for a CNN: the restarts' starts drawn from rng as the MLP
// version draws them, all minimized at once, the least objective wins.
func reconstructCNN(ctx context.Context, p *cnnInvProblem, rng *rand.Rand, cfg Config) ([]float64, float64, error) {
	if !p.init() {
		return nil, 0, nil
	}
	defer p.release()
	starts := make([]float64, p.P*p.dim)
	for i := range starts {
		starts[i] = rng.Float64()
	}
	xs, objs, err := p.minimize(ctx, starts, cfg)
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("invgrad: %w", err)
	}
	best := pickRestart(objs)
	if best < 0 {
		return nil, 0, nil
	}
	return xs[best*p.dim : (best+1)*p.dim], objs[best], nil
}
