package experiment

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/experiment/bounds"
	"github.com/fedaudit/fedaudit/experiment/headline"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/theory"
)

// AnalyzeOptions say how scores become bounds. A zero field is taken from the experiment's
// audit settings (the audit: section of DIR/config.json) when there is an experiment, and from
// the defaults otherwise; a non-zero field overrides the configuration, and the analysis says so.
type AnalyzeOptions struct {
	// Confidence is the family-wise confidence: every certified bound of the analysis holds
	// jointly with at least this probability (default 0.95).
	Confidence float64
	// Delta is the delta at which epsilon is bounded (default 1e-5).
	Delta  float64
	Method audit.ThresholdMethod
	// Claim, when it states something, is judged for every group. Otherwise each group is
	// judged against the theory for its threat model (the convergent bound for the final
	// model, the composition bound for every iterate, the uploads bound for the uploads) when
	// one is known.
	Claim audit.Claim
	// ClaimSource names where Claim came from in the findings: "config claim" when empty,
	// e.g. "--claim-mu claim" for a flag, or ClaimFor's line for an accountant's claim.
	ClaimSource string
	// ClaimAbout is what Claim is about: ClaimAboutModels ("" means it: the released global
	// models, judged on the final and all-iterates rows) or ClaimAboutUploads (each upload of
	// the target client, judged on the uploads rows). The other rows are judged against the
	// theory for their threat model; rows of foreign scores without a threat model are judged
	// against the claim whatever it is about.
	ClaimAbout string
	// OneRunUncovered, when not empty, says why Claim does not apply to the one-run rows, which
	// are then judged against the theory for their threat model (or not at all): an
	// accountant's claim bounds adding or removing a whole client, and record canaries replace
	// one record inside a client, a change of up to twice the clip norm.
	OneRunUncovered string
	// OneRunTheoryUncovered, when not empty, says why the one-run rows are not judged against
	// the theory either: the target's bounds are not the canaries' (gradient canaries under
	// DP-SGD with K >= 2).
	OneRunTheoryUncovered string
	// Seed drives the split method; 0 means the experiment's master seed (1 without one).
	Seed uint64
	// Exact, when set, gives the exact mu for a threat model and round (NaN if unknown).
	Exact func(threat string, round int) float64
	// ExactOneRun, when set, gives the exact mu of the one-run rows: the largest exact mu of a
	// canary (the guarantee the one-run test is about is one for every canary).
	ExactOneRun func(threat string, round int) float64
	// EpsHeuristic, when set, gives the last-iterate heuristic's epsilon (at the claim's delta
	// where the claim is an epsilon, else at Delta; the analysis of a directory sets it) for the final
	// model at a round (DP-FedAvg family; claims.LastIterate), shown beside final-model rows as
	// what their attacks can be expected to reach; NaN or 0 where unknown. oneRun asks for the
	// one-run rows' canaries, which are canary clients with client 0's sampling rate and clip,
	// rather than for the target client.
	EpsHeuristic func(round int, oneRun bool) float64
	// Smoothness is the L behind the convergent bounds, named in the rows judged against them
	// (as estimates after T = 1, whatever L: theoryClaim).
	Smoothness bounds.Smoothness
	// Notes are prepended to the analysis's notes (where the settings came from).
	Notes []string
	// ChecksFailed, when not empty, says which grey-box check of the runs failed (audit check,
	// DIR/check.json): the deployment may not run the mechanism it declares, so a consistent
	// headline becomes inconclusive (checksFailed).
	ChecksFailed string
	// Rounds are the per-round training summaries of the runs the scores come from (nil for
	// scores without run files): where most runs of an audited checkpoint diverged, the
	// headline is inconclusive, and any diverged run is noted.
	Rounds []findings.RoundSummary
	// Logf, when set, receives a progress line: an analysis of millions of score rows takes
	// minutes (16,000 pairs of 21 checkpoints and 13 attacks: 8.3 million).
	Logf func(format string, args ...any)
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
// two runs of one pair, which share their noise, so the worlds are not independent. Coupled
// scores whose pairing is incomplete keep every score and list the ids without a partner.
type scoreGroup struct {
	attack, threat string
	round          int
	c, cprime      []float64
	paired         bool
	unpaired       []int64
}

// groupScores splits scores by (attack, threat, round) and world. For coupled scores (a pair id
// column), an id that occurs twice in one world of a group is an error: it cannot name one pair.
func groupScores(scores []runs.Score, coupled bool) ([]*scoreGroup, error) {
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
		if coupled {
			c, cp, unpaired, err := pairUp(p.ids, p.vals)
			if err != nil {
				return nil, fmt.Errorf("analyze: attack %q threat %q round %d: %w", p.attack, p.threat, p.round, err)
			}
			if len(unpaired) == 0 && len(c) >= 2 {
				g.c, g.cprime, g.paired = c, cp, true
			}
			g.unpaired = unpaired
		}
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *scoreGroup) int {
		return cmp.Or(cmp.Compare(a.attack, b.attack), cmp.Compare(a.threat, b.threat), cmp.Compare(a.round, b.round))
	})
	return groups, nil
}

