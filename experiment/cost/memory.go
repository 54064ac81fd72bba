package cost

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

// MemoryEstimate is the memory of an experiment's stages as estimated before they run.
type MemoryEstimate struct {
	Engine memory.Memory `json:"engine"`
	// GroupPairs is the number of pairs trained together; TrainBytes the training's peak
	// (one group, the data and a record batch being written), whatever the shard's pairs.
	GroupPairs int   `json:"group_pairs"`
	TrainBytes int64 `json:"train_bytes"`
	// MinTrainBytes is the training's peak with one pair per group: what a shard needs at least.
	MinTrainBytes int64 `json:"min_train_bytes"`
	// AttackBytes estimates the attack stage, which holds every run's rows of the attacked
	// rounds (with their parameter and upload vectors) at once, and Go's collector's room
	// beside them (attackPeak), every attack's observation of every run and the score rows made
	// of them, and, for a CNN whose attacks run its host model, one model's working memory a
	// worker.
	AttackBytes int64 `json:"attack_bytes"`
	// AnalyzeBytes estimates the analysis (analyze, report, and the finish job's): every score
	// row of the score file at once.
	AnalyzeBytes int64 `json:"analyze_bytes"`
	// Scores is the number of score rows the attacks write, at most.
	Scores int64 `json:"scores"`
	// HostModelBytes is one attack worker's host CNN, counted AttackWorkers times (the cores of
	// the machine that plans: the attack stage runs a worker a core of its node); 0 without.
	HostModelBytes int64 `json:"host_model_bytes,omitempty"`
	AttackWorkers  int   `json:"attack_workers,omitempty"`
}

// Bytes a score row costs at the peak of the attack stage (its observation, the row and its
// metrics, Go's collector's room) and of the analysis (the row read back and its group's
// copy), measured: 4,000 pairs of an MLP with 21 checkpoints and 13 attacks (2.1 million
// rows) peaked at 1.31-1.43 GB attacking and 0.96-1.02 GB analyzing (16,000 pairs: 4.68 and
// 3.99 GB), where the estimate counted only the run files' rows and said 399 MiB.
const (
	attackScoreBytes  = 640
	analyzeScoreBytes = 480
)

// hostModelRows is how many samples the attacks' host CNN evaluates at once (attacks/upload.go's
// cnnAuxSamples), and hostModelFactor the ratio of a worker's measured peak to the engine's
// per-pair estimate at that batch (float64 against float32, forward and backward buffers, the
// collector's room): ResNet-18 2.0 GB a worker against 1009 MiB, a small ResNet 191 MB against
// 47 MiB, LeNet-5 89 MB against 18 MiB.
const (
	hostModelRows   = 64
	hostModelFactor = 5
)

// runtimeOverhead covers what the estimate does not count: the Go runtime, the loaded source
// dataset before it is split, the Arrow writer's batch (runs.DefaultBatchBytes) and its
// compression buffers.
const runtimeOverhead = 160 << 20

// ShardMemory is EstimateMemory for a shard of pairs pairs: its groups hold no more pairs than
// it has, nor its writer more rows. Only its training numbers are the shard's (the attack and
// analysis stages read every shard).
func ShardMemory(cfg *spec.Config, data *spec.Data, pairs int) (MemoryEstimate, error) {
	shard := *cfg
	shard.Pairs = pairs
	return EstimateMemory(&shard, data)
}

