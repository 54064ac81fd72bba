package train

import (
	"context"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/train/model"
)

// localSteps is how a client's local steps run, chosen once per engine (chooseSteps): the
// direct form (a gradient per group of replicas, then ClipStep), the fused form (the model's
// whole clipped step in one call) or the deferred form of deferred.go (first-layer updates
// kept as low-rank factors). A round calls it in the same order whatever the form:
// startRound, then per client train and accumulate, then average.
type localSteps interface {
	// startRound clears the round's sum acc.
	startRound()
	// train runs client i's K local steps of round t from w_t for every replica into buf.
	// With flip, world-w replicas train on the other world's data (the informed adversary's
	// phi' for C replicas and phi for C' replicas). The deferred form writes buf's first
	// weight matrix only with materialize.
	train(ctx context.Context, t, i int, buf compute.Buffer, flip, materialize bool) error
	// accumulate adds client i's parameters in l, replica r weighted by coef[r], to acc.
	accumulate(i int, coef []float32)
	// average divides acc by n.
	average(n float32)
	// sameWorlds reports that client i's training of round t, just run, read the same data in
	// both worlds for every replica, so that its informed shadow's training (flip) would
	// repeat it to the bit; false where the form cannot tell.
	sameWorlds(t, i int) bool
}

// groupStepper is the per-group part of the direct and fused forms: step computes, for the
// replicas first, first+stride, ... (count) at params buf, what the form does with one
// minibatch (x, y); finish completes the step of pairs [p0, p1).
type groupStepper interface {
	step(buf compute.Buffer, first, count, stride int, x, y compute.Mat)
	finish(buf compute.Buffer, p0, p1 int)
}

// chooseSteps picks the local-step form: deferred when it applies (and allowDeferred), else
// fused when the model has a fused step and it applies, else direct.
func (e *engine) chooseSteps(allowDeferred bool) localSteps {
	if allowDeferred {
		if ds := newDeferred(e); ds != nil {
			return &deferredSteps{e: e, ds: ds, groups: newClientGroups(e, ds)}
		}
	}
	// The fused step pays n^2 per replica for the Gram matrices instead of n*in: worth it for
	// minibatches no larger than the input. It clips whole gradients, so never for DP-SGD.
	// The gradient canary is added between the gradient and the clipped step, which only
	// the direct form keeps apart.
	if f, ok := e.model.(model.FusedStepper); ok && e.perEx == 0 && e.gradCanary == nil && e.cfg.Batching == algo.Fixed && e.cfg.BatchSize <= e.dim {
		return &wholeSteps{e: e, form: &fusedSteps{e: e, f: f}}
	}
	return &wholeSteps{e: e, form: &directSteps{e: e}}
}

// wholeSteps is the direct or fused form: every parameter of buf is written at every step.
type wholeSteps struct {
	e    *engine
	form groupStepper
	idx  []int32 // sameWorlds' minibatch indices
}

func (s *wholeSteps) startRound() {
	e := s.e
	e.be.Axpby(0, compute.Mat{}, 0, e.all(e.acc), nil)
}

func (s *wholeSteps) train(ctx context.Context, t, i int, buf compute.Buffer, flip, _ bool) error {
	e := s.e
	be := e.be
	// Pairs go through the K steps a chunk at a time, so that a chunk's parameters stay in
	// cache from one step to the next; replicas are independent, so chunking changes nothing
	// in the results.
	for p0 := 0; p0 < e.P; p0 += e.chunk {
		p1 := min(p0+e.chunk, e.P)
		be.Axpby(1, e.rows(e.g, 2*p0, 2*(p1-p0), 1), 0, e.rows(buf, 2*p0, 2*(p1-p0), 1), nil)
		for k := 0; k < e.cfg.LocalSteps; k++ {
			if e.stop.Load() {
				return context.Cause(ctx)
			}
			e.eta = float32(e.cfg.LearningRateAt(t, k))
			if err := e.localGrad(s.form, t, i, k, buf, flip, p0, p1); err != nil {
				return err
			}
			s.form.finish(buf, p0, p1)
		}
	}
	return nil
}

// sameWorlds: fixed minibatches are drawn from (seed, round, client, step) alone, so the
// target's round-t minibatches are known again without running them. Where none holds the
// target sample, every step of its training read world C's rows for every replica (localGrad's
// shared group), and its shadow's would too; nothing else differs between the worlds there
// unless a gradient canary or a canary variant does, which this leaves to the training.
func (s *wholeSteps) sameWorlds(t, i int) bool {
	e := s.e
	if e.cfg.Batching != algo.Fixed || i != e.target.Client || e.gradCanary != nil || e.canary.hasVariants(i) {
		return false
	}
	n := e.cfg.LocalSteps * e.cfg.BatchSize
	if cap(s.idx) < n {
		s.idx = make([]int32, n)
	}
	return !e.drawSplits(t, i, s.idx[:n])
}

func (s *wholeSteps) accumulate(_ int, coef []float32) {
	e := s.e
	e.be.Axpby(1, e.all(e.l), 1, e.all(e.acc), coef)
}

