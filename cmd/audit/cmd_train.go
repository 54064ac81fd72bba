package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/cost"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
)

// shardFromFlagOrEnv picks the shard: --shard i/n, or the array-task index of a batch system
// (SLURM_ARRAY_TASK_ID, Kubernetes' JOB_COMPLETION_INDEX) with --shards n.
func shardFromFlagOrEnv(flagValue string, shards int) (runs.Shard, bool, error) {
	if flagValue != "" {
		s, err := runs.ParseShard(flagValue)
		if err != nil {
			return runs.Shard{}, false, usagef("--shard: %v", err)
		}
		return s, true, nil
	}
	for _, name := range []string{"SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"} {
		if v := os.Getenv(name); v != "" && shards > 0 {
			i, err := strconv.Atoi(v)
			if err != nil || i < 0 || i >= shards {
				return runs.Shard{}, false, usagef("%s=%q is not a shard index in [0, %d)", name, v, shards)
			}
			return runs.Shard{Index: i, Count: shards}, true, nil
		}
	}
	return runs.Shard{}, false, nil
}

// trainAll trains the shards of an experiment into dir: one shard when given, else all of
// them in turn. Complete shards are skipped.
func trainAll(ctx context.Context, e *env, cfg *spec.Config, dir string, shard runs.Shard, one bool, shards int, sequential bool, bf backendFlags) (err error) {
	budget, err := bf.preflight(cfg)
	if err != nil {
		return err
	}
	var only *runs.Shard
	if one {
		only = &shard
	}
	existed := existedBefore(dir)
	defer func() { forgetIfRefused(dir, existed, err) }()
	lock, err := lockExperiment(e, cfg, dir, shards, only, "audit train")
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer lock.Unlock()
	if note := cfg.PrepareNote(); note != "" {
		e.logf("%s", note)
	}
	data, err := prepareData(ctx, cfg, budget)
	if err != nil {
		return err
	}
	record, err := recordedConfig(cfg, shards, sequential)
	if err != nil {
		return err
	}
	changed, err := experiment.SetUpDirectory(record, dir, shards)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if len(changed) > 0 {
		e.logf("train: settings changed since the last run in %s (training is the same): %s", dir, strings.Join(changed, "; "))
	}
	if !sequential {
		// A run of fixed size replaces an earlier sequential run's stop: the stages after it
		// analyze every shard, not the ones the stop saw.
		forgot, err := experiment.ForgetSequential(dir)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		if forgot {
			e.logf("train: %s held the record of an earlier sequential run (removed): this run is of fixed size, and later stages analyze every shard", dir)
		}
	}
	if sequential {
		// A task of an array whose sequential run already stopped has nothing to train.
		rec, stale, err := experiment.SequentialSettled(dir, cfg, shards)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		if stale != nil {
			e.logf("train: %s held the record of an earlier sequential run of other settings (removed): this array's looks are its own", dir)
		}
		if rec != nil {
			l := rec.Looks[len(rec.Looks)-1]
			e.logf("train: the sequential run in %s stopped at look %d (%s at %d of %d pairs): shard %s is not needed", dir, len(rec.Looks), rec.Status, l.Pairs, rec.Pairs, shard)
			return nil
		}
	}
	list := experiment.AllShards(shards)
	if one {
		list = []runs.Shard{shard}
	}
	pr := newProgress(e)
	err = experiment.TrainShards(ctx, cfg, data, dir, list,
		bf.trainOptions(e),
		func(s runs.Shard) func(int, int) { return pr.bar(fmt.Sprintf("train %s", s), cfg.Train.Rounds) })
	pr.wait()
	if err != nil || !sequential {
		return err
	}
	rec, err := experiment.SequentialTask(ctx, cfg, data, dir, shards, experiment.AnalyzeOptions{}, experiment.AttackOptions{Logf: e.logf})
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if rec != nil {
		l := rec.Looks[len(rec.Looks)-1]
		e.logf("train: sequential look %d certifies a violation at %d of %d pairs: the array's remaining tasks train nothing; the finish job (audit run --sequential) writes the analysis", len(rec.Looks), l.Pairs, rec.Pairs)
	}
	return nil
}

