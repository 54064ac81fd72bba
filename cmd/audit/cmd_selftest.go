package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/fedaudit/fedaudit/audit/calibrate"
	"github.com/fedaudit/fedaudit/cmd/audit/internal/tables"
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
					tables.SelfTest(e.stdout, rep)
				}
				if !rep.Pass {
					return errors.New("selftest: coverage below what a 95% method reaches (see the table)")
				}
				return nil
			}
		},
	})
}
