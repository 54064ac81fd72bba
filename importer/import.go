package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
)

// Options say what to import and where.
type Options struct {
	// Manifest lists the snapshots (ReadManifest).
	Manifest *Manifest
	// Config describes the deployment: data, adjacency, model, algorithm and noise, as for
	// fedaudit's own trainer; the import records it so that the later stages rebuild the data,
	// the theory and the claim from it.
	Config *experiment.Config
	// Out is the experiment directory to create; it must not exist or be empty.
	Out string
	// Names, when set, are the tensor names of the model's slots in layout order.
	Names []string
	// ToolVersion is recorded in the run file.
	ToolVersion string
	// Workers reading snapshots in parallel; 0 means all cores. The output does not depend on it.
	Workers int
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

// Result summarizes an import.
type Result struct {
	Dir       string   `json:"dir"`
	Pairs     int      `json:"pairs"`
	Rounds    []int    `json:"rounds"`
	Snapshots int      `json:"snapshots"`
	Params    int      `json:"params"`
	Layout    string   `json:"layout"`
	Dropped   []string `json:"dropped_attacks,omitempty"` // config attacks imported runs cannot support
}

// Record is DIR/import.json: where the runs came from.
type Record struct {
	Manifest string `json:"manifest"`
	Result
}

// ImportPath is where an imported experiment directory records its provenance.
func ImportPath(dir string) string { return filepath.Join(dir, "import.json") }

// statNames are the statistics an import records: the target sample's loss and margin in both
// worlds, computed from the imported parameters exactly as train computes them.
var statNames = []string{runs.StatTargetLossC, runs.StatTargetLossCPrime, runs.StatTargetMarginC, runs.StatTargetMarginCPrime}

// Import reads every snapshot of the manifest, checks it against the deployment's model and
// writes a standard experiment directory at opts.Out: runs/ (one run file), config.json and
// import.json. Nothing appears at opts.Out unless everything succeeded.
func Import(ctx context.Context, opts Options) (*Result, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := checkOut(opts.Out); err != nil {
		return nil, err
	}
	cfg := *opts.Config
	// Imported runs carry global parameters only: the trainer-internal statistics of the
	// informed adversary and the target's uploads are not observable from snapshots.
	cfg.Train.Informed, cfg.Train.RecordParams, cfg.Train.RecordUpload = false, true, false
	rounds := slices.Clone(cfg.Train.Checkpoints)
	slices.Sort(rounds)
	rounds = slices.Compact(rounds)
	if len(rounds) == 0 {
		return nil, &experiment.ConfigError{Err: errors.New("import: the config lists no train.checkpoints: they are the rounds the manifest must provide")}
	}
	plan, err := opts.Manifest.Validate(cfg.Pairs, rounds)
	if err != nil {
		return nil, &InputError{err}
	}
	data, err := experiment.Prepare(&cfg)
	if err != nil {
		return nil, err
	}
	dim := data.Pair.C[0].Dim()
	lay, err := LayoutOf(cfg.Train.Model, dim, data.Classes)
	if err != nil {
		return nil, err
	}
	ev, err := attacks.NewEvaluator(cfg.Train.Model, dim, data.Classes)
	if err != nil {
		return nil, err
	}
	meta := runs.Meta{
		Config:      cfg.TrainingJSON(),
		DatasetHash: data.Hash,
		ToolVersion: opts.ToolVersion,
		StatNames:   statNames,
		HasParams:   true,
	}
	dropped := dropInapplicable(&cfg, meta, logf)

	parent := filepath.Dir(filepath.Clean(opts.Out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(opts.Out))+".import-")
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.MkdirAll(expdir.Dir(tmp).Runs(), 0o755); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	w, err := runs.Create(filepath.Join(expdir.Dir(tmp).Runs(), runs.Shard{}.FileName()), meta)
	if err != nil {
		return nil, err
	}
	defer w.Abort()

	if err := readRounds(ctx, w, plan, lay, opts, ev, data, logf); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	res := &Result{Dir: opts.Out, Pairs: plan.Pairs, Rounds: plan.Rounds, Snapshots: 2 * plan.Pairs * len(plan.Rounds),
		Params: lay.D, Layout: lay.Describe(), Dropped: dropped}
	if err := commitImport(tmp, opts.Out, &cfg, Record{Manifest: opts.Manifest.Path, Result: *res}); err != nil {
		return nil, err
	}
	committed = true
	fsutil.SyncDir(parent)
	return res, nil
}

// dropInapplicable removes from the config's attack list the attacks the imported runs cannot
// feed (they need trainer-internal statistics or uploads) and returns their names.
func dropInapplicable(cfg *experiment.Config, meta runs.Meta, logf func(string, ...any)) []string {
	if len(cfg.Audit.Attacks) == 0 {
		return nil
	}
	var dropped []string
	skipped := attacks.Skipped(meta)
	kept := cfg.Audit.Attacks[:0:0]
	for _, a := range cfg.Audit.Attacks {
		if i := slices.IndexFunc(skipped, func(s attacks.Skip) bool { return s.Name == a }); i >= 0 {
			dropped = append(dropped, a)
			logf("import: audit.attacks: dropping %s: %s", a, skipped[i].Why)
			continue
		}
		kept = append(kept, a)
	}
	cfg.Audit.Attacks = kept
	return dropped
}

// readRounds reads every snapshot of the plan, one round at a time with all runs in parallel,
// and writes each round's rows in (pair, world) order: the order fedaudit's trainer writes, so
// files do not depend on the worker count.
func readRounds(ctx context.Context, w *runs.Writer, plan *Plan, lay Layout, opts Options, ev *attacks.Evaluator, data *experiment.Data, logf func(string, ...any)) error {
	target, targetPrime := data.Pair.Sample, data.Pair.SamplePrime
	if !targetPrime.Present() {
		targetPrime = target // removal: C' has no epsilon'; train scores the C sample in both columns too
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	rows := make([]runs.Row, 2*plan.Pairs)
	errs := make([]error, 2*plan.Pairs)
	for ri, round := range plan.Rounds {
		// One round at a time, all runs in parallel, written in (pair, world) order: the order
		// fedaudit's trainer writes, so files do not depend on the worker count.
		var wg sync.WaitGroup
		next := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range next {
					pair, world := r/2, r%2
					rows[r], errs[r] = readRow(plan.Files[pair][world][ri], pair, world, round, lay, opts.Names, ev, data, target, targetPrime)
				}
			}()
		}
	feed:
		for r := range rows {
			select {
			case next <- r:
			case <-ctx.Done():
				break feed
			}
		}
		close(next)
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := firstErrors(errs, 5); err != nil {
			return &InputError{fmt.Errorf("import: round %d: %w", round, err)}
		}
		if err := w.Write(rows...); err != nil {
			return err
		}
		logf("import: round %d: %d runs read", round, len(rows))
	}
	return nil
}

