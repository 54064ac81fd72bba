package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
	"github.com/fedaudit/fedaudit/train/privacy"
)

// Options say what to import and where.
type Options struct {
	// Manifest lists the snapshots (ReadManifest).
	Manifest *Manifest
	// Config describes the deployment: data, adjacency, model, algorithm and noise, as for
	// fedaudit's own trainer; the import records it so that the later stages rebuild the data,
	// the theory and the claim from it. A model of kind external (model.External) stands for an
	// architecture fedaudit does not know: its tensors are imported as they are.
	Config *spec.Config
	// Out is the experiment directory to create; it must not exist or be empty.
	Out string
	// Names, when set, are the tensor names of the model's slots in layout order (for an
	// external model: the tensors that are its parameters, in the order to keep).
	Names []string
	// UploadUpdates says the manifest's uploads are model updates (the upload minus w_{t-1},
	// what many frameworks send) rather than the uploaded models themselves.
	UploadUpdates bool
	// ToolVersion is recorded in the run file.
	ToolVersion string
	// Workers reading snapshots in parallel; 0 means all cores. The output does not depend on it.
	Workers int
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
	// Warnf, when set, receives the warnings (also in Result.Warnings); unset, they go to Logf.
	Warnf func(format string, args ...any)
}

// Result summarizes an import.
type Result struct {
	Dir       string `json:"dir"`
	Pairs     int    `json:"pairs"`
	Rounds    []int  `json:"rounds"`
	Snapshots int    `json:"snapshots"`
	// Uploads counts the target client's uploads imported (zero: none; the uploads observer
	// is then not audited); OtherUploads the other clients' uploads the manifest listed, which
	// no attack reads.
	Uploads      int    `json:"uploads,omitempty"`
	OtherUploads int    `json:"other_uploads,omitempty"`
	Params       int    `json:"params"`
	Model        string `json:"model"`
	Layout       string `json:"layout"`
	// Statistics says whether the runs carry the target's loss and margin (train's evaluation
	// of a model fedaudit knows); an external model has none.
	Statistics bool `json:"statistics"`
	// Replayed says whether the informed adversary's statistics were computed by replaying the
	// rounds (replay.go).
	Replayed bool     `json:"replayed"`
	Dropped  []string `json:"dropped_attacks,omitempty"` // config attacks imported runs cannot support
	// Warnings are what the import noticed but could not decide: the target client's upload
	// files look like updates while read as models, or the other way round (their norms beside
	// w_{t-1}'s); uploads that agree bit for bit across pairs (copies, or uploads without
	// noise: uploadCopies).
	Warnings []string `json:"warnings,omitempty"`
}

// Record is DIR/import.json: where the runs came from.
type Record struct {
	Manifest string `json:"manifest"`
	Result
}

// ImportPath is where an imported experiment directory records its provenance.
func ImportPath(dir string) string { return expdir.Dir(dir).ImportRecord() }

