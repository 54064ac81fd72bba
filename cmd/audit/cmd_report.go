package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/fedaudit/fedaudit/experiment"
)

func init() {
	register(&command{
		name:    "report",
		summary: "write the HTML and Markdown report of an experiment directory",
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
				opts, err := af.options()
				if err != nil {
					return err
				}
				dir := args[0]
				findings, err := experiment.AnalyzeDir(ctx, dir, opts, experiment.AttackOptions{Workers: *workers, AllowPartial: *partial, Logf: e.logf})
				if err != nil {
					return err
				}
				if err := experiment.Report(ctx, dir, findings, experiment.ReportOptions{PNG: *png, ToolVersion: version}, *partial); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "report written: %s and %s\n", filepath.Join(dir, "report.html"), filepath.Join(dir, "report.md"))
				return nil
			}
		},
	})
}
