package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/importer"
)

func init() {
	register(&command{
		name:    "import",
		summary: "import runs trained elsewhere: model snapshots (safetensors, .npy, .npz) or per-record model outputs (CSV, Parquet, Arrow)",
		usage:   "import --manifest M --config CFG --out DIR [--names t1,t2,...] [--uploads model|update] [--workers n] [--json]  |  import --outputs FILE --out DIR [--shadow-every k] [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			manifest := fs.String("manifest", "", "CSV or JSON manifest: file, world (C or C'), pair, round[, client, canary]; rows with a client are that client's uploads; canary is true in C' (fedaudit's canary is there), false in C (docs/import.md)")
			config := fs.String("config", "", "experiment YAML describing the deployment (data, adjacency, model, algorithm, noise, checkpoints)")
			out := fs.String("out", "", "experiment directory to create (must not exist or be empty)")
			names := fs.String("names", "", "tensor names of the model's parameters in layout order (default: the file's order, or one flat vector)")
			uploads := fs.String("uploads", "model", "what the manifest's upload snapshots hold: model (the uploaded model) or update (upload minus w_{t-1})")
			workers := fs.Int("workers", 0, "parallel readers (0: all cores); the output does not depend on it")
			asJSON := fs.Bool("json", false, "print the import summary as JSON")
			of := registerOutputsFlags(fs) // --outputs: per-record model outputs (cmd_import_outputs.go)
			return func(ctx context.Context, e *env, args []string) error {
				// A flag of the other kind of import would be ignored without a word: a user
				// who set --shadow-every for snapshots believed it took effect.
				if of.set() {
					for _, f := range []string{"names", "uploads"} {
						if flagGiven(fs, f) {
							return usagef("import: --%s applies to snapshots (--manifest), not to --outputs", f)
						}
					}
					return of.run(ctx, e, args, *manifest, *config, *out, *asJSON)
				}
				if flagGiven(fs, "shadow-every") {
					return usagef("import: --shadow-every applies to --outputs (the pairs LiRA is fitted on); the attacks on imported snapshots choose theirs as audit attack does")
				}
				if len(args) > 0 {
					return usagef("import: unexpected argument %q", args[0])
				}
				if *manifest == "" || *config == "" || *out == "" {
					return usagef("import: --manifest, --config and --out are required")
				}
				if *uploads != "model" && *uploads != "update" {
					return usagef("import: --uploads %q: want model or update", *uploads)
				}
				cfg, err := spec.Load(*config)
				if err != nil {
					return err
				}
				m, err := importer.ReadManifest(*manifest)
				var pe *os.PathError
				if errors.As(err, &pe) {
					// A manifest that cannot be read is a failure (exit 1), as a --config that
					// cannot be; one that cannot be parsed is bad input (exit 2).
					return fmt.Errorf("import: %w", err)
				}
				if err != nil {
					return inputf("import: %v", err)
				}
				res, err := importer.Import(ctx, importer.Options{
					Manifest: m, Config: cfg, Out: *out, Names: splitList(*names), UploadUpdates: *uploads == "update",
					ToolVersion: version, Workers: *workers, Logf: e.logf,
					// Warnings reach stderr even with --quiet, and the summary below repeats them.
					Warnf: func(format string, args ...any) {
						fmt.Fprintf(e.stderr, "audit: import: warning: "+format+"\n", args...)
					},
				})
				var ie *importer.InputError
				if errors.As(err, &ie) {
					return inputf("%v", err)
				}
				if err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(e.stdout, res)
				}
				fmt.Fprintf(e.stdout, "imported %d pairs x 2 worlds x %d checkpoints %v (%d snapshots, %d parameters) into %s\n",
					res.Pairs, len(res.Rounds), res.Rounds, res.Snapshots, res.Params, res.Dir)
				if res.Uploads > 0 {
					fmt.Fprintf(e.stdout, "uploads: %d of the target client (the uploads observer is audited)\n", res.Uploads)
				}
				if res.Replayed {
					fmt.Fprintf(e.stdout, "informed adversary: statistics replayed from the imported rounds\n")
				}
				fmt.Fprintf(e.stdout, "model %s, layout: %s\n", res.Model, res.Layout)
				for _, w := range res.Warnings {
					fmt.Fprintf(e.stdout, "warning: %s\n", w)
				}
				fmt.Fprintf(e.stdout, "next: audit analyze %s   (or audit attack --runs %s; audit report %s)\n", res.Dir, res.Dir, res.Dir)
				return nil
			}
		},
	})
}
