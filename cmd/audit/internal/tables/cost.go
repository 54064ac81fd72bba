package tables

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/audit/calibrate"
	"github.com/fedaudit/fedaudit/experiment/cost"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/internal/numfmt"
)

// Cost writes the simulated cost table of `audit cost --mu` (and of `audit plan` at each mu it
// knows): per audit method the trainings a certified bound of o.Fraction x mu needs.
func Cost(w io.Writer, o calibrate.CostOptions, rows []calibrate.CostRow) {
	fmt.Fprintf(w, "Trainings needed for a certified bound of %g x mu = %.4g (confidence %s), on the Gaussian mechanism with mu = %.4g\n",
		o.Fraction, o.Fraction*o.Mu, numfmt.LowerConfidence(o.Confidence, 'g', 6), o.Mu)
	fmt.Fprintf(w, "(the first size at which at least %g of %d simulated audits reach the target: pairs from 50 in steps of 1.5 and 4/3,\ncanaries doubling from 100; reached: the share that did there; exact for the quadratic instance, a best case for other models)\n\n", cmp.Or(o.Power, calibrate.DefaultPower), o.Reps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "method\ttrainings\tcanaries/run\ttarget\treached\tmedian\tnote\n")
	for _, r := range rows {
		trainings := fmt.Sprint(r.Trainings)
		if !r.Reached {
			trainings = "not reached"
		}
		canaries := "-"
		if r.Canaries > 0 {
			canaries = fmt.Sprint(r.Canaries)
		}
		// The median of an odd number of audits is one audit's certified bound: rounded down,
		// as every certified bound is printed (numfmt).
		median := numfmt.LowerF(r.Median, 3)
		if r.MedianRelError > 0 {
			median = fmt.Sprintf("%s (error %.1f%%)", median, 100*r.MedianRelError)
		}
		reached := "-"
		if r.MedianRelError == 0 {
			reached = fmt.Sprintf("%.2f", r.Power)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%s\t%s\t%s\n", r.Method, trainings, canaries, r.Target, reached, median, r.Note)
	}
	tw.Flush()
	// audit plan prints this table too, and has no flags of these limits.
	fmt.Fprintf(w, "\nA row not reached reports the share and the median at the largest size tried (%d pairs, %d canaries a run; `audit cost --max-pairs N --max-canaries N` tries larger).\n", o.MaxPairs, o.MaxCanaries)
}

// Measured writes the measured cost of one-run audits of `audit cost --config`: per canary
// count, attack and round the medians over the seeds beside the truth.
func Measured(w io.Writer, cfg *spec.Config, res []cost.OneRunCost) {
	fmt.Fprintf(w, "One-run audits of %s measured on real trainings (one run each, %s canaries, %d seeds per count):\n", cfg.Name, cfg.Train.Canaries.Kind, res[0].Seeds)
	fmt.Fprintf(w, "medians of the certified bounds (confidence %g jointly over each audit's rows)\n\n", cfg.Audit.Confidence)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "canaries\tattack\tthreat\tT\tmu_lower\teps_lower\ttruth\tshare\tabove truth\tone-shot mu (estimate)\n")
	for _, m := range res {
		for _, r := range m.Rows {
			truth, share, above := "-", "-", "-"
			if !math.IsNaN(r.Truth) {
				truth = fmt.Sprintf("%.3f %s", r.Truth, r.TruthKind)
				share = numfmt.LowerF(r.MuLower/r.Truth, 2)
			}
			if r.TruthKind == "exact" {
				above = fmt.Sprintf("%d of %d", r.Misses, m.Seeds)
			}
			est := "-"
			if !math.IsNaN(r.EstimateMu) {
				est = fmt.Sprintf("%.3f", r.EstimateMu)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Canaries, r.Attack, r.Threat, r.Round, numfmt.LowerF(r.MuLower, 3), numfmt.LowerF(r.EpsLower, 3), truth, share, above, est)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntruth: the exact mu of the canaries (the largest, what the one-run test is about) where the instance has one; else\n"+
		"the realized mu of the informed adversary on the target sample, an observer of every iterate, as a yardstick.\n")
}