// statNames are the statistics an import records for a model fedaudit knows: the target
// sample's loss and margin in both worlds, computed from the imported parameters by train's own
// evaluation (train.Evaluate), in the order train's runs record them.
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
	cfg, rounds, err := importConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	data, err := spec.PrepareContext(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	plan, probs := planImport(&cfg, data, rounds, opts.Manifest, logf)
	if probs.len() > 0 {
		return nil, listSnapshotProblems(ctx, &cfg, data, plan, opts, logf, probs)
	}
	lay, err := layoutFor(&cfg, data, plan, opts.Names)
	if err != nil {
		return nil, err
	}
	known := !lay.External
	var rp *replayer
	if cfg.Train.Informed {
		if err := canReplay(cfg.Train, len(data.Pair.C), known, rounds); err != nil {
			logf("import: the informed adversary's statistics are not computed: %v", err)
			cfg.Train.Informed = false
		} else {
			rp = newReplayer(cfg.Train, 2*plan.Pairs, len(data.Pair.C), plan.Uploads != nil)
		}
	}
	meta := importMeta(&cfg, data, opts.ToolVersion, plan.Uploads != nil, rp, known)
	dropped := dropInapplicable(&cfg, meta, logf)
	if len(cfg.Audit.Attacks) == 0 && len(dropped) > 0 {
		// An empty list means every attack the run files support: the analysis would score
		// attacks the config never chose (or fail on one that needs w_0).
		return nil, &spec.ConfigError{Err: fmt.Errorf("audit.attacks: no attack of %s can score the imported runs (see the reasons above): list attacks that can (audit attack --list), or leave audit.attacks out to score every one that can",
			strings.Join(dropped, ", "))}
	}
	// What the analysis of the imported directory needs of it, refused before anything is
	// written: an attack that reads w_0 without round 0 among the snapshots failed that
	// analysis (exit 1) after the import.
	if err := spec.CheckImportedStages(&cfg, meta); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}

	parent, tmp, lock, err := tempBeside(opts.Out, logf)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
		lock.Unlock()
	}()
	w, err := runs.Create(filepath.Join(expdir.Dir(tmp).Runs(), runs.Shard{}.FileName()), meta)
	if err != nil {
		return nil, err
	}
	defer w.Abort()

	rd := &reader{plan: plan, lay: lay, opts: opts, known: known, replay: rp, logf: logf,
		job:   train.Job{Config: cfg.Train, WorldC: data.Pair.C, WorldCPrime: data.Pair.CPrime, Target: data.Target, Test: data.Test},
		group: train.GroupSize(cfg.Train, memory.SizesOf(data.Pair.C, data.Test), plan.Pairs)}
	uploads, found, err := rd.readRounds(ctx, w, probs)
	if err != nil {
		return nil, err
	}
	if probs.len() > 0 {
		return nil, &InputError{probs.err("import: snapshots of " + opts.Manifest.Path)}
	}
	var warnings []string
	for _, warning := range found {
		warnings = append(warnings, warn(opts, logf, warning)...)
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	res := &Result{Dir: opts.Out, Pairs: plan.Pairs, Rounds: plan.Rounds, Snapshots: 2 * plan.Pairs * len(plan.Rounds),
		Uploads: uploads, OtherUploads: plan.OtherUploads, Params: lay.D, Model: cfg.Train.Model.Kind, Layout: lay.Describe(),
		Statistics: known, Replayed: rp != nil, Dropped: dropped, Warnings: warnings}
	if err := commitImport(tmp, opts.Out, &cfg, Record{Manifest: opts.Manifest.Path, Result: *res}); err != nil {
		return nil, err
	}
	committed = true
	fsutil.SyncDir(parent)
	return res, nil
}

// importConfig is the deployment's config as an import uses it: refused where imported runs
// cannot keep its promises (canaries, add and remove adjacency for a model fedaudit evaluates,
// no checkpoints), with parameters recorded and uploads left to the manifest; rounds are its
// checkpoints, sorted and distinct. Every refusal comes before any data is prepared or
// snapshot read.
func importConfig(c *spec.Config) (spec.Config, []int, error) {
	cfg := *c
	if cc := cfg.Train.Canaries; cc != nil && cc.Count > 0 {
		// The manifest has no place for canary inclusion bits or their observations: runs
		// imported under such a config would be audited without the one-run rows it promises.
		return cfg, nil, &spec.ConfigError{Err: fmt.Errorf("import: the config declares %d canaries (train.canaries), which imported runs cannot carry; remove train.canaries to audit the coupled pairs", cc.Count)}
	}
	if k := cfg.Adjacency.Kind; (k == "add" || k == "remove") && cfg.Train.Model.Kind != model.External {
		// Evaluation runs both worlds' clients side by side, with equal sample counts (the
		// trainer's code, bit for bit): it failed after every snapshot had been read.
		return cfg, nil, &spec.ConfigError{Err: fmt.Errorf("import: adjacency %s changes client %d's number of samples between C and C', which fedaudit's evaluation of a %s cannot run side by side: use replace (the canary in place of one sample), or model kind external (parameter-space attacks only)", k, cfg.Adjacency.Client, cfg.Train.Model.Kind)}
	}
	// Imported runs carry global parameters (and uploads where the manifest lists them); the
	// informed adversary's statistics are replayed where that is possible (replay.go).
	cfg.Train.RecordParams, cfg.Train.RecordUpload = true, false
	rounds := slices.Clone(cfg.Train.Checkpoints)
	slices.Sort(rounds)
	rounds = slices.Compact(rounds)
	if len(rounds) == 0 {
		return cfg, nil, &spec.ConfigError{Err: errors.New("import: the config lists no train.checkpoints: they are the rounds the manifest must provide")}
	}
	if rounds[len(rounds)-1] < 1 {
		// Every attack scores models of rounds 1 and later: the import would succeed and the
		// analysis then find no round to score.
		return cfg, nil, &spec.ConfigError{Err: fmt.Errorf("import: train.checkpoints %v lists no round after 0, and the attacks score the models of rounds 1 and later: list the rounds the manifest provides (e.g. 0 and the final round)", rounds)}
	}
	return cfg, rounds, nil
}