// prepareData loads the config's data and refuses a training that cannot fit budget with it.
func prepareData(ctx context.Context, cfg *spec.Config, budget int64) (*spec.Data, error) {
	data, err := spec.PrepareContext(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := cost.CheckMemory(cfg, data, budget); err != nil {
		return nil, err
	}
	return data, nil
}

// recordedConfig is the config a training records in its directory. A task of a sequential
// array records what `audit run --sequential` records: the last look's confidence, which an
// analysis of all the shards before the finish job judges at.
func recordedConfig(cfg *spec.Config, shards int, sequential bool) (*spec.Config, error) {
	if !sequential {
		return cfg, nil
	}
	record, err := experiment.SequentialConfig(cfg, shards)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return record, nil
}

// checkTraining refuses, training nothing, what would make every task of an array of shards
// fail at its start: a precision the backend cannot give, data the config cannot have, a model
// that cannot take the data, a training that cannot fit the memory, stages that would fail
// after training, a sequential run of too few shards, and a directory that holds another
// training or another shard layout. A submission that queued its tasks (perhaps for GPUs) only
// for each to exit 2 is refused before it is submitted.
func checkTraining(ctx context.Context, e *env, cfg *spec.Config, dir string, shards int, sequential bool, bf backendFlags) error {
	budget, err := bf.preflight(cfg)
	if err != nil {
		return err
	}
	if err := spec.CheckStages(cfg); err != nil {
		return err
	}
	if _, err := prepareData(ctx, cfg, budget); err != nil {
		return err
	}
	if sequential {
		if shards < 2 {
			return usagef("train: --sequential trains one shard of at least 2 (--shards n)")
		}
		if err := experiment.CheckSequential(cfg, shards, nil); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	record, err := recordedConfig(cfg, shards, sequential)
	if err != nil {
		return err
	}
	if _, err := experiment.CheckDirectory(record, dir, shards); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	fmt.Fprintf(e.stdout, "train: %d shards of %d pairs can be trained into %s (backend %s)\n", shards, cfg.Pairs, dir, bf.name)
	return nil
}

func init() {
	register(&command{
		name:    "train",
		summary: "train the coupled pairs of an experiment into Arrow run files",
		usage: "train --config F --out DIR [--shard i/n | --shards n] [--sequential] [--backend auto|cpu|gpu] [--check]\n\n" +
			"--sequential, for the tasks of a cluster array of a sequential run (docs/cluster.md): a task\n" +
			"first reads DIR/sequential.json and trains nothing once the run has stopped; after its\n" +
			"shard it evaluates every look whose shards are all trained and records a stop at the first\n" +
			"violation. The finish job is `audit run --sequential` with the same --shards.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			config := fs.String("config", "", "experiment config (YAML)")
			out := fs.String("out", "", "output directory (run files go to DIR/runs)")
			shard := fs.String("shard", "", "train only shard i/n (default: all shards in turn)")
			shards := fs.Int("shards", 1, "number of shards; with SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX set, train only that one")
			sequential := fs.Bool("sequential", false, "a task of a sequential run's array: skip once it stopped, evaluate the looks after training")
			checkOnly := fs.Bool("check", false, "train nothing: check the config, the backend and DIR as the tasks of an array would (deploy/slurm/submit.sh asks before it submits)")
			var bf backendFlags
			bf.register(fs)
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("train: unexpected argument %q", args[0])
				}
				if *config == "" || *out == "" {
					return usagef("train: --config and --out are required")
				}
				if err := bf.check(); err != nil {
					return err
				}
				if *shards < 1 {
					return usagef("--shards must be >= 1")
				}
				cfg, err := spec.Load(*config)
				if err != nil {
					return err
				}
				s, one, err := shardFromFlagOrEnv(*shard, *shards)
				if err != nil {
					return err
				}
				if *shard != "" && flagGiven(fs, "shards") && *shards != s.Count {
					return usagef("train: --shard %s and --shards %d disagree on the number of shards", *shard, *shards)
				}
				if !one {
					*shards = bf.defaultShards(*shards, flagGiven(fs, "shards"), cfg.Pairs)
				}
				if one {
					*shards = s.Count
				}
				if *checkOnly {
					return checkTraining(ctx, e, cfg, *out, *shards, *sequential, bf)
				}
				if *sequential && (!one || *shards < 2) {
					return usagef("train: --sequential trains one shard of at least 2 (--shard i/n, or an array task with --shards n); a whole sequential run is audit run --sequential")
				}
				if *sequential {
					// Refused before the shard is trained, not when its first look is evaluated.
					if err := experiment.CheckSequential(cfg, *shards, nil); err != nil {
						return fmt.Errorf("train: %w", err)
					}
				}
				return trainAll(ctx, e, cfg, *out, s, one, *shards, *sequential, bf)
			}
		},
	})
}

