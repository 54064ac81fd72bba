package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/report"
	"github.com/fedaudit/fedaudit/runs"
)

// analyzeFlags are the statistics flags shared by analyze, run and demo. Only flags given on the
// command line override the experiment's own audit settings (DIR/config.json); the analysis
// says so in its notes.
type analyzeFlags struct {
	confidence float64
	delta      float64
	method     string
	claimMu    float64
	claimEps   float64
	claimAbout string
	seed       uint64
}

func (a *analyzeFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&a.confidence, "confidence", 0, "family-wise confidence of the certified lower bounds (default: the config's audit.confidence, else 0.95)")
	fs.Float64Var(&a.delta, "delta", 0, "delta at which epsilon is bounded (default: the config's audit.delta, else 1e-5)")
	fs.StringVar(&a.method, "threshold-method", "", "how thresholds are chosen validly: bonferroni, split, dkw, band or dkw+band (default: the config's, else dkw+band for coupled scores and bonferroni for independent ones; bonferroni is refused for coupled scores, every experiment directory's included)")
	fs.Float64Var(&a.claimMu, "claim-mu", 0, "claimed mu (Gaussian DP) to judge, a finite number > 0, replacing the config's claim")
	fs.Float64Var(&a.claimEps, "claim-eps", 0, "claimed epsilon at --delta to judge (without --delta: at the delta of the config's claim), a finite number > 0, replacing the config's claim")
	fs.StringVar(&a.claimAbout, "claim-about", "", "what the claim is about: models (the released global models, judged on the final and all-iterates rows) or uploads (each upload of the target client, judged on the uploads rows); default: the config's audit.claim_about, else models")
	fs.Uint64Var(&a.seed, "seed", 0, "seed of the split method's random division of the scores into selection and evaluation halves, used only with --threshold-method split; not the training seed (the runs, their data and noise come from the config's seed) (default: the experiment's master seed, which its score files record too, else 1)")
}

// options returns the settings given on the command line; the others stay zero, so the
// experiment's configuration supplies them. Its errors begin with the command's name, as the
// commands' other errors do.
func (a *analyzeFlags) options(fs *flag.FlagSet) (experiment.AnalyzeOptions, error) {
	cmd := strings.TrimPrefix(fs.Name(), "audit ")
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var opts experiment.AnalyzeOptions
	if set["confidence"] {
		if !(a.confidence > 0 && a.confidence < 1) {
			return opts, usagef("%s: --confidence must be in (0, 1), got %g", cmd, a.confidence)
		}
		// What audit.confidence may be, the flag that replaces it may be (spec.CheckConfidence).
		if err := spec.CheckConfidence(a.confidence); err != nil {
			return opts, usagef("%s: --confidence: %v", cmd, err)
		}
		opts.Confidence = a.confidence
	}
	if set["delta"] {
		if !(a.delta > 0 && a.delta < 1) {
			return opts, usagef("%s: --delta must be in (0, 1), got %g", cmd, a.delta)
		}
		opts.Delta = a.delta
	}
	if a.method != "" {
		m, err := audit.ParseThresholdMethod(a.method)
		if err != nil {
			return opts, usagef("%s: --threshold-method: %v", cmd, strings.TrimPrefix(err.Error(), "audit: "))
		}
		opts.Method = m
	}
	// A claim is a finite number > 0: 0 (no privacy loss at all) and infinity (no guarantee)
	// are refused rather than read as "no claim", as in the config (audit.claim_mu).
	for _, c := range []struct {
		flag string
		x    float64
	}{{"claim-mu", a.claimMu}, {"claim-eps", a.claimEps}} {
		if set[c.flag] && !spec.ValidClaim(c.x) {
			return opts, usagef("%s: --%s: %s, got %g", cmd, c.flag, spec.ClaimRule, c.x)
		}
	}
	if set["claim-mu"] && set["claim-eps"] {
		return opts, usagef("%s: give --claim-mu or --claim-eps, not both", cmd)
	}
	switch {
	case set["claim-mu"]:
		opts.Claim.Mu, opts.ClaimSource = a.claimMu, "--claim-mu claim"
	case set["claim-eps"]:
		opts.Claim.Epsilon, opts.ClaimSource = a.claimEps, "--claim-eps claim"
		if set["delta"] {
			opts.Claim.Delta = a.delta
		}
	}
	switch a.claimAbout {
	case "", spec.ClaimAboutModels, spec.ClaimAboutUploads:
		opts.ClaimAbout = a.claimAbout
	default:
		return opts, usagef("%s: --claim-about: %q is not %s or %s", cmd, a.claimAbout, spec.ClaimAboutModels, spec.ClaimAboutUploads)
	}
	opts.Seed = a.seed
	return opts, nil
}