// importMeta is the run file's metadata of an import: the training config, the data's hash, the
// parameters always and the uploads where the manifest lists them, and the statistics the
// import computes (the replayed informed adversary's, then the evaluated ones where the model
// is known).
func importMeta(cfg *spec.Config, data *spec.Data, toolVersion string, hasUpload bool, rp *replayer, known bool) runs.Meta {
	meta := runs.Meta{
		Config:      cfg.TrainingJSON(),
		DatasetHash: data.Hash,
		ToolVersion: toolVersion,
		HasParams:   true,
		HasUpload:   hasUpload,
	}
	if rp != nil {
		meta.StatNames = rp.names()
	}
	if known {
		meta.StatNames = append(meta.StatNames, statNames...)
	}
	return meta
}

// planImport checks the manifest against the deployment (Manifest.validate, with the canary
// convention of its adjacency) and returns the plan of what it lists with the problems found;
// with the target client's uploads it turns cfg's record_upload on, a problem where the
// deployment cannot have them.
func planImport(cfg *spec.Config, data *spec.Data, rounds []int, m *Manifest, logf func(string, ...any)) (*Plan, *problems) {
	participants := cfg.Train.Participants
	adj := cfg.Adjacency.Kind
	if adj == "" {
		adj = "replace"
	}
	plan, probs := m.validate(Expect{Pairs: cfg.Pairs, Rounds: rounds, Clients: len(data.Pair.C),
		TargetClient: data.Target.Client, Partial: participants > 0 && participants < len(data.Pair.C),
		CanaryInC: cfg.Adjacency.DifferingWorld() == runs.WorldC, Adjacency: adj})
	if plan.OtherUploads > 0 {
		logf("import: skipping %d uploads of clients other than the target client %d: the uploads observer sees the target's", plan.OtherUploads, data.Target.Client)
	}
	if plan.Uploads != nil {
		cfg.Train.RecordUpload = true
		if err := cfg.Validate(); err != nil {
			probs.add("the manifest lists the target client's uploads, which this deployment cannot have: %v", err)
		}
	}
	return plan, probs
}

// warn hands a warning ("" for none) to opts.Warnf, else to logf, and returns the warnings.
func warn(opts Options, logf func(string, ...any), warning string) []string {
	if warning == "" {
		return nil
	}
	if opts.Warnf != nil {
		opts.Warnf("%s", warning)
	} else {
		logf("import: warning: %s", warning)
	}
	return []string{warning}
}

// listSnapshotProblems reads the snapshots a manifest with problems lists all the same, so that
// one run lists their problems too (nothing is evaluated or written), and returns the error
// listing them all.
func listSnapshotProblems(ctx context.Context, cfg *spec.Config, data *spec.Data, plan *Plan, opts Options, logf func(string, ...any), probs *problems) error {
	if lay, err := layoutFor(cfg, data, plan, opts.Names); err == nil {
		rd := &reader{plan: plan, lay: lay, opts: opts, logf: logf}
		if _, _, err := rd.readRounds(ctx, nil, probs); err != nil {
			return err
		}
	} else if plan.Files[0][0][0] != "" {
		probs.add("%v", err) // an external model's layout (with no first snapshot, said already)
	}
	return &InputError{probs.err("import: manifest " + opts.Manifest.Path)}
}

