package bounds

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/theory"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"

	"gonum.org/v1/gonum/floats"
)

// Smoothness is the constant L the convergent bound uses, and where it came from.
type Smoothness struct {
	L float64
	// Source is "certified" (computed from the model and data, an upper bound on the true L),
	// "given" (from the config, not checked), "estimated" (Hessian power iteration at recorded
	// parameters) or "none". Whatever the source, the convergent bound computed with L is an
	// estimate after T = 1 (docs/theory.md, "When the convergent bound is a bound"); the rows
	// judged against it name the source.
	Source string
}

// SmoothnessOf returns L for the experiment: the model's certified constant over every sample
// of both worlds (hostmodel.CertifiedSmoothness: the quadratic model and softmax regression), or
// the given one. A given L below the certified one is rejected (spec.CheckSmoothness, which
// spec.Prepare already ran before training; data prepared otherwise is checked here). For
// MLPs L can only be given.
func SmoothnessOf(cfg *spec.Config, data *spec.Data) (Smoothness, error) {
	if err := spec.CheckSmoothness(cfg, data); err != nil {
		return Smoothness{}, err
	}
	if given := cfg.Audit.Smoothness; given > 0 {
		return Smoothness{L: given, Source: "given"}, nil
	}
	if certified, ok := spec.CertifiedSmoothness(cfg, data); ok {
		return Smoothness{L: certified, Source: "certified"}, nil
	}
	return Smoothness{Source: "none"}, nil
}

// sampleLevelTheory reports whether the bounds of docs/theory.md (Noisy-FedAvg, FedProx and DP-SGD
// with Gaussian noise, one sample changed) describe the experiment; for client-level
// adjacency, the DP-FedAvg family and non-Gaussian noise they do not, and TheoryAt gives none.
func sampleLevelTheory(cfg *spec.Config) bool {
	m := cfg.Train.Mechanism
	return !cfg.Adjacency.ClientLevel() && !cfg.Train.IsClientDP() && (m == "" || m == algo.Gaussian)
}

// TheoryConfig maps the experiment onto the theory's parameters. L is the smoothness of one
// sample's loss (what SmoothnessOf certifies, which bounds every batch mean). L may be zero
// (unknown): the convergent bound is then unavailable but the composition bound, which needs no
// L, is not.
//
// fedavg and fedprox step on the batch mean, which is L-smooth. dpsgd steps on the sum of the
// batch's clipped per-example gradients (docs/training.md, "Algorithms as implemented"), which
// is B L-smooth for a batch of B samples, so the theory gets L times the largest batch a step
// can hold (dpsgdLargestBatch), and that batch, whose other examples move gamma_t once the
// worlds' iterates differ (theory.Config.Batch).
func TheoryConfig(cfg *spec.Config, L float64) (theory.Config, error) {
	tc := cfg.Train
	if tc.Algorithm == algo.DPSGD {
		L *= float64(dpsgdLargestBatch(cfg))
	}
	c := theory.Config{
		Algo:  tc.Algorithm,
		Eta:   tc.LearningRate,
		L:     L,
		K:     tc.LocalSteps,
		M:     cfg.Data.Clients,
		N:     tc.Participants,
		Sigma: tc.NoiseStd,
		Clip:  tc.ClipNorm,
		Alpha: tc.ProxAlpha,
		Delta: cfg.Audit.Delta,
	}
	if c.Algo == algo.DPSGD {
		c.M, c.N, c.Batch = 1, 0, dpsgdLargestBatch(cfg)
	}
	if tc.Schedule == "table" {
		s, err := theory.NewTableSchedule(tc.ScheduleTable)
		if err != nil {
			return c, fmt.Errorf("train.schedule_table: %w", err)
		}
		c.Schedule = s
	} else {
		s, err := theory.ParseSchedule(tc.Schedule, tc.LearningRate, tc.LocalSteps)
		if err != nil {
			return c, fmt.Errorf("train.schedule: %w", err)
		}
		c.Schedule = s
	}
	return c, nil
}

