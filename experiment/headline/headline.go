package headline

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/numfmt"
)

// Summarize takes the verdict over every row of an analysis. Rows judged against an estimate
// never make it a violation: they become notes.
func Summarize(fs []findings.Finding, fam findings.Family, notes []string) findings.Headline {
	h := findings.Headline{Status: findings.StatusNoClaim, Confidence: fam.Confidence, Rows: fam.Rows, Notes: append([]string(nil), notes...)}
	var best *findings.Finding
	better := func(a, b *findings.Finding) bool { // a stronger than b
		if b == nil {
			return true
		}
		return cmp.Or(cmp.Compare(a.Verdict.Tightness, b.Verdict.Tightness), cmp.Compare(a.Result.MuLower, b.Result.MuLower)) > 0
	}
	for i := range fs {
		f := &fs[i]
		if f.Verdict == nil || f.Verdict.Status == audit.Invalid || f.ClaimKind == findings.ClaimEstimate {
			continue
		}
		violated := f.Verdict.Status == audit.Violated
		switch {
		case violated && h.Status != findings.StatusViolated:
			h.Status, best = findings.StatusViolated, f
		case violated == (h.Status == findings.StatusViolated) && better(f, best):
			best = f
		}
		if h.Status == findings.StatusNoClaim {
			h.Status = findings.StatusConsistent
		}
	}
	if best == nil {
		for i := range fs {
			if best == nil || fs[i].Result.MuLower > best.Result.MuLower {
				best = &fs[i]
			}
		}
	}
	level := fmt.Sprintf("%s confidence jointly over %d rows", findings.Percent(fam.Confidence), fam.Rows)
	if fam.Rows == 1 {
		level = fmt.Sprintf("%s confidence", findings.Percent(fam.Confidence))
	}
	if best != nil {
		h.Attack, h.Threat, h.Round = best.Attack, best.Threat, best.Round
		h.MuLower, h.EpsLower = best.Result.MuLower, best.Result.EpsLower
		row := rowName(best)
		switch h.Status {
		case findings.StatusViolated, findings.StatusConsistent:
			c := decisiveCheck(best.Verdict)
			h.Claim = claimWithSource(c, best.ClaimSource)
			t := c.Tightness
			h.Tightness = &t
			switch {
			case h.Status == findings.StatusViolated:
				h.Text = fmt.Sprintf("VIOLATED: %s certifies %s, above the %s (%s).",
					row, lowerText(c), claimWithSource(c, best.ClaimSource), level)
			case c.Lower <= 0:
				h.Text = fmt.Sprintf("CONSISTENT: no certified bound exceeds its claim (%s); no attack certifies any privacy loss (the %s).",
					level, claimWithSource(c, best.ClaimSource))
				// Rows judged against an estimate (the convergent bound after T = 1) are not
				// among those a verdict rests on, but they may certify a loss the sentence
				// above denied.
				if s := strongest(fs); s != nil && s.Result.MuLower > 0 {
					h.Text = fmt.Sprintf("CONSISTENT: no certified bound exceeds its claim (%s); no row judged against a claim certifies any privacy loss (the %s), and the strongest row, %s, judged against an estimate, certifies mu >= %s.",
						level, claimWithSource(c, best.ClaimSource), rowName(s), numfmt.LowerG(s.Result.MuLower, 4))
				}
			default:
				h.Text = fmt.Sprintf("CONSISTENT: no certified bound exceeds its claim (%s); the row nearest its claim, %s, certifies %s, %s of the %s.",
					level, row, lowerText(c), numfmt.LowerShare(c.Tightness), claimWithSource(c, best.ClaimSource))
				// Named only where it reads larger: at the printed digits a bound equal to the
				// nearest row's says nothing more.
				if l, v := largest(fs, c); l != nil && l != best && numfmt.LowerG(v.Lower, 4) != numfmt.LowerG(c.Lower, 4) {
					h.Text = strings.TrimSuffix(h.Text, ".") + fmt.Sprintf("; the largest, %s, certifies %s, %s of the %s.",
						rowName(l), lowerText(v), numfmt.LowerShare(v.Tightness), claimWithSource(v, l.ClaimSource))
				}
			}
		default:
			h.Text = fmt.Sprintf("NO CLAIM: nothing the deployment promises was judged; the strongest attack, %s, certifies mu >= %s (%s).",
				row, numfmt.LowerG(best.Result.MuLower, 4), level)
		}
		if e := best.ExactMu; e > 0 && !math.IsInf(e, 0) && best.Result.MuLower > 0 {
			// Where the mechanism's mu is known (the quadratic instance), how close the audit
			// came is the number a reader wants, not its share of a loose theory bound.
			h.Text = strings.TrimSuffix(h.Text, ".") + fmt.Sprintf("; that row's mu >= %s is %s of its exact mu = %.4g.",
				numfmt.LowerG(best.Result.MuLower, 4), numfmt.LowerShare(best.Result.MuLower/e), e)
		}
		ceil := ceilings{}
		if note := ceil.note(best, fs); note != "" {
			h.Notes = append(h.Notes, note)
		}
		if h.Status == findings.StatusConsistent {
			if note := ceil.powerNote(fs); note != "" {
				h.Notes = append(h.Notes, note)
			}
		}
	}
	for i := range fs {
		f := &fs[i]
		row := rowName(f)
		if f.Verdict != nil && f.ClaimKind == findings.ClaimEstimate && f.Verdict.Status == audit.Violated {
			c := decisiveCheck(f.Verdict)
			why := "the convergent bound is the paper's argument, not a proof for every smooth loss; with an assumed L, the constant may also be too small"
			if strings.Contains(f.ClaimSource, "composition") {
				why = "it bounds the other examples' drift by an L that is not certified, which may be too small"
			}
			h.Notes = append(h.Notes, fmt.Sprintf("%s certifies %s, above the %s: an estimate, not a claim of the deployment (%s).",
				row, lowerText(c), claimWithSource(c, f.ClaimSource), why))
		}
		if f.Reversed() {
			h.Notes = append(h.Notes, fmt.Sprintf("%s: AUC %.3f < 0.5; read the other way round its scores would give mu >= %s (a diagnostic, not certified: the direction was chosen after seeing the scores, outside the family's correction). The attack is worse than guessing in its stated direction (higher = world C): check the score direction. Its verdict says nothing about the claim.",
				row, f.Result.AUC, numfmt.LowerG(f.ReversedMuLower, 4)))
		}
		if len(f.Unpaired) > 0 {
			h.Notes = append(h.Notes, fmt.Sprintf("%s: %d coupled scores without a partner in the other world (%s); certified with %s, which does not need the pairing.",
				row, len(f.Unpaired), UnpairedText(f.Unpaired), f.Result.Method))
		}
	}
	return h
}

