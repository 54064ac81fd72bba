package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/audit/calibrate"
	"github.com/fedaudit/fedaudit/cmd/audit/internal/tables"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/bounds"
	"github.com/fedaudit/fedaudit/experiment/cost"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

func init() {
	register(&command{
		name:    "plan",
		summary: "estimate the work, run-file size and time of an experiment before submitting it",
		usage: "plan --config F [--shards n] [--sequential] [--gpu-tflops 50] [--gpu-efficiency 0.25] [--backend gpu] [--no-calibrate] [--json]\n\n" +
			"FLOPs count a client gradient step on B rows as 3·B forward passes (a forward pass is\n" +
			"2·d for d parameters of a dense model, counted layer by layer for a CNN, whose weights\n" +
			"serve every position of an image) for every client and replica in every round (the\n" +
			"target client twice with the informed statistics), plus a forward pass per evaluated\n" +
			"row at checkpoints. The CPU time comes from timing a few rounds of a\n" +
			"4-pair slice of the config on this machine (about a second); the GPU time from the\n" +
			"stated peak rate times the assumed efficiency, or with --backend gpu from timing a\n" +
			"slice of one group's pairs on the GPU.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			p := &planFlags{}
			fs.StringVar(&p.config, "config", "", "experiment config (YAML)")
			fs.IntVar(&p.shards, "shards", 1, "number of shards (array tasks) the training is split into")
			fs.BoolVar(&p.sequential, "sequential", false, "check the config and --shards for a sequential run (audit run --sequential, or an array of audit train --sequential), as its tasks would")
			fs.Float64Var(&p.tflops, "gpu-tflops", 50, "peak FP32 rate of one GPU, in TFLOP/s")
			fs.Float64Var(&p.eff, "gpu-efficiency", cost.DefaultGPUEfficiency, "fraction of the peak rate the training reaches")
			fs.BoolVar(&p.noCal, "no-calibrate", false, "skip the timing on this machine (deterministic output)")
			fs.Float64Var(&p.costMu, "mu", 0, "print the cost table (trainings each audit method needs to certify 0.8 mu) at this mu, e.g. a pilot's realized mu (default: the exact mu of the quadratic instance at the last checkpoint, where the config is one)")
			fs.BoolVar(&p.noCost, "no-cost", false, "skip the cost table")
			fs.DurationVar(&p.budget, "calibrate-time", time.Second, "about how long the calibration may train; a slice is timed at two round counts at least, so a slow one takes up to about three times it")
			fs.BoolVar(&p.asJSON, "json", false, "machine-readable output")
			registerMemory(fs, &p.memory)
			fs.StringVar(&p.gpuMemory, "gpu-memory", "80GiB", "free memory of one GPU, for the pairs a group holds with --backend gpu")
			fs.StringVar(&p.backend, "backend", "cpu", "cpu, or gpu to time a slice of the training on the GPU (--device; a build with -tags gpu) instead of assuming --gpu-tflops at --gpu-efficiency")
			fs.IntVar(&p.device, "device", 0, "GPU ordinal for --backend gpu")
			return func(ctx context.Context, e *env, args []string) error {
				return runPlan(ctx, e, args, p)
			}
		},
	})
}

// planFlags is the flags of `audit plan`, gathered so that the command's steps (checks, the
// estimate, the calibration, the output) can be functions of their own.
type planFlags struct {
	config      string
	shards      int
	sequential  bool
	tflops, eff float64
	noCal       bool
	costMu      float64
	noCost      bool
	budget      time.Duration
	asJSON      bool
	memory      string
	gpuMemory   string
	backend     string
	device      int
}

