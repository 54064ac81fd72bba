package tables

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/audit/calibrate"
	"github.com/fedaudit/fedaudit/internal/numfmt"
)

// SelfTest writes the coverage table of `audit selftest` and its PASS or FAIL line.
func SelfTest(w io.Writer, rep *calibrate.SelfTestReport) {
	fmt.Fprintf(w, "Coverage of the certified bounds on mechanisms whose truth is known: Gaussian N(mu,1) vs N(0,1) and Laplace(s,1) vs Laplace(0,1)\n")
	fmt.Fprintf(w, "(pairs: %d scores per world; one-run: %d canaries per run, each included with probability 1/2), %d repetitions, seed %d, confidence %g\n\n",
		rep.N, rep.N, rep.Reps, rep.Seed, rep.Confidence)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "method\tmechanism\ttruth\tcoverage\tmisses\tmax misses\tmean bound\ttightness\t\n")
	family := 0
	for _, r := range rep.Rows {
		truth := fmt.Sprintf("mu %.4g", r.Mu)
		if r.Quantity == "eps" {
			truth = fmt.Sprintf("eps %.4g (delta %g)", r.Epsilon, r.Delta)
		}
		if r.Family > 0 {
			truth, family = fmt.Sprintf("family of %d", r.Family), r.Family
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%d\t%d\t%.4f\t%.3f\t\n",
			r.Method, r.Mechanism, truth, r.Coverage, r.Misses, r.MaxMisses, r.MeanLower, r.Tightness)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nLaplace rows hold the bound against the mechanism's GDP-equivalent mu (eps: its exact s at delta 0). One-run rows: f-DP mu (Mahloujifar et al.) and eps (Steinke et al.) from the default grid of guesses, each at half the error level so that they hold together, as the one-run rows of audit run and analyze.\n")
	if family > 0 {
		fmt.Fprintf(w, "Family rows: %d mechanisms (mu cycling through the list) audited together, each bound at confidence %s (Bonferroni over the rows, as `audit analyze` certifies its rows); a repetition misses when any of them exceeds its true mu. Their mean bound and tightness are those of the largest mu.\n",
			family, numfmt.LowerConfidence(audit.FamilyRowConfidence(rep.Confidence, family), 'g', 4))
	}
	fmt.Fprintf(w, "pairs-sequential rows: audit run --sequential on %d pairs in 8 batches (looks at 1, 2, 4 and 8), each look at its share of the error level (docs/statistics.md); a repetition misses when any look certifies above the true mu.\n", rep.N)
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\n%s: %s\n", verdict, rep.Rule)
}
