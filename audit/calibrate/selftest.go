package calibrate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mathext"

	"github.com/fedaudit/fedaudit/audit"
)

// SelfTestOptions configures SelfTest; zero fields take the defaults noted.
type SelfTestOptions struct {
	Reps int       // repetitions per mu; 0 means 200
	N    int       // scores per world; 0 means 1000
	Mus  []float64 // true mu values; nil means {0.5, 1, 2}
	Seed uint64
	// Confidence of the bounds under test; 0 means 0.95.
	Confidence float64
	// Methods to test; nil means all of ThresholdMethods.
	Methods []audit.ThresholdMethod
	// Family is the number of rows of the family-wise check: that many mechanisms (their mu
	// cycling through Mus) audited together, each at FamilyRowConfidence, must all cover their
	// truth at once with probability Confidence. 0 means 8; 1 skips the check.
	Family int
	// NoOneRun skips the one-run rows: N canaries per run, each included with probability 1/2,
	// certified mu (f-DP) and eps at delta 1e-5 (Steinke et al.) and the adaptive mu
	// (audit.OneRunAdaptiveMu) on the Gaussian mechanism and on the shared-level Gaussian
	// mechanism (canaries dependent, each exactly mu-GDP), and all three (eps at delta 0) on the
	// Laplace mechanism, where the sequential eps (audit.OneRunSequentialEpsilon, pure DP) has a
	// row too.
	NoOneRun bool
	// NoSequential skips the sequential rows: a group-sequential audit (audit run --sequential)
	// of N pairs in 8 batches, looks at 1, 2, 4 and 8 of them, against a claim equal to each
	// true mu; a repetition misses when any look certifies above it (SequentialSelfTest).
	NoSequential bool
	// LaplaceShift is the shift s of the Laplace rows (an exactly s-DP mechanism); 0 means 1,
	// a negative value skips them.
	LaplaceShift float64
}

// SelfTestRow is the coverage of one method at one true mu.
type SelfTestRow struct {
	Method audit.ThresholdMethod `json:"method"`
	// Mechanism is "gaussian" (scores N(mu, 1) against N(0, 1)), "laplace" (Laplace(s, 1)
	// against Laplace(0, 1), exactly s-DP; Mu is then its GDP-equivalent mu) or, for one-run
	// rows only, "gaussian-shared" (the shared-level Gaussian mechanism: the same marginals as
	// "gaussian", every canary exactly mu-GDP, but the canaries of a run dependent).
	Mechanism string `json:"mechanism"`
	// Quantity is what the row bounds: "mu", or "eps" (Epsilon is then the truth, at Delta).
	Quantity string  `json:"quantity"`
	Epsilon  float64 `json:"epsilon,omitempty"`
	Delta    float64 `json:"delta,omitempty"`
	// Mu is the true mu; for a family row, the largest of the family's.
	Mu   float64 `json:"mu"`
	Reps int     `json:"reps"`
	// Family is the number of mechanisms audited jointly in a family row (0 for a single one).
	Family int `json:"family,omitempty"`
	// Misses counts repetitions whose lower bound exceeded the true mu; in a family row, those
	// in which any bound of the family exceeded its mechanism's mu.
	Misses   int     `json:"misses"`
	Coverage float64 `json:"coverage"`
	// MaxMisses is the largest miss count the pass rule accepts.
	MaxMisses int `json:"max_misses"`
	// MeanLower is the mean lower bound (a family row: of the mechanism with the largest mu).
	MeanLower float64 `json:"mean_lower"`
	// Tightness is MeanLower / Mu.
	Tightness float64 `json:"tightness"`
	Pass      bool    `json:"pass"`
}

// SelfTestReport is the outcome of SelfTest.
type SelfTestReport struct {
	Reps       int           `json:"reps"`
	N          int           `json:"n"`
	Seed       uint64        `json:"seed"`
	Confidence float64       `json:"confidence"`
	Rows       []SelfTestRow `json:"rows"`
	Pass       bool          `json:"pass"`
	Rule       string        `json:"rule"`
}