// dpsgdLargestBatch is the most samples a dpsgd step sums over: B with fixed batches; the
// client's samples with full batches, and with Poisson batches, which can hold every sample and
// whose Lipschitz constant rho_t must hold for every draw. Under adjacency "add" C' holds one
// sample more than C.
func dpsgdLargestBatch(cfg *spec.Config) int {
	if cfg.Train.Batching == algo.Fixed {
		return cfg.Train.BatchSize
	}
	n := cfg.Data.PerClient
	if cfg.Adjacency.Kind == "add" {
		n++
	}
	return n
}

// TheoryAt computes the bounds at the given rounds. With an unknown L, or FedProx with
// alpha <= L (outside Theorem 4), it fills only the bounds that need no L (composition, the
// uploads bound at T = 1 and its composition variant, the heuristic), by computing with a tiny
// positive L (gamma_t does not depend on L) and blanking the convergent fields.
func TheoryAt(cfg *spec.Config, sm Smoothness, rounds []int) ([]theory.Bound, error) {
	if cfg.Train.NoiseStd == 0 || cfg.Train.ClipNorm == 0 || !sampleLevelTheory(cfg) {
		return nil, nil // no noise, no clipping, or another system: the theory promises nothing
	}
	L := sm.L
	// FedProx with alpha <= L is outside Theorem 4, so there is no convergent bound; but the
	// per-round sensitivity gamma_t, and with it the composition bounds, needs only
	// eta alpha <= 1, not L: they are computed as without an L.
	withoutL := L == 0 || (cfg.Train.Algorithm == algo.FedProx && !(cfg.Train.ProxAlpha > L))
	if withoutL {
		L = 1e-12
	}
	tcfg, err := TheoryConfig(cfg, L)
	if err != nil {
		return nil, err
	}
	// The placeholder L must not shrink gamma_t (DP-SGD's, with K >= 2, can use L).
	tcfg.SmoothnessUnknown = withoutL
	bounds, err := theory.Bounds(tcfg, rounds)
	if err != nil {
		return nil, fmt.Errorf("theory: %w", err)
	}
	if !withoutL && sm.Source != "certified" && compositionUsesL(cfg) {
		// The composition bounds used an L that is given or estimated: they are estimates too,
		// and the same bounds without it are what holds whatever L.
		tcfg.SmoothnessUnknown = true
		anyL, err := theory.Bounds(tcfg, rounds)
		if err != nil {
			return nil, fmt.Errorf("theory: %w", err)
		}
		for i := range bounds {
			bounds[i].MuCompositionAnyL, bounds[i].MuUploadsCompositionAnyL = anyL[i].MuComposition, anyL[i].MuUploadsComposition
		}
	}
	if withoutL {
		for i := range bounds {
			bounds[i].Mu, bounds[i].Epsilon, bounds[i].MuClosedForm = math.NaN(), math.NaN(), math.NaN()
			bounds[i].ClosedFormKind = ""
			if bounds[i].T > 1 { // at T = 1 the uploads bound is Gamma/sigma, free of L
				bounds[i].MuUploads, bounds[i].EpsilonUploads = math.NaN(), math.NaN()
			}
		}
	}
	return bounds, nil
}

// compositionUsesL says whether the per-round sensitivity gamma_t, and with it the composition
// bounds, uses L where one is known: DP-SGD with more than one local step bounds the drift the
// other examples of a batch add after the first step by L (theory.Bounds).
func compositionUsesL(cfg *spec.Config) bool {
	return cfg.Train.Algorithm == algo.DPSGD && cfg.Train.LocalSteps > 1
}

// ExactMu returns the exact mu of the quadratic reference instance for an observer of the final
// model, for an observer of every iterate, and for the uploads observer (w_{T-1} and the target
// client's upload of round T), as functions of T, when the experiment is that
// instance (quadratic model, Noisy-FedAvg, constant schedule, full batches, every client in
// every round, replace adjacency); ok is false otherwise. The values hold where clipping is
// never active: ok is false too unless clipNeverBinds shows the clip norm out of reach of every
// gradient of the training, but for an event of probability below 1e-13 a round (a gradient
// canary that alone exceeds it among them).
func ExactMu(cfg *spec.Config, data *spec.Data) (final, allIterates, uploads func(T int) float64, ok bool) {
	return exactMu(cfg, data, 0, 0)
}