// EstimateMemory estimates the memory of training and attacking cfg (data as for Sizes).
func EstimateMemory(cfg *spec.Config, data *spec.Data) (MemoryEstimate, error) {
	mem, err := train.MemoryOf(cfg.Train, spec.Sizes(cfg, data))
	if err != nil {
		return MemoryEstimate{}, &spec.ConfigError{Err: fmt.Errorf("train: %w", err)}
	}
	g := train.GroupSize(cfg.Train, spec.Sizes(cfg, data), cfg.Pairs)
	vec, fixed := rowBytes(cfg, mem.Params)
	est := MemoryEstimate{Engine: mem, GroupPairs: g,
		TrainBytes:    trainPeak(mem.Bytes(g), vec+fixed, int64(cfg.Pairs)*int64(len(cfg.Train.Checkpoints))),
		MinTrainBytes: trainPeak(mem.Bytes(1), vec+fixed, int64(cfg.Pairs)*int64(len(cfg.Train.Checkpoints))),
	}
	// Attack stage: per run and attacked round a row of fixed columns and statistics plus the
	// recorded vectors the attacks keep (the previous round's upload too, for upload attacks)
	// and the canary columns.
	rounds := int64(max(len(cfg.Audit.Rounds), len(cfg.Train.Checkpoints)))
	kept := attackVectorBytes(cfg, mem.Params)
	perRow := memory.SatAdd(int64(200)+fixed, kept)
	if cfg.Train.RecordUpload && kept == vec {
		perRow = memory.SatAdd(perRow, memory.SatMul(4, int64(mem.Params)))
	}
	// Reading the run files decodes a batch at a time, whatever the attacks keep of it: the
	// compressed batch, its columns and the rows' copies of its vectors (as trainPeak counts
	// the writer's). Without it an audit of an MLP recording parameters whose attacks keep
	// none (300 pairs, 5 checkpoints, 390 MB of run files) peaked at 425 MiB beside 167 MiB
	// estimated.
	runRows := memory.SatMul(2*int64(cfg.Pairs), int64(len(cfg.Train.Checkpoints)))
	batch := min(runs.DefaultBatchBytes, memory.SatMul(runs.DefaultBatchRows, vec+fixed), memory.SatMul(runRows, vec+fixed))
	est.AttackBytes = attackPeak(memory.SatAdd(memory.SatMul(memory.SatMul(2*int64(cfg.Pairs), rounds), perRow), 3*batch))
	est.Scores = memory.SatMul(memory.SatMul(2*int64(cfg.Pairs), int64(spec.PlannedRows(cfg))), int64(max(1, canaryCount(cfg))))
	est.AttackBytes = memory.SatAdd(est.AttackBytes, memory.SatMul(est.Scores, attackScoreBytes))
	est.AnalyzeBytes = memory.SatAdd(runtimeOverhead, memory.SatMul(est.Scores, analyzeScoreBytes))
	if host, err := hostModelBytes(cfg, data); err != nil {
		return MemoryEstimate{}, err
	} else if host > 0 {
		// Every attack worker (one a core: attacks.Options.Workers) holds a host model.
		est.HostModelBytes, est.AttackWorkers = host, runtime.GOMAXPROCS(0)
		est.AttackBytes = memory.SatAdd(est.AttackBytes, memory.SatMul(int64(est.AttackWorkers), host))
	}
	// Both stages load the source before they split it, and that can be the peak:
	// Fashion-MNIST's 60,000 images, read as bytes and made float32, peaked at 497 MiB in a
	// training estimated at 206 MiB, 515 MiB in its attack stage estimated at 160 MiB.
	load := loadPeak(datasets.SourceBytes(cfg.Data.Source))
	est.TrainBytes = max(est.TrainBytes, load)
	est.MinTrainBytes = max(est.MinTrainBytes, load)
	est.AttackBytes = max(est.AttackBytes, load)
	est.AnalyzeBytes = max(est.AnalyzeBytes, load)
	return est, nil
}

// attackVectorBytes is what the recorded vectors of one row cost the attack stage: the attacks
// keep a round's parameters only where one of them reads parameters (or, for an upload attack,
// the model the upload started from), and its uploads only for upload attacks (attacks
// collect's keptColumns). Counting every recorded vector made a LeNet-5 audit of 5,000 pairs
// whose attacks read only the recorded statistics plan 23.3 GiB for its attack stage (the
// parameter vectors of every checkpoint) and warn that it may not fit. One-run audits and
// attacks of unknown needs keep the whole row's vectors.
func attackVectorBytes(cfg *spec.Config, d int) int64 {
	vec, _ := rowBytes(cfg, d)
	if cfg.Audit.Method == spec.MethodOneRun || canaryCount(cfg) > 0 {
		return vec
	}
	m := spec.PlannedMeta(cfg)
	names, _ := spec.RunAttacks(cfg.Audit.Attacks, m, cfg.Train.Model, cfg.Pairs)
	var params, upload bool
	for _, n := range names {
		a, err := attacks.Lookup(n)
		if err != nil {
			return vec
		}
		needs := a.Info().Needs
		params = params || needs.Params || needs.Upload || needs.Initial
		upload = upload || needs.Upload
	}
	var kept int64
	if params && m.HasParams {
		kept = memory.SatAdd(kept, memory.SatMul(4, int64(d)))
	}
	if upload && m.HasUpload {
		kept = memory.SatAdd(kept, memory.SatMul(4, int64(d)))
	}
	return kept
}

