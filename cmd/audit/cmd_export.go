package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/export"
)

func init() {
	register(&command{
		name:    "export",
		summary: "export an experiment directory's run metadata, scores and findings as Parquet, or its runs as snapshots to import",
		usage:   "export --format parquet|safetensors DIR --out OUTDIR",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			format := fs.String("format", "parquet", "parquet: runs.parquet, scores.parquet, findings.parquet; safetensors: one snapshot per run and checkpoint (and upload), manifest.csv and config.json, for audit import")
			out := fs.String("out", "", "directory to write into (for safetensors: new or empty)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("export: want one experiment directory, got %d arguments", len(args))
				}
				if *out == "" {
					return usagef("export: --out is required")
				}
				if *format != "parquet" && *format != "safetensors" {
					return usagef("export: --format %q: want parquet or safetensors", *format)
				}
				if err := experimentDirArg("export", args[0]); err != nil {
					return err
				}
				// Both formats export run files: a directory without them says why it has
				// none ("open DIR/runs: no such file or directory" said nothing of it).
				if err := experiment.NoRunFiles(args[0], "export"); err != nil {
					return fmt.Errorf("export: %w", err)
				}
				var files []string
				var err error
				switch *format {
				case "parquet":
					files, err = export.Parquet(ctx, args[0], *out)
				case "safetensors":
					files, err = export.Snapshots(ctx, args[0], *out)
				default:
					return usagef("export: --format %q: want parquet or safetensors", *format)
				}
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