// ceilingNote says when the headline's row certifies the most its runs can (audit.MuCeiling):
// its scores told every run of one world from every run of the other, so its bound measures
// the number of runs rather than the mechanism, which may leak more. Other rows at their
// ceilings are counted. A reader who takes such a bound for a measurement of the deployment
// is misled, and the remedy (more pairs) is not otherwise visible.
func (ceil ceilings) note(best *findings.Finding, fs []findings.Finding) string {
	if !ceil.at(best) {
		return ""
	}
	r := best.Result
	runs := fmt.Sprintf("%d runs of each world", r.N0)
	if r.N0 != r.N1 {
		runs = fmt.Sprintf("%d runs of world C and %d of world C'", r.N0, r.N1)
	}
	others := 0
	for i := range fs {
		if &fs[i] != best && ceil.at(&fs[i]) {
			others++
		}
	}
	also := ""
	switch {
	case others == 1:
		also = "; so does 1 other row"
	case others > 1:
		also = fmt.Sprintf("; so do %d other rows", others)
	}
	return fmt.Sprintf("%s certifies the most that %s can at its confidence (mu >= %s: its scores tell every run of one world from every run of the other)%s. Such a bound measures the number of runs, not the mechanism, which may leak more: more pairs would certify more.",
		rowName(best), runs, numfmt.LowerG(r.MuLower, 4), also)
}