// check refuses arguments and flag values the plan cannot use, before any file is read.
func (p *planFlags) check(args []string) error {
	if len(args) > 0 {
		return usagef("plan: unexpected argument %q", args[0])
	}
	if p.config == "" {
		return usagef("plan: --config is required")
	}
	if p.shards < 1 {
		return usagef("--shards must be >= 1")
	}
	if !(p.tflops > 0) || math.IsInf(p.tflops, 0) {
		return usagef("--gpu-tflops must be a positive number, got %g", p.tflops)
	}
	if !(p.eff > 0 && p.eff <= 1) {
		return usagef("--gpu-efficiency must be in (0, 1], got %g", p.eff)
	}
	// 0 is the default (the exact mu where known); any other value must be a mu, or the cost
	// table would be left out with "no mu known".
	if p.costMu != 0 && !(p.costMu > 0 && !math.IsInf(p.costMu, 0)) {
		return usagef("--mu must be a positive finite number, got %g", p.costMu)
	}
	if p.budget <= 0 {
		return usagef("--calibrate-time must be positive, got %s (--no-calibrate skips the calibration)", p.budget)
	}
	switch p.backend {
	case "cpu":
	case "gpu":
		if !cuda.Available() {
			return fmt.Errorf("--backend gpu: %w", cuda.ErrNotBuilt)
		}
	default:
		return usagef("--backend: %q is not cpu or gpu", p.backend)
	}
	return nil
}

// runPlan is `audit plan`: the checks, the work and memory of the config, the calibration and
// the cost table, then the report as text or JSON.
func runPlan(ctx context.Context, e *env, args []string, p *planFlags) error {
	if err := p.check(args); err != nil {
		return err
	}
	memBudget, err := memoryBudget(p.memory)
	if err != nil {
		return err
	}
	gpuBytes, err := cost.ParseBytes(p.gpuMemory)
	if err != nil || gpuBytes == 0 {
		return usagef("--gpu-memory: %v", errOr(err, "need > 0"))
	}
	cfg, err := spec.Load(p.config)
	if err != nil {
		return err
	}
	// A job whose attack stage would fail after its training is refused here too.
	if err := spec.CheckStages(cfg); err != nil {
		return err
	}
	// So is a sequential run its array tasks would refuse (submit.sh SEQUENTIAL=1 asks here,
	// rather than see N tasks fail).
	if p.sequential {
		if err := experiment.CheckSequential(cfg, p.shards, nil); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
	}
	if _, err := cost.CheckMemory(cfg, nil, memBudget); err != nil {
		return err
	}
	data, err := spec.PrepareContext(ctx, cfg)
	if err != nil {
		return err
	}
	mem, err := cost.CheckMemory(cfg, data, memBudget)
	if err != nil {
		return err
	}
	w, err := cost.Plan(cfg, data, p.shards)
	if err != nil {
		return err
	}
	// "per shard": the largest shard's groups and writer, not all the pairs' (16 shards of 40
	// pairs printed groups of 40 beside the GPU line's 3).
	if w.ShardPairs < cfg.Pairs {
		shard, err := cost.ShardMemory(cfg, data, w.ShardPairs)
		if err != nil {
			return err
		}
		mem.GroupPairs, mem.TrainBytes, mem.MinTrainBytes = shard.GroupPairs, shard.TrainBytes, shard.MinTrainBytes
	}
	// The GPU's options are those of this environment where it sets one: a plan made where
	// the job will run with FEDAUDIT_CUDA_PATCHCONV=1 counts the convolutions as it will (every
	// form, the largest taken), with FEDAUDIT_CUDA_WINOGRAD2=1 by Winograd's F(2x2, 3x3), else
	// by F(4x4, 3x3) where it fits, the GPU's default: as cuda.NewOps reads them. The options
	// it sets, and any variable of theirs that changes nothing, are logged here.
	for _, line := range experiment.GPUEnvLines(os.Environ()) {
		e.logf("plan: %s", line)
	}
	on := memory.DeviceFor(cuda.EnvWinogradTile())
	dev, err := cost.EstimateDevice(cfg, data, (w.Pairs+w.Shards-1)/w.Shards, gpuBytes, on)
	if err != nil {
		return err
	}
	rate := p.tflops * 1e12 * p.eff
	rep := tables.PlanReport{Config: p.config, Work: w, Memory: mem, MemoryBudget: memBudget, GPU: tables.GPUEstimate{
		PeakTFLOPS: p.tflops, Efficiency: p.eff,
		Seconds: cost.Seconds(w.FLOPs, rate), ShardSeconds: cost.Seconds(w.ShardFLOPs, rate), Memory: dev,
	}}
	rep.InvgradReconstructions, rep.InvgradCapped = invgradReconstructions(cfg)
	if !p.noCal {
		if err := calibratePlan(ctx, e, cfg, data, p.budget, &rep); err != nil {
			return err
		}
	}
	if p.backend == "gpu" {
		if err := calibrateGPU(ctx, e, cfg, data, p, &rep); err != nil {
			return err
		}
	}
	if !p.noCost {
		joint := cmp.Or(cfg.Audit.Confidence, audit.DefaultConfidence)
		if p.sequential {
			// A sequential audit's last look certifies at its own level (the looks share the
			// confidence's complement), above the fixed audit's: its cost is at that level.
			looks, err := audit.SequentialLooks(p.shards)
			if err != nil {
				return usagef("plan: %v", err)
			}
			each, err := audit.SequentialConfidences(joint, looks)
			if err != nil {
				return usagef("plan: %v", err)
			}
			joint = each[len(each)-1]
		}
		if rep.Cost, err = planCosts(ctx, e, cfg, data, p.costMu, joint); err != nil {
			return err
		}
	}
	if p.asJSON {
		return writeJSON(e.stdout, rep)
	}
	tables.Plan(e.stdout, cfg, rep)
	tables.PlanCosts(e.stdout, rep, p.noCost)
	return nil
}