// selfTestFalseAlarm is the probability with which one row of a correct method fails the pass
// rule: the rule rejects when the misses would be that unlikely at the nominal miss rate.
const selfTestFalseAlarm = 1e-3

// SelfTest checks the certified bounds on the Gaussian mechanism, where the truth is known:
// world C' scores are N(0, 1) and world C scores N(mu, 1), whose trade-off curve is exactly
// T_G(mu). For each mu and repetition it draws both samples, computes every method's lower
// bound and counts how often the bound exceeds mu. A row passes when its miss count is at
// most MaxMisses, the largest m with P(Binomial(Reps, 1-Confidence) >= m) >= 1e-3: a method
// whose true miss rate is at most 1-Confidence fails a row with probability below 0.1%.
func SelfTest(ctx context.Context, opts SelfTestOptions) (*SelfTestReport, error) {
	return selfTest(ctx, opts, nil)
}

// lowerBoundFunc computes a lower bound on mu from sorted samples; tests substitute faulty
// ones to show that the pass rule catches them.
type lowerBoundFunc func(x, y []float64, o audit.Options, plan *audit.BonferroniPlan) (float64, error)

func selfTest(ctx context.Context, opts SelfTestOptions, bound lowerBoundFunc) (*SelfTestReport, error) {
	if bound == nil {
		bound = audit.MuLowerSorted
	}
	opts = opts.withDefaults()
	methods, err := opts.check()
	if err != nil {
		return nil, err
	}
	maxMisses := maxAllowedMisses(opts.Reps, 1-opts.Confidence, selfTestFalseAlarm)
	rep := &SelfTestReport{
		Reps: opts.Reps, N: opts.N, Seed: opts.Seed, Confidence: opts.Confidence, Pass: true,
		Rule: fmt.Sprintf("a row passes when misses <= %d, the largest m with P(Binomial(%d, %.3g) >= m) >= %g",
			maxMisses, opts.Reps, 1-opts.Confidence, selfTestFalseAlarm),
	}
	add := func(rows []SelfTestRow, err error) error {
		if err != nil {
			return err
		}
		for _, r := range rows {
			rep.Pass = rep.Pass && r.Pass
		}
		rep.Rows = append(rep.Rows, rows...)
		return nil
	}
	if err := add(selfTestGaussian(ctx, opts, methods, maxMisses, bound)); err != nil {
		return nil, err
	}
	if opts.LaplaceShift > 0 {
		if err := add(selfTestLaplace(ctx, opts, methods, maxMisses, bound)); err != nil {
			return nil, err
		}
	}
	if !opts.NoOneRun {
		if err := add(selfTestOneRun(ctx, opts, maxMisses)); err != nil {
			return nil, err
		}
	}
	if !opts.NoSequential {
		if err := add(selfTestSequential(ctx, opts, maxMisses)); err != nil {
			return nil, err
		}
	}
	if opts.Family > 1 {
		if err := add(selfTestFamily(ctx, opts, methods, maxMisses, bound)); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// withDefaults fills the options left zero with the self-test's defaults, kept apart so that
// every part of the self-test sees the same completed options.
func (opts SelfTestOptions) withDefaults() SelfTestOptions {
	if opts.Reps == 0 {
		opts.Reps = 200
	}
	if opts.N == 0 {
		opts.N = 1000
	}
	if opts.Mus == nil {
		opts.Mus = []float64{0.5, 1, 2}
	}
	if opts.Confidence == 0 {
		opts.Confidence = audit.DefaultConfidence
	}
	if opts.Methods == nil {
		opts.Methods = append(slices.Clone(audit.ThresholdMethods), audit.RankBand, audit.DKWBand)
	}
	if opts.LaplaceShift == 0 {
		opts.LaplaceShift = 1
	}
	if opts.Family == 0 {
		opts.Family = 8
	}
	return opts
}

// check refuses completed options the self-test cannot run and parses the methods, so that
// nothing is drawn before every option is known to be good.
func (opts SelfTestOptions) check() ([]audit.ThresholdMethod, error) {
	switch {
	case opts.Reps < 1:
		return nil, fmt.Errorf("audit: selftest needs at least 1 repetition, got %d", opts.Reps)
	case opts.N < 2:
		return nil, fmt.Errorf("audit: selftest needs at least 2 scores per world, got %d", opts.N)
	case !(opts.Confidence > 0 && opts.Confidence < 1):
		return nil, fmt.Errorf("audit: selftest confidence %v outside (0, 1)", opts.Confidence)
	case opts.Family < 1:
		return nil, fmt.Errorf("audit: selftest family of %d rows, need at least 1", opts.Family)
	}
	for _, mu := range opts.Mus {
		if !(mu > 0) || math.IsInf(mu, 0) {
			return nil, fmt.Errorf("audit: selftest mu %v is not a finite number > 0", mu)
		}
	}
	methods := make([]audit.ThresholdMethod, len(opts.Methods))
	for i, m := range opts.Methods {
		pm, err := audit.ParseThresholdMethod(string(m))
		if err != nil {
			return nil, err
		}
		methods[i] = pm
	}
	return methods, nil
}

// selfTestGaussian is the self-test's first part: for each mu, every method's bound on
// Gaussian scores whose trade-off curve is exactly T_G(mu), counted as a miss when above mu.
func selfTestGaussian(ctx context.Context, opts SelfTestOptions, methods []audit.ThresholdMethod, maxMisses int, bound lowerBoundFunc) ([]SelfTestRow, error) {
	var out []SelfTestRow
	plan := audit.NewBonferroniPlan(opts.N, opts.N, opts.Confidence)
	x := make([]float64, opts.N)
	y := make([]float64, opts.N)
	for mi, mu := range opts.Mus {
		rows := make([]SelfTestRow, len(methods))
		for i, m := range methods {
			rows[i] = SelfTestRow{Method: m, Mechanism: "gaussian", Quantity: "mu", Mu: mu, Reps: opts.Reps, MaxMisses: maxMisses}
		}
		rng := rand.New(rand.NewPCG(opts.Seed, uint64(mi)))
		for r := 0; r < opts.Reps; r++ {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("audit: selftest: %w", err)
			}
			gaussianScores(rng, mu, x, y)
			for i, m := range methods {
				o := audit.Options{Confidence: opts.Confidence, Method: m, SplitFraction: 0.5, Seed: rng.Uint64()}
				lower, err := bound(x, y, o, plan)
				if err != nil {
					return nil, fmt.Errorf("audit: selftest %s mu=%g: %w", m, mu, err)
				}
				rows[i].MeanLower += lower / float64(opts.Reps)
				if lower > mu {
					rows[i].Misses++
				}
			}
		}
		for i := range rows {
			rows[i].Coverage = 1 - float64(rows[i].Misses)/float64(opts.Reps)
			rows[i].Tightness = rows[i].MeanLower / mu
			rows[i].Pass = rows[i].Misses <= maxMisses
		}
		out = append(out, rows...)
	}
	return out, nil
}

// selfTestFamily checks the family-wise statement: opts.Family Gaussian mechanisms, their mu
// cycling through opts.Mus, are audited together in each repetition, every bound at
// FamilyRowConfidence; a repetition misses when any bound exceeds its mechanism's mu. This is
// the situation of an analysis with many (attack, threat, round) rows, whose verdict is
// "violated" as soon as one row's bound exceeds its claim.
func selfTestFamily(ctx context.Context, opts SelfTestOptions, methods []audit.ThresholdMethod, maxMisses int, bound lowerBoundFunc) ([]SelfTestRow, error) {
	rowConf := audit.FamilyRowConfidence(opts.Confidence, opts.Family)
	plan := audit.NewBonferroniPlan(opts.N, opts.N, rowConf)
	mus := make([]float64, opts.Family)
	top := 0
	for j := range mus {
		mus[j] = opts.Mus[j%len(opts.Mus)]
		if mus[j] > mus[top] {
			top = j
		}
	}
	rows := make([]SelfTestRow, len(methods))
	for i, m := range methods {
		rows[i] = SelfTestRow{Method: m, Mechanism: "gaussian", Quantity: "mu", Mu: mus[top], Reps: opts.Reps, Family: opts.Family, MaxMisses: maxMisses}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x66616d696c79)) // "family"
	x := make([]float64, opts.N)
	y := make([]float64, opts.N)
	missed := make([]bool, len(methods))
	for r := 0; r < opts.Reps; r++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("audit: selftest: %w", err)
		}
		clear(missed)
		for j, mu := range mus {
			gaussianScores(rng, mu, x, y)
			for i, m := range methods {
				o := audit.Options{Confidence: rowConf, Method: m, SplitFraction: 0.5, Seed: rng.Uint64()}
				lower, err := bound(x, y, o, plan)
				if err != nil {
					return nil, fmt.Errorf("audit: selftest family %s mu=%g: %w", m, mu, err)
				}
				if j == top {
					rows[i].MeanLower += lower / float64(opts.Reps)
				}
				missed[i] = missed[i] || lower > mu
			}
		}
		for i := range rows {
			if missed[i] {
				rows[i].Misses++
			}
		}
	}
	for i := range rows {
		rows[i].Coverage = 1 - float64(rows[i].Misses)/float64(opts.Reps)
		rows[i].Tightness = rows[i].MeanLower / rows[i].Mu
		rows[i].Pass = rows[i].Misses <= maxMisses
	}
	return rows, nil
}