// ScoresError is a problem of the scores analyzed, not of the analysis: a score file given on
// the command line that breaks a rule (a pair id twice in one world) is the caller's to fix
// (exit status 2 in the CLI), as a file of the wrong columns is.
type ScoresError struct{ Err error }

func (e *ScoresError) Error() string { return e.Err.Error() }
func (e *ScoresError) Unwrap() error { return e.Err }

// pairUp orders both worlds by pair id and returns the ids that occur in one world only
// (sorted). A pair id twice in one world is an error.
func pairUp(ids [2][]int64, vals [2][]float64) (c, cprime []float64, unpaired []int64, err error) {
	pos := make(map[int64]int, len(ids[0]))
	for i, id := range ids[0] {
		if _, dup := pos[id]; dup {
			return nil, nil, nil, &ScoresError{fmt.Errorf("pair id %d occurs twice in world C; each pair has one run per world (scores of several rounds or attacks need a round or attack column)", id)}
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
		if seen[id] {
			return nil, nil, nil, &ScoresError{fmt.Errorf("pair id %d occurs twice in world C'; each pair has one run per world (scores of several rounds or attacks need a round or attack column)", id)}
		}
		seen[id] = true
		i, found := pos[id]
		if !found {
			unpaired = append(unpaired, id)
			continue
		}
		rows = append(rows, pv{id, vals[0][i], vals[1][j]})
	}
	for _, id := range ids[0] {
		if !seen[id] {
			unpaired = append(unpaired, id)
		}
	}
	slices.Sort(unpaired)
	slices.SortFunc(rows, func(a, b pv) int { return cmp.Compare(a.id, b.id) })
	c, cprime = make([]float64, len(rows)), make([]float64, len(rows))
	for i, r := range rows {
		c[i], cprime[i] = r.c, r.p
	}
	return c, cprime, unpaired, nil
}

// AnalyzeScores audits every (attack, threat, round) group of scores. theory, when not nil,
// maps a round to its bound. A group whose scores are all of one world is an error naming it.
// opts must be resolved (Confidence set).
func AnalyzeScores(ctx context.Context, sf *runs.ScoreFile, opts AnalyzeOptions, theory func(round int) *theory.Bound) (*findings.Analysis, error) {
	if sf == nil || len(sf.Scores) == 0 {
		return nil, fmt.Errorf("analyze: no scores")
	}
	rec := recordedAudit(sf.Meta.Config)
	if opts.Seed == 0 {
		opts.Seed = cmp.Or(rec.Audit.SplitSeed, rec.Seed)
	}
	if opts.Claim.Mu == 0 && opts.Claim.Epsilon == 0 && len(sf.Meta.Config) > 0 {
		// A score file alone is judged against no claim and no theory bound: an experiment's
		// own score file analyzed so ended NO CLAIM, exit 0, where its directory was VIOLATED.
		what := "the claim its accountant gives and its theory bounds, where its system has them"
		switch {
		case rec.Audit.ClaimMu > 0:
			what = fmt.Sprintf("its claim mu %g (audit.claim_mu) and its theory bounds, where its system has them", rec.Audit.ClaimMu)
		case rec.Audit.ClaimEpsilon > 0:
			what = fmt.Sprintf("its claim epsilon %g (audit.claim_epsilon) and its theory bounds, where its system has them", rec.Audit.ClaimEpsilon)
		}
		from := "an experiment"
		if rec.Name != "" {
			from = fmt.Sprintf("the experiment %q", rec.Name)
		}
		opts.Notes = append(opts.Notes, fmt.Sprintf("these scores come from %s, whose directory is judged against %s; a score file alone is judged only against --claim-mu or --claim-eps: analyze the directory for those verdicts", from, what))
	}
	return AnalyzeAll(ctx, sf, nil, opts, theory)
}

// recorded is what AnalyzeScores reads of the experiment config a score file of ours records.
type recorded struct {
	Name  string `json:"name"`
	Seed  uint64 `json:"seed"`
	Audit struct {
		SplitSeed    uint64  `json:"split_seed"`
		ClaimMu      float64 `json:"claim_mu"`
		ClaimEpsilon float64 `json:"claim_epsilon"`
	} `json:"audit"`
}

// recordedAudit reads the config a score file records: the split method's seed (its
// audit.split_seed, else its master seed), so that `audit analyze --scores DIR/scores.arrow`
// divides the scores as `audit analyze DIR` does (they took seeds 1 and 3 and gave two
// verdicts), and its claim, to say that a score file alone is not judged against it. Zero
// values for a file without a config.
func recordedAudit(config []byte) recorded {
	var c recorded
	if len(config) == 0 || json.Unmarshal(config, &c) != nil {
		return recorded{}
	}
	return c
}

// pairFindings certifies every group of coupled-pair scores at the family's row confidence
// (ROC, bounds, the reversed-scores diagnostic); AnalyzeAll adds theory, exact mu and verdicts.
func pairFindings(ctx context.Context, groups []*scoreGroup, means map[groupKey]map[string]float64, sf *runs.ScoreFile, opts AnalyzeOptions, fam findings.Family) ([]findings.Finding, error) {
	var out []findings.Finding
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("attack %q threat %q round %d", g.attack, g.threat, g.round)
		if len(g.c) == 0 || len(g.cprime) == 0 {
			return nil, fmt.Errorf("analyze: %s has %d scores of world C and %d of world C'; both are needed", name, len(g.c), len(g.cprime))
		}
		aopts := audit.Options{
			Confidence: fam.RowConfidence, Method: opts.Method, Delta: opts.Delta, Seed: opts.Seed,
			Paired: g.paired, Dependent: sf.Coupled,
		}
		res, err := audit.Analyze(g.c, g.cprime, aopts)
		if err != nil {
			if len(g.unpaired) > 0 {
				err = fmt.Errorf("%w (%s)", err, headline.UnpairedText(g.unpaired))
			}
			return nil, fmt.Errorf("analyze: %s: %w", name, err)
		}
		f := findings.Finding{Attack: g.attack, Threat: g.threat, Round: g.round, Result: res, ExactMu: math.NaN(),
			Metrics: means[groupKey{g.attack, g.threat, int32(g.round)}], ReversedMuLower: math.NaN(),
			Unpaired: g.unpaired}
		if res.Method == audit.Split {
			f.Seed = opts.Seed
		}
		if res.AUC < 0.5 {
			// A diagnostic: where the reversed scores cannot be analyzed (a score of
			// -MaxFloat64 becomes the largest float64, which audit reserves), it is left out
			// (NaN) rather than failing the analysis the forward scores gave.
			if rev, err := reversedResult(g, aopts); err == nil {
				f.ReversedMuLower = rev.MuLower
				if opts.Claim.Epsilon > 0 {
					f.ReversedEpsLower = rev.EpsLowerAt(opts.Claim.Delta)
				}
			}
		}
		res.Compact() // every row is held until all are judged
		out = append(out, f)
	}
	return out, nil
}

