package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

// ShardPairs returns the pairs of shard s: a contiguous, balanced slice of [0, pairs), so shard
// i/n of a job holds exactly the pairs it would hold in a one-shard job.
func ShardPairs(pairs int, s runs.Shard) train.PairRange {
	n := max(s.Count, 1)
	first := s.Index * pairs / n
	end := (s.Index + 1) * pairs / n
	return train.PairRange{First: first, Count: end - first}
}

// TrainOptions tune the training stage.
type TrainOptions struct {
	// ToolVersion is recorded in every run file.
	ToolVersion string
	// Progress, when set, is called after every round.
	Progress func(done, total int)
	// Logf, when set, receives one line per skipped or redone shard.
	Logf func(format string, args ...any)
	// Backend is "cpu" (default), "gpu" (the CUDA backend, in builds with the gpu tag) or
	// "auto" (the GPU when this build has one). Results agree to float rounding.
	Backend string
	// Device is the GPU ordinal for the gpu backend.
	Device int
	// Devices, when it lists more than one GPU, trains as many shards at once, each on a
	// device of its own (Device is then not used): results do not depend on which device
	// trains which shard.
	Devices []int
}

// trainOn trains the pairs on the chosen backend.
func trainOn(ctx context.Context, cfg *spec.Config, data *spec.Data, pairs train.PairRange, rec checkpoint.Recorder, opts TrainOptions) error {
	backend := opts.Backend
	if backend == "auto" {
		backend = "cpu"
		if cuda.Available() {
			backend = "gpu"
		}
	}
	job := train.Job{
		Config: cfg.Train, WorldC: data.Pair.C, WorldCPrime: data.Pair.CPrime, Target: data.Target, Test: data.Test,
		Pairs: pairs, Recorder: rec, Progress: opts.Progress, Initial: data.Initial,
	}
	switch backend {
	case "", "cpu":
		return train.Train(ctx, job)
	case "gpu":
		g, err := OpenGPUTrainer(opts.Device)
		if err != nil {
			return err
		}
		if opts.Logf != nil {
			for _, line := range GPUEnvLines(os.Environ()) {
				opts.Logf("%s", line)
			}
		}
		err = g.Train(ctx, job)
		if cuda.SwitchOn(cuda.ProfileEnv) && opts.Logf != nil {
			prof, perr := g.be.Profile()
			for _, line := range profileLines(prof, profileLogTop) {
				opts.Logf("%s", line)
			}
			if perr != nil {
				opts.Logf("gpu profile: %v", perr)
			}
		}
		return errors.Join(err, g.Close())
	}
	return fmt.Errorf("backend %q is not cpu, gpu or auto", opts.Backend)
}

// GPUEnvLines are the log lines that say which of the GPU backend's tuning variables environ
// sets (cuda.EnvSettings), and warn of any variable with the backend's prefix that changes
// nothing (a misspelt name, a switch not set to 1); none when there are neither.
func GPUEnvLines(environ []string) []string {
	set, problems := cuda.EnvSettings(environ)
	var lines []string
	if len(set) > 0 {
		lines = append(lines, "gpu: options from the environment: "+strings.Join(set, " "))
	}
	for _, p := range problems {
		lines = append(lines, "gpu: warning: "+p)
	}
	return lines
}

// profileLogTop is how many operations a profiled GPU training logs.
const profileLogTop = 12

// profileLines describes where a profiled GPU training's device time went
// (FEDAUDIT_CUDA_PROFILE=1, cuda.Ops.Profile), for the log: the total, then the top operations
// (prof is sorted, the largest first) with their calls, seconds and share, then the rest.
func profileLines(prof []cuda.OpTime, top int) []string {
	if len(prof) == 0 {
		return nil
	}
	total, calls := 0.0, 0
	for _, p := range prof {
		total, calls = total+p.Seconds, calls+p.Calls
	}
	share := func(s float64) float64 {
		if total <= 0 {
			return 0
		}
		return 100 * s / total
	}
	lines := []string{fmt.Sprintf("gpu profile: %.3f s of device time in %d calls; the largest:", total, calls)}
	for _, p := range prof[:min(top, len(prof))] {
		lines = append(lines, fmt.Sprintf("gpu profile: %-40s %8d calls %10.4f s %5.1f%%", p.Op, p.Calls, p.Seconds, share(p.Seconds)))
	}
	if rest := prof[min(top, len(prof)):]; len(rest) > 0 {
		n, s := 0, 0.0
		for _, p := range rest {
			n, s = n+p.Calls, s+p.Seconds
		}
		lines = append(lines, fmt.Sprintf("gpu profile: %-40s %8d calls %10.4f s %5.1f%%", fmt.Sprintf("the other %d", len(rest)), n, s, share(s)))
	}
	return lines
}