// selfTestLaplace checks the pair methods on the Laplace mechanism with shift s: world C
// scores Laplace(s, 1), world C' Laplace(0, 1). It is exactly s-DP, not Gaussian, and the mu
// its bounds are held against is its GDP equivalent (LaplaceGDPEquivalent).
func selfTestLaplace(ctx context.Context, opts SelfTestOptions, methods []audit.ThresholdMethod, maxMisses int, bound lowerBoundFunc) ([]SelfTestRow, error) {
	s := opts.LaplaceShift
	mu := audit.LaplaceGDPEquivalent(s)
	plan := audit.NewBonferroniPlan(opts.N, opts.N, opts.Confidence)
	rows := make([]SelfTestRow, len(methods))
	for i, m := range methods {
		rows[i] = SelfTestRow{Method: m, Mechanism: "laplace", Quantity: "mu", Mu: mu, Reps: opts.Reps, MaxMisses: maxMisses}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6c61706c616365)) // "laplace"
	x := make([]float64, opts.N)
	y := make([]float64, opts.N)
	for r := 0; r < opts.Reps; r++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("audit: selftest: %w", err)
		}
		for i := range x {
			x[i] = s + laplaceDraw(rng)
			y[i] = laplaceDraw(rng)
		}
		slices.Sort(x)
		slices.Sort(y)
		for i, m := range methods {
			o := audit.Options{Confidence: opts.Confidence, Method: m, SplitFraction: 0.5, Seed: rng.Uint64()}
			lower, err := bound(x, y, o, plan)
			if err != nil {
				return nil, fmt.Errorf("audit: selftest laplace %s: %w", m, err)
			}
			rows[i].MeanLower += lower / float64(opts.Reps)
			if lower > mu {
				rows[i].Misses++
			}
		}
	}
	finishRows(rows)
	return rows, nil
}