// canaryCount is the canaries of every run (0 without).
func canaryCount(cfg *spec.Config) int {
	if c := cfg.Train.Canaries; c != nil {
		return c.Count
	}
	return 0
}

// hostModelBytes is one attack worker's host CNN (hostModelFactor times the engine's per-pair
// estimate at hostModelRows rows), or 0 where the model is no CNN or no planned attack runs
// it.
func hostModelBytes(cfg *spec.Config, data *spec.Data) (int64, error) {
	if !model.IsNNKind(cfg.Train.Model.Kind) {
		return 0, nil
	}
	names, _ := spec.RunAttacks(cfg.Audit.Attacks, spec.PlannedMeta(cfg), cfg.Train.Model, cfg.Pairs)
	uses := false
	for _, n := range names {
		if a, err := attacks.Lookup(n); err == nil && a.Info().Needs.Model {
			uses = true
		}
	}
	if !uses {
		return 0, nil
	}
	tc := cfg.Train
	tc.Batching, tc.BatchSize, tc.LocalSteps = "fixed", hostModelRows, 1
	tc.Informed, tc.RecordParams, tc.RecordUpload, tc.Canaries = false, false, false, nil
	m, err := train.MemoryOf(tc, spec.Sizes(cfg, data))
	if err != nil {
		return 0, &spec.ConfigError{Err: fmt.Errorf("train: %w", err)}
	}
	return memory.SatMul(hostModelFactor, m.PerPair), nil
}

// loadPeak is the host memory a stage peaks at while it loads a source of source bytes
// (datasets.SourceBytes: the stored bytes and the float32 features made of them): Go's
// collector (GOGC=100) lets the heap grow to twice what is live, beside the runtime's own.
// Measured on Fashion-MNIST's training set (224 MiB by SourceBytes): 497 MiB in `audit train`
// of 8 pairs of a small MLP, 515 MiB in its attack stage; this gives 544 MiB.
func loadPeak(source int64) int64 {
	if source <= 0 {
		return 0
	}
	return memory.SatAdd(memory.SatMul(2, source), 96<<20)
}

// attackPeak is the host memory the attack stage peaks at with rows bytes of run-file rows
// live: the attacks copy the vectors they read into float64 features and fits as they go, all
// garbage once scored, and Go's collector (GOGC=100) lets the heap grow to twice what is live
// before it collects, so the rows are counted twice, beside runtimeOverhead. Counted once, the
// estimate fell short: an MLP of d = 267,268 recording parameters and uploads (40 pairs, 4
// checkpoints, the parameter attacks among nine) peaked at 1.34 GiB where 1.1 GiB was
// estimated, and was killed under a 1.2 GiB limit the plan had accepted; d = 66,820 (64 pairs,
// 11 checkpoints) at 1.58 GiB against 1.2 GiB.
func attackPeak(rows int64) int64 {
	return memory.SatAdd(memory.SatMul(2, rows), runtimeOverhead)
}