// calibratePlan times a slice of the training on this machine and puts the CPU times into rep,
// or says in rep why it did not (the smallest slice would outlast the budget).
func calibratePlan(ctx context.Context, e *env, cfg *spec.Config, data *spec.Data, budget time.Duration, rep *tables.PlanReport) error {
	w := rep.Work
	// Said before the second of training, and only when it will happen.
	if cost.CalibrationFits(cfg, data, budget) == nil {
		e.logf("plan: calibrating on this machine (about %s)", budget)
	}
	cal, err := cost.Calibrate(ctx, cfg, data, budget)
	var tooLong *cost.CalibrationTooLongError
	switch {
	case errors.As(err, &tooLong):
		rep.NotCalibrated = fmt.Sprintf("not calibrated: one round of one pair is %sFLOP, at least %s even at %.0f GFLOP/s; --calibrate-time above %s times it anyway",
			tables.SI(tooLong.FLOPs), tables.Duration(tooLong.Guess.Seconds()), cost.CalibrationRateGuess/1e9, tables.Duration((2 * tooLong.Guess).Seconds()))
	case err != nil:
		return err
	default:
		rep.Calibration = &cal
		// The setup is the slice's; a shard's groups of pairs each pay it, counted once a shard.
		rep.CPUSeconds = cost.Seconds(w.FLOPs, cal.FLOPS) + float64(w.Shards)*cal.Setup.Seconds()
		rep.CPUShardSecs = cost.Seconds(w.ShardFLOPs, cal.FLOPS) + cal.Setup.Seconds()
	}
	return nil
}

// registerMemory declares --memory, the memory budget the config is checked against.
func registerMemory(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "memory", "", "memory budget of this machine, e.g. 8GiB (default: MemAvailable of /proc/meminfo); a config whose training cannot fit is refused")
}

// memoryBudget is --memory in bytes, or MemAvailable when it is empty (0 where unknown: no
// check).
func memoryBudget(text string) (int64, error) {
	if text == "" {
		return cost.MemAvailable(), nil
	}
	n, err := cost.ParseBytes(text)
	if err != nil || n == 0 {
		return 0, usagef("--memory: %v", errOr(err, "need > 0"))
	}
	return n, nil
}

// errOr is err's text, or msg when err is nil.
func errOr(err error, msg string) string {
	if err != nil {
		return err.Error()
	}
	return msg
}

// invgradReconstructions is how many runs invgrad reconstructs in the audit of cfg (0 when it
// is not among the attacks run), and whether audit.invgrad_pairs (or the CNN default) caps the
// pairs.
func invgradReconstructions(cfg *spec.Config) (int, bool) {
	names, _ := spec.RunAttacks(cfg.Audit.Attacks, spec.PlannedMeta(cfg), cfg.Train.Model, cfg.Pairs)
	if !slices.Contains(names, "invgrad") {
		return 0, false
	}
	pairs := cfg.Audit.InvgradPairs
	if pairs == 0 && model.IsNNKind(cfg.Train.Model.Kind) {
		pairs = attacks.DefaultInvgradPairsCNN
	}
	capped := pairs > 0 && pairs < cfg.Pairs
	if !capped {
		pairs = cfg.Pairs
	}
	return 2 * pairs * spec.AuditedRounds(cfg), capped
}