// refuseIndependentMethod refuses --threshold-method bonferroni for coupled scores: the two runs
// of a pair share their noise, which Bonferroni's argument cannot allow, and the analysis
// refuses it (audit.Analyze) only once it reaches the scores, after training and scoring.
// Every experiment directory's scores are coupled (runs.ScoreFile.Coupled), so run, demo,
// report and analyze DIR refuse it before any work, as a usage error.
func refuseIndependentMethod(cmd string, opts experiment.AnalyzeOptions) error {
	if opts.Method == audit.Bonferroni {
		return usagef("%s: --threshold-method bonferroni assumes independent worlds, and the scores of coupled pairs (every experiment directory's, and a score file's with a pair_id column) are not: use dkw+band (the default), dkw, band or split", cmd)
	}
	return nil
}

func init() {
	register(&command{
		name:    "analyze",
		summary: "certify lower bounds on mu and epsilon from attack scores and judge a claim",
		usage:   "analyze (--scores FILE | DIR) [--confidence 0.95] [--claim-mu X | --claim-eps E] [--claim-about models|uploads] [--delta D] [--threshold-method bonferroni|split|dkw|band|dkw+band] [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			var af analyzeFlags
			af.register(fs)
			scores := fs.String("scores", "", "score file: CSV (columns world, score; optional round, attack, threat, run_id, pair_id) or Arrow")
			asJSON := fs.Bool("json", false, "machine-readable output: the headline, the family and one object per (attack, threat, round)")
			workers := fs.Int("workers", 0, "attack workers when scores must be computed (0: all cores)")
			partial := fs.Bool("allow-partial", false, "analyze a run directory with missing shards")
			return func(ctx context.Context, e *env, args []string) error {
				opts, err := af.options(fs)
				if err != nil {
					return err
				}
				var a *findings.Analysis
				switch {
				case *scores != "" && len(args) > 0:
					return usagef("analyze: give --scores FILE or a run directory, not both")
				case *scores != "":
					if f, err := os.Open(*scores); err != nil {
						return fmt.Errorf("analyze: %w", err) // missing or unreadable: a failure
					} else {
						f.Close()
					}
					s, err := runs.ReadScoreFile(*scores)
					if err != nil {
						// The file given is not a score file (its columns, values or format):
						// the command line's to fix, as a malformed manifest is import's.
						return inputf("analyze: %v", err)
					}
					if s.Coupled {
						if err := refuseIndependentMethod("analyze", opts); err != nil {
							return err
						}
					}
					a, err = experiment.AnalyzeScores(ctx, s, opts, nil)
					var bad *experiment.ScoresError
					if errors.As(err, &bad) {
						// The whole error: it names the attack, threat and round (the
						// inner one alone said "pair id 0 occurs twice in world C").
						return inputf("analyze: %s: %s", *scores, strings.TrimPrefix(err.Error(), "analyze: "))
					}
					if err != nil {
						return fmt.Errorf("%s: %w", *scores, err)
					}
				case len(args) == 1:
					if err := refuseIndependentMethod("analyze", opts); err != nil {
						return err
					}
					if err := experimentDirArg("analyze", args[0]); err != nil {
						return err
					}
					// Shared: analyses run side by side, but not beside a writer.
					lock, err := fsutil.LockDirReader(args[0])
					if err != nil {
						return fmt.Errorf("analyze: %w", err)
					}
					defer lock.Unlock()
					a, err = experiment.AnalyzeDir(ctx, args[0], opts, experiment.AttackOptions{Workers: *workers, AllowPartial: *partial, Logf: e.logf})
					if err != nil {
						return err
					}
					// Experiment directories record the claim their findings.json was judged
					// with (config.json); directories of imported outputs cannot, so the
					// headline says when the files on disk were judged against another claim.
					if experiment.IsOutputsDir(args[0]) {
						experiment.OnDiskClaimNote(args[0], a)
					}
				case len(args) > 1:
					return usagef("analyze: one run directory, got %d arguments", len(args))
				default:
					return usagef("analyze: give --scores FILE or a run directory")
				}
				if *asJSON {
					err = a.WriteJSON(e.stdout)
				} else {
					err = report.WriteAnalysis(e.stdout, a)
				}
				return errors.Join(err, verdictStatus(a))
			}
		},
	})
}