// powerNote says when no row judged against the deployment's claim could have certified more
// than the claim with its runs (each row's ceiling, audit.Ceiling, at its own confidence and
// the claim's quantity): the audit could not have found the claim violated whatever the
// deployment, so its CONSISTENT says nothing of the claim (one run of each world, or 200 pairs
// against a claim of mu 10, gave it with no word). Rows judged against the theory's bounds are
// checks of the theory, not of a promise, and are left out.
func (ceil ceilings) powerNote(fs []findings.Finding) string {
	var most float64
	var mostRow *findings.Finding
	var claim audit.Check
	judged := 0
	for i := range fs {
		f := &fs[i]
		if f.Verdict == nil || f.Verdict.Status == audit.Invalid || len(f.Verdict.Checks) == 0 ||
			(f.ClaimKind != "" && f.ClaimKind != findings.ClaimDeployment) {
			continue
		}
		c := decisiveCheck(f.Verdict)
		top, ok := ceil.row(f, c)
		if !ok || top > c.Claimed {
			return ""
		}
		judged++
		if mostRow == nil || top > most {
			most, mostRow, claim = top, f, c
		}
	}
	if judged == 0 {
		return ""
	}
	what := fmt.Sprintf("mu = %s", numfmt.LowerG(most, 4))
	if claim.Quantity == "epsilon" {
		what = fmt.Sprintf("epsilon = %s at delta = %g", numfmt.LowerG(most, 4), claim.Delta)
	}
	return fmt.Sprintf("no row judged against the claim could have certified more than %s with its runs (the ceiling of %s: what scores telling every run of one world from every run of the other certify), not above the claim %s: whatever the deployment, this audit could not have found the claim violated, and CONSISTENT says nothing of it. More pairs raise the ceiling.",
		what, rowName(mostRow), claimText(claim))
}

// ceilings holds the ceiling results (audit.Ceiling) of one headline by the options that make
// them: the rows of a family share their counts and level, and an all-iterates row carries
// every earlier checkpoint's result, so without it a family of many checkpoints analyzed the
// same separated scores a quadratic number of times.
type ceilings map[ceilingKey]*audit.Result

type ceilingKey struct {
	opts   audit.Options
	n0, n1 int
}

// of is the ceiling of r's counts and options; nil where there is none (one-run rows, an
// option Analyze refuses).
func (ceil ceilings) of(r *audit.Result) *audit.Result {
	if r.OneRun != nil {
		return nil
	}
	opts := audit.Options{Method: r.Method, Confidence: r.Confidence, Delta: r.Delta, Paired: r.Paired}
	key := ceilingKey{opts, r.N0, r.N1}
	if c, ok := ceil[key]; ok {
		return c
	}
	c, err := audit.Ceiling(r.N0, r.N1, opts)
	if err != nil {
		c = nil
	}
	ceil[key] = c
	return c
}

// row is the most a row can certify of the check's quantity with its runs at its own
// confidence (for an all-iterates row carrying earlier checkpoints' bounds, the largest of their
// ceilings); not known for one-run rows.
func (ceil ceilings) row(f *findings.Finding, c audit.Check) (float64, bool) {
	if f == nil || f.Result == nil {
		return 0, false
	}
	top := 0.0
	for _, r := range append([]*audit.Result{f.Result}, f.Result.Implied...) {
		cr := ceil.of(r)
		if cr == nil {
			return 0, false
		}
		v := cr.MuLower
		if c.Quantity == "epsilon" {
			v = cr.EpsLowerAt(c.Delta)
		}
		top = max(top, v)
	}
	return top, true
}

// at reports whether a pair row's certified mu is the most its runs can certify with its
// options. One-run rows have no such ceiling here.
func (ceil ceilings) at(f *findings.Finding) bool {
	if f == nil || f.Result == nil || !(f.Result.MuLower > 0) {
		return false
	}
	ceiling, ok := ceil.row(f, audit.Check{Quantity: "mu"})
	// The same computation on the same counts: equal to the last bits when the scores
	// separate; the relative slack only absorbs a carried bound's own rounding.
	return ok && f.Result.MuLower >= ceiling*(1-1e-12)
}

