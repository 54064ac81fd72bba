package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/fedaudit/fedaudit/audit/calibrate"
	"github.com/fedaudit/fedaudit/cmd/audit/internal/tables"
	"github.com/fedaudit/fedaudit/experiment/cost"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

func init() {
	register(&command{
		name:    "cost",
		summary: "how many trainings each audit method needs to certify a share of a known mu",
		usage: "cost --mu X [--fraction 0.8] [--confidence 0.95] [--delta 1e-5] [--reps 21] [--max-pairs 102400] [--max-canaries 102400] [--seed 1] [--json]\n" +
			"  cost --config F --canaries 250,500,1000 [--seeds 5] [--rounds T,...] [--json]\n\n" +
			"With --mu, every method is simulated on the Gaussian mechanism with that mu. With --config (a\n" +
			"config with train.canaries), real trainings measure the one-run audit: for each canary count,\n" +
			"--seeds trainings of one run each (master seeds seed, seed+1, ...), every canary attack at the\n" +
			"last checkpoint (or --rounds), medians over the seeds beside the exact mu of the canaries where known, else\n" +
			"the realized mu of the informed adversary on the target.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			var o calibrate.CostOptions
			fs.Float64Var(&o.Mu, "mu", 0, "the true Gaussian-DP mu (for the quadratic instance: its exact mu; otherwise the realized mu of the informed adversary)")
			fs.Float64Var(&o.Fraction, "fraction", 0.8, "share of mu the certified bound must reach")
			fs.Float64Var(&o.Confidence, "confidence", 0.95, "confidence of the certified bounds")
			fs.Float64Var(&o.Delta, "delta", 1e-5, "delta of the epsilon rows")
			fs.IntVar(&o.Reps, "reps", 21, "simulated audits per size")
			fs.Float64Var(&o.Power, "power", calibrate.DefaultPower, "share of the simulated audits at a size that must reach the target: the chance an audit of that size does")
			fs.IntVar(&o.MaxPairs, "max-pairs", 102400, "largest number of pairs tried")
			fs.IntVar(&o.MaxCanaries, "max-canaries", 102400, "largest number of canaries per run tried")
			fs.Uint64Var(&o.Seed, "seed", 1, "random seed of the simulation")
			config := fs.String("config", "", "measure the one-run audit by real trainings of this config (train.canaries set)")
			counts := fs.String("canaries", "", "comma-separated canary counts to measure (with --config)")
			seeds := fs.Int("seeds", 5, "trainings per canary count (with --config)")
			rounds := fs.String("rounds", "", "comma-separated checkpoints to audit, as one family (with --config; default: the last)")
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("cost: unexpected argument %q", args[0])
				}
				if *config != "" {
					rs, err := parseCheckpoints(*rounds)
					if err != nil {
						return err
					}
					return measureCost(ctx, e, *config, *counts, *seeds, rs, *asJSON)
				}
				if !(o.Mu > 0) || math.IsInf(o.Mu, 0) {
					return usagef("cost: --mu must be a positive finite number (got %v), or measure with --config", o.Mu)
				}
				if o.Reps < 1 || o.MaxPairs < 50 || o.MaxCanaries < 100 {
					return usagef("cost: --reps >= 1, --max-pairs >= 50 and --max-canaries >= 100 are needed")
				}
				if !(o.Power > 0 && o.Power <= 1) {
					return usagef("cost: --power must be in (0, 1], got %v", o.Power)
				}
				e.logf("cost: simulating the audit methods on the %g-GDP Gaussian mechanism", o.Mu)
				rows, err := calibrate.CostTable(ctx, o)
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err() // interrupted: exit status 130, not a usage error
					}
					return usagef("cost: %v", err)
				}
				if *asJSON {
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					if err := enc.Encode(map[string]any{"mu": o.Mu, "fraction": o.Fraction, "confidence": o.Confidence, "delta": o.Delta, "reps": o.Reps, "power": o.Power, "seed": o.Seed, "rows": rows}); err != nil {
						return fmt.Errorf("cost: write JSON: %w", err)
					}
					return nil
				}
				tables.Cost(e.stdout, o, rows)
				return nil
			}
		},
	})
}

// measureCost is `audit cost --config`: real one-run trainings at each canary count.
func measureCost(ctx context.Context, e *env, path, countList string, seeds int, rounds []int, asJSON bool) error {
	var counts []int
	for _, p := range splitList(countList) {
		k, err := strconv.Atoi(p)
		if err != nil || k < 1 {
			return usagef("cost: --canaries: %q is not a positive count", p)
		}
		counts = append(counts, k)
	}
	if len(counts) == 0 {
		return usagef("cost: --config needs --canaries (e.g. 250,500,1000)")
	}
	if seeds < 1 {
		return usagef("cost: --seeds must be >= 1")
	}
	cfg, err := spec.Load(path)
	if err != nil {
		return err
	}
	if cfg.Train.Canaries == nil {
		return usagef("cost: %s has no train.canaries to measure", path)
	}
	e.logf("cost: measuring one-run audits of %s: %v canaries x %d trainings", cfg.Name, counts, seeds)
	res, err := cost.MeasureOneRun(ctx, cfg, counts, seeds, rounds, os.TempDir())
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, map[string]any{"config": path, "name": cfg.Name, "confidence": cfg.Audit.Confidence, "measurements": res})
	}
	tables.Measured(e.stdout, cfg, res)
	return nil
}