// exactMu is ExactMu where canaries may move a client's mean sample by up to maxShift, and the
// clients' average by up to meanShift, beyond the adjacent pair's (clipNeverBinds).
func exactMu(cfg *spec.Config, data *spec.Data, maxShift, meanShift float64) (final, allIterates, uploads func(T int) float64, ok bool) {
	tc := cfg.Train
	if !quadraticInstance(cfg) || (cfg.Adjacency.Kind != "replace" && cfg.Adjacency.Kind != "gradient") {
		return nil, nil, nil, false
	}
	p := data.Pair
	n := float64(p.C[p.Client].Len())
	if gc := tc.GradientCanary; cfg.Adjacency.Kind == "gradient" && gc != nil {
		// The canary adds Norm u / n to its client's mean gradient in world C'.
		maxShift += gc.Norm / n
		meanShift += gc.Norm / n / float64(len(p.C))
	}
	if !clipNeverBinds(cfg, data, maxShift, meanShift) {
		return nil, nil, nil, false
	}
	diff := make([]float64, len(p.Sample.Features))
	if gc := tc.GradientCanary; cfg.Adjacency.Kind == "gradient" {
		// A sample x contributes a w - x to the gradient; when its gradient differs by
		// Shift u between the worlds, the client's mean gradient a w - b is that of a mean b
		// shifted by Shift u / n, whatever the direction (the curvature is the same in every
		// direction).
		if gc == nil {
			return nil, nil, nil, false
		}
		// (A canary that takes the mean gradient past the clip norm was refused above, by
		// clipNeverBinds with its shift.)
		diff = []float64{gc.Shift() / n}
	} else {
		for j := range diff {
			diff[j] = (float64(p.Sample.Features[j]) - float64(p.SamplePrime.Features[j])) / n
		}
	}
	rho, dnorm, err := theory.QuadraticDelta(tc.Model.Curvature, tc.LearningRate, tc.LocalSteps, cfg.Data.Clients, diff)
	if err != nil {
		return nil, nil, nil, false
	}
	m, sigma := cfg.Data.Clients, tc.NoiseStd
	final = func(T int) float64 { return theory.QuadraticFinalMu(m, dnorm, sigma, rho, T) }
	allIterates = func(T int) float64 { return theory.QuadraticAllIteratesMu(m, dnorm, sigma, T) }
	uploads = func(T int) float64 { return theory.QuadraticUploadMu(m, dnorm, sigma, rho, T) }
	return final, allIterates, uploads, true
}

