package experiment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/headline"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/theory"
)

// oneRunOnly reports whether the configured method leaves the coupled pairs out.
func (o AnalyzeOptions) oneRunOnly() bool { return string(o.Method) == spec.MethodOneRun }

// canaryScoring resolves the canary attacks to score: those the attack list names (options',
// else the config's), else every canary attack the run files support; and the rounds.
func (e *experimentDir) canaryScoring(opts AttackOptions) (names []string, rounds []int) {
	if e.tab.Meta().Canaries == 0 {
		return nil, nil
	}
	listed := opts.Attacks
	if len(listed) == 0 {
		listed = e.cfg.Audit.Attacks
	}
	for _, n := range listed {
		if attacks.IsCanaryAttack(n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		names = attacks.CanaryDefault(e.tab.Meta())
	}
	rounds = opts.Rounds
	if len(rounds) == 0 {
		rounds = e.cfg.Audit.Rounds
	}
	return names, rounds
}

// canaryScores reads the directory's canary score file, scoring the canaries into it first when
// it is missing, damaged or scored for other attacks or rounds. It returns nil when the runs
// carry no canaries.
func (e *experimentDir) canaryScores(ctx context.Context, opts AttackOptions) (*runs.CanaryScoreFile, error) {
	names, rounds := e.canaryScoring(opts)
	if len(names) == 0 {
		return nil, nil
	}
	path := expdir.Dir(e.dir).CanaryScores()
	why := ""
	if _, err := os.Stat(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else if err == nil {
		cf, err := runs.ReadCanaryScores(path)
		switch {
		case rescorable(err):
			why = err.Error()
		case err != nil:
			return nil, err
		default:
			why = scoredOtherRuns(cf.Meta.Config, cf.Meta.DatasetHash, e.tab, e.cfg)
			if why == "" {
				why = scoringDiffers(cf.Meta.Config, names, rounds, e.cfg.Audit.InvgradPairs, e.cfg.Audit.InvgradIterations)
			}
			if why == "" {
				why = scoresCoverRuns(cf.Scores, func(s runs.CanaryScore) int64 { return s.PairID }, e.tab, e.cfg.Pairs, 1)
			}
			if why == "" {
				return cf, nil
			}
		}
	}
	if err := e.writableScores(path, why); err != nil {
		return nil, err
	}
	if why != "" && opts.Logf != nil {
		opts.Logf("attack: %s is stale (%s); scoring again", path, why)
	}
	if opts.Logf != nil {
		opts.Logf("attacks: scoring the canaries with %v", names)
	}
	scores, err := attacks.ScoreCanaries(ctx, e.tab, names, rounds)
	if err != nil {
		return nil, err
	}
	scored := *e.cfg
	scored.Audit.Attacks, scored.Audit.Rounds = names, rounds
	meta := e.tab.Meta()
	meta.Config = scored.JSON()
	if err := attacks.WriteCanaryScores(path, meta, meta.ToolVersion, scores); err != nil {
		return nil, err
	}
	return runs.ReadCanaryScores(path)
}

// canaryGroup is the canaries of one (attack, threat, round) in the world-C runs: one score and
// inclusion bit per canary of each run, in (run, canary) order.
type canaryGroup struct {
	attack, threat string
	round          int
	scores         []float64
	included       []bool
	runs           int
}

// groupCanaryScores splits canary scores by (attack, threat, round), keeping the runs of world
// C: the two runs of a pair carry the same canaries and share their noise, so only one of them
// is an independent run. A (run, canary) scored twice in one group is an error.
func groupCanaryScores(scores []runs.CanaryScore) ([]*canaryGroup, error) {
	type key struct {
		attack, threat string
		round          int32
	}
	type entry struct {
		run    int64
		canary int32
		score  float64
		in     bool
	}
	byKey := map[key][]entry{}
	var keys []key
	for _, s := range scores {
		if s.World != runs.WorldC {
			continue
		}
		k := key{s.Attack, s.Threat, s.Round}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], entry{s.RunID, s.Canary, s.Score, s.Included})
	}
	var out []*canaryGroup
	for _, k := range keys {
		es := byKey[k]
		slices.SortFunc(es, func(a, b entry) int { return cmp.Or(cmp.Compare(a.run, b.run), cmp.Compare(a.canary, b.canary)) })
		g := &canaryGroup{attack: k.attack, threat: k.threat, round: int(k.round)}
		for i, e := range es {
			if i > 0 && e.run == es[i-1].run && e.canary == es[i-1].canary {
				return nil, fmt.Errorf("analyze: attack %q round %d: canary %d of run %d scored twice", k.attack, k.round, e.canary, e.run)
			}
			if i == 0 || e.run != es[i-1].run {
				g.runs++
			}
			g.scores = append(g.scores, e.score)
			g.included = append(g.included, e.in)
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *canaryGroup) int {
		return cmp.Or(cmp.Compare(a.attack, b.attack), cmp.Compare(a.threat, b.threat), cmp.Compare(a.round, b.round))
	})
	return out, nil
}

