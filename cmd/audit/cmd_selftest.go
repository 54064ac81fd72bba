package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/audit/calibrate"
)

func init() {
	register(&command{
		name:    "selftest",
		summary: "check the coverage of the certified bounds on mechanisms of known mu (Gaussian, Laplace, one-run canaries)",
		usage:   "selftest [--reps 200] [--n 1000] [--mus 0.5,1,2] [--family 8] [--seed 1] [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			reps := fs.Int("reps", 200, "repetitions per mu")
			n := fs.Int("n", 1000, "scores per world in each repetition")
			mus := fs.String("mus", "0.5,1,2", "comma-separated true mu values")
			seed := fs.Uint64("seed", 1, "random seed")
			family := fs.Int("family", 8, "mechanisms audited jointly in the family-wise check (1: skip it)")
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("selftest: unexpected argument %q", args[0])
				}
				if *reps < 1 {
					return usagef("selftest: --reps must be at least 1, got %d", *reps)
				}
				if *n < 2 {
					return usagef("selftest: --n must be at least 2, got %d", *n)
				}
				var muList []float64
				for _, s := range splitList(*mus) {
					v, err := strconv.ParseFloat(s, 64)
					if err != nil || !(v > 0) || v > 1e6 {
						return usagef("selftest: --mus: %q is not a number in (0, 1e6]", s)
					}
					muList = append(muList, v)
				}
				if len(muList) == 0 {
					return usagef("selftest: --mus is empty")
				}
				if *family < 1 {
					return usagef("selftest: --family must be at least 1, got %d", *family)
				}
				rep, err := calibrate.SelfTest(ctx, calibrate.SelfTestOptions{Reps: *reps, N: *n, Mus: muList, Seed: *seed, Family: *family})
				if err != nil {
					return err
				}
				if *asJSON {
					if err := json.NewEncoder(e.stdout).Encode(rep); err != nil {
						return fmt.Errorf("selftest: write JSON: %w", err)
					}
				} else {
					printSelfTest(e, rep)
				}
				if !rep.Pass {
					return errors.New("selftest: coverage below what a 95% method reaches (see the table)")
				}
				return nil
			}
		},
	})
}

func printSelfTest(e *env, rep *calibrate.SelfTestReport) {
	fmt.Fprintf(e.stdout, "Coverage of the certified bounds on mechanisms whose truth is known: Gaussian N(mu,1) vs N(0,1) and Laplace(s,1) vs Laplace(0,1)\n")
	fmt.Fprintf(e.stdout, "(pairs: %d scores per world; one-run: %d canaries per run, each included with probability 1/2), %d repetitions, seed %d, confidence %g\n\n",
		rep.N, rep.N, rep.Reps, rep.Seed, rep.Confidence)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
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
	fmt.Fprintf(e.stdout, "\nLaplace rows hold the bound against the mechanism's GDP-equivalent mu (eps: its exact s at delta 0). One-run rows: f-DP mu (Mahloujifar et al.) and eps (Steinke et al.) from the default grid of guesses, each at half the error level so that they hold together, as the one-run rows of audit run and analyze.\n")
	if family > 0 {
		fmt.Fprintf(e.stdout, "Family rows: %d mechanisms (mu cycling through the list) audited together, each bound at confidence %.4g (Bonferroni over the rows, as `audit analyze` certifies its rows); a repetition misses when any of them exceeds its true mu. Their mean bound and tightness are those of the largest mu.\n",
			family, audit.FamilyRowConfidence(rep.Confidence, family))
	}
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(e.stdout, "\n%s: %s\n", verdict, rep.Rule)
}