// ExactMuOneRun gives the exact mu of the one-run rows where it is known: the largest exact mu
// of a canary, since the one-run test is about a guarantee for every canary. Known are
//
//   - gradient canaries on the quadratic instance of ExactMu: each adds Norm u_j / n to its
//     client's mean gradient, the shift of that client's mean by Norm / n, so every canary's
//     exact mu is the instance's formula with that shift (final model and all iterates);
//   - record canaries on the quadratic instance of ExactMu: canary j replaces a sample x of its
//     client by the canary x_j, which shifts the client's mean by (x - x_j)/n, and its exact mu
//     is the instance's formula with that shift (final model and all iterates);
//   - direction canaries of dp-fedavg with every client sampled (q = 1): each round adds c u_j
//     under noise of standard deviation z c, so the observer of every iterate faces T Gaussian
//     mechanisms of mu 1/z each: mu = sqrt(T)/z. On the quadratic model the final model's mu
//     is the quadratic instance's formula (1/z) sum_{j<T} A^j / sqrt(sum_{j<T} A^(2j)), with A
//     the factor a round multiplies w_t by (directionCanaryMaps), where the real clients'
//     updates are never clipped.
func ExactMuOneRun(cfg *spec.Config, data *spec.Data) (func(threat string, T int) float64, bool) {
	tc := cfg.Train
	cc := tc.Canaries
	if cc == nil {
		return nil, false
	}
	if cc.Gradients() {
		return exactMuGradientCanaries(cfg, data)
	}
	if cc.Directions() {
		if tc.SamplingRate != 1 || !(tc.NoiseMultiplier > 0) || tc.SkipUpdateClip {
			return nil, false
		}
		z := tc.NoiseMultiplier
		maps, finalKnown := directionCanaryMaps(cfg, data)
		return func(threat string, T int) float64 {
			switch {
			case T < 1:
				return math.NaN()
			case threat == runs.ThreatAllIterates:
				return math.Sqrt(float64(T)) / z
			case threat == runs.ThreatFinal && finalKnown:
				// Each run's canaries face their own world's map; the largest is every canary's
				// guarantee.
				mu := 0.0
				for _, A := range maps {
					mu = math.Max(mu, theory.QuadraticFinalMu(1, 1, z, A, T))
				}
				return mu
			}
			return math.NaN()
		}, true
	}
	rc, err := train.RecordCanariesOf(tc, data.Pair.C, data.Target)
	if err != nil {
		return nil, false
	}
	p := data.Pair
	norm := func(a, b []float32, n int) float64 {
		var ss float64
		for j := range a {
			d := (float64(a[j]) - float64(b[j])) / float64(n)
			ss += d * d
		}
		return math.Sqrt(ss)
	}
	// Each included canary moves its client's mean sample by its shift: at most the sum over
	// the client's canaries, and the average by the sum over all of them over m.
	moved := make([]float64, len(p.C))
	for j, s := range rc.Slots {
		c := p.C[s.Client]
		moved[s.Client] += norm(c.Row(s.Index), rc.Samples[j].Features, c.Len())
	}
	final, all, _, ok := exactMu(cfg, data, slices.Max(moved), floats.Sum(moved)/float64(len(moved)))
	if !ok {
		return nil, false
	}
	// The instance's mu is proportional to the norm of the shift; scale the target's.
	target := norm(p.Sample.Features, p.SamplePrime.Features, p.C[p.Client].Len())
	largest := 0.0
	for j, s := range rc.Slots {
		c := p.C[s.Client]
		largest = math.Max(largest, norm(c.Row(s.Index), rc.Samples[j].Features, c.Len()))
	}
	if !(target > 0) {
		return nil, false
	}
	scale := largest / target
	return func(threat string, T int) float64 {
		switch {
		case T < 1:
			return math.NaN()
		case threat == runs.ThreatFinal:
			return scale * final(T)
		case threat == runs.ThreatAllIterates:
			return scale * all(T)
		}
		return math.NaN()
	}, true
}

// EstimateSmoothness estimates L for a model without a certified constant (the MLP) from
// recorded parameters: the largest Hessian spectral norm of a client's mean loss, by power
// iteration, over up to three checkpoints of the first world-C run and up to three clients (the
// target client first). It needs run files with parameters; without them L stays unknown.
// Every bound computed from it is labelled an estimate. For convolutional models (package nn)
// and models of unknown architecture (external) no estimate is made: L stays unknown.
func EstimateSmoothness(ctx context.Context, tab *runs.Table, cfg *spec.Config, data *spec.Data) (Smoothness, error) {
	if !tab.Meta().HasParams || model.IsNNKind(cfg.Train.Model.Kind) || cfg.Train.Model.Kind == model.External {
		return Smoothness{Source: "none"}, nil
	}
	var points [][]float32
	err := tab.Scan(ctx, func(r runs.Row) error {
		if r.World == runs.WorldC && r.PairID == 0 && len(r.Params) > 0 && !r.Diverged {
			points = append(points, slices.Clone(r.Params))
		}
		return nil
	})
	if err != nil {
		return Smoothness{}, err
	}
	if len(points) == 0 {
		return Smoothness{Source: "none"}, nil
	}
	if len(points) > 3 {
		points = [][]float32{points[0], points[len(points)/2], points[len(points)-1]}
	}
	clients := []*datasets.Dataset{data.Pair.C[data.Pair.Client]}
	for i, c := range data.Pair.C {
		if len(clients) < 3 && i != data.Pair.Client {
			clients = append(clients, c)
		}
	}
	var L float64
	for _, p := range points {
		for _, c := range clients {
			xs := make([][]float32, c.Len())
			for i := range xs {
				xs[i] = c.Row(i)
			}
			l, err := hostmodel.SmoothnessEstimate(cfg.Train.Model, c.Dim(), data.Classes, p, xs, c.Labels, 30, cfg.Seed)
			if err != nil {
				return Smoothness{}, fmt.Errorf("estimate smoothness: %w", err)
			}
			L = math.Max(L, l)
		}
	}
	return Smoothness{L: L, Source: "estimated"}, nil
}