// selfTestOneRun checks the one-run audits as audit run and analyze make them (OneRunAnalyze,
// the default grid, mu and eps each at half the error level so that they hold together) and the
// adaptive bound (OneRunAdaptiveMu at the full confidence, a row of its own; on the Laplace
// mechanism also the sequential eps at delta 0, OneRunSequentialEpsilon): each repetition is
// one run with N canaries, each included with probability 1/2 and scored N(mu b, 1) (Gaussian,
// for every mu of the list), by the shared-level Gaussian mechanism (the same marginals, every
// canary exactly mu-GDP, the canaries of a run dependent: sharedLevelScores) or s b + Laplace(0,
// 1) (Laplace, exactly s-DP per canary). The f-DP mu and the adaptive mu must stay at or below mu
// (the Laplace mechanism's GDP equivalent), the eps at or below the exact eps at delta 1e-5
// (Gaussian, both kinds) or s at delta 0 (Laplace).
func selfTestOneRun(ctx context.Context, opts SelfTestOptions, maxMisses int) ([]SelfTestRow, error) {
	const delta = 1e-5
	type mech struct {
		name      string
		mu, eps   float64
		delta     float64
		shift     float64
		laplace   bool
		shared    bool
		streamTag uint64
	}
	var mechs []mech
	for i, mu := range opts.Mus {
		eps, err := audit.EpsilonFromGDP(mu, delta)
		if err != nil {
			return nil, err
		}
		mechs = append(mechs, mech{name: "gaussian", mu: mu, eps: eps, delta: delta, shift: mu, streamTag: uint64(i)})
	}
	if s := opts.LaplaceShift; s > 0 {
		mechs = append(mechs, mech{name: "laplace", mu: audit.LaplaceGDPEquivalent(s), eps: s, shift: s, laplace: true, streamTag: 99})
	}
	for i, mu := range opts.Mus {
		eps, err := audit.EpsilonFromGDP(mu, delta)
		if err != nil {
			return nil, err
		}
		mechs = append(mechs, mech{name: "gaussian-shared", mu: mu, eps: eps, delta: delta, shift: mu, shared: true, streamTag: 200 + uint64(i)})
	}
	var out []SelfTestRow
	scores := make([]float64, opts.N)
	incl := make([]bool, opts.N)
	for _, mc := range mechs {
		muRow := SelfTestRow{Method: audit.OneRunMethod, Mechanism: mc.name, Quantity: "mu", Mu: mc.mu, Reps: opts.Reps, MaxMisses: maxMisses}
		epsRow := SelfTestRow{Method: audit.OneRunMethod, Mechanism: mc.name, Quantity: "eps", Mu: mc.mu, Epsilon: mc.eps, Delta: mc.delta, Reps: opts.Reps, MaxMisses: maxMisses}
		adaptRow := SelfTestRow{Method: audit.OneRunAdaptiveMethod, Mechanism: mc.name, Quantity: "mu", Mu: mc.mu, Reps: opts.Reps, MaxMisses: maxMisses}
		seqRow := SelfTestRow{Method: audit.OneRunSequentialMethod, Mechanism: mc.name, Quantity: "eps", Mu: mc.mu, Epsilon: mc.eps, Reps: opts.Reps, MaxMisses: maxMisses}
		rng := rand.New(rand.NewPCG(opts.Seed, 0x6f6e6572756e00+mc.streamTag)) // "onerun"
		for r := 0; r < opts.Reps; r++ {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("audit: selftest: %w", err)
			}
			switch {
			case mc.shared:
				sharedLevelScores(rng, mc.mu, scores, incl)
			default:
				for i := range scores {
					incl[i] = rng.IntN(2) == 1
					if mc.laplace {
						scores[i] = laplaceDraw(rng)
					} else {
						scores[i] = rng.NormFloat64()
					}
					if incl[i] {
						scores[i] += mc.shift
					}
				}
			}
			// The one-run rows of audit run and analyze (mu and eps jointly at the confidence).
			res, err := audit.OneRunAnalyze(scores, incl, nil, mc.delta, opts.Confidence)
			if err != nil {
				return nil, fmt.Errorf("audit: selftest one-run %s: %w", mc.name, err)
			}
			ad, err := audit.OneRunAdaptiveMu(scores, incl, nil, opts.Confidence)
			if err != nil {
				return nil, fmt.Errorf("audit: selftest adaptive one-run %s: %w", mc.name, err)
			}
			if mc.laplace { // pure DP: the sequential eps at delta 0
				seq, err := audit.OneRunSequentialEpsilon(scores, incl, nil, opts.Confidence)
				if err != nil {
					return nil, fmt.Errorf("audit: selftest sequential one-run %s: %w", mc.name, err)
				}
				seqRow.MeanLower += seq.EpsLower / float64(opts.Reps)
				if seq.EpsLower > mc.eps {
					seqRow.Misses++
				}
			}
			muRow.MeanLower += res.MuLower / float64(opts.Reps)
			epsRow.MeanLower += res.EpsLower / float64(opts.Reps)
			adaptRow.MeanLower += ad.MuLower / float64(opts.Reps)
			if res.MuLower > mc.mu {
				muRow.Misses++
			}
			if res.EpsLower > mc.eps {
				epsRow.Misses++
			}
			if ad.MuLower > mc.mu {
				adaptRow.Misses++
			}
		}
		out = append(out, muRow, epsRow, adaptRow)
		if mc.laplace {
			out = append(out, seqRow)
		}
	}
	finishRows(out)
	return out, nil
}