// commitImport writes the config and the import record into the temporary directory tmp and
// renames it to out (an empty directory there is replaced): nothing is visible at out before
// the import is complete.
func commitImport(tmp, out string, cfg *experiment.Config, rec Record) error {
	if err := fsutil.WriteFile(expdir.Dir(tmp).Config(), append(cfg.JSON(), '\n')); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(rec, "", "  ")
	if err := fsutil.WriteFile(ImportPath(tmp), append(raw, '\n')); err != nil {
		return err
	}
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("import: %w", err) // only an empty directory is removed
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

// checkOut refuses a destination that holds anything: an import never mixes with other runs.
func checkOut(out string) error {
	if out == "" {
		return &experiment.ConfigError{Err: errors.New("import: no output directory (--out)")}
	}
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("import: %w", err)
	case len(ents) > 0:
		return &experiment.ConfigError{Err: fmt.Errorf("import: %s exists and is not empty; choose another --out", out)}
	}
	return nil
}

// readRow reads one snapshot into a run-file row with the statistics train records.
func readRow(file string, pair, world, round int, lay Layout, names []string, ev *attacks.Evaluator, data *experiment.Data,
	target, targetPrime datasets.Sample) (runs.Row, error) {
	ts, err := ingest.ReadFile(file)
	if err != nil {
		return runs.Row{}, err
	}
	params, err := lay.Flatten(ts, names)
	if err != nil {
		return runs.Row{}, fmt.Errorf("%s (pair %d, world %s, round %d): %w", file, pair, runs.WorldName(int8(world)), round, err)
	}
	clients := data.Pair.C
	if world == 1 {
		clients = data.Pair.CPrime
	}
	trainLoss, _, err := ev.Dataset(params, clients...)
	if err != nil {
		return runs.Row{}, err
	}
	acc := 0.0
	if data.Test != nil {
		if _, acc, err = ev.Dataset(params, data.Test); err != nil {
			return runs.Row{}, err
		}
	}
	lc, mc, err := ev.LossMargin(params, target)
	if err != nil {
		return runs.Row{}, err
	}
	lp, mp, err := ev.LossMargin(params, targetPrime)
	if err != nil {
		return runs.Row{}, err
	}
	return runs.Row{
		RunID: int64(2*pair + world), PairID: int64(pair), World: int8(world), Round: int32(round),
		TrainLoss: trainLoss, TestAccuracy: acc, Stats: []float64{lc, lp, mc, mp}, Params: params,
	}, nil
}

// firstErrors joins the first n errors of errs and counts the rest, so a manifest of broken files
// gives a readable message.
func firstErrors(errs []error, n int) error {
	var out []error
	count := 0
	for _, e := range errs {
		if e == nil {
			continue
		}
		if count < n {
			out = append(out, e)
		}
		count++
	}
	if count > n {
		out = append(out, fmt.Errorf("... %d snapshots failed in all", count))
	}
	return errors.Join(out...)
}