// clipNeverBinds reports whether the quadratic instance's clip norm V is out of reach of every
// client's gradient in every local step of the training, both worlds, but for an event of
// probability below 1e-13 a round (V = 0: no clipping). With the loss a/2 |w|^2 - <b, w>
// averaged over a client's samples, the gradient is a w - b_i (b_i the client's mean sample),
// and K local steps at rate eta take w_t to rho w_t + (1 - rho) b_i / a, rho = (1 - eta a)^K:
// with |1 - eta a| <= 1 a local step does not raise the gradient's norm, so the round's first
// step bounds it, |a w_t - b_i|. Without noise the global models run from w_0 = 0 toward
// b / a (b the clients' average) as w*(1 - rho^t), so |a w_t - b_i| <= |b| + |b - b_i| plus a
// times the noise's part of w_t: a Gaussian of variance s^2 = sigma^2 / m sum_j rho^(2j) <=
// sigma^2 / (m (1 - rho^2)) in each of d coordinates, whose norm exceeds s (sqrt(d) + 8) with
// probability below e^(-32). Canaries (a gradient canary, record canaries) move a client's b_i
// by up to maxShift and the average b by up to meanShift more, so |b - b_i| by up to their sum
// and |b| by meanShift. A clip that binds makes the local map nonlinear: the instance's mu says
// nothing of the runs (a canary past it: 1.006 "exact" where the runs' shift gave 0.100).
func clipNeverBinds(cfg *spec.Config, data *spec.Data, maxShift, meanShift float64) bool {
	tc := cfg.Train
	if tc.ClipNorm == 0 {
		return true
	}
	if tc.Pretrain != nil || data.Initial != nil {
		return false // a pretrained w_0: not the path from w_0 = 0 bounded below
	}
	a, eta := tc.Model.Curvature, tc.LearningRate
	if !(math.Abs(1-eta*a) <= 1) {
		return false // local steps that overshoot: not the instance's contraction
	}
	rho := math.Pow(1-eta*a, float64(tc.LocalSteps))
	m := float64(len(data.Pair.C))
	s := tc.NoiseStd / math.Sqrt(m)
	if rho*rho < 1 {
		s /= math.Sqrt(1 - rho*rho)
	} else {
		s *= math.Sqrt(float64(tc.Rounds))
	}
	d := len(data.Pair.C[0].Row(0))
	for _, clients := range [][]*datasets.Dataset{data.Pair.C, data.Pair.CPrime} {
		means := make([][]float64, len(clients))
		avg := make([]float64, d)
		for i, c := range clients {
			means[i] = make([]float64, d)
			for r := 0; r < c.Len(); r++ {
				for j, x := range c.Row(r) {
					means[i][j] += float64(x) / float64(c.Len())
				}
			}
			floats.AddScaled(avg, 1/m, means[i])
		}
		spread := 0.0 // the largest |b - b_i|
		for i := range means {
			spread = math.Max(spread, floats.Distance(avg, means[i], 2))
		}
		if !(floats.Norm(avg, 2)+spread+maxShift+2*meanShift+a*s*(math.Sqrt(float64(d))+8) < tc.ClipNorm) {
			return false
		}
	}
	return true
}

