package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/numfmt"
)

// WriteAnalysis prints an analysis as a person reads it in a terminal: the headline first, its
// notes, then one table row per (attack, threat, T), and a line on how the bounds were
// certified.
func WriteAnalysis(w io.Writer, a *findings.Analysis) error {
	fmt.Fprintf(w, "%s\n", a.Headline.Text)
	for _, n := range a.Headline.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
	if err := WriteTable(w, a.Findings); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", methodLine(a))
	return nil
}

// splitOneRun separates the rows of coupled pairs from the one-run rows.
func splitOneRun(fs []findings.Finding) (pairs, oneRun []findings.Finding) {
	for _, f := range fs {
		if f.OneRun() {
			oneRun = append(oneRun, f)
		} else {
			pairs = append(pairs, f)
		}
	}
	return pairs, oneRun
}

// methodLine says how the table's bounds were certified: the method per row kind, the family
// and each row's level.
func methodLine(a *findings.Analysis) string {
	var methods []string
	pairs, oneRun := splitOneRun(a.Findings)
	for _, f := range pairs {
		m := string(f.Result.Method)
		switch {
		case f.Result.Paired:
			m += " (paired scores)"
		case len(f.Unpaired) > 0:
			m += " (coupled scores, incomplete pairs)"
		}
		if f.Result.Method == audit.Split {
			m += fmt.Sprintf(" (split seed %d)", f.Seed)
		}
		if !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	fam := a.Family
	joint := fmt.Sprintf("at %s confidence", findings.Percent(fam.Confidence))
	if fam.Rows > 1 {
		joint = fmt.Sprintf("at %s confidence jointly over %d rows (Bonferroni: each row at %s)", findings.Percent(fam.Confidence), fam.Rows, findings.Percent(fam.RowConfidence))
	}
	var lines []string
	if len(pairs) > 0 {
		line := fmt.Sprintf("mu_lower: certified %s with %s thresholds; mu_est: a point estimate, not a bound.", joint, strings.Join(methods, ", "))
		for i := range pairs {
			if c, ok := pairs[i].EpsilonCheck(); ok {
				line += fmt.Sprintf(" eps_lower: certified likewise, at the claim's delta %g: the number an epsilon claim is judged on.", c.Delta)
				break
			}
		}
		lines = append(lines, line)
	}
	if len(oneRun) > 0 {
		lines = append(lines, fmt.Sprintf("one-run rows: mu_lower (f-DP, Mahloujifar et al.) and eps_lower (Steinke et al., at delta %g) are CERTIFIED %s from the canaries of the world-C runs; "+
			"mu_est (from the AUC) and oneshot_mu, oneshot_eps (one-shot, Andrew et al.) are ESTIMATES, not bounds, and never decide a verdict.", oneRun[0].Result.Delta, joint))
	}
	if slices.ContainsFunc(a.Findings, func(f findings.Finding) bool { return !f.RoundGiven() }) {
		lines = append(lines, "T -: the scores give no round (a score file or outputs table without a round column puts its rows at round 0; fedaudit's attacks score rounds from 1, w_0 being the same in both worlds).")
	}
	return strings.Join(lines, "\n")
}

// roundCell is a row's T in a table: "-" where the scores gave no round
// (findings.Finding.RoundGiven).
func roundCell(f *findings.Finding) string {
	if !f.RoundGiven() {
		return "-"
	}
	return strconv.Itoa(f.Round)
}

// verdictText is a row's verdict as the terminal table prints it. A row judged against an
// estimate says so instead of "violated", and a row whose scores look reversed is marked.
func verdictText(f *findings.Finding) string {
	if f.Verdict == nil {
		return "-"
	}
	v := string(f.Verdict.Status)
	if f.ClaimKind == findings.ClaimEstimate && f.Verdict.Status == audit.Violated {
		v = "exceeds estimate"
	}
	if t := f.Verdict.Tightness; !math.IsNaN(t) && !math.IsInf(t, 0) {
		v += fmt.Sprintf(" (%s of %s)", numfmt.LowerShare(t), f.ClaimSource)
	}
	if f.Reversed() && !math.IsInf(f.ReversedMuLower, 0) {
		v += " [reversed scores?]"
	}
	return v
}

// WriteTable prints findings as the one table a person reads: attack, threat, T, AUC, TPR at
// 1% FPR, the certified mu lower bound, the point estimate, the exact mu where the instance has
// one, the two theoretical bounds and the verdict.
func WriteTable(w io.Writer, fs []findings.Finding) error {
	pairs, oneRun := splitOneRun(fs)
	if len(pairs) > 0 || len(oneRun) == 0 {
		if err := writePairTable(w, pairs); err != nil {
			return err
		}
	}
	if len(oneRun) == 0 {
		return nil
	}
	if len(pairs) > 0 {
		fmt.Fprintln(w)
	}
	return writeOneRunTable(w, oneRun)
}

// writeOneRunTable prints the one-run rows: the runs and canaries they pool, the certified mu
// and eps, the estimates beside them, the exact mu where known and the verdict.
func writeOneRunTable(w io.Writer, fs []findings.Finding) error {
	exact := false
	for i := range fs {
		exact = exact || isFinite(fs[i].ExactMu)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "one-run\tthreat\tT\truns\tcanaries\tincluded\tAUC\tmu_lower\teps_lower\tmu_est\toneshot_mu\toneshot_eps\t"
	if exact {
		header += "exact\t"
	}
	io.WriteString(tw, header+"verdict\t\n")
	for i := range fs {
		f, r := &fs[i], fs[i].Result
		est := audit.OneShotEstimate{Mu: math.NaN(), Epsilon: math.NaN()}
		if f.Estimate != nil {
			est = *f.Estimate
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%.4f\t%s\t%s\t",
			f.Attack, f.Threat, roundCell(f), f.Runs, r.N0+r.N1, r.N0, offTheEnds(r.AUC, 'f', 4), numfmt.LowerF(r.MuLower, 4), numfmt.LowerF(r.EpsLower, 4), r.MuEstimate, orDash(est.Mu), orDash(est.Epsilon))
		if exact {
			fmt.Fprintf(tw, "%s\t", orDash(f.ExactMu))
		}
		fmt.Fprintf(tw, "%s\t\n", verdictText(f))
	}
	return tw.Flush()
}

// writePairTable prints the rows of coupled pairs. When some row judged an epsilon claim, an
// eps_lower column beside mu_lower shows the number each verdict compared (ComparedEpsLower).
func writePairTable(w io.Writer, fs []findings.Finding) error {
	exact, uploads, eps, heuristic := false, false, false, false
	for i := range fs {
		exact = exact || isFinite(fs[i].ExactMu)
		uploads = uploads || isFinite(fs[i].MuUploads())
		eps = eps || epsilonJudged(&fs[i])
		heuristic = heuristic || heuristicCell(&fs[i], orDash) != "-"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "attack\tthreat\tT\tn0\tn1\tAUC\tTPR@1pctFPR\tmu_lower\t"
	if eps {
		header += "eps_lower\t"
	}
	header += "mu_est\t"
	if exact {
		header += "exact\t"
	}
	header += "convergent\tcomposition\t"
	if heuristic {
		header += "heuristic\t"
	}
	if uploads {
		header += "uploads\t"
	}
	io.WriteString(tw, header+"verdict\t\n")
	for i := range fs {
		f, r := &fs[i], fs[i].Result
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t",
			f.Attack, f.Threat, roundCell(f), r.N0, r.N1, offTheEnds(r.AUC, 'f', 4), offTheEnds(r.TPRAt1e2, 'f', 4), numfmt.LowerF(r.MuLower, 4))
		if eps {
			fmt.Fprintf(tw, "%s\t", numfmt.LowerF(ComparedEpsLower(f), 4))
		}
		fmt.Fprintf(tw, "%.4f\t", r.MuEstimate)
		if exact {
			fmt.Fprintf(tw, "%s\t", orDash(f.ExactMu))
		}
		convergent, composition := math.NaN(), math.NaN()
		if f.Theory != nil {
			convergent, composition = f.Theory.Mu, f.Theory.MuComposition
		}
		fmt.Fprintf(tw, "%s\t%s\t", orDash(convergent), orDash(composition))
		if heuristic {
			fmt.Fprintf(tw, "%s\t", heuristicCell(f, orDash))
		}
		if uploads {
			fmt.Fprintf(tw, "%s\t", orDash(f.MuUploads()))
		}
		fmt.Fprintf(tw, "%s\t\n", verdictText(f))
	}
	return tw.Flush()
}

func epsilonJudged(f *findings.Finding) bool { _, ok := f.EpsilonCheck(); return ok }

// ComparedEpsLower is the certified eps lower bound a row's verdict compared with its claimed
// epsilon (at the claim's delta), or the row's eps_lower at the analysis's delta when it judged
// no epsilon.
func ComparedEpsLower(f *findings.Finding) float64 {
	if c, ok := f.EpsilonCheck(); ok {
		return c.Lower
	}
	return f.Result.EpsLower
}

// heuristicCell is a final-model row's last-iterate heuristic written by format: its mu, or
// "eps X" on DP-FedAvg rows, whose heuristic is an epsilon at the row's delta; "-" where
// unknown.
func heuristicCell(f *findings.Finding, format func(float64) string) string {
	if h := f.MuHeuristic(); isFinite(h) {
		return format(h)
	}
	if h := f.EpsHeuristic; h > 0 && isFinite(h) {
		return "eps " + format(h)
	}
	return "-"
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// orDash formats x with four significant digits, or "-" when it is not a finite number.
func orDash(x float64) string {
	if !isFinite(x) {
		return "-"
	}
	return fmt.Sprintf("%.4g", x)
}