// layoutFor is the parameter layout of the deployment's model; for a model of kind external,
// the one of the first snapshot (pair 0, world C, first checkpoint).
func layoutFor(cfg *spec.Config, data *spec.Data, plan *Plan, names []string) (Layout, error) {
	if cfg.Train.Model.Kind != model.External {
		return LayoutOf(cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	}
	first := plan.Files[0][0][0]
	ts, err := ingest.ReadFile(first)
	if err != nil {
		return Layout{}, &InputError{err}
	}
	lay, err := ExternalLayout(ts, names)
	if err != nil {
		return Layout{}, &InputError{fmt.Errorf("%s: model kind external takes its layout from the first snapshot: %w", first, err)}
	}
	return lay, nil
}

// dropInapplicable removes from the config's attack list the attacks the imported runs cannot
// feed (they need trainer-internal statistics, uploads, or a model fedaudit can evaluate) and
// returns their names.
func dropInapplicable(cfg *spec.Config, meta runs.Meta, logf func(string, ...any)) []string {
	if len(cfg.Audit.Attacks) == 0 {
		return nil
	}
	var dropped []string
	skipped := append(attacks.ModelSkipped(cfg.Train.Model), attacks.Skipped(meta)...)
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

// reader reads the snapshots of a plan into run-file rows.
type reader struct {
	plan  *Plan
	lay   Layout
	opts  Options
	known bool // the model is one fedaudit evaluates: rows carry train's statistics
	// replay, when set, computes the informed adversary's statistics (replay.go).
	replay *replayer
	logf   func(string, ...any)
	// job is the deployment as train sees it, group the pairs train evaluates at once.
	job   train.Job
	group int
	nan   []float32 // the upload vector of a row without one (all NaN), made once
	// dpPlan is the DP-FedAvg family's privacy plan (privacyPlan), once planMade.
	dpPlan   *privacy.Plan
	planMade bool
}

// readRounds reads every snapshot of the plan, one round at a time with all runs in parallel,
// and writes each round's rows in (pair, world) order: the order fedaudit's trainer writes, so
// files do not depend on the worker count. It returns the number of uploads imported and the
// warnings: uploads that agree across pairs (uploadCopies) and the uploads' kind
// (uploadKindWarning).
//
// A snapshot that cannot be read, does not fit the model or breaks a rule (round 0: every run
// starts from the same w_0) is a problem, added to probs; once probs holds one (the manifest's
// own, from the start), the remaining rounds are only read and checked, not evaluated or written
// (w may then be nil), so that one pass lists every problem of every round. Snapshots the plan
// lacks ("") are skipped: the manifest's problems name them.
func (rd *reader) readRounds(ctx context.Context, w *runs.Writer, probs *problems) (int, []string, error) {
	plan := rd.plan
	workers := rd.opts.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	n := 2 * plan.Pairs
	params, uploads := make([][]float32, n), make([][]float32, n)
	var prev [][]float32 // the previous checkpoint's parameters (w_{t-1} for uploads)
	errs := make([][2]error, n)
	norms := make([]uploadNorms, n)
	var allNorms []uploadNorms
	var copied []string // warnings of uploads that agree across pairs
	count := 0
	apart, compared := false, 0 // whether some pair's worlds differ after round 0, of how many
	quietWarned := false        // whether runs closer than the declared noise allows were named
	for ri, round := range plan.Rounds {
		err := parallelRuns(ctx, workers, n, func(r int) {
			var p []float32
			if prev != nil {
				p = prev[r]
			}
			params[r], uploads[r], norms[r], errs[r] = rd.readRun(r, ri, p)
		})
		if err != nil {
			return 0, nil, err
		}
		for r := range n {
			for _, e := range errs[r] {
				if e != nil {
					probs.add("%v", e)
				}
			}
			if uploads[r] != nil {
				allNorms = append(allNorms, norms[r])
			}
		}
		if round == 0 {
			rd.checkInitial(params, ri, probs)
		} else {
			cfg := &rd.job.Config
			noisy := cfg.Noisy() // idp-fedavg's and adaptive-fedavg's noise is train.privacy's
			rd.checkCopies(params, ri, noisy, probs)
			if w := rd.checkNearCopies(params, ri, rd.roundNoiseStd(ctx, round), probs); w != "" && !quietWarned {
				copied, quietWarned = append(copied, w), true // once: every round says the same
			}
			copied = append(copied, rd.uploadCopies(uploads, norms, ri, noisy)...)
			rd.worldsApart(params, ri, &apart, &compared)
		}
		if probs.len() > 0 {
			// Check only from here on: the later rounds' problems are listed too.
			rd.logf("import: round %d: %d problem(s) so far; reading the other rounds to list theirs", round, probs.len())
		} else {
			c, err := rd.writeRound(ctx, w, round, prev, params, uploads)
			if err != nil {
				return 0, nil, err
			}
			count += c
		}
		prev, params = params, prev
		if params == nil {
			params = make([][]float32, n)
		}
	}
	if !apart && compared > 0 && rd.targetAlwaysTrains(ctx) {
		// Both worlds trained on one world's data (C' runs trained on c/client*): every pair's
		// rows would certify nothing, a CONSISTENT no deployment earned.
		probs.add("the two runs of every pair hold the same model bit for bit at every checkpoint after round 0 (%d comparisons of %d pairs), where the target client takes part in every round and its differing data enters every step of its training, so the worlds differ from round 1 on: did the runs of world C' train on world C's data (c/client* rather than cprime/client*, docs/import.md)? Audited, they would certify nothing whatever the deployment", compared, plan.Pairs)
	}
	if probs.len() > 0 {
		return 0, nil, nil
	}
	if kind := uploadKindWarning(allNorms, rd.opts.UploadUpdates); kind != "" {
		copied = append(copied, kind)
	}
	return count, copied, nil
}

// readRun reads the snapshots of run r (2 pair + world) at checkpoint ri: its global model and,
// where the plan lists one, the target client's upload, made the uploaded model from an update
// with prev (w_{t-1}; nil where it could not be read), with the norms that tell the two kinds
// apart. errs holds the global model's problem and the upload's.
func (rd *reader) readRun(r, ri int, prev []float32) (params, upload []float32, norms uploadNorms, errs [2]error) {
	plan, round := rd.plan, rd.plan.Rounds[ri]
	pair, world := r/2, r%2
	if file := plan.Files[pair][world][ri]; file != "" {
		params, errs[0] = rd.snapshot(file, pair, world, round, "")
	}
	if plan.Uploads == nil || round == 0 {
		return params, nil, norms, errs
	}
	file := plan.Uploads[pair][world][ri]
	if file == "" {
		return params, nil, norms, errs // the target client sat this round out (partial participation)
	}
	up, err := rd.snapshot(file, pair, world, round, "upload of ")
	if err != nil || prev == nil {
		// Without w_{t-1} (it could not be read, or is not listed) a problem is listed already.
		errs[1] = err
		return params, nil, norms, errs
	}
	norms = normsOf(up, prev)
	norms.digest = digestBits(up) // the file's values, before an update is made an upload
	if rd.opts.UploadUpdates {
		// An update u = upload - w_{t-1}: the upload is w_{t-1} + u (validation made round-1 a
		// checkpoint, read in the previous iteration).
		for i, v := range prev {
			up[i] += v
			if math.IsInf(float64(up[i]), 0) {
				// Both finite, their float32 sum is not: refused as Flatten refuses such a model.
				errs[1] = fmt.Errorf("%s (upload of pair %d, world %s, round %d): parameter %d (%s) of the update plus w_%d is %v: the upload is not a finite model",
					file, pair, runs.WorldName(int8(world)), round, i, rd.lay.slotOf(i), round-1, up[i])
				return params, nil, norms, errs
			}
		}
	}
	return params, up, norms, errs
}

// writeRound writes one round's rows: train's statistics of the imported parameters, the
// informed adversary's replayed ones, and the uploads (a NaN vector where none was made). It
// returns the number of uploads written.
func (rd *reader) writeRound(ctx context.Context, w *runs.Writer, round int, prev, params, uploads [][]float32) (int, error) {
	rows, err := rd.rows(ctx, round, params)
	if err != nil {
		return 0, err
	}
	if rd.replay != nil {
		var stats [][]float64
		if round == 0 {
			stats = make([][]float64, len(rows))
			for r := range stats {
				stats[r] = rd.replay.zero()
			}
		} else if stats, err = rd.replay.round(ctx, rd.job, round-1, prev, params, uploads, rd.group,
			func(r int) bool { return rd.diverged(r, round) }); err != nil {
			return 0, err
		}
		for r := range rows {
			rows[r].Stats = append(stats[r], rows[r].Stats...)
		}
	}
	count := 0
	if rd.plan.Uploads != nil {
		for r := range rows {
			switch {
			case uploads[r] != nil:
				rows[r].Upload = uploads[r]
				count++
			default:
				// No upload (round 0, or the target sat the round out): the row keeps its place
				// with a NaN vector, which attacks read as "not observed", as train records it.
				if rd.nan == nil {
					rd.nan = make([]float32, rd.lay.D)
					for i := range rd.nan {
						rd.nan[i] = float32(math.NaN())
					}
				}
				rows[r].Upload = rd.nan
			}
		}
	}
	if err := w.Write(rows...); err != nil {
		return 0, err
	}
	rd.logf("import: round %d: %d runs read", round, len(rows))
	return count, nil
}

// parallelRuns calls fn(0..n-1) on workers goroutines and returns ctx's error if it was
// cancelled meanwhile.
func parallelRuns(ctx context.Context, workers, n int, fn func(int)) error {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				fn(r)
			}
		}()
	}
