package calibrate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/audit"
)

// The cost of an audit: how many trainings each method needs before its certified bound
// reaches a given share of the true mu. Computed by simulation on the Gaussian mechanism with
// that mu, which is exact for the quadratic reference instance (its outputs are Gaussian, and
// canaries in orthogonal directions are independent Gaussian mechanisms) and the idealized
// case for any other deployment: real attacks see less than the Neyman-Pearson statistic
// simulated here, so real audits need at least as many trainings.

// CostOptions set up CostTable.
type CostOptions struct {
	// Mu is the true Gaussian-DP parameter (> 0).
	Mu float64
	// Fraction of Mu the certified bound must reach (default 0.8).
	Fraction float64
	// Confidence of the certified bounds (default 0.95); Delta is used by the epsilon rows
	// (default 1e-5).
	Confidence, Delta float64
	// Reps is the number of simulated audits per size (default 21); a size is enough when at
	// least Power of them (default 0.8) certify the target.
	Reps  int
	Power float64
	// MaxPairs and MaxCanaries end the search (defaults 102400 and 102400).
	MaxPairs, MaxCanaries int
	Seed                  uint64
}

// DefaultPower is CostOptions.Power's default: the chance an audit of the size named reaches
// the target.
const DefaultPower = 0.8

// CostRow is one method of the cost table.
type CostRow struct {
	Method string `json:"method"`
	// Trainings is the number of training runs the method needs (0 when the target is not
	// reached within the search limit); Canaries the canaries per run of the one-run methods.
	Trainings int  `json:"trainings"`
	Canaries  int  `json:"canaries,omitempty"`
	Reached   bool `json:"reached"`
	// Target and Median are the target and the median certified value at the size reported
	// (or at the largest size tried when the target is not reached): mu for the mu rows,
	// epsilon at Delta for the Steinke row. Power is the share of the simulated audits at that
	// size that certified the target: the chance an audit of that size reaches it.
	Target float64 `json:"target"`
	Median float64 `json:"median"`
	Power  float64 `json:"power"`
	// Estimate rows (the one-shot estimate) report the median relative error instead.
	MedianRelError float64 `json:"median_rel_error,omitempty"`
	Note           string  `json:"note"`
}

func (o CostOptions) withDefaults() (CostOptions, error) {
	if !(o.Mu > 0) || math.IsInf(o.Mu, 0) {
		return o, fmt.Errorf("audit: cost table: mu %v must be positive", o.Mu)
	}
	if o.Fraction == 0 {
		o.Fraction = 0.8
	}
	if !(o.Fraction > 0 && o.Fraction < 1) {
		return o, fmt.Errorf("audit: cost table: fraction %v outside (0, 1)", o.Fraction)
	}
	if o.Confidence == 0 {
		o.Confidence = 0.95
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		return o, fmt.Errorf("audit: cost table: confidence %v outside (0, 1)", o.Confidence)
	}
	if o.Delta == 0 {
		o.Delta = 1e-5
	}
	if !(o.Delta > 0 && o.Delta < 1) {
		return o, fmt.Errorf("audit: cost table: delta %v outside (0, 1)", o.Delta)
	}
	if o.Reps == 0 {
		o.Reps = 21
	}
	if o.Reps < 1 {
		return o, fmt.Errorf("audit: cost table: reps %d must be positive", o.Reps)
	}
	if o.Power == 0 {
		o.Power = DefaultPower
	}
	if !(o.Power > 0 && o.Power <= 1) {
		return o, fmt.Errorf("audit: cost table: power %v outside (0, 1]", o.Power)
	}
	if o.MaxPairs == 0 {
		o.MaxPairs = 102400
	}
	if o.MaxCanaries == 0 {
		o.MaxCanaries = 102400
	}
	return o, nil
}