// backendFlags are --backend, --device, --memory and --group-memory, on every command that
// trains.
type backendFlags struct {
	name        string
	device      int
	devices     string
	memory      string
	groupMemory string
	// deviceList is --devices parsed by check.
	deviceList []int
}

func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.name, "backend", "auto", "compute backend: auto (the GPU when this build has one), cpu or gpu (needs a build with -tags gpu)")
	fs.IntVar(&b.device, "device", 0, "GPU ordinal for --backend gpu")
	fs.StringVar(&b.devices, "devices", "", "GPUs for --backend gpu: ordinals (0,1,3) or all; several train as many shards at once, each on its own device (default: --device)")
	registerMemory(fs, &b.memory)
	fs.StringVar(&b.groupMemory, "group-memory", "", "memory budget of one group of pairs trained together, e.g. 256MiB (default: train.group_memory, else 256MiB); results do not depend on it")
}

// preflight applies --group-memory to cfg and refuses, before any data is loaded or file
// written, a config whose training cannot fit the memory budget; it returns the budget.
func (b *backendFlags) preflight(cfg *spec.Config) (int64, error) {
	if p := cfg.Train.Precision; p != "" && p != compute.FP32 && (b.name == "cpu" || b.name == "auto" && !cuda.Available()) {
		return 0, usagef("train.precision %s needs the gpu backend (--backend gpu, a build with -tags gpu); this would train on the CPU, which computes in float32", p)
	}
	if b.groupMemory != "" {
		n, err := cost.ParseBytes(b.groupMemory)
		if err != nil || n == 0 {
			return 0, usagef("--group-memory: %v", errOr(err, "need > 0"))
		}
		cfg.Train.GroupMemory = n
	}
	budget, err := memoryBudget(b.memory)
	if err != nil {
		return 0, err
	}
	_, err = cost.CheckMemory(cfg, nil, budget)
	return budget, err
}

func (b *backendFlags) check() error {
	if b.device < 0 {
		return usagef("--device: %d is not a GPU ordinal", b.device)
	}
	switch b.name {
	case "auto", "cpu":
		if b.devices != "" {
			return usagef("--devices needs --backend gpu")
		}
		if b.name == "cpu" && b.device != 0 {
			return usagef("--device needs --backend gpu (or auto): the CPU backend has no devices")
		}
		return nil
	case "gpu":
		if !cuda.Available() {
			// A usage error (exit 2), as any flag this build cannot honour: rerunning the
			// same command cannot succeed.
			return usagef("--backend gpu: %v", cuda.ErrNotBuilt)
		}
		return b.parseDevices()
	}
	return usagef("--backend: %q is not auto, cpu or gpu", b.name)
}

// parseDevices reads --devices: "all" (every GPU the driver sees) or distinct ordinals.
func (b *backendFlags) parseDevices() error {
	if b.devices == "" {
		return nil
	}
	if b.devices == "all" {
		n, err := cuda.DeviceCount()
		if err != nil {
			return fmt.Errorf("--devices all: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("--devices all: the driver sees no GPU")
		}
		for i := range n {
			b.deviceList = append(b.deviceList, i)
		}
		return nil
	}
	list, err := parseDeviceList(b.devices)
	if err != nil {
		return usagef("--devices: %v", err)
	}
	b.deviceList = list
	return nil
}

// parseDeviceList reads comma-separated distinct GPU ordinals.
func parseDeviceList(text string) ([]int, error) {
	var list []int
	for _, f := range strings.Split(text, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q is not a GPU ordinal (want ordinals like 0,1,3, or all)", f)
		}
		if slices.Contains(list, d) {
			return nil, fmt.Errorf("device %d is listed twice", d)
		}
		list = append(list, d)
	}
	return list, nil
}

// trainOptions are the training stage's options from the flags.
func (b *backendFlags) trainOptions(e *env) experiment.TrainOptions {
	return experiment.TrainOptions{ToolVersion: version, Logf: e.logf, Backend: b.name, Device: b.device, Devices: b.deviceList}
}

// defaultShards is the shard count when --shards is not given: one per device listed, so that
// every device has a shard to train.
func (b *backendFlags) defaultShards(shards int, given bool, pairs int) int {
	if given || len(b.deviceList) < 2 {
		return shards
	}
	return max(shards, min(len(b.deviceList), pairs))
}
