package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/fedaudit/fedaudit/datasets"
)

func init() {
	register(&command{
		name:    "datasets",
		summary: "inspect a dataset: samples, shape, classes, value range and content hash",
		usage: "datasets inspect PATH|NAME [--data-dir DIR] [--json]\n\n" +
			"NAME is one of " + strings.Join(datasets.Names(), ", ") + ".\n" +
			"PATH is an IDX images file (raw or gzip'd, labels beside it) or a CIFAR-10 .bin batch.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			dataDir := fs.String("data-dir", "", "directory holding dataset files (searched before /usr/share/datasets)")
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(_ context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("datasets: missing subcommand (want: inspect)")
				}
				if args[0] != "inspect" {
					return usagef("datasets: unknown subcommand %q (want: inspect)", args[0])
				}
				pos, err := parseInterspersed(fs, args[1:])
				if errors.Is(err, flag.ErrHelp) {
					printCommandHelp(e.stdout, commands["datasets"], fs)
					return nil
				}
				if err != nil {
					return usagef("datasets inspect: %v (see 'audit datasets --help')", err)
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