// theoryClaim is the bound a row is judged against when the deployment states no claim: the
// composition bound for every iterate, the convergent bound for the final model (the
// composition bound where there is none: without an L, or FedProx outside Theorem 4; the final
// model is a function of every iterate, so the composition bound holds for it too, and such rows
// were left unjudged: a CNN's audit without a claim said NO CLAIM and exited 0), and for the
// uploads the bound of what that observer sees, MuUploads = sqrt(Mu(T-1)^2 + (Gamma/sigma)^2):
// one upload carries the client's noise sigma, not the average's sigma/sqrt(n), so the bounds
// of the average are sqrt(n) too small for it.
//
// Only the composition bounds and the bounds of round 1 (T = 1: one Gaussian mechanism from the
// public w_0, no L enters) are proven, and only they can make a row violated. The convergent bound, and the
// uploads bound after round 1 that builds on it, are the paper's argument, which is not a proof
// for every smooth loss whatever L (docs/theory.md, "When the convergent bound is a bound"): it
// falls as L grows, while a loss that is L-smooth is L'-smooth for every L' > L, and a loss
// that is linear along the canary's direction leaks as much from the final model as the
// composition bound allows. A row above it is an estimate exceeded: a finding about the theory,
// not a broken promise of the deployment. Without any L the uploads rows fall back to
// MuUploadsComposition, which never needs one.
func theoryClaim(threat string, th *theory.Bound, sm bounds.Smoothness) (audit.Claim, string, string) {
	if th == nil {
		return audit.Claim{}, "", ""
	}
	valid := func(x float64) bool { return !math.IsNaN(x) && x > 0 }
	withL := func(what string) string { return fmt.Sprintf("%s with %s L", what, cmp.Or(sm.Source, "assumed")) }
	// A value is a bound unless it used an L that is not certified: the composition bound of
	// its threat (comp) then differs from the same bound whatever L (anyL; DP-SGD with K >= 2).
	composition := func(mu, comp, anyL float64, what string) (audit.Claim, string, string) {
		if _, usesL := whateverL(comp, anyL); usesL {
			return audit.Claim{Mu: mu}, withL(what), findings.ClaimEstimate
		}
		return audit.Claim{Mu: mu}, what, findings.ClaimTheory
	}
	switch threat {
	case runs.ThreatFinal:
		switch {
		case !valid(th.Mu) && th.MuComposition > 0:
			return composition(th.MuComposition, th.MuComposition, th.MuCompositionAnyL, "composition bound")
		case !valid(th.Mu):
			return audit.Claim{}, "", ""
		case th.T == 1:
			// One round: the Gaussian mechanism itself, where no L enters (DP-SGD's drift
			// with K >= 2 aside: Mu is then MuComposition, with its L).
			return composition(th.Mu, th.MuComposition, th.MuCompositionAnyL, "convergent bound")
		}
		return audit.Claim{Mu: th.Mu}, withL("convergent bound"), findings.ClaimEstimate
	case runs.ThreatUploads:
		switch {
		case valid(th.MuUploads) && th.T == 1:
			return composition(th.MuUploads, th.MuUploadsComposition, th.MuUploadsCompositionAnyL, "uploads bound")
		case valid(th.MuUploads):
			return audit.Claim{Mu: th.MuUploads}, withL("uploads bound"), findings.ClaimEstimate
		case valid(th.MuUploadsComposition):
			return composition(th.MuUploadsComposition, th.MuUploadsComposition, th.MuUploadsCompositionAnyL, "uploads composition bound")
		}
		return audit.Claim{}, "", ""
	}
	if th.MuComposition > 0 {
		return composition(th.MuComposition, th.MuComposition, th.MuCompositionAnyL, "composition bound")
	}
	return audit.Claim{}, "", ""
}