// quadraticInstance reports whether cfg trains the exact reference instance: fedavg on the
// quadratic model with a constant schedule, full batches, every client in every round and
// Gaussian noise, so that local training is affine and the exact mu is known.
func quadraticInstance(cfg *spec.Config) bool {
	tc := cfg.Train
	// Gaussian noise only: the exact mu is the Gaussian mechanism's. Under Laplace or
	// staircase noise of the same standard deviation the Gaussian formula was reported as the
	// exact mu, and valid certified bounds came out above it in 93 audits of 100.
	return tc.Model.Kind == "quadratic" && tc.Algorithm == algo.FedAvg && tc.Schedule == "constant" && tc.Batching == "full" &&
		(tc.Participants == 0 || tc.Participants == cfg.Data.Clients) && tc.NoiseStd > 0 && tc.Mechanism.OrGaussian() == algo.Gaussian
}

// exactMuGradientCanaries is ExactMuOneRun for gradient canaries on the quadratic instance
// (the conditions of ExactMu: fedavg, constant schedule, full batches, every client).
func exactMuGradientCanaries(cfg *spec.Config, data *spec.Data) (func(threat string, T int) float64, bool) {
	tc, cc := cfg.Train, cfg.Train.Canaries
	if !quadraticInstance(cfg) || cc.Client >= len(data.Pair.C) {
		return nil, false
	}
	n := float64(data.Pair.C[cc.Client].Len())
	// The included canaries' orthonormal directions add at most Norm sqrt(k) / n to their
	// client's mean gradient.
	if moved := cc.Norm * math.Sqrt(float64(cc.Count)) / n; !clipNeverBinds(cfg, data, moved, moved/float64(len(data.Pair.C))) {
		return nil, false
	}
	rho, dnorm, err := theory.QuadraticDelta(tc.Model.Curvature, tc.LearningRate, tc.LocalSteps, cfg.Data.Clients, []float64{cc.Norm / n})
	if err != nil {
		return nil, false
	}
	m, sigma := cfg.Data.Clients, tc.NoiseStd
	return func(threat string, T int) float64 {
		switch {
		case T < 1:
			return math.NaN()
		case threat == runs.ThreatFinal:
			return theory.QuadraticFinalMu(m, dnorm, sigma, rho, T)
		case threat == runs.ThreatAllIterates:
			return theory.QuadraticAllIteratesMu(m, dnorm, sigma, T)
		}
		return math.NaN()
	}, true
}

