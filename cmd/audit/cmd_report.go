package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/report"
)

func init() {
	register(&command{
		name:    "report",
		summary: "analyze an experiment directory, write its findings.json and HTML and Markdown report, and record the statistics flags given in its config.json for later analyses",
		usage:   "report DIR [--png] [--allow-partial] [statistics flags]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			var af analyzeFlags
			af.register(fs)
			png := fs.Bool("png", false, "also write every figure as PNG")
			partial := fs.Bool("allow-partial", false, "report a run directory with missing shards")
			workers := fs.Int("workers", 0, "attack workers when scores must be computed (0: all cores)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("report: give one experiment directory")
				}
				opts, err := af.options(fs)
				if err != nil {
					return err
				}
				if err := refuseIndependentMethod("report", opts); err != nil {
					return err
				}
				dir := args[0]
				if err := experimentDirArg("report", dir); err != nil {
					return err
				}
				lock, err := lockWriter(e, dir, "audit report")
				if err != nil {
					return err
				}
				defer lock.Unlock()
				a, err := experiment.AnalyzeDir(ctx, dir, opts, experiment.AttackOptions{Workers: *workers, AllowPartial: *partial, Logf: e.logf})
				if err != nil {
					return err
				}
				// The directory's config.json records what the command line asked for, so a later
				// analyze judges the same; recorded first, as the findings and report judged with
				// the settings it replaces are removed with them (a report killed between the two
				// left findings of one claim beside the config.json of another).
				if _, err := experiment.RecordSettings(dir, opts); err != nil {
					return err
				}
				err = experiment.Report(ctx, dir, a, experiment.ReportOptions{PNG: *png, ToolVersion: version}, *partial)
				outputsOnly := errors.Is(err, experiment.ErrOutputsOnly)
				if err != nil && !outputsOnly {
					return err
				}
				if err := report.WriteAnalysis(e.stdout, a); err != nil {
					return err
				}
				if outputsOnly {
					fmt.Fprintf(e.stdout, "\nFindings written: %s (imported model outputs have no run files or config, so the table above is the whole report)\n", expdir.Dir(dir).Findings())
				} else {
					fmt.Fprintf(e.stdout, "\nReport written: %s and %s (findings in %s)\n", expdir.Dir(dir).ReportHTML(), expdir.Dir(dir).ReportMarkdown(), expdir.Dir(dir).Findings())
				}
				return verdictStatus(a)
			}
		},
	})
}