// GPUTrainer trains jobs on one GPU, each in groups of pairs that fit the device's free
// memory (train.DeviceGroupSize), freeing the device between groups: what `audit train
// --backend gpu` runs, and what `audit plan --backend gpu` times.
type GPUTrainer struct {
	be cuda.Engine
}

// OpenGPUTrainer opens GPU ordinal device (ErrNotBuilt in a build without the gpu tag).
func OpenGPUTrainer(device int) (*GPUTrainer, error) {
	be, err := cuda.NewBackend(device)
	if err != nil {
		return nil, fmt.Errorf("backend gpu: %w", err)
	}
	return &GPUTrainer{be: be}, nil
}

// Name describes the device.
func (g *GPUTrainer) Name() string { return g.be.Name() }

// GroupSize is the pairs of job trained together on the device now.
func (g *GPUTrainer) GroupSize(job train.Job) (int, error) {
	free, _, err := g.be.FreeMemory()
	if err != nil {
		return 0, fmt.Errorf("backend gpu: %w", err)
	}
	size, err := train.DeviceGroupSize(job.Config, memory.SizesOf(job.WorldC, job.Test), job.Pairs.Count, free, g.memoryBackend())
	if err != nil {
		return 0, fmt.Errorf("backend gpu %s: %w", g.be.Name(), err)
	}
	return size, nil
}

// memoryBackend is the device memory estimate that follows this device's convolutions: by
// Winograd's form as it runs them (F(4x4, 3x3) by default, F(2x2, 3x3) with
// cuda.Options.Winograd2), else (cuda.Options.PatchConv) every form, the largest taken.
func (g *GPUTrainer) memoryBackend() memory.Backend {
	w, ok := g.be.(interface{ WinogradTile() compute.WinogradTile })
	if !ok {
		return memory.Device
	}
	return memory.DeviceFor(w.WinogradTile())
}

// Train trains job's pairs on the device; checkpoints stop reaching the recorder at the first
// device error, which Train returns.
func (g *GPUTrainer) Train(ctx context.Context, job train.Job) error {
	size, err := g.GroupSize(job)
	if err != nil {
		return err
	}
	job.Recorder = cuda.CheckRecorder(g.be, job.Recorder)
	err = train.TrainInGroups(ctx, g.be, job, size, g.be.FreeAll)
	if err == nil {
		err = g.be.FreeAll() // the next job starts on a free device
	}
	return errors.Join(err, g.be.Err())
}

// Close releases the device.
func (g *GPUTrainer) Close() error { return g.be.Close() }

// AllShards lists shards 0/n .. (n-1)/n.
func AllShards(n int) []runs.Shard {
	out := make([]runs.Shard, max(n, 1))
	for i := range out {
		out[i] = runs.Shard{Index: i, Count: len(out)}
	}
	return out
}

// TrainShards trains the listed shards with TrainShard, logging each one written or skipped:
// in turn, or with more than one of opts.Devices that many at a time, each on its own device.
// progress, when set, gives each shard its progress callback.
func TrainShards(ctx context.Context, cfg *spec.Config, data *spec.Data, dir string, shards []runs.Shard, opts TrainOptions, progress func(runs.Shard) func(done, total int)) error {
	train := func(ctx context.Context, s runs.Shard, o TrainOptions) error {
		path, skipped, err := TrainShard(ctx, cfg, data, s, dir, o)
		if err != nil {
			return err
		}
		if o.Logf != nil {
			if skipped {
				o.Logf("train: shard %s already complete: %s", s, path)
			} else {
				o.Logf("train: shard %s written: %s", s, path)
			}
		}
		return nil
	}
	return forEachShard(ctx, shards, opts, progress, train)
}

// forEachShard runs train for every shard: in turn on opts.Device (or the one device listed),
// or, with several devices, one worker per device taking the next shard as it finishes one.
// The progress callbacks are made here, in shard order, before any worker starts (a progress
// display need not be safe for concurrent use; its callbacks are), and Logf is serialized.
// The first error cancels the shards still running and is returned.
func forEachShard(ctx context.Context, shards []runs.Shard, opts TrainOptions, progress func(runs.Shard) func(done, total int), train func(context.Context, runs.Shard, TrainOptions) error) error {
	prog := make([]func(done, total int), len(shards))
	if progress != nil {
		for i, s := range shards {
			prog[i] = progress(s)
		}
	}
	if len(opts.Devices) <= 1 {
		o := opts
		if len(opts.Devices) == 1 {
			o.Device = opts.Devices[0]
		}
		for i, s := range shards {
			o.Progress = prog[i]
			if err := train(ctx, s, o); err != nil {
				return err
			}
		}
		return nil
	}
	if opts.Logf != nil {
		var mu sync.Mutex
		logf := opts.Logf
		opts.Logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logf(format, args...)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for _, dev := range opts.Devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Device, o.Devices = dev, nil
			for i := range next {
				o.Progress = prog[i]
				if err := train(ctx, shards[i], o); err != nil {
					cancel(fmt.Errorf("shard %s on device %d: %w", shards[i], dev, err))
				}
			}
		}()
	}
	for i := range shards {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx) // nil unless a shard failed or the caller cancelled
}