feed:
	for r := range n {
		select {
		case next <- r:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return ctx.Err()
}

// snapshot reads one snapshot file into the flat parameter vector; an error names the file and
// the run, world and round it holds.
func (rd *reader) snapshot(file string, pair, world, round int, what string) ([]float32, error) {
	v, err := func() ([]float32, error) {
		raw, err := os.ReadFile(file)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = fmt.Errorf("%s: %w", pe.Op, pe.Err) // the path is named below
			}
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		var ts []ingest.Tensor
		if len(rd.opts.Names) == 0 {
			// Every tensor is then one of the model's (Flatten), so none holds more than D
			// values: a larger one is refused before it is converted or decompressed.
			ts, err = ingest.ParseAtMost(raw, name, rd.lay.D)
		} else {
			// With --names the file may hold other tensors, of any size and dtype (an I64
			// buffer of a state_dict), that are not read.
			ts, err = ingest.ParseNamed(raw, name, rd.lay.D, rd.opts.Names)
		}
		if err != nil {
			return nil, err
		}
		return rd.lay.Flatten(ts, rd.opts.Names)
	}()
	if err != nil {
		return nil, fmt.Errorf("%s (%spair %d, world %s, round %d): %w", file, what, pair, runs.WorldName(int8(world)), round, err)
	}
	return v, nil
}