// sharedLevelScores draws one run of the shared-level Gaussian mechanism: one level t = |mu/2 +
// Z| for the whole run and, for each canary, an inclusion bit b_i (probability 1/2) and the
// score mu/2 + t pointing to its bit with probability e^{mu t}/(1+e^{mu t}), mu/2 - t otherwise,
// independently given t (plus a jitter of 1e-9 that breaks the ties and carries nothing).
// Given b_i a score is exactly N(mu b_i, 1), and given the other canaries (which reveal t and
// nothing of b_i) canary i's channel is the Gaussian mechanism of sensitivity mu: the mechanism
// is exactly mu-GDP per canary, but all the canaries of a run are easy together when t is large.
// Bounds that assume independent canaries fail on it (audit's TestOneRunIndependenceIsNotCertified).
func sharedLevelScores(rng *rand.Rand, mu float64, scores []float64, incl []bool) {
	t := math.Abs(mu/2 + rng.NormFloat64())
	q := 1 / (1 + math.Exp(-mu*t))
	for i := range scores {
		incl[i] = rng.IntN(2) == 1
		right := rng.Float64() < q
		sign := -1.0
		if incl[i] == right {
			sign = 1
		}
		scores[i] = mu/2 + sign*t + 1e-9*rng.NormFloat64()
	}
}