func (s *wholeSteps) average(n float32) {
	e := s.e
	e.be.Axpby(1/n, e.all(e.acc), 0, e.all(e.acc), nil)
}

// directSteps is the op-by-op step: the model's gradient, then ClipStep.
type directSteps struct{ e *engine }

func (s *directSteps) step(buf compute.Buffer, first, count, stride int, x, y compute.Mat) {
	e := s.e
	e.model.Grad(e.be, e.ws, e.rows(buf, first, count, stride), x, y, e.rows(e.grad, first, count, stride), e.perEx)
}

func (s *directSteps) finish(buf compute.Buffer, p0, p1 int) {
	e := s.e
	rows := func(b compute.Buffer) compute.Mat { return e.rows(b, 2*p0, 2*(p1-p0), 1) }
	e.be.ClipStep(e.eta, e.clipV, e.alpha, rows(buf), rows(e.grad), rows(e.g))
}

// fusedSteps is the model's fused clipped step: it updates the parameters itself.
type fusedSteps struct {
	e *engine
	f model.FusedStepper
}

func (s *fusedSteps) step(buf compute.Buffer, first, count, stride int, x, y compute.Mat) {
	e := s.e
	s.f.Step(e.be, e.ws, e.rows(buf, first, count, stride), x, y, e.rows(e.g, first, count, stride),
		e.rows(e.grad, first, count, stride), e.eta, e.clipV, e.alpha)
}

func (s *fusedSteps) finish(compute.Buffer, int, int) {}

// deferredSteps is the deferred form (deferred.go), with several clients' steps grouped into
// one call where the backend gains from it (groups, grouped.go; nil otherwise).
type deferredSteps struct {
	e      *engine
	ds     *deferredState
	groups *clientGroups
}

func (s *deferredSteps) startRound() {
	e, ds := s.e, s.ds
	// The participants' mean first matrix is W_0 plus the mean of their deferred updates,
	// which flushDeferred adds (divided by n).
	e.be.Axpby(1, ds.model.Weight(e.all(e.g), 0), 0, ds.model.Weight(e.all(e.acc), 0), nil)
	e.be.Axpby(0, compute.Mat{}, 0, ds.model.Rest(e.all(e.acc)), nil)
	if s.groups != nil {
		s.groups.count = 0
	}
}

func (s *deferredSteps) train(ctx context.Context, t, i int, buf compute.Buffer, flip, materialize bool) error {
	e, g := s.e, s.groups
	// A client may be grouped with the next ones (grouped.go); its parameters then stay in the
	// group's rows, and are written to buf only where the round reads them (materialize: the
	// target's, in the rounds it groups).
	if g != nil && !flip {
		if !g.has(i) {
			if n := g.span(e, s.ds, t, i); n >= 2 {
				if err := e.trainGrouped(ctx, s.ds, g, t, i, n); err != nil {
					return err
				}
			}
		}
		if g.has(i) {
			if materialize {
				g.materialize(e, s.ds, i, buf)
			}
			return nil
		}
	}
	return e.localTrainDeferred(ctx, s.ds, t, i, buf, flip, materialize)
}

func (s *deferredSteps) accumulate(i int, coef []float32) {
	e, ds, be := s.e, s.ds, s.e.be
	rest, sum := ds.model.Rest(e.all(e.l)), ds.model.Rest(e.all(e.acc))
	switch g := s.groups; {
	case g == nil || !g.has(i):
		be.Axpby(1, rest, 1, sum, coef)
	case g.sum != nil:
		// The group's clients are added in one call once the last one's weights are known.
		q := i - g.first
		copy(g.coefs[q*e.R:(q+1)*e.R], coef)
		if q == g.count-1 {
			g.sum.AccumulateInOrder(sum, g.restRows(0, e.R), g.count, e.R*g.restLen, g.coefs[:g.count*e.R])
		}
	default:
		be.Axpby(1, g.restRows(i-g.first, e.R), 1, sum, coef)
	}
	sl := ds.slot(i)
	if e.n < e.m { // non-participants add nothing
		u := ds.factors(false, sl, 0, e.R, 1)
		be.Axpby(1, u, 0, u, coef)
	}
	if sl == ds.window-1 || i == e.m-1 {
		e.flushDeferred(ds, sl+1)
	}
}

// sameWorlds: the client's slot holds its round-t minibatches, and they do not split the
// replicas (neither the target sample nor, for a client-level target, the client is in them).
// Its shadow would then read world C's minibatches in both worlds, as the client did, from the
// same w_t: the same operations on the same inputs.
func (s *deferredSteps) sameWorlds(t, i int) bool {
	ds := s.ds
	sl := ds.slot(i)
	return ds.slotRound[sl] == t && ds.slotClient[sl] == i && !ds.split[sl]
}

func (s *deferredSteps) average(n float32) {
	e, ds := s.e, s.ds
	e.be.Axpby(1/n, ds.model.Rest(e.all(e.acc)), 0, ds.model.Rest(e.all(e.acc)), nil)
}
