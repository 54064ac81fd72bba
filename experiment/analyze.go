package experiment

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/runs"
)

// AnalyzeOptions say how scores become bounds.
type AnalyzeOptions struct {
	Confidence float64
	Delta      float64
	Method     audit.ThresholdMethod
	// Claim, when it states something, is judged for every group. Otherwise each group is
	// judged against the theory for its threat model (the convergent bound for the final
	// model, the composition bound for every iterate or the uploads) when one is known.
	Claim audit.Claim
	// ClaimSource names where Claim came from in the findings ("claim" when empty; ClaimFor's
	// line for an accountant's claim).
	ClaimSource string
	// Seed drives the split method.
	Seed uint64
	// Exact, when set, gives the exact mu for a threat model and round (NaN if unknown).
	Exact func(threat string, round int) float64
}

// Finding is the audit of one attack under one threat model at one checkpoint. Its JSON form
// is Record.
type Finding struct {
	Attack string
	Threat string
	Round  int
	// Result is the empirical side: ROC, AUC, certified lower bounds.
	Result *audit.Result
	// Theory is the bound at this round, nil when the scores come without a config.
	Theory *audit.Bound
	// ClaimSource says what the verdict judged: "claim" (the user's), "accountant: ..." (the
	// DP-FedAvg family's accountant), "convergent bound", "composition bound", or "" when there
	// was nothing to judge.
	ClaimSource string
	Verdict     *audit.Verdict
	// ExactMu is the exact mu of the mechanism for this threat model and round where it is known
	// (the quadratic reference instance), NaN elsewhere.
	ExactMu float64
	// Metrics holds the mean of each of the attack's own success metrics (label accuracy,
	// PSNR, ...) over the runs where it is defined.
	Metrics map[string]float64
}

type groupKey struct {
	attack, threat string
	round          int32
}

// metricMeans averages every metric column per (attack, threat, round) over finite values: NaN
// is a metric the attack does not report or a run where it is undefined, and an infinite PSNR
// (an exact reconstruction) has no mean; the MSE column still counts such runs.
func metricMeans(sf *runs.ScoreFile) map[groupKey]map[string]float64 {
	type acc struct {
		sum []float64
		n   []int
	}
	accs := map[groupKey]*acc{}
	for _, s := range sf.Scores {
		k := groupKey{s.Attack, s.Threat, s.Round}
		a := accs[k]
		if a == nil {
			a = &acc{sum: make([]float64, len(sf.Meta.MetricNames)), n: make([]int, len(sf.Meta.MetricNames))}
			accs[k] = a
		}
		for i, v := range s.Metrics {
			if i < len(a.sum) && !math.IsNaN(v) && !math.IsInf(v, 0) {
				a.sum[i] += v
				a.n[i]++
			}
		}
	}
	out := map[groupKey]map[string]float64{}
	for k, a := range accs {
		for i, name := range sf.Meta.MetricNames {
			if a.n[i] > 0 {
				if out[k] == nil {
					out[k] = map[string]float64{}
				}
				out[k][name] = a.sum[i] / float64(a.n[i])
			}
		}
	}
	return out
}

// scoreGroup is the scores of one (attack, threat, round), split by world. When every pair
// id appears exactly once in each world, the scores are paired: c[i] and cprime[i] come from the
// two runs of one pair, which share their noise, so the worlds are not independent.
type scoreGroup struct {
	attack, threat string
	round          int
	c, cprime      []float64
	paired         bool
}

func groupScores(scores []runs.Score) []*scoreGroup {
	type key struct {
		attack, threat string
		round          int32
	}
	type pairScores struct {
		ids    [2][]int64
		vals   [2][]float64
		attack string
		threat string
		round  int32
	}
	idx := map[key]*pairScores{}
	var order []*pairScores
	for _, s := range scores {
		k := key{s.Attack, s.Threat, s.Round}
		g, ok := idx[k]
		if !ok {
			g = &pairScores{attack: s.Attack, threat: s.Threat, round: s.Round}
			idx[k] = g
			order = append(order, g)
		}
		w := 0
		if s.World != runs.WorldC {
			w = 1
		}
		g.ids[w] = append(g.ids[w], s.PairID)
		g.vals[w] = append(g.vals[w], s.Score)
	}
	groups := make([]*scoreGroup, 0, len(order))
	for _, p := range order {
		g := &scoreGroup{attack: p.attack, threat: p.threat, round: int(p.round)}
		g.c, g.cprime = p.vals[0], p.vals[1]
		if c, cp, ok := pairUp(p.ids, p.vals); ok {
			g.c, g.cprime, g.paired = c, cp, true
		}
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *scoreGroup) int {
		return cmp.Or(cmp.Compare(a.attack, b.attack), cmp.Compare(a.threat, b.threat), cmp.Compare(a.round, b.round))
	})
	return groups
}

