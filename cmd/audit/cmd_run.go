package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/report"
	"github.com/fedaudit/fedaudit/runs"
)

// runExperiment is the body of `audit run` and `audit demo`: every stage, resumable, with one
// progress display, then the summary on stdout.
func runExperiment(ctx context.Context, e *env, cfg *spec.Config, dir string, shards, workers int, sequential bool, bf backendFlags, aopts experiment.AnalyzeOptions) (a *findings.Analysis, err error) {
	if _, err := bf.preflight(cfg); err != nil {
		return nil, err
	}
	existed := existedBefore(dir)
	defer func() { forgetIfRefused(dir, existed, err) }()
	lock, err := lockExperiment(e, cfg, dir, shards, nil, "audit run")
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	defer lock.Unlock()
	pr := newProgress(e)
	start := time.Now()
	e.logf("run: %s: %d pairs, %d rounds, output in %s", cfg.Name, cfg.Pairs, cfg.Train.Rounds, dir)
	a, err = experiment.Run(ctx, cfg, dir, experiment.RunOptions{
		Shards:     shards,
		Sequential: sequential,
		Analyze:    aopts,
		Train:      bf.trainOptions(e),
		Attack:     experiment.AttackOptions{Workers: workers, Logf: e.logf},
		Report:     experiment.ReportOptions{ToolVersion: version},
		Stage:      pr.stages([]string{"train", "attack", "analyze", "report"}),
		TrainProgress: func(s runs.Shard) func(int, int) {
			return pr.bar(fmt.Sprintf("train %s", s), cfg.Train.Rounds)
		},
	})
	pr.wait()
	if err != nil {
		return nil, err
	}
	e.logf("run: done in %s", time.Since(start).Round(time.Millisecond))
	return a, nil
}

func printRunSummary(w io.Writer, cfg *spec.Config, dir string, a *findings.Analysis) error {
	tc := &cfg.Train
	mechanism := fmt.Sprintf("noise sigma %g, clip %g", tc.NoiseStd, tc.ClipNorm)
	if tc.IsClientDP() {
		mechanism = fmt.Sprintf("client sampling q %g, noise multiplier %g, update clip %g", tc.SamplingRate, tc.NoiseMultiplier, tc.UpdateClip)
	}
	if p := tc.Privacy; tc.IsClientDP() && p != nil && len(p.Groups) > 0 {
		// The noise of idp-fedavg and adaptive-fedavg is set per privacy group from its budget
		// ("noise multiplier 0" read as no noise), and adaptive-fedavg samples each group at
		// its own saving rate before its transition round.
		groups := make([]string, len(p.Groups))
		for i, g := range p.Groups {
			groups[i] = fmt.Sprintf("%d clients at epsilon %g", g.Clients, g.Epsilon)
			if g.SavingRate > 0 {
				groups[i] += fmt.Sprintf(", q %g before round %d", g.SavingRate, g.Transition)
			}
		}
		mechanism = fmt.Sprintf("client sampling q %g, noise per privacy group (%s, delta %g), update clip %g",
			tc.SamplingRate, strings.Join(groups, "; "), p.Delta, tc.UpdateClip)
	}
	fmt.Fprintf(w, "%s: %s, %d pairs (%d runs), model %s, %s, %d clients\n\n",
		cfg.Name, tc.Algorithm, cfg.Pairs, 2*cfg.Pairs, tc.Model.Kind, mechanism, cfg.Data.Clients)
	if err := report.WriteAnalysis(w, a); err != nil {
		return err
	}
	fmt.Fprintf(w, "Report: %s (and report.md, figures/, tables/)\n", expdir.Dir(dir).ReportHTML())
	return nil
}

// runFlags are the flags run and demo share.
type runFlags struct {
	workers int
	// sequential is `audit run --sequential` (experiment.RunOptions.Sequential).
	sequential bool
	asJSON     bool
	backend    backendFlags
	stats      analyzeFlags
	fs         *flag.FlagSet
}

