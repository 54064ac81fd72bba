package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"

	"github.com/fedaudit/fedaudit/importer/outputs"
)

// outputsFlags are import's flags for per-record model outputs (audit import --outputs).
type outputsFlags struct {
	file        *string
	shadowEvery *int
}

func registerOutputsFlags(fs *flag.FlagSet) *outputsFlags {
	return &outputsFlags{
		file:        fs.String("outputs", "", "per-record model outputs (CSV, Parquet or Arrow): pair_id, world, [round, record, run_id,] loss or logits + label; scored with loss, margin and LiRA (docs/import.md)"),
		shadowEvery: fs.Int("shadow-every", 0, "with --outputs: every k-th pair fits LiRA and is not audited by it (0: 5)"),
	}
}

func (o *outputsFlags) set() bool { return *o.file != "" }

func (o *outputsFlags) run(ctx context.Context, e *env, args []string, manifest, config, out string, asJSON bool) error {
	switch {
	case len(args) > 0:
		return usagef("import: unexpected argument %q", args[0])
	case manifest != "" || config != "":
		return usagef("import: --outputs imports model outputs; --manifest and --config import snapshots; give one kind")
	case out == "":
		return usagef("import: --out is required")
	case *o.shadowEvery < 0 || *o.shadowEvery == 1:
		return usagef("import: --shadow-every must be 0 (default) or at least 2, got %d", *o.shadowEvery)
	}
	sum, err := outputs.Import(ctx, outputs.ImportOptions{Input: *o.file, Out: out, ToolVersion: version,
		Options: outputs.Options{ShadowEvery: *o.shadowEvery}})
	var ie *outputs.InputError
	if errors.As(err, &ie) {
		return inputf("import: %v", err)
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == *o.file {
		// "import: --outputs x.csv: no such file or directory", not "x.csv: stat x.csv: ...".
		return fmt.Errorf("import: --outputs %s: %w", *o.file, pe.Err)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, sum)
	}
	fmt.Fprintf(e.stdout, "imported outputs of %d pairs x 2 worlds at rounds %v (%s, %d classes, %d reference records per run) into %s\n",
		sum.Pairs, sum.Rounds, sum.Format, sum.Classes, sum.References, out)
	fmt.Fprintf(e.stdout, "attacks scored: %v (LiRA fitted on %d shadow pairs, which it does not audit)\n", sum.Ran, sum.Shadow)
	for _, s := range sum.Skipped {
		fmt.Fprintf(e.stdout, "  not run: %s: %s\n", s.Attack, s.Why)
	}
	fmt.Fprintf(e.stdout, "threat model: %s\n", sum.Threat)
	fmt.Fprintf(e.stdout, "next: audit analyze %s [--claim-mu X | --claim-eps E --delta D]\n", out)
	return nil
}