// provenBound is the bound that holds for a row of the threat whatever the smoothness, where
// theoryClaim judges the row against an estimate that needs L (the convergent or uploads bound
// after T = 1, a composition bound that used an L not certified): the composition bound for
// the final model (a function of the iterates the composition bounds) and for every iterate,
// and the uploads composition bound for the uploads, each as it holds whatever L
// (theory.Bound's *AnyL where the bound used L). A row that certifies more than that bound is
// judged against it, as violated: judged against the estimate alone it was "above an
// estimate" and the headline passed over it (a final-model row certifying mu 2.76 beside a
// composition bound of 0.8 ended NO CLAIM).
func provenBound(threat string, th *theory.Bound) (float64, string) {
	if th == nil {
		return 0, ""
	}
	pick := func(mu, anyL float64, what string) (float64, string) {
		if bound, usesL := whateverL(mu, anyL); usesL {
			return bound, what + " whatever L"
		}
		return mu, what
	}
	switch threat {
	case runs.ThreatFinal, runs.ThreatAllIterates:
		return pick(th.MuComposition, th.MuCompositionAnyL, "composition bound")
	case runs.ThreatUploads:
		return pick(th.MuUploadsComposition, th.MuUploadsCompositionAnyL, "uploads composition bound")
	}
	return 0, ""
}