// imported refuses to train shard s in a directory of imported runs (DIR/import.json): their
// run file is missing or damaged (why), and training it would put fedaudit's own trainer where
// the deployment's runs were, an audit of another mechanism under the import's name (a damaged
// import of a deployment with a twenty-fifth of its declared noise, VIOLATED at mu >= 3.32, was
// trained again on resume and came out CONSISTENT).
func imported(dir string, s runs.Shard, why string) error {
	_, err := os.Stat(expdir.Dir(dir).ImportRecord())
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("train shard %s: %w", s, err)
	}
	return fmt.Errorf("train shard %s: %s, and %s holds runs trained elsewhere (%s): training the shard here would audit fedaudit's trainer, not the deployment; import the runs again (audit import, docs/import.md)",
		s, why, dir, expdir.Dir(dir).ImportRecord())
}

// TrainShard trains shard s of the experiment into expdir.Dir(dir).Runs(). A shard whose complete file of
// the same experiment is already there is skipped (skipped = true); a corrupt file is replaced;
// a complete file of another experiment is an error, never overwritten.
func TrainShard(ctx context.Context, cfg *spec.Config, data *spec.Data, s runs.Shard, dir string, opts TrainOptions) (path string, skipped bool, err error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rdir := expdir.Dir(dir).Runs()
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		return "", false, fmt.Errorf("train: %w", err)
	}
	path = filepath.Join(rdir, s.FileName())
	if _, statErr := os.Stat(path); statErr == nil {
		// Every checksum is read: a damaged shard is trained again, never used.
		_, openErr := runs.VerifyFile(path)
		var t *runs.Table
		if openErr == nil {
			t, openErr = runs.Open(path)
		}
		if openErr == nil {
			meta := t.Meta()
			t.Close()
			trained, cfgErr := spec.FromJSON(meta.Config)
			if cfgErr == nil && spec.SameTraining(trained, cfg) && meta.DatasetHash == data.Hash && meta.Shard == s {
				return path, true, nil
			}
			if cfgErr == nil && spec.SameTraining(trained, cfg) && meta.DatasetHash == data.Hash {
				// This experiment's shard under another shard's name (a file copied or renamed
				// by hand): not another experiment, but not the shard this name promises.
				return "", false, fmt.Errorf("train: %s holds shard %s of this experiment, not shard %s; move it away (or give it its own name, %s)", path, meta.Shard, s, meta.Shard.FileName())
			}
			why := fmt.Sprintf("shard %s, dataset %s", meta.Shard, meta.DatasetHash)
			if cfgErr == nil && !spec.SameTraining(trained, cfg) {
				why = strings.Join(spec.ConfigDiff(trained, cfg, true), "; ")
			}
			return "", false, fmt.Errorf("train: %s holds shard %s of another experiment (%s); move it away or choose another --out", path, meta.Shard, why)
		}
		if err := imported(dir, s, fmt.Sprintf("%s is not a complete run file (%v)", path, openErr)); err != nil {
			return "", false, err
		}
		logf("shard %s: %s is not a complete run file (%v); training it again", s, path, openErr)
		if err := os.Remove(path); err != nil {
			return "", false, fmt.Errorf("train: remove corrupt %s: %w", path, err)
		}
	} else if err := imported(dir, s, fmt.Sprintf("%s is missing", path)); err != nil {
		return "", false, err
	}

	if err := otherToolVersion(rdir, s, opts.ToolVersion); err != nil {
		return "", false, err
	}
	// The grey-box checks of DIR/check.json looked at runs this shard replaces: they say
	// nothing of the new ones, and a failed check would make their headline inconclusive (a
	// directory retrained after rm -rf runs kept it). audit check runs them again.
	if err := os.Remove(expdir.Dir(dir).Check()); err == nil {
		logf("shard %s: removed %s, the checks of the runs it replaces", s, expdir.Dir(dir).Check())
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("train shard %s: %w", s, err)
	}
	dim, err := model.ParamCountShape(cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		return "", false, fmt.Errorf("train shard %s: %w", s, err)
	}
	rec := &shardRecorder{path: path, dim: dim, meta: runs.Meta{
		Config:      cfg.TrainingJSON(),
		DatasetHash: data.Hash,
		ToolVersion: opts.ToolVersion,
		Shard:       s,
		HasParams:   cfg.Train.RecordParams,
		HasUpload:   cfg.Train.RecordUpload,
	}}
	if cc := cfg.Train.Canaries; cc != nil {
		rec.meta.Canaries = cc.Count
	}
	pairs := ShardPairs(cfg.Pairs, s)
	err = trainOn(ctx, cfg, data, pairs, rec, opts)
	if err == nil && rec.w == nil {
		err = errors.New("no checkpoint was recorded: set train.checkpoints")
	}
	if err != nil {
		if rec.w != nil {
			rec.w.Abort()
		}
		return "", false, fmt.Errorf("train shard %s: %w", s, err)
	}
	if err := rec.w.Close(); err != nil {
		return "", false, fmt.Errorf("train shard %s: %w", s, err)
	}
	return path, false, nil
}