// trainPeak is the host memory a training peaks at: engine bytes of the engine's buffers
// (memory.Memory.Bytes), runtimeOverhead, and what the run-file rows cost beside them (row bytes
// each, pairRounds = pairs x checkpoints rows of each world). Every checkpoint allocates its
// rows' recorded vectors afresh (the host copies in train/checkpoint.go) and the writer copies
// them into its batch builder (runs/writer.go), whose buffers grow by doubling and are
// compressed into a third copy when the batch is written (runs/file.go): up to 3 batches in
// flight, one of which runtimeOverhead counts. All of that is garbage once written, and Go's
// collector (GOGC=100) lets the heap grow to twice what is live before it collects: once the
// rows written exceed the live heap, garbage as large as the live heap sits beside it. Measured
// on a 784-256-10 MLP recording parameters and uploads (d = 203,530; 100 pairs, 2 checkpoints,
// groups of 14): a peak RSS of 815 MiB where engine and overhead alone come to 409 MiB.
//
// A tenth more is added: the same MLP at 100 pairs peaked at 1016 MiB where this said 981 MiB
// (a --memory of 1000 MiB was accepted and would have been overrun).
func trainPeak(engine, row, pairRounds int64) int64 {
	rows := memory.SatMul(2, pairRounds)
	batch := min(runs.DefaultBatchBytes, memory.SatMul(runs.DefaultBatchRows, row), memory.SatMul(rows, row))
	live := memory.SatAdd(engine, 3*batch)
	garbage := min(live, memory.SatMul(2, memory.SatMul(rows, row)))
	peak := memory.SatAdd(memory.SatAdd(live, garbage), runtimeOverhead-batch)
	return memory.SatAdd(peak, peak/10)
}

// CheckMemory refuses, with a ConfigError naming the numbers, a config whose training needs
// more than available bytes even with one pair per group. available <= 0 skips the check.
func CheckMemory(cfg *spec.Config, data *spec.Data, available int64) (MemoryEstimate, error) {
	est, err := EstimateMemory(cfg, data)
	if err != nil {
		return est, err
	}
	if available > 0 && est.MinTrainBytes > available {
		// Before a named dataset is loaded its input dimension is taken as 1 (spec.Sizes): the
		// parameter count is then a lower bound, not the model's (d = 258 of a 784-64-10 MLP).
		model, what := fmt.Sprintf("d = %d parameters", est.Engine.Params), "an estimated"
		if data == nil && cfg.Data.Source != "synthetic" && cfg.Data.Source != "synthetic-images" {
			model, what = "its parameters not yet counted", "at least"
		}
		why := fmt.Sprintf("%s of it an allowance for the runtime, the source data and the run-file writer", FormatBytes(runtimeOverhead))
		if load := loadPeak(datasets.SourceBytes(cfg.Data.Source)); load >= est.MinTrainBytes {
			why = fmt.Sprintf("loading the source, %s, peaks there: its stored bytes and float32 features, with Go's collector's room", cfg.Data.Source)
		}
		return est, &spec.ConfigError{Err: fmt.Errorf("memory: training one pair of this model (%s) needs %s %s with one pair a group (%s), the budget is %s (MemAvailable, or --memory)",
			model, what, FormatBytes(est.MinTrainBytes), why, FormatBytes(available))}
	}
	return est, nil
}

// MemAvailable is the memory a new process may use: MemAvailable from /proc/meminfo (what it
// may use without swapping), or less where its control group limits it (a Slurm task's --mem,
// a Kubernetes pod's limits.memory: the kernel kills a process past it, whatever the node has
// free). It returns 0 where /proc/meminfo is absent (not Linux), which skips the memory checks.
func MemAvailable() int64 {
	return memAvailable("/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup")
}

func memAvailable(meminfo, selfCgroup, cgroupRoot string) int64 {
	avail := meminfoAvailable(meminfo)
	if room, ok := cgroupRoom(selfCgroup, cgroupRoot); ok && avail > 0 && room < avail {
		return room
	}
	return avail
}

// cgroupRoom is the memory the process's control group and its ancestors leave it (limit less
// usage, the smallest over the hierarchy), from /proc/self/cgroup and the cgroup file system:
// cgroup v2 (memory.max, memory.current; "max" is no limit) or v1's memory controller
// (memory.limit_in_bytes, memory.usage_in_bytes; its "no limit" is a value near 2^63). ok is
// false where no limit is found.
func cgroupRoom(selfCgroup, root string) (int64, bool) {
	raw, err := os.ReadFile(selfCgroup)
	if err != nil {
		return 0, false
	}
	readInt := func(path string) (int64, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil
	}
	room, found := int64(math.MaxInt64), false
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var base, limitFile, usageFile, inactiveKey string
		switch {
		case parts[0] == "0" && parts[1] == "":
			base, limitFile, usageFile, inactiveKey = root, "memory.max", "memory.current", "inactive_file"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			base, limitFile, usageFile, inactiveKey = filepath.Join(root, "memory"), "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
		default:
			continue
		}
		// The group and every ancestor up to the root: a limit set on a job's group holds
		// for the step's group inside it.
		for dir := filepath.Join(base, parts[2]); ; dir = filepath.Dir(dir) {
			limit, okL := readInt(filepath.Join(dir, limitFile))
			usage, okU := readInt(filepath.Join(dir, usageFile))
			// The usage counts the page cache, which the kernel reclaims before it kills: a
			// finish job that has just read every run file had its budget near 0 (4.9 MB of
			// 4 GiB). The inactive file pages are taken off, as kubelet's working set does.
			usage -= statValue(filepath.Join(dir, "memory.stat"), inactiveKey)
			if okL && okU && limit < 1<<60 {
				room, found = min(room, max(limit-usage, 1)), true // 0 would read as "unknown"
			}
			if dir == base || len(dir) <= len(base) {
				break
			}
		}
	}
	return room, found
}