// CostTable simulates each audit method on the mu-GDP Gaussian mechanism at growing sizes
// (pairs from 50 in steps of 1.5 and 4/3, two a doubling; canaries from 100, doubling) and
// reports the first size at which at least Power of the simulated audits certify
// Fraction * Mu (epsilon rows: Fraction * eps(Mu, Delta)), with the share that did. It chose
// the first size whose median reached the target: an audit of that size reached it with
// probability about 1/2, and as low as 0.23 where the median of 11 draws fell above it by
// chance (measured by 300 simulated audits a size and by real audits of the quadratic
// instance: 16 of 40 detected a violation at the size the plan named).
func CostTable(ctx context.Context, opts CostOptions) ([]CostRow, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	epsTrue, err := audit.EpsilonFromGDP(o.Mu, o.Delta)
	if err != nil {
		return nil, err
	}
	// One generator for the whole table, drawn from in the order of the rows.
	rng := rand.New(rand.NewPCG(o.Seed, 0xc057))
	rows, err := costPairRows(ctx, o, rng)
	if err != nil {
		return nil, err
	}
	mu1, eps1, err := costOneRunRows(ctx, o, rng, epsTrue)
	if err != nil {
		return nil, err
	}
	rows = append(rows, mu1, eps1)
	shot, err := costOneShotRow(o, rng)
	if err != nil {
		return nil, err
	}
	rows = append(rows, shot)
	return rows, nil
}

