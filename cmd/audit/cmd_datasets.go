package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/dataexport"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

func init() {
	register(&command{
		name:    "datasets",
		summary: "inspect a dataset, or export an experiment's clients of C and C' for an external trainer",
		usage: "datasets inspect PATH|NAME [--data-dir DIR] [--json]\n" +
			"       audit datasets export --config F --out FILE.npz|FILE.safetensors\n\n" +
			"inspect: samples, shape, classes, value range and content hash of a dataset.\n" +
			"NAME is one of " + strings.Join(datasets.Names(), ", ") + ".\n" +
			"PATH is an IDX images file (raw or gzip'd, labels beside it) or a CIFAR-10 .bin batch.\n\n" +
			"export: writes the data the experiment F trains on, built from its seed exactly as\n" +
			"`audit run` builds it, for an external trainer whose runs `audit import` then audits:\n" +
			"every client of world C and of world C' (c/client<i>/x float32 [n, sample shape...],\n" +
			"c/client<i>/y int64 [n], cprime/client<i>/x and /y), canary/client and canary/index\n" +
			"(where the worlds differ: C' holds the canary; under remove and remove-client C holds\n" +
			"the record or client C' lacks), classes, and test/x, test/y when the\n" +
			"config has test samples. The extension of --out chooses the format: .npz (numpy.load)\n" +
			"or .safetensors (its metadata names the config and the data hash). docs/import.md has\n" +
			"the layout.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			dataDir := fs.String("data-dir", "", "inspect: directory holding dataset files (searched before /usr/share/datasets)")
			asJSON := fs.Bool("json", false, "inspect: machine-readable output")
			config := fs.String("config", "", "export: experiment config (YAML, or an experiment directory's config.json)")
			out := fs.String("out", "", "export: the file to write, FILE.npz or FILE.safetensors (replaced if it exists)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("datasets: missing subcommand (want: inspect or export)")
				}
				sub := args[0]
				if sub != "inspect" && sub != "export" {
					return usagef("datasets: unknown subcommand %q (want: inspect or export)", sub)
				}
				pos, err := parseInterspersed(fs, args[1:])
				if errors.Is(err, flag.ErrHelp) {
					printCommandHelp(e.stdout, commands["datasets"], fs)
					return nil
				}
				if err != nil {
					return usagef("datasets %s: %v (see 'audit datasets --help')", sub, err)
				}
				// The subcommands share one flag set: a flag of the other one is a mistake.
				own := map[string][]string{"inspect": {"data-dir", "json"}, "export": {"config", "out"}}
				var foreign error
				fs.Visit(func(f *flag.Flag) {
					if foreign == nil && f.Name != "quiet" && !slices.Contains(own[sub], f.Name) {
						foreign = usagef("datasets %s: --%s belongs to the other subcommand (see 'audit datasets --help')", sub, f.Name)
					}
				})
				if foreign != nil {
					return foreign
				}
				if sub == "export" {
					if len(pos) > 0 {
						return usagef("datasets export: unexpected argument %q", pos[0])
					}
					return exportDatasets(ctx, e, *config, *out)
				}
				if len(pos) == 0 {
					return usagef("datasets inspect: missing dataset: a path or one of %s", strings.Join(datasets.Names(), ", "))
				}
				if len(pos) > 1 {
					return usagef("datasets inspect: unexpected argument %q", pos[1])
				}
				d, err := datasets.Open(pos[0], *dataDir)
				if err != nil {
					return err
				}
				if err := d.Validate(); err != nil {
					return err
				}
				s := d.Summarize()
				if *asJSON {
					return json.NewEncoder(e.stdout).Encode(s)
				}
				printSummary(e, s)
				return nil
			}
		},
	})
}

// exportDatasets is `audit datasets export`: the experiment's clients of both worlds as one
// file (package dataexport), and a summary of what it holds on stdout.
func exportDatasets(ctx context.Context, e *env, config, out string) error {
	if config == "" {
		return usagef("datasets export: --config is required")
	}
	if out == "" {
		return usagef("datasets export: --out is required (FILE.npz or FILE.safetensors)")
	}
	if _, err := dataexport.FormatOf(out); err != nil {
		return usagef("datasets export: --out %v", err)
	}
	cfg, err := spec.Load(config)
	if err != nil {
		return err
	}
	data, err := spec.PrepareContext(ctx, cfg)
	if err != nil {
		return err
	}
	if err := dataexport.Write(ctx, out, cfg, data); err != nil {
		return err
	}
	p := data.Pair
	sizes := func(world []*datasets.Dataset) string {
		n := make([]string, len(world))
		for i, c := range world {
			n[i] = fmt.Sprint(c.Len())
		}
		return strings.Join(n, " ")
	}
	w := e.stdout
	fmt.Fprintf(w, "wrote %s: the data of experiment %q (seed %d)\n", out, cfg.Name, cfg.Seed)
	fmt.Fprintf(w, "  C:  %d clients of %s samples, sample shape %v, %d classes\n", len(p.C), sizes(p.C), data.Shape, data.Classes)
	fmt.Fprintf(w, "  C': %d clients of %s samples\n", len(p.CPrime), sizes(p.CPrime))
	fmt.Fprintf(w, "  adjacency %s: %s\n", cfg.Adjacency.Kind, where(cfg.Adjacency.Kind, data))
	if data.Test != nil {
		fmt.Fprintf(w, "  test: %d samples\n", data.Test.Len())
	}
	fmt.Fprintf(w, "  dataset sha256 %s (as the run files of this config record it)\n", data.Hash)
	return nil
}

// where says in words where the worlds differ, as canary/client and canary/index locate it.
func where(kind string, d *spec.Data) string {
	c, i := d.Target.Client, d.Target.Index
	switch kind {
	case "add":
		return fmt.Sprintf("C' holds the canary at cprime/client%d sample %d; C lacks it", c, i)
	case "remove":
		return fmt.Sprintf("C holds sample %d of c/client%d; C' lacks it", i, c)
	case "replace-client":
		return fmt.Sprintf("cprime/client%d is the canary client (its sample %d is the one recorded)", c, i)
	case "remove-client":
		return fmt.Sprintf("C' lacks client %d (the other clients keep their numbers; its sample %d is the one recorded)", c, i)
	}
	return fmt.Sprintf("sample %d of client %d: C holds the original, C' the canary", i, c)
}

func printSummary(e *env, s datasets.Summary) {
	w := e.stdout
	fmt.Fprintf(w, "name     %s\n", s.Name)
	fmt.Fprintf(w, "samples  %d\n", s.Samples)
	fmt.Fprintf(w, "shape    %v (%d features)\n", s.Shape, s.Dim)
	fmt.Fprintf(w, "classes  %d\n", s.Classes)
	fmt.Fprintf(w, "features min %.6g, max %.6g, mean %.6g\n", s.Min, s.Max, s.Mean)
	fmt.Fprintf(w, "sha256   %s\n", s.SHA256)
	fmt.Fprintf(w, "samples per class:\n")
	for k, n := range s.ClassCounts {
		fmt.Fprintf(w, "  %3d  %d\n", k, n)
	}
}
