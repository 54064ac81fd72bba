package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/runs"
)

// analyzeFlags are the statistics flags shared by analyze, run and demo.
type analyzeFlags struct {
	confidence float64
	delta      float64
	method     string
	claimMu    float64
	claimEps   float64
	seed       uint64
}

func (a *analyzeFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&a.confidence, "confidence", 0.95, "confidence level of the certified lower bounds")
	fs.Float64Var(&a.delta, "delta", 1e-5, "delta at which epsilon is bounded")
	fs.StringVar(&a.method, "threshold-method", "", "how thresholds are chosen validly: bonferroni, split or dkw (default: bonferroni for independent scores, dkw for coupled pairs)")
	fs.Float64Var(&a.claimMu, "claim-mu", 0, "claimed mu (Gaussian DP) to judge")
	fs.Float64Var(&a.claimEps, "claim-eps", 0, "claimed epsilon at --delta to judge")
	fs.Uint64Var(&a.seed, "seed", 1, "seed of the split method's random division")
}

func (a *analyzeFlags) options() (experiment.AnalyzeOptions, error) {
	if !(a.confidence > 0 && a.confidence < 1) {
		return experiment.AnalyzeOptions{}, usagef("--confidence must be in (0, 1), got %g", a.confidence)
	}
	if !(a.delta > 0 && a.delta < 1) {
		return experiment.AnalyzeOptions{}, usagef("--delta must be in (0, 1), got %g", a.delta)
	}
	var m audit.ThresholdMethod
	if a.method != "" {
		var err error
		if m, err = audit.ParseThresholdMethod(a.method); err != nil {
			return experiment.AnalyzeOptions{}, usagef("--threshold-method: %v", err)
		}
	}
	if a.claimMu < 0 || a.claimEps < 0 {
		return experiment.AnalyzeOptions{}, usagef("claims must be >= 0")
	}
	if a.claimMu > 0 && a.claimEps > 0 {
		return experiment.AnalyzeOptions{}, usagef("give --claim-mu or --claim-eps, not both")
	}
	opts := experiment.AnalyzeOptions{Confidence: a.confidence, Delta: a.delta, Method: m, Seed: a.seed}
	opts.Claim.Mu = a.claimMu
	if a.claimEps > 0 {
		opts.Claim.Epsilon, opts.Claim.Delta = a.claimEps, a.delta
	}
	return opts, nil
}

func init() {
	register(&command{
		name:    "analyze",
		summary: "certify lower bounds on mu and epsilon from attack scores and judge a claim",
		usage:   "analyze (--scores FILE | DIR) [--confidence 0.95] [--claim-mu X | --claim-eps E] [--delta D] [--threshold-method bonferroni|split|dkw] [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			var af analyzeFlags
			af.register(fs)
			scores := fs.String("scores", "", "score file: CSV (columns world, score; optional round, attack, threat) or Arrow")
			asJSON := fs.Bool("json", false, "machine-readable output: a JSON array, one object per (attack, threat, round)")
			workers := fs.Int("workers", 0, "attack workers when scores must be computed (0: all cores)")
			partial := fs.Bool("allow-partial", false, "analyze a run directory with missing shards")
			return func(ctx context.Context, e *env, args []string) error {
				opts, err := af.options()
				if err != nil {
					return err
				}
				var findings []experiment.Finding
				switch {
				case *scores != "" && len(args) > 0:
					return usagef("analyze: give --scores FILE or a run directory, not both")
				case *scores != "":
					s, err := runs.ReadScoreFile(*scores)
					if err != nil {
						return err
					}
					findings, err = experiment.AnalyzeScores(ctx, s, opts, nil)
					if err != nil {
						return fmt.Errorf("%s: %w", *scores, err)
					}
				case len(args) == 1:
					findings, err = experiment.AnalyzeDir(ctx, args[0], opts, experiment.AttackOptions{Workers: *workers, AllowPartial: *partial, Logf: e.logf})
					if err != nil {
						return err
					}
				case len(args) > 1:
					return usagef("analyze: one run directory, got %d arguments", len(args))
				default:
					return usagef("analyze: give --scores FILE or a run directory")
				}
				if *asJSON {
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(experiment.Records(findings))
				}
				return experiment.WriteTable(e.stdout, findings)
			}
		},
	})
}