// costPairRows is the cost of the methods that audit pairs of trainings: for each, the first
// number of pairs (nextPairs from 50) at which at least Power of the simulated audits certify
// the target.
func costPairRows(ctx context.Context, o CostOptions, rng *rand.Rand) ([]CostRow, error) {
	type pairMethod struct {
		name, note string
		coupled    bool
		method     audit.ThresholdMethod
	}
	var rows []CostRow
	for _, pm := range []pairMethod{
		{"pairs + DKW and band", "coupled pairs (shared noise), fedaudit's default", true, audit.DKWBand},
		{"pairs + DKW", "coupled pairs, DKW alone", true, audit.DKW},
		{"pairs + rank band", "coupled pairs, the band of docs/statistics.md alone", true, audit.RankBand},
		{"independent pairs + Bonferroni", "the two worlds trained with independent noise", false, audit.Bonferroni},
	} {
		row := CostRow{Method: pm.name, Target: o.Fraction * o.Mu, Note: pm.note}
		for n := 50; n <= o.MaxPairs; n = nextPairs(n) {
			vals := make([]float64, o.Reps)
			for r := range vals {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				c, cp := mechanismScores(rng, o.Mu, n, pm.coupled)
				res, err := audit.Analyze(c, cp, audit.Options{Confidence: o.Confidence, Method: pm.method, Delta: o.Delta, Dependent: pm.coupled, Seed: rng.Uint64()})
				if err != nil {
					return nil, fmt.Errorf("cost table: %s at %d pairs: %w", pm.name, n, err)
				}
				vals[r] = res.MuLower
			}
			row.Median, row.Power, row.Trainings = audit.Median(vals), reachedShare(vals, row.Target), 2*n
			if row.Power >= o.Power {
				row.Reached = true
				break
			}
		}
		if !row.Reached {
			row.Trainings = 0
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// costOneRunRows is the cost of the one-run audits, mu and epsilon: the first number of
// canaries in one run with m canaries, each included with probability 1/2 (score N(mu b_i, 1)),
// doubling from 100, whose median bound reaches its target.
func costOneRunRows(ctx context.Context, o CostOptions, rng *rand.Rand, epsTrue float64) (CostRow, CostRow, error) {
	mu1 := CostRow{Method: "one run + f-DP (Mahloujifar et al.)", Target: o.Fraction * o.Mu, Note: "one training carrying the canaries shown"}
	eps1 := CostRow{Method: "one run + epsilon (Steinke et al.)", Target: o.Fraction * epsTrue, Note: "target and median are epsilon at delta"}
	for m := 100; m <= o.MaxCanaries && !(mu1.Reached && eps1.Reached); m *= 2 {
		mus := make([]float64, o.Reps)
		epss := make([]float64, o.Reps)
		for r := range mus {
			if err := ctx.Err(); err != nil {
				return mu1, eps1, err
			}
			scores, included := oneRunScores(rng, o.Mu, m)
			// The path audit run and analyze take (OneRunAnalyze: mu and eps jointly at the
			// confidence), so the table's numbers are what a user gets.
			res, err := audit.OneRunAnalyze(scores, included, nil, o.Delta, o.Confidence)
			if err != nil {
				return mu1, eps1, fmt.Errorf("cost table: one run with %d canaries: %w", m, err)
			}
			mus[r], epss[r] = res.MuLower, res.EpsLower
		}
		for _, x := range []struct {
			row  *CostRow
			vals []float64
		}{{&mu1, mus}, {&eps1, epss}} {
			if x.row.Reached {
				continue
			}
			x.row.Median, x.row.Power, x.row.Canaries = audit.Median(x.vals), reachedShare(x.vals, x.row.Target), m
			if x.row.Power >= o.Power {
				x.row.Reached, x.row.Trainings = true, 1
			}
		}
	}
	return mu1, eps1, nil
}

// nextPairs is the pair count after n: 1.5 n from 50 times a power of 2, else 4/3 n (50, 75,
// 100, 150, 200, ...), so that a size is never more than 1.5 times the one needed.
func nextPairs(n int) int {
	if q := n / 50; n%50 == 0 && q&(q-1) == 0 {
		return n * 3 / 2
	}
	return n * 4 / 3
}

// reachedShare is the share of vals at or above target.
func reachedShare(vals []float64, target float64) float64 {
	k := 0
	for _, v := range vals {
		if v >= target {
			k++
		}
	}
	return float64(k) / float64(len(vals))
}

// costOneShotRow is the one-shot estimate with 1000 inserted and 1000 held-out canaries: an
// estimate, so its cost is its error, not a size.
func costOneShotRow(o CostOptions, rng *rand.Rand) (CostRow, error) {
	shot := CostRow{Method: "one-shot estimate (Andrew et al.)", Trainings: 1, Canaries: 2000, Target: o.Mu,
		Note: "an estimate, not a bound: median relative error of mu"}
	errs := make([]float64, o.Reps)
	vals := make([]float64, o.Reps)
	for r := range errs {
		held, ins := make([]float64, 1000), make([]float64, 1000)
		for i := range held {
			held[i], ins[i] = rng.NormFloat64(), o.Mu+rng.NormFloat64()
		}
		est, err := audit.OneShotEpsilon(held, ins, o.Delta)
		if err != nil {
			return shot, err
		}
		vals[r], errs[r] = est.Mu, math.Abs(est.Mu-o.Mu)/o.Mu
	}
	shot.Median, shot.MedianRelError, shot.Reached = audit.Median(vals), audit.Median(errs), true
	return shot, nil
}

// mechanismScores are n scores per world of the mu-GDP Gaussian mechanism seen by its
// Neyman-Pearson test (higher means world C): coupled pairs share their noise.
func mechanismScores(rng *rand.Rand, mu float64, n int, coupled bool) (c, cp []float64) {
	c, cp = make([]float64, n), make([]float64, n)
	for i := range c {
		z := rng.NormFloat64()
		c[i] = mu + z
		if !coupled {
			z = rng.NormFloat64()
		}
		cp[i] = z
	}
	return c, cp
}

// oneRunScores are m canaries' scores N(mu b_i, 1) with inclusion bits b_i ~ Bernoulli(1/2).
func oneRunScores(rng *rand.Rand, mu float64, m int) ([]float64, []bool) {
	scores, included := make([]float64, m), make([]bool, m)
	for i := range scores {
		included[i] = rng.IntN(2) == 1
		scores[i] = rng.NormFloat64()
		if included[i] {
			scores[i] += mu
		}
	}
	return scores, included
}