// oneShotAttacks are the direction canaries' attacks, beside whose certified bounds the one-shot
// estimate of Andrew et al. is reported: a Gaussian fitted to the statistic of the included and
// of the excluded canaries. canary-cos and canary-cos-max are the paper's statistics for the
// final model and for every iterate; canary-llr is ours (for q = 1 it is a sum of Gaussian
// projections, so the Gaussian fit is exact there, where the largest cosine over the rounds
// keeps only one round).
var oneShotAttacks = []string{attacks.CanaryCos, attacks.CanaryCosMax, attacks.CanaryLLR}

// oneRunFinding audits one canary group at the row confidence: certified mu and eps (at the
// claim's delta when an epsilon is claimed, so that the verdict and the row agree; else at the
// audit's delta) from audit.OneRunAnalyze, the AUC of included against excluded canaries, and
// for the one-shot statistics the one-shot estimate.
func oneRunFinding(g *canaryGroup, opts AnalyzeOptions, rowConfidence float64) (findings.Finding, error) {
	name := fmt.Sprintf("attack %q threat %q round %d", g.attack, g.threat, g.round)
	delta := opts.Delta
	if opts.Claim.Epsilon > 0 && opts.Claim.Delta > 0 {
		delta = opts.Claim.Delta
	}
	res, err := audit.OneRunAnalyze(g.scores, g.included, nil, delta, rowConfidence)
	if err != nil {
		return findings.Finding{}, fmt.Errorf("analyze: %s: %w", name, err)
	}
	f := findings.Finding{Attack: g.attack, Threat: g.threat, Round: g.round, Result: res, ExactMu: math.NaN(),
		ReversedMuLower: math.NaN(), Runs: g.runs}
	if slices.Contains(oneShotAttacks, g.attack) {
		var in, out []float64
		for i, s := range g.scores {
			if g.included[i] {
				in = append(in, s)
			} else {
				out = append(out, s)
			}
		}
		if est, err := audit.OneShotEpsilon(out, in, opts.Delta); err == nil {
			f.Estimate = &est
		}
	}
	return f, nil
}