func (r *runFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&r.workers, "workers", 0, "attack workers (0: all cores)")
	fs.BoolVar(&r.asJSON, "json", false, "print the analysis as JSON (headline, family, findings) instead of the summary")
	r.backend.register(fs)
	r.stats.register(fs)
	r.fs = fs
}

// execute runs every stage of cfg into dir and prints the summary, or the analysis as JSON. A
// violated headline makes the command exit with status 3 after the output.
func (r *runFlags) execute(ctx context.Context, e *env, cfg *spec.Config, dir string, shards int) error {
	aopts, err := r.stats.options(r.fs)
	if err != nil {
		return err
	}
	if err := refuseIndependentMethod(strings.TrimPrefix(r.fs.Name(), "audit "), aopts); err != nil {
		return err
	}
	a, err := runExperiment(ctx, e, cfg, dir, shards, r.workers, r.sequential, r.backend, aopts)
	if err != nil {
		return err
	}
	if r.asJSON {
		err = a.WriteJSON(e.stdout)
	} else {
		err = printRunSummary(e.stdout, cfg, dir, a)
	}
	return errors.Join(err, verdictStatus(a))
}

func init() {
	register(&command{
		name:    "run",
		summary: "train, attack, analyze and report an experiment in one resumable command",
		usage: "run --config F --out DIR [--shards n] [--sequential] [--workers n] [--json] [--claim-mu X | --claim-eps E] [statistics flags]\n\n" +
			"--sequential trains the shards in order (16 unless --shards says otherwise) and analyzes\n" +
			"after 1, 2, 4, ... of them and after the last, stopping at the first look that certifies a\n" +
			"violation; look j, of n_j pairs, certifies at confidence 1 - (1 - c) n_j / (n_1 + ... ),\n" +
			"so the looks' errors add up to 1 - c and they hold jointly at c (docs/statistics.md).\n" +
			"DIR/sequential.json records the looks.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			config := fs.String("config", "", "experiment config (YAML)")
			out := fs.String("out", "", "output directory")
			shards := fs.Int("shards", 1, "number of run-file shards (with --sequential: 16 when not given)")
			var rf runFlags
			fs.BoolVar(&rf.sequential, "sequential", false, "stop at the first of 1, 2, 4, ... shards whose analysis certifies a violation")
			rf.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("run: unexpected argument %q", args[0])
				}
				if err := rf.backend.check(); err != nil {
					return err
				}
				if *config == "" || *out == "" {
					return usagef("run: --config and --out are required")
				}
				if *shards < 1 {
					return usagef("--shards must be >= 1")
				}
				cfg, err := spec.Load(*config)
				if err != nil {
					return err
				}
				if rf.sequential && !flagGiven(fs, "shards") {
					*shards = min(16, cfg.Pairs)
				}
				*shards = rf.backend.defaultShards(*shards, flagGiven(fs, "shards"), cfg.Pairs)
				return rf.execute(ctx, e, cfg, *out, *shards)
			}
		},
	})
	register(&command{
		name:    "demo",
		summary: "run the built-in demo audit (synthetic data, small MLP, Noisy-FedAvg) and summarize it",
		usage:   "demo [--out results/demo] [--pairs N] [--json] [--claim-mu X | --claim-eps E] [statistics flags]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			out := fs.String("out", "results/demo", "output directory")
			pairs := fs.Int("pairs", 0, "number of coupled pairs (0: the demo's default)")
			var rf runFlags
			rf.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("demo: unexpected argument %q", args[0])
				}
				if err := rf.backend.check(); err != nil {
					return err
				}
				if *pairs < 0 {
					return usagef("--pairs must be >= 1")
				}
				cfg := spec.Demo()
				if *pairs > 0 {
					cfg.Pairs = *pairs
					if err := cfg.Validate(); err != nil {
						return &spec.ConfigError{Err: err}
					}
				}
				return rf.execute(ctx, e, cfg, *out, 1)
			}
		},
	})
}

// flagGiven reports whether the command line set the named flag.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