// otherToolVersion refuses to train shard s into rdir beside a run file that another version
// of the tool wrote: runs.Open does not read files of two versions as one experiment, and
// every rerun would skip both as complete, so the set could never be finished.
func otherToolVersion(rdir string, s runs.Shard, version string) error {
	infos, err := runs.ShardStatus(rdir, s.Count)
	if err != nil {
		return nil // nothing readable to mix with
	}
	for _, info := range infos {
		if info.Path == "" || (info.State != runs.ShardComplete && info.State != runs.ShardMismatch) {
			continue
		}
		t, err := runs.Open(info.Path)
		if err != nil {
			continue
		}
		v := t.Meta().ToolVersion
		t.Close()
		if v != version {
			return fmt.Errorf("train shard %s: %s was written by version %q of the tool, this is %q, and run files of two versions are not read as one experiment: train the missing shards with version %q, or remove the run files to train them all again",
				s, info.Path, v, version, v)
		}
	}
	return nil
}

// shardRecorder turns the trainer's checkpoints into run-file rows. The writer is created at
// the first checkpoint, when the trainer's statistic names are known.
type shardRecorder struct {
	path string
	meta runs.Meta
	w    *runs.Writer
	rows []runs.Row
	nan  []float32
	dim  int // parameter count of the model
}

// nanUpload returns a NaN vector as long as the model's parameter vector: the length of any
// recorded upload or parameter vector of this checkpoint.
func (r *shardRecorder) nanUpload(paramLen int, cp *checkpoint.Checkpoint) []float32 {
	n := paramLen
	for i := range cp.Replicas {
		if l := len(cp.Replicas[i].Upload); l > 0 {
			n = l
			break
		}
	}
	if n == 0 {
		n = r.dim
	}
	if len(r.nan) != n {
		r.nan = make([]float32, n)
		for i := range r.nan {
			r.nan[i] = float32(math.NaN())
		}
	}
	return r.nan
}

func (r *shardRecorder) Checkpoint(_ context.Context, cp *checkpoint.Checkpoint) error {
	if r.w == nil {
		r.meta.StatNames = append(append([]string(nil), cp.StatNames...),
			runs.StatTargetLossC, runs.StatTargetLossCPrime, runs.StatTargetMarginC, runs.StatTargetMarginCPrime)
		r.meta.CanaryStatNames = cp.CanaryStatNames
		w, err := runs.Create(r.path, r.meta)
		if err != nil {
			return err
		}
		r.w = w
	}
	r.rows = r.rows[:0]
	for i := range cp.Replicas {
		s := &cp.Replicas[i]
		upload := s.Upload
		if r.meta.HasUpload && len(upload) == 0 {
			// No upload to record (round 0, or the target client sat the round out): the row
			// keeps its place with a NaN vector, which attacks read as "not observed".
			upload = r.nanUpload(len(s.Params), cp)
		}
		stats := make([]float64, 0, len(s.Stats)+4)
		stats = append(stats, s.Stats...)
		stats = append(stats, s.TargetLoss[0], s.TargetLoss[1], s.TargetMargin[0], s.TargetMargin[1])
		r.rows = append(r.rows, runs.Row{
			RunID:        int64(2*s.Pair + s.World),
			PairID:       int64(s.Pair),
			World:        int8(s.World),
			Seed:         s.Seed,
			Round:        int32(cp.Round),
			Diverged:     s.Diverged,
			TrainLoss:    s.TrainLoss,
			TestAccuracy: s.TestAccuracy,
			Stats:        stats,
			Params:       s.Params,
			Upload:       upload,
			CanaryIn:     s.CanaryIn,
			CanaryStats:  s.CanaryStats,
		})
	}
	return r.w.Write(r.rows...)
}
