package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/fedaudit/fedaudit/export"
)

func init() {
	register(&command{
		name:    "export",
		summary: "export an experiment directory's run metadata, scores and findings as Parquet",
		usage:   "export --format parquet DIR --out OUTDIR",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			format := fs.String("format", "parquet", "output format (parquet)")
			out := fs.String("out", "", "directory to write runs.parquet, scores.parquet and findings.parquet into")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("export: want one experiment directory, got %d arguments", len(args))
				}
				if *format != "parquet" {
					return usagef("export: --format %q: only parquet is supported", *format)
				}
				if *out == "" {
					return usagef("export: --out is required")
				}
				files, err := export.Parquet(ctx, args[0], *out)
				if err != nil {
					return err
				}
				for _, f := range files {
					fmt.Fprintln(e.stdout, f)
				}
				return nil
			}
		},
	})
}
