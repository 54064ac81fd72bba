package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/audit"
)

func init() {
	register(&command{
		name:    "cost",
		summary: "how many trainings each audit method needs to certify a share of a known mu",
		usage:   "cost --mu X [--fraction 0.8] [--confidence 0.95] [--delta 1e-5] [--reps 21] [--max-pairs 102400] [--max-canaries 102400] [--seed 1] [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			var o audit.CostOptions
			fs.Float64Var(&o.Mu, "mu", 0, "the true Gaussian-DP mu (for the quadratic instance: its exact mu; otherwise the realized mu of the informed adversary)")
			fs.Float64Var(&o.Fraction, "fraction", 0.8, "share of mu the certified bound must reach")
			fs.Float64Var(&o.Confidence, "confidence", 0.95, "confidence of the certified bounds")
			fs.Float64Var(&o.Delta, "delta", 1e-5, "delta of the epsilon rows")
			fs.IntVar(&o.Reps, "reps", 21, "simulated audits per size (the median must reach the target)")
			fs.IntVar(&o.MaxPairs, "max-pairs", 102400, "largest number of pairs tried")
			fs.IntVar(&o.MaxCanaries, "max-canaries", 102400, "largest number of canaries per run tried")
			fs.Uint64Var(&o.Seed, "seed", 1, "random seed of the simulation")
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("cost: unexpected argument %q", args[0])
				}
				if !(o.Mu > 0) {
					return usagef("cost: --mu must be positive (got %v)", o.Mu)
				}
				if o.Reps < 1 || o.MaxPairs < 50 || o.MaxCanaries < 100 {
					return usagef("cost: --reps >= 1, --max-pairs >= 50 and --max-canaries >= 100 are needed")
				}
				e.logf("cost: simulating the audit methods on the %g-GDP Gaussian mechanism", o.Mu)
				rows, err := audit.CostTable(ctx, o)
				if err != nil {
					return usagef("cost: %v", err)
				}
				if *asJSON {
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					if err := enc.Encode(map[string]any{"mu": o.Mu, "fraction": o.Fraction, "confidence": o.Confidence, "delta": o.Delta, "reps": o.Reps, "seed": o.Seed, "rows": rows}); err != nil {
						return fmt.Errorf("cost: write JSON: %w", err)
					}
					return nil
				}
				printCost(e, o, rows)
				return nil
			}
		},
	})
}

func printCost(e *env, o audit.CostOptions, rows []audit.CostRow) {
	fmt.Fprintf(e.stdout, "Trainings needed for a certified bound of %g x mu = %.4g (confidence %g), on the Gaussian mechanism with mu = %g\n",
		o.Fraction, o.Fraction*o.Mu, o.Confidence, o.Mu)
	fmt.Fprintf(e.stdout, "(median of %d simulated audits at doubling sizes; exact for the quadratic instance, a best case for other models)\n\n", o.Reps)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "method\ttrainings\tcanaries/run\ttarget\tmedian\tnote\n")
	for _, r := range rows {
		trainings := fmt.Sprint(r.Trainings)
		if !r.Reached {
			trainings = "not reached"
		}
		canaries := "-"
		if r.Canaries > 0 {
			canaries = fmt.Sprint(r.Canaries)
		}
		median := fmt.Sprintf("%.3f", r.Median)
		if r.MedianRelError > 0 {
			median = fmt.Sprintf("%.3f (error %.1f%%)", r.Median, 100*r.MedianRelError)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%s\t%s\n", r.Method, trainings, canaries, r.Target, median, r.Note)
	}
	tw.Flush()
	fmt.Fprintf(e.stdout, "\nA row not reached reports the median at the largest size tried (--max-pairs %d, --max-canaries %d).\n", o.MaxPairs, o.MaxCanaries)
}