// rowName names a row as "attack (threat, T = t)", without an empty threat of foreign scores,
// and with "T unknown" where the scores gave no round (findings.Finding.RoundGiven: a score
// file or an outputs table without a round column, whose rows are at round 0; "T = 0" would
// read as before training).
func rowName(f *findings.Finding) string {
	t := fmt.Sprintf("T = %d", f.Round)
	if !f.RoundGiven() {
		t = "T unknown"
	}
	if f.Threat == "" {
		return fmt.Sprintf("%s (%s)", f.Attack, t)
	}
	return fmt.Sprintf("%s (%s, %s)", f.Attack, f.Threat, t)
}

// decisiveCheck is the check of a verdict that decides it: a violated one, else the tightest.
func decisiveCheck(v *audit.Verdict) audit.Check {
	best := v.Checks[0]
	for _, c := range v.Checks[1:] {
		if (c.Violated && !best.Violated) || (c.Violated == best.Violated && c.Tightness > best.Tightness) {
			best = c
		}
	}
	return best
}

func claimText(c audit.Check) string {
	if c.Quantity == "epsilon" {
		return fmt.Sprintf("epsilon = %.4g at delta = %g", c.Claimed, c.Delta)
	}
	return fmt.Sprintf("mu = %.4g", c.Claimed)
}

func claimWithSource(c audit.Check, source string) string {
	if strings.HasPrefix(source, "accountant:") {
		source = "accountant's claim"
	}
	return fmt.Sprintf("%s %s", source, claimText(c))
}

func lowerText(c audit.Check) string {
	if c.Quantity == "epsilon" {
		return fmt.Sprintf("epsilon >= %s at delta = %g", numfmt.LowerG(c.Lower, 4), c.Delta)
	}
	return fmt.Sprintf("mu >= %s", numfmt.LowerG(c.Lower, 4))
}

// Diverged puts the training's divergence into the headline: a diverged run keeps its last
// finite parameters, so the attacks on it audit a stalled model, not the mechanism the claim is
// about. Where more than half of the runs of some audited checkpoint diverged the headline is
// inconclusive whatever the rows say (they are kept in a note); where fewer did, a note names
// them beside the verdict. rounds are the training's per-round summaries (rounds.json).
func Diverged(h *findings.Headline, fs []findings.Finding, rounds []findings.RoundSummary) {
	audited := map[int]bool{}
	for _, f := range fs {
		audited[f.Round] = true
	}
	var worst *findings.RoundSummary
	for i := range rounds {
		r := &rounds[i]
		if !audited[r.Round] || r.Diverged == 0 || r.Runs == 0 {
			continue
		}
		if worst == nil || r.Diverged*worst.Runs > worst.Diverged*r.Runs ||
			(r.Diverged*worst.Runs == worst.Diverged*r.Runs && r.Round < worst.Round) {
			worst = r
		}
	}
	if worst == nil {
		return
	}
	what := fmt.Sprintf("training diverged in %d of %d runs by T = %d (rounds.json \"diverged\")", worst.Diverged, worst.Runs, worst.Round)
	const why = "A diverged run keeps its last finite parameters, so the attacks on it audit a stalled model, not the mechanism the claim is about"
	if 2*worst.Diverged <= worst.Runs {
		h.Notes = append([]string{fmt.Sprintf("%s. %s; the verdict rests on every run's scores, those included.", what, why)}, h.Notes...)
		return
	}
	rows := h.Text
	h.Status, h.Claim, h.Tightness = findings.StatusInconclusive, "", nil
	h.Text = fmt.Sprintf("INCONCLUSIVE: %s. %s: no verdict is given. Lower the learning rate (or the clip norm) until the runs converge, and audit again.", what, why)
	h.Notes = append([]string{"what the rows say of the diverged runs, not of the mechanism: " + rows}, h.Notes...)
}