// rows turns one round's parameter vectors (run 2 pair + world) into run-file rows with the
// statistics train records at a checkpoint: for a model fedaudit knows, train's own evaluation
// of them (train.Evaluate) in groups of pairs of bounded memory; for an external model none
// (loss and accuracy NaN, as train records an unknown test accuracy).
func (rd *reader) rows(ctx context.Context, round int, params [][]float32) ([]runs.Row, error) {
	rows := make([]runs.Row, len(params))
	for r := range rows {
		rows[r] = runs.Row{RunID: int64(r), PairID: int64(r / 2), World: int8(r % 2), Round: int32(round),
			TrainLoss: math.NaN(), TestAccuracy: math.NaN(), Params: params[r]}
		if d := rd.plan.Diverged; d != nil {
			rows[r].Diverged = d[r/2][r%2][slices.Index(rd.plan.Rounds, round)]
		}
	}
	if !rd.known {
		return rows, nil
	}
	job, pairs, size := rd.job, rd.plan.Pairs, rd.group
	for first := 0; first < pairs; first += size {
		job.Pairs = train.PairRange{First: first, Count: min(size, pairs-first)}
		cp, err := train.Evaluate(ctx, job, round, params[2*first:2*(first+job.Pairs.Count)])
		if err != nil {
			return nil, fmt.Errorf("import: round %d: evaluate pairs %d..%d: %w", round, first, first+job.Pairs.Count-1, err)
		}
		for j, s := range cp.Replicas {
			row := &rows[2*first+j]
			row.TrainLoss, row.TestAccuracy = s.TrainLoss, s.TestAccuracy
			row.Stats = []float64{s.TargetLoss[0], s.TargetLoss[1], s.TargetMargin[0], s.TargetMargin[1]}
		}
	}
	return rows, nil
}

// tempBeside makes the hidden temporary directory beside out that an import fills (with its
// runs/ folder) and renames into place, locked (its lock goes with it to out); parent is out's
// parent directory. The staging directories of killed imports of out, which no process holds,
// are removed first (they stayed forever).
func tempBeside(out string, logf func(string, ...any)) (parent, tmp string, lock *fsutil.Lock, err error) {
	parent = filepath.Dir(filepath.Clean(out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", "", nil, fmt.Errorf("import: %w", err)
	}
	tmp, lock, removed, err := fsutil.StagingDir(parent, "."+filepath.Base(filepath.Clean(out))+".import-", "audit import")
	for _, d := range removed {
		logf("import: removed %s, left by a killed import", d)
	}
	if err != nil {
		return "", "", nil, fmt.Errorf("import: %w", err)
	}
	if err := os.MkdirAll(expdir.Dir(tmp).Runs(), 0o755); err != nil {
		lock.Unlock()
		os.RemoveAll(tmp)
		return "", "", nil, fmt.Errorf("import: %w", err)
	}
	return parent, tmp, lock, nil
}

// commitImport writes the config and the import record into the temporary directory tmp and
// renames it to out (an empty directory there is replaced): nothing is visible at out before
// the import is complete.
func commitImport(tmp, out string, cfg *spec.Config, rec Record) error {
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
		return &spec.ConfigError{Err: errors.New("import: no output directory (--out)")}
	}
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("import: %w", err)
	case len(ents) > 0:
		return &spec.ConfigError{Err: fmt.Errorf("import: %s exists and is not empty; choose another --out", out)}
	}
	return nil
}