// AnalyzeAll audits the scores of coupled pairs (sf; nil or ignored with the one-run method)
// and the canary scores of runs with canaries (cf; nil without) as one family of rows: every
// row, pair row or one-run row, is certified at the family's row confidence, and each is
// judged against the claim, or the theory for its threat model. opts must be resolved.
func AnalyzeAll(ctx context.Context, sf *runs.ScoreFile, cf *runs.CanaryScoreFile, opts AnalyzeOptions, theory func(round int) *theory.Bound) (*findings.Analysis, error) {
	opts = opts.withDefaults(nil)
	var groups []*scoreGroup
	var means map[groupKey]map[string]float64
	if sf != nil && !opts.oneRunOnly() {
		if len(sf.Scores) == 0 {
			return nil, fmt.Errorf("analyze: no scores")
		}
		var err error
		if groups, err = groupScores(sf.Scores, sf.Coupled); err != nil {
			return nil, err
		}
		means = metricMeans(sf)
	}
	var canaries []*canaryGroup
	if cf != nil {
		var err error
		if canaries, err = groupCanaryScores(cf.Scores); err != nil {
			return nil, err
		}
	}
	rows := len(groups) + len(canaries)
	if opts.Logf != nil && sf != nil {
		opts.Logf("analyze: %d score rows, %d rows of the audit (attack, threat model, round) to certify", len(sf.Scores), rows)
	}
	switch {
	case rows == 0 && opts.oneRunOnly():
		return nil, fmt.Errorf("analyze: audit method %s needs canary scores (runs trained with train.canaries)", spec.MethodOneRun)
	case rows == 0:
		return nil, fmt.Errorf("analyze: no scores")
	}
	fam := findings.Family{Confidence: opts.Confidence, Rows: rows, Correction: "bonferroni over rows"}
	fam.RowConfidence = audit.FamilyRowConfidence(opts.Confidence, rows)
	if rows == 1 {
		fam.Correction = "none (one row)"
	}
	out, err := pairFindings(ctx, groups, means, sf, opts, fam)
	if err != nil {
		return nil, err
	}
	for _, g := range canaries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := oneRunFinding(g, opts, fam.RowConfidence)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	carryAllIterates(out)
	for i := range out {
		f := &out[i]
		if theory != nil {
			f.Theory = theory(f.Round)
		}
		if opts.Exact != nil && !f.OneRun() {
			f.ExactMu = opts.Exact(f.Threat, f.Round)
		}
		if opts.ExactOneRun != nil && f.OneRun() {
			f.ExactMu = opts.ExactOneRun(f.Threat, f.Round)
		}
		// One-run rows too: the DP-FedAvg family's direction canaries are canary clients with
		// client 0's sampling rate and clip norm, the heuristic's linear case.
		if opts.EpsHeuristic != nil && f.Threat == runs.ThreatFinal {
			f.EpsHeuristic = finiteOr(opts.EpsHeuristic(f.Round, f.OneRun()), 0)
		}
		claim, source, kind := opts.Claim, cmp.Or(opts.ClaimSource, "config claim"), findings.ClaimDeployment
		if opts.ClaimAbout == spec.ClaimAboutUploads {
			source += " on each upload"
		}
		if (claim.Mu == 0 && claim.Epsilon == 0) || !spec.ClaimCovers(opts.ClaimAbout, f.Threat) || (f.OneRun() && opts.OneRunUncovered != "") {
			claim, source, kind = theoryClaim(f.Threat, f.Theory, opts.Smoothness)
			if f.OneRun() && opts.OneRunTheoryUncovered != "" {
				claim, source, kind = audit.Claim{}, "", ""
			}
		}
		if proven, provenSource := provenBound(f.Threat, f.Theory); kind == findings.ClaimEstimate && proven > 0 && f.Result != nil && f.Result.MuLower > proven {
			// Above the estimate and above the bound that holds whatever L: a broken promise
			// of the mechanism, not a finding about the estimate.
			claim, source, kind = audit.Claim{Mu: proven}, provenSource, findings.ClaimTheory
		}
		if claim.Mu > 0 || claim.Epsilon > 0 {
			v := audit.Judge(f.Result, claim)
			f.Verdict, f.ClaimSource, f.ClaimKind = &v, source, kind
		}
	}
	a := &findings.Analysis{Findings: out, Family: fam}
	a.Headline = headline.Summarize(out, fam, opts.Notes)
	uncovered(&a.Headline, out, opts)
	headline.Diverged(&a.Headline, out, opts.Rounds)
	headline.Reversed(&a.Headline, out)
	checksFailed(&a.Headline, opts.ChecksFailed)
	return a, nil
}

// carryAllIterates makes the bounds of every all-iterates row monotone in T, per attack and
// kind of row: the observer of every iterate at T sees every iterate an earlier checkpoint T'
// saw, so a test at T' is a test at T and the mechanism's privacy loss at T is at least that
// at T'. On the event that every row's bound holds, which the family's Bonferroni correction
// guarantees at its confidence, the largest bound of the checkpoints up to T therefore holds at
// T too: the rows keep their family confidence and the verdicts are judged on the carried
// bounds. A row whose own checkpoint gives less keeps its own bounds in AtT. Attacks that look
// at the last round only (attacks.Window: informed-last) keep their own bounds: their rows show
// what that window certifies, which is not monotone in T.
func carryAllIterates(fs []findings.Finding) {
	type series struct {
		attack string
		oneRun bool
		threat string
	}
	rows := map[series][]int{}
	for i := range fs {
		f := &fs[i]
		if f.Threat != runs.ThreatAllIterates || f.Result == nil || attacks.Window(f.Attack) {
			continue
		}
		k := series{f.Attack, f.OneRun(), f.Threat}
		rows[k] = append(rows[k], i)
	}
	for _, idx := range rows {
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(fs[a].Round, fs[b].Round) })
		for n, i := range idx {
			r := fs[i].Result
			mu, eps := r.MuLower, r.EpsLower
			for _, j := range idx[:n] {
				if fs[j].Round < fs[i].Round {
					r.Imply(fs[j].Result)
				}
			}
			if r.MuLower != mu || r.EpsLower != eps {
				fs[i].AtT = &findings.Bounds{MuLower: mu, EpsLower: eps}
			}
		}
	}
}