// Reversed makes a consistent headline inconclusive where the scores read the wrong way round
// (higher meaning world C', the commonest slip of scores written by other tools: a loss given as
// the score) speak against the verdict: when every row judged against a claim or a proven bound
// is reversed, so that no row audits the claim in its stated direction, or when a judged row,
// read the other way, would give a mu above its mu claim or an epsilon above its epsilon claim
// (Finding.ReversedEpsLower, at the claim's delta). A CI pipeline gating on the exit status
// passed such scores under CONSISTENT, the direction a note beside it. A violated headline
// stays: its bounds hold in the direction stated. Reversed bounds are diagnostics (the
// direction is chosen after seeing the scores), so the answer is no verdict, not a violation.
func Reversed(h *findings.Headline, fs []findings.Finding) {
	if h.Status != findings.StatusConsistent {
		return
	}
	judged, reversed := 0, 0
	var why string
	var only *findings.Finding
	for i := range fs {
		f := &fs[i]
		if f.Verdict == nil || f.Verdict.Status == audit.Invalid || f.ClaimKind == findings.ClaimEstimate {
			continue
		}
		judged++
		if !f.Reversed() {
			continue
		}
		reversed, only = reversed+1, f
		for _, c := range f.Verdict.Checks {
			lower, text := f.ReversedMuLower, "mu >= %s"
			if c.Quantity == "epsilon" {
				lower, text = f.ReversedEpsLower, "epsilon >= %s at delta = "+fmt.Sprint(c.Delta)
			}
			if why == "" && lower > c.Claimed {
				why = fmt.Sprintf("the scores of %s read the other way round (AUC %.3f < 0.5) would give "+text+", above the %s",
					rowName(f), f.Result.AUC, numfmt.LowerG(lower, 4), claimWithSource(c, f.ClaimSource))
			}
		}
	}
	if why == "" && (judged == 0 || reversed < judged) {
		return
	}
	switch {
	case why != "":
	case judged == 1:
		why = fmt.Sprintf("the only row judged against a claim, %s, scores worse than guessing in its stated direction (AUC %.3f < 0.5), so it does not audit the claim",
			rowName(only), only.Result.AUC)
	default:
		why = fmt.Sprintf("each of the %d rows judged against a claim scores worse than guessing in its stated direction (AUC < 0.5), so none audits the claim", judged)
	}
	rows := h.Text
	h.Status, h.Claim, h.Tightness = findings.StatusInconclusive, "", nil
	h.Text = fmt.Sprintf("INCONCLUSIVE: %s: no verdict is given. Check the direction of the scores (higher must mean world C: a loss is given negated) and audit again.", why)
	h.Notes = append([]string{"what the rows say in the stated direction: " + rows}, h.Notes...)
}

// largest is the judged row (against a claim or a proven bound) whose check of the quantity of
// c (mu, or epsilon at c's delta) certifies the most, with that check; nil when none certifies
// more than c. The headline names the row nearest its claim, which decides the verdict; where a
// later checkpoint certifies more against a larger bound, a reader looks for that number too.
func largest(fs []findings.Finding, c audit.Check) (*findings.Finding, audit.Check) {
	var l *findings.Finding
	var lc audit.Check
	for i := range fs {
		f := &fs[i]
		if f.Verdict == nil || f.Verdict.Status == audit.Invalid || f.ClaimKind == findings.ClaimEstimate {
			continue
		}
		for _, fc := range f.Verdict.Checks {
			if fc.Quantity == c.Quantity && fc.Delta == c.Delta && fc.Lower > c.Lower && (l == nil || fc.Lower > lc.Lower) {
				l, lc = f, fc
			}
		}
	}
	return l, lc
}

// strongest is the row of the largest certified mu, nil without rows.
func strongest(fs []findings.Finding) *findings.Finding {
	var s *findings.Finding
	for i := range fs {
		if fs[i].Result != nil && (s == nil || fs[i].Result.MuLower > s.Result.MuLower) {
			s = &fs[i]
		}
	}
	return s
}

// UnpairedText names at most eight unpaired pair ids.
func UnpairedText(ids []int64) string {
	const show = 8
	parts := make([]string, 0, show)
	for _, id := range ids[:min(len(ids), show)] {
		parts = append(parts, fmt.Sprint(id))
	}
	more := ""
	if len(ids) > show {
		more = fmt.Sprintf(", ... (%d in all)", len(ids))
	}
	return fmt.Sprintf("pair ids in only one world: %s%s", strings.Join(parts, ", "), more)
}