// planCostReps is the number of simulated audits per size in the plan's cost table: as many as
// `audit cost` (21); with 11 the share that reaches the target moves by 1/11 a draw, and the
// median of 11 named sizes half of `audit cost`'s.
const planCostReps = 21

// planCosts simulates the cost table at --mu, or at the exact mu of the quadratic instance at
// the config's last checkpoint (final model and every iterate), or returns nothing; joint is
// the confidence the audit's rows hold jointly at (a sequential audit's last look's).
func planCosts(ctx context.Context, e *env, cfg *spec.Config, data *spec.Data, mu, joint float64) ([]tables.PlanCost, error) {
	var want []tables.PlanCost
	T := slices.Max(append([]int{0}, cfg.Train.Checkpoints...))
	switch {
	case mu > 0:
		want = append(want, tables.PlanCost{Mu: mu, Source: "--mu"})
	case T > 0:
		if final, all, _, ok := bounds.ExactMu(cfg, data); ok {
			want = append(want, tables.PlanCost{Mu: final(T), Source: fmt.Sprintf("exact mu of the final model at T = %d", T)},
				tables.PlanCost{Mu: all(T), Source: fmt.Sprintf("exact mu of every iterate at T = %d", T)})
		} else if exact, ok := bounds.ExactMuOneRun(cfg, data); ok {
			for _, threat := range []string{"final", "all-iterates"} {
				if m := exact(threat, T); m > 0 {
					want = append(want, tables.PlanCost{Mu: m, Source: fmt.Sprintf("exact mu of the canaries, %s, at T = %d", threat, T)})
				}
			}
		}
	}
	// The audit certifies each of its rows at the family's row confidence (Bonferroni over the
	// rows), so one row's cost at the joint confidence would plan too few pairs.
	family := max(spec.PlannedRows(cfg), 1)
	rowConf := audit.FamilyRowConfidence(joint, family)
	for i := range want {
		c := &want[i]
		if !(c.Mu > 0) || math.IsInf(c.Mu, 0) {
			continue
		}
		c.Confidence, c.JointConfidence, c.FamilyRows, c.Delta = rowConf, joint, family, cfg.Audit.Delta
		e.logf("plan: simulating the cost of an audit at mu = %.4g", c.Mu)
		rows, err := calibrate.CostTable(ctx, calibrate.CostOptions{Mu: c.Mu, Reps: planCostReps, Seed: 1, Confidence: c.Confidence, Delta: c.Delta})
		if err != nil {
			return nil, fmt.Errorf("plan: cost table: %w", err)
		}
		c.Reps, c.Rows = planCostReps, rows
	}
	return slices.DeleteFunc(want, func(c tables.PlanCost) bool { return c.Rows == nil }), nil
}

// calibrateGPU times a slice of the training on the GPU: as many pairs as one group of a
// shard holds on the device (a GPU's rate depends on the replicas it batches), rounds grown as
// on the CPU; the measured rate replaces the assumed one in rep.GPU.
func calibrateGPU(ctx context.Context, e *env, cfg *spec.Config, data *spec.Data, p *planFlags, rep *tables.PlanReport) error {
	g, err := experiment.OpenGPUTrainer(p.device)
	if err != nil {
		return err
	}
	defer g.Close()
	w := rep.Work
	shardPairs := (w.Pairs + w.Shards - 1) / w.Shards
	pairs, err := g.GroupSize(train.Job{Config: cfg.Train, WorldC: data.Pair.C, Test: data.Test, Pairs: train.PairRange{Count: shardPairs}})
	if err != nil {
		return err
	}
	e.logf("plan: timing %d pairs on %s (about %s)", pairs, g.Name(), p.budget)
	cal, err := cost.CalibrateWith(ctx, cfg, data, p.budget, pairs, g.Train)
	if err != nil {
		return fmt.Errorf("plan: --backend gpu: %w", err)
	}
	rep.GPU.Device, rep.GPU.Calibration = g.Name(), &cal
	rep.GPU.Seconds, rep.GPU.ShardSeconds = cost.Seconds(w.FLOPs, cal.FLOPS), cost.Seconds(w.ShardFLOPs, cal.FLOPS)
	return nil
}