// whateverL is a composition bound comp as it holds whatever L, given the same bound computed
// without L (anyL, theory.Bound's *AnyL: 0 where the bound needs none), and whether comp used
// an L, which makes comp an estimate.
func whateverL(comp, anyL float64) (bound float64, usesL bool) {
	if anyL > 0 && anyL != comp {
		return anyL, true
	}
	return comp, false
}

// reversedResult certifies the group's scores read the other way round (higher means C'),
// with the same options: the diagnostic for an attack whose direction is wrong.
func reversedResult(g *scoreGroup, opts audit.Options) (*audit.Result, error) {
	neg := func(x []float64) []float64 {
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = -v
		}
		return out
	}
	return audit.Analyze(neg(g.c), neg(g.cprime), opts)
}

// withDefaults fills the zero settings of opts from the experiment's audit settings (cfg may be
// nil for scores without an experiment) and the defaults, and notes every command-line setting
// that replaces a configured one, so the output says what it judged.
func (o AnalyzeOptions) withDefaults(cfg *spec.Config) AnalyzeOptions {
	var a spec.AuditConfig
	seed := uint64(1)
	if cfg != nil {
		a, seed = cfg.Audit, cmp.Or(cfg.Audit.SplitSeed, cfg.Seed)
		note := func(what string, differs bool, flag, configured string) {
			if differs {
				o.Notes = append(o.Notes, fmt.Sprintf("%s: %s from the command line replaces the configuration's %s", what, flag, configured))
			}
		}
		note("confidence", o.Confidence != 0 && o.Confidence != a.Confidence, fmt.Sprint(o.Confidence), fmt.Sprint(a.Confidence))
		note("delta", o.Delta != 0 && o.Delta != a.Delta, fmt.Sprint(o.Delta), fmt.Sprint(a.Delta))
		note("threshold method", o.Method != "" && a.Method != "" && string(o.Method) != a.Method, string(o.Method), a.Method)
		note("what the claim is about", o.ClaimAbout != "" && o.ClaimAbout != cmp.Or(a.ClaimAbout, spec.ClaimAboutModels), o.ClaimAbout, cmp.Or(a.ClaimAbout, spec.ClaimAboutModels))
		if o.Claim.Mu > 0 || o.Claim.Epsilon > 0 {
			switch {
			case a.ClaimMu > 0 && a.ClaimMu != o.Claim.Mu:
				note("claim", true, claimLabel(o.Claim), fmt.Sprintf("claim_mu %g", a.ClaimMu))
			case a.ClaimEpsilon > 0 && a.ClaimEpsilon != o.Claim.Epsilon:
				note("claim", true, claimLabel(o.Claim), fmt.Sprintf("claim_epsilon %g", a.ClaimEpsilon))
			}
		}
	}
	a.FillDefaults()
	o.Confidence = cmp.Or(o.Confidence, a.Confidence)
	o.Delta = cmp.Or(o.Delta, a.Delta)
	o.Method = cmp.Or(o.Method, audit.ThresholdMethod(a.Method))
	o.Seed = cmp.Or(o.Seed, seed)
	o.ClaimAbout = cmp.Or(o.ClaimAbout, a.ClaimAbout)
	if o.Claim.Mu == 0 && o.Claim.Epsilon == 0 && (a.ClaimMu > 0 || a.ClaimEpsilon > 0) {
		o.Claim = audit.Claim{Mu: a.ClaimMu}
		if a.ClaimEpsilon > 0 {
			// At the delta the configuration states it at, whatever --delta says: epsilon at
			// another delta is another claim, which the deployment never made.
			o.Claim = audit.Claim{Epsilon: a.ClaimEpsilon, Delta: configClaimDelta(a)}
		}
		o.ClaimSource = "config claim"
	}
	if o.Claim.Epsilon > 0 && o.Claim.Delta == 0 {
		// --claim-eps without --delta: at the delta of the configuration's claim (restating
		// it must not move it to the delta of eps_lower a recorded --delta set), else at delta.
		o.Claim.Delta = o.Delta
		if cfg != nil {
			o.Claim.Delta = configClaimDelta(cfg.Audit)
		}
	}
	if o.Claim.Epsilon > 0 && o.Claim.Delta != o.Delta {
		// Options are resolved more than once (a directory's analysis, then AnalyzeAll): once.
		note := fmt.Sprintf("claim: epsilon %g is judged at delta %g, the delta it is stated at; eps_lower is given at delta %g", o.Claim.Epsilon, o.Claim.Delta, o.Delta)
		if !slices.Contains(o.Notes, note) {
			o.Notes = append(o.Notes, note)
		}
	}
	return o
}