// pairUp orders both worlds by pair id when each id occurs once in each world and there is more
// than one id; otherwise the scores carry no usable pairing.
func pairUp(ids [2][]int64, vals [2][]float64) (c, cprime []float64, ok bool) {
	if len(ids[0]) != len(ids[1]) || len(ids[0]) < 2 {
		return nil, nil, false
	}
	pos := make(map[int64]int, len(ids[0]))
	for i, id := range ids[0] {
		if _, dup := pos[id]; dup {
			return nil, nil, false
		}
		pos[id] = i
	}
	type pv struct {
		id   int64
		c, p float64
	}
	seen := make(map[int64]bool, len(ids[1]))
	rows := make([]pv, 0, len(ids[1]))
	for j, id := range ids[1] {
		i, found := pos[id]
		if !found || seen[id] {
			return nil, nil, false
		}
		seen[id] = true
		rows = append(rows, pv{id, vals[0][i], vals[1][j]})
	}
	slices.SortFunc(rows, func(a, b pv) int { return cmp.Compare(a.id, b.id) })
	c, cprime = make([]float64, len(rows)), make([]float64, len(rows))
	for i, r := range rows {
		c[i], cprime[i] = r.c, r.p
	}
	return c, cprime, true
}

// AnalyzeScores audits every (attack, threat, round) group of scores. theory, when not nil,
// maps a round to its bound. A group whose scores are all of one world is an error naming it.
func AnalyzeScores(ctx context.Context, sf *runs.ScoreFile, opts AnalyzeOptions, theory func(round int) *audit.Bound) ([]Finding, error) {
	scores := sf.Scores
	if len(scores) == 0 {
		return nil, fmt.Errorf("analyze: no scores")
	}
	means := metricMeans(sf)
	var out []Finding
	for _, g := range groupScores(scores) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("attack %q threat %q round %d", g.attack, g.threat, g.round)
		if len(g.c) == 0 || len(g.cprime) == 0 {
			return nil, fmt.Errorf("analyze: %s has %d scores of world C and %d of world C'; both are needed", name, len(g.c), len(g.cprime))
		}
		res, err := audit.Analyze(g.c, g.cprime, audit.Options{
			Confidence: opts.Confidence, Method: opts.Method, Delta: opts.Delta, Seed: opts.Seed,
			Paired: g.paired,
		})
		if err != nil {
			return nil, fmt.Errorf("analyze: %s: %w", name, err)
		}
		f := Finding{Attack: g.attack, Threat: g.threat, Round: g.round, Result: res, ExactMu: math.NaN(),
			Metrics: means[groupKey{g.attack, g.threat, int32(g.round)}]}
		if theory != nil {
			f.Theory = theory(g.round)
		}
		if opts.Exact != nil {
			f.ExactMu = opts.Exact(g.threat, g.round)
		}
		claim, source := opts.Claim, cmp.Or(opts.ClaimSource, "claim")
		if claim.Mu == 0 && claim.Epsilon == 0 {
			claim, source = audit.Claim{}, ""
			if f.Theory != nil {
				if g.threat == runs.ThreatFinal && !math.IsNaN(f.Theory.Mu) {
					claim.Mu, source = f.Theory.Mu, "convergent bound"
				} else if g.threat != runs.ThreatFinal && f.Theory.MuComposition > 0 {
					claim.Mu, source = f.Theory.MuComposition, "composition bound"
				}
			}
		}
		if claim.Mu > 0 || claim.Epsilon > 0 {
			v := audit.Judge(res, claim)
			f.Verdict, f.ClaimSource = &v, source
		}
		out = append(out, f)
	}
	return out, nil
}