// statValue is the value of key in a cgroup memory.stat file (lines "key value"), 0 where it
// cannot be read.
func statValue(path, key string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// meminfoAvailable reads MemAvailable from a meminfo file; 0 where it cannot.
func meminfoAvailable(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// ParseBytes reads a byte count such as "600MB", "4GiB", "256M" or "1048576" (K, M, G, T are
// powers of 1024, with or without "iB" or "B").
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "IB"), "B")
	mult := int64(1)
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			u = u[:n-1]
		}
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if err != nil || !(x >= 0) || x*float64(mult) > 1<<62 {
		return 0, errors.New("not a byte count such as 600MB, 4GiB or 1048576: " + strconv.Quote(t))
	}
	return int64(x * float64(mult)), nil
}

// FormatBytes writes n in KiB, MiB or GiB for people (memory.FormatBytes).
func FormatBytes(n int64) string { return memory.FormatBytes(n) }

// DeviceEstimate is the training's memory on one GPU of a given size (train.MemoryOn with
// memory.Device, or memory.DeviceWinograd): what `audit train --backend gpu` groups the pairs
// by.
type DeviceEstimate struct {
	DeviceBytes int64         `json:"device_bytes"`
	Engine      memory.Memory `json:"engine"`
	// GroupPairs is the pairs trained together on the device (train.DeviceGroupSize), 0 when
	// one pair does not fit; Problem then says why.
	GroupPairs int    `json:"group_pairs"`
	Problem    string `json:"problem,omitempty"`
	// Winograd: some stride-1 3 x 3 convolutions counted by Winograd's minimal filtering
	// WinogradForm, F(4x4, 3x3) as a GPU runs them by default (memory.DeviceWinograd4) or
	// F(2x2, 3x3) (memory.DeviceWinograd); else none fits that form, or (with memory.Device)
	// the convolutions were counted in every form, the largest taken.
	Winograd     bool   `json:"winograd,omitempty"`
	WinogradForm string `json:"winograd_form,omitempty"`
}

// EstimateDevice estimates the training of cfg in shards of at most shardPairs pairs on one
// GPU with deviceBytes of free memory, whose options on says (memory.DeviceWinograd4 for one
// that runs its 3 x 3 convolutions by Winograd's F(4x4, 3x3), the default;
// memory.DeviceWinograd by F(2x2, 3x3); memory.Device when they are not known or with
// cuda.Options.PatchConv).
func EstimateDevice(cfg *spec.Config, data *spec.Data, shardPairs int, deviceBytes int64, on memory.Backend) (DeviceEstimate, error) {
	s := spec.Sizes(cfg, data)
	mem, err := train.MemoryOn(cfg.Train, s, on)
	if err != nil {
		return DeviceEstimate{}, &spec.ConfigError{Err: fmt.Errorf("train: %w", err)}
	}
	est := DeviceEstimate{DeviceBytes: deviceBytes, Engine: mem, Winograd: mem.WinogradConvolutions > 0}
	if est.Winograd {
		est.WinogradForm = on.WinogradTile().String()
	}
	est.GroupPairs, err = train.DeviceGroupSize(cfg.Train, s, max(shardPairs, 1), deviceBytes, on)
	if err != nil {
		est.Problem = err.Error()
	}
	return est, nil
}