// heuristicDelta is the delta of the last-iterate heuristic's epsilon: the claim's when the
// claim is an epsilon, since the verdicts table sets the certified eps at that delta over it
// (lower / heuristic), else the analysis's.
func (o AnalyzeOptions) heuristicDelta() float64 {
	if o.Claim.Epsilon > 0 && o.Claim.Delta > 0 {
		return o.Claim.Delta
	}
	return o.Delta
}

// configClaimDelta is the delta a configuration's claim_epsilon is stated at.
func configClaimDelta(a spec.AuditConfig) float64 {
	a.FillDefaults()
	return cmp.Or(a.ClaimDelta, a.Delta)
}

func claimLabel(c audit.Claim) string {
	if c.Epsilon > 0 {
		return fmt.Sprintf("epsilon %g", c.Epsilon)
	}
	return fmt.Sprintf("mu %g", c.Mu)
}

// finiteOr returns x, or def when x is NaN or infinite.
func finiteOr(x, def float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return def
	}
	return x
}

// checksFailed makes a consistent headline inconclusive (exit status 4) where a grey-box check
// failed: the runs show a mechanism other than the declared one (no clipping, noise off its
// scale), so that no certified bound exceeds the claim says nothing of whether the deployment
// meets it, and a pipeline gating on `audit run` or `audit report` passed such a deployment
// under a CONSISTENT headline, the failure a note beside it. A violated headline stays: its
// bounds hold whatever mechanism ran.
func checksFailed(h *findings.Headline, failed string) {
	if failed == "" || h.Status != findings.StatusConsistent {
		return
	}
	rows := h.Text
	h.Status, h.Claim, h.Tightness = findings.StatusInconclusive, "", nil
	h.Text = "INCONCLUSIVE: " + failed + " (docs/check.md says what each check means)."
	h.Notes = append([]string{"what the rows say of the mechanism that ran: " + rows}, h.Notes...)
}

// uncovered handles a stated claim that no row speaks of: a claim about the uploads where no
// uploads attack was scored (or about the models where only uploads attacks were), so every row
// was judged against its theory bound. The headline then says nothing of the claim, and a
// pipeline that gates on the exit status would read a consistent headline as the claim's
// pass: it becomes inconclusive (exit status 4), with what the rows said in a note. A
// violated theory bound stays the headline: the mechanism breaks its own proof, whatever was
// claimed.
func uncovered(h *findings.Headline, fs []findings.Finding, o AnalyzeOptions) {
	if o.Claim.Mu == 0 && o.Claim.Epsilon == 0 || len(fs) == 0 {
		return
	}
	for i := range fs {
		if spec.ClaimCovers(o.ClaimAbout, fs[i].Threat) {
			return
		}
	}
	what := fmt.Sprintf("the %s (%s, about the %s) was judged on no row: no attack of that threat model was scored",
		cmp.Or(o.ClaimSource, "config claim"), claimLabel(o.Claim), cmp.Or(o.ClaimAbout, spec.ClaimAboutModels))
	if h.Status == findings.StatusViolated {
		h.Notes = append(h.Notes, what+", so every row is judged against its theory bound")
		return
	}
	rows := h.Text
	h.Status, h.Claim, h.Tightness = findings.StatusInconclusive, "", nil
	h.Text = fmt.Sprintf("INCONCLUSIVE: %s: no verdict on it is given. Score an attack of that threat model (audit.attacks), or state the claim about the threat the attacks observe (audit.claim_about, --claim-about).", what)
	h.Notes = append([]string{"what the rows say against their theory bounds: " + rows}, h.Notes...)
}