// directionCanaryMaps gives, for the direction canaries of dp-fedavg on the quadratic model
// (constant schedule, full batches, every client sampled: q = 1), the factor A by which a round
// multiplies w_t in each world, where no update_clip can bind on a real client's update but
// for an event of probability below e^-32; ok is false otherwise. K local steps at rate eta take
// w_t to b_i/a + rho (w_t - b_i/a) (b_i the client's mean sample), so the update is
// (rho - 1)(w_t - b_i/a): linear in w_t only while unclipped. With n of the m clients training
// (the others: a crafted update, or a client absent from C'), the round is
// w_{t+1} = A w_t + ... with A = 1 + server_lr (n/m)(rho - 1), and a canary's shift of round t
// reaches w_T multiplied by A^(T-1-t). Clipping never binds if |1 - rho| |w_t - b_i/a| < c for
// every training client and round: w_t - b_i/a is at most the distance of the fixed point
// w* = b_n/a + server_lr/m crafted/(1 - A) from w_0 = 0 (shrunk by A^t) and from b_i/a, plus
// what the canaries and the server noise (standard deviation z c a coordinate) add through
// sum_j A^j, but for events of probability below e^-30 in all.
func directionCanaryMaps(cfg *spec.Config, data *spec.Data) ([]float64, bool) {
	tc := cfg.Train
	if tc.Model.Kind != "quadratic" || tc.Algorithm != algo.DPFedAvg || tc.Schedule != "constant" || tc.Batching != "full" ||
		tc.ClipNorm != 0 || tc.Pretrain != nil || tc.SkipUpdateClip || tc.SamplingRate != 1 || data.Initial != nil {
		return nil, false
	}
	a := tc.Model.Curvature
	rho, _, err := theory.QuadraticLocalMap(a, tc.LearningRate, tc.LocalSteps)
	if err != nil || a == 0 {
		return nil, false
	}
	m := float64(len(data.Pair.C))
	slr, c, z, T := cmp.Or(tc.ServerLR, 1), tc.UpdateClip, tc.NoiseMultiplier, tc.Rounds
	// The included canaries (each with probability 1/2) are at most k/2 + 4 sqrt(k) but with
	// probability e^-32 (Hoeffding); they add the same sum c S of their directions every round,
	// |S| at most their count, or its square root when orthonormal.
	k := float64(tc.Canaries.Count)
	included := math.Min(k, k/2+4*math.Sqrt(k))
	perRound := c * included
	if tc.Canaries.Orthogonal {
		perRound = c * math.Sqrt(included)
	}
	crafted := 0.0
	if tc.CraftedUpdate != nil {
		crafted = c
	}
	p := data.Pair
	var maps []float64
	for w, clients := range [][]*datasets.Dataset{p.C, p.CPrime} {
		var training [][]float64 // the mean samples of the clients that train
		craftedHere := 0.0
		for i, cl := range clients {
			if crafted > 0 && i == p.Client && (w == 0 || !data.Target.Absent) {
				craftedHere = crafted
				continue
			}
			mean := make([]float64, len(cl.Row(0)))
			for r := 0; r < cl.Len(); r++ {
				for j, x := range cl.Row(r) {
					mean[j] += float64(x) / float64(cl.Len())
				}
			}
			training = append(training, mean)
		}
		if len(training) == 0 {
			return nil, false
		}
		n := float64(len(training))
		A := 1 + slr*(n/m)*(rho-1)
		if math.IsNaN(A) || math.IsInf(A, 0) {
			return nil, false
		}
		// sum_{j<T} |A|^j and sum_{j<T} A^(2j), and the largest |A|^t, t < T.
		var sumA, sumA2, maxPow float64
		for j, pow := 0, 1.0; j < T; j, pow = j+1, pow*math.Abs(A) {
			sumA += pow
			sumA2 += pow * pow
			maxPow = math.Max(maxPow, pow)
		}
		bn := make([]float64, len(training[0]))
		for _, b := range training {
			floats.AddScaled(bn, 1/n, b)
		}
		fixed := floats.Norm(bn, 2) / math.Abs(a) // |w*| without the crafted part
		if craftedHere > 0 {
			if A == 1 {
				return nil, false // no fixed point: the crafted update drifts w_t
			}
			fixed += slr / m * craftedHere / math.Abs(1-A)
		}
		spread := 0.0 // the largest |b_n - b_i| / a
		for _, b := range training {
			spread = math.Max(spread, floats.Distance(bn, b, 2)/math.Abs(a))
		}
		// The crafted update's part of w* sits beside b_n/a, so it counts toward the distance
		// from every b_i/a (the spread) as well as toward |w*|.
		if craftedHere > 0 {
			spread += slr / m * craftedHere / math.Abs(1-A)
		}
		// The canaries' part v of w_t - w* and the noise's g, a Gaussian of standard deviation
		// s a coordinate: |v + g|^2 = |v|^2 + 2 <v, g> + |g|^2, with <v, g> <= 8 s |v| and
		// |g| <= s (sqrt(d) + 8) but with probability e^-32 each.
		d := float64(len(bn))
		v := slr / m * perRound * sumA
		s := slr / m * z * c * math.Sqrt(sumA2)
		moved := math.Sqrt(v*v + 16*s*v + s*s*(math.Sqrt(d)+8)*(math.Sqrt(d)+8))
		reach := maxPow*fixed + spread + moved
		if !(math.Abs(1-rho)*reach < c) {
			return nil, false
		}
		maps = append(maps, A)
	}
	return maps, true
}