// finishRows fills coverage, tightness and the pass flag from misses and mean bounds.
func finishRows(rows []SelfTestRow) {
	for i := range rows {
		r := &rows[i]
		truth := r.Mu
		if r.Quantity == "eps" {
			truth = r.Epsilon
		}
		r.Coverage = 1 - float64(r.Misses)/float64(r.Reps)
		r.Tightness = r.MeanLower / truth
		r.Pass = r.Misses <= r.MaxMisses
	}
}

// laplaceDraw is a standard Laplace(0, 1) draw by inversion.
func laplaceDraw(rng *rand.Rand) float64 {
	u := rng.Float64() - 0.5
	if u < 0 {
		return math.Log1p(2 * u)
	}
	return -math.Log1p(-2 * u)
}

// gaussianScores fills x with sorted N(mu, 1) scores (world C) and y with sorted N(0, 1)
// scores (world C').
func gaussianScores(rng *rand.Rand, mu float64, x, y []float64) {
	for i := range x {
		x[i] = mu + rng.NormFloat64()
	}
	for i := range y {
		y[i] = rng.NormFloat64()
	}
	slices.Sort(x)
	slices.Sort(y)
}

// maxAllowedMisses is the largest m with P(Binomial(n, p) >= m) >= alarm.
func maxAllowedMisses(n int, p, alarm float64) int {
	m := 0
	for m < n && binomialUpperTail(n, p, m+1) >= alarm {
		m++
	}
	return m
}

// binomialUpperTail is P(Binomial(n, p) >= m) = I_p(m, n-m+1) for 1 <= m <= n.
func binomialUpperTail(n int, p float64, m int) float64 {
	if m <= 0 {
		return 1
	}
	if m > n {
		return 0
	}
	return mathext.RegIncBeta(float64(m), float64(n-m+1), p)
}
