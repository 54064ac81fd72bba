package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fedaudit/fedaudit/audit/calibrate"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/cost"
)

// planReport is `audit plan --json`.
type planReport struct {
	Config string    `json:"config"`
	Work   cost.Work `json:"work"`
	// Calibration and the CPU times are absent with --no-calibrate.
	Calibration *cost.Calibration `json:"calibration,omitempty"`
	// NotCalibrated says why the calibration was skipped when its smallest slice would have
	// outlasted --calibrate-time.
	NotCalibrated string      `json:"not_calibrated,omitempty"`
	CPUSeconds    float64     `json:"cpu_seconds,omitempty"`
	CPUShardSecs  float64     `json:"cpu_shard_seconds,omitempty"`
	GPU           gpuEstimate `json:"gpu"`
	// Memory is the estimated peak memory of training (bounded by one group of pairs) and of
	// the attack stage, beside the budget it was checked against (0: not checked).
	Memory       cost.MemoryEstimate `json:"memory"`
	MemoryBudget int64               `json:"memory_budget"`
	// Cost is the simulated cost table of each audit method at each mu the plan knows (the
	// exact mu of the quadratic instance at the last checkpoint, or --mu); absent otherwise.
	Cost []planCost `json:"cost,omitempty"`
}

// planCost is the cost table at one mu.
type planCost struct {
	Mu     float64             `json:"mu"`
	Source string              `json:"source"`
	Reps   int                 `json:"reps"`
	Rows   []calibrate.CostRow `json:"rows"`
}

type gpuEstimate struct {
	PeakTFLOPS   float64 `json:"peak_tflops"`
	Efficiency   float64 `json:"efficiency"`
	Seconds      float64 `json:"seconds"`       // the whole job on one GPU
	ShardSeconds float64 `json:"shard_seconds"` // the largest shard on one GPU
}

func init() {
	register(&command{
		name:    "plan",
		summary: "estimate the work, run-file size and time of an experiment before submitting it",
		usage: "plan --config F [--shards n] [--gpu-tflops 50] [--gpu-efficiency 0.25] [--no-calibrate] [--json]\n\n" +
			"FLOPs count 6·B·d per client gradient step (B rows, d parameters) for every client and\n" +
			"replica in every round (the target client twice with the informed statistics), plus\n" +
			"2·d per evaluated row at checkpoints. The CPU time comes from timing a few rounds of a\n" +
			"4-pair slice of the config on this machine (about a second); the GPU time from the\n" +
			"stated peak rate times the assumed efficiency.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			p := &planFlags{}
			fs.StringVar(&p.config, "config", "", "experiment config (YAML)")
			fs.IntVar(&p.shards, "shards", 1, "number of shards (array tasks) the training is split into")
			fs.Float64Var(&p.tflops, "gpu-tflops", 50, "peak FP32 rate of one GPU, in TFLOP/s")
			fs.Float64Var(&p.eff, "gpu-efficiency", cost.DefaultGPUEfficiency, "fraction of the peak rate the training reaches")
			fs.BoolVar(&p.noCal, "no-calibrate", false, "skip the timing on this machine (deterministic output)")
			fs.Float64Var(&p.costMu, "mu", 0, "print the cost table (trainings each audit method needs to certify 0.8 mu) at this mu, e.g. a pilot's realized mu (default: the exact mu of the quadratic instance at the last checkpoint, where the config is one)")
			fs.BoolVar(&p.noCost, "no-cost", false, "skip the cost table")
			fs.DurationVar(&p.budget, "calibrate-time", time.Second, "about how long the calibration may train")
			fs.BoolVar(&p.asJSON, "json", false, "machine-readable output")
			registerMemory(fs, &p.memory)
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
	tflops, eff float64
	noCal       bool
	costMu      float64
	noCost      bool
	budget      time.Duration
	asJSON      bool
	memory      string
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
	cfg, err := experiment.Load(p.config)
	if err != nil {
		return err
	}
	// A job whose attack stage would fail after its training is refused here too.
	if err := experiment.CheckStages(cfg); err != nil {
		return err
	}
	if _, err := cost.CheckMemory(cfg, nil, memBudget); err != nil {
		return err
	}
	data, err := experiment.Prepare(cfg)
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
	rate := p.tflops * 1e12 * p.eff
	rep := planReport{Config: p.config, Work: w, Memory: mem, MemoryBudget: memBudget, GPU: gpuEstimate{
		PeakTFLOPS: p.tflops, Efficiency: p.eff,
		Seconds: cost.Seconds(w.FLOPs, rate), ShardSeconds: cost.Seconds(w.ShardFLOPs, rate),
	}}
	if !p.noCal {
		if err := calibratePlan(ctx, e, cfg, data, p.budget, &rep); err != nil {
			return err
		}
	}
	if !p.noCost {
		if rep.Cost, err = planCosts(ctx, e, cfg, data, p.costMu); err != nil {
			return err
		}
	}
	if p.asJSON {
		return writeJSON(e.stdout, rep)
	}
	printPlan(e, cfg, rep)
	printPlanCosts(e, rep, p.noCost)
	return nil
}

// calibratePlan times a slice of the training on this machine and puts the CPU times into rep,
// or says in rep why it did not (the smallest slice would outlast the budget).
func calibratePlan(ctx context.Context, e *env, cfg *experiment.Config, data *experiment.Data, budget time.Duration, rep *planReport) error {
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
			si(tooLong.FLOPs), duration(tooLong.Guess.Seconds()), cost.CalibrationRateGuess/1e9, duration((2 * tooLong.Guess).Seconds()))
	case err != nil:
		return err
	default:
		rep.Calibration = &cal
		rep.CPUSeconds = cost.Seconds(w.FLOPs, cal.FLOPS)
		rep.CPUShardSecs = cost.Seconds(w.ShardFLOPs, cal.FLOPS)
	}
	return nil
}

// printPlanCosts prints the plan's cost tables, or says how to get one when no mu was known.
func printPlanCosts(e *env, rep planReport, noCost bool) {
	for _, c := range rep.Cost {
		fmt.Fprintf(e.stdout, "\ncost of an audit at mu = %.4g (%s):\n", c.Mu, c.Source)
		printCost(e.stdout, calibrate.CostOptions{Mu: c.Mu, Fraction: 0.8, Confidence: 0.95, Reps: c.Reps, MaxPairs: 102400, MaxCanaries: 102400}, c.Rows)
	}
	if len(rep.Cost) == 0 && !noCost {
		fmt.Fprintf(e.stdout, "cost: no mu known before training; --mu X (e.g. a pilot's realized mu) prints the trainings each audit method needs\n")
	}
}

func printPlan(e *env, cfg *experiment.Config, r planReport) {
	w := r.Work
	out := e.stdout
	fmt.Fprintf(out, "%s: %d pairs (%d replicas) x %d rounds = %d replica-rounds, in %d shard(s)\n",
		cfg.Name, w.Pairs, w.Replicas, w.Rounds, w.ReplicaRounds, w.Shards)
	fmt.Fprintf(out, "model: d = %d parameters; %d local trainings x %d steps per replica-round, %d rows per step\n",
		w.Params, w.LocalTrainings, w.LocalSteps, w.BatchRows)
	fmt.Fprintf(out, "work:  %s FLOP (train %s, eval %s at %d checkpoints); largest shard %s\n",
		si(w.FLOPs), si(w.TrainFLOPs), si(w.EvalFLOPs), w.Checkpoints, si(w.ShardFLOPs))
	fmt.Fprintf(out, "files: %d rows, about %sB of run files (%sB of parameter/upload vectors)\n",
		w.Rows, si(float64(w.RunFileBytes)), si(float64(w.VectorBytes)))
	m := r.Memory
	fmt.Fprintf(out, "memory: training about %s per shard (groups of %d pairs, %s per pair), attack stage about %s",
		cost.FormatBytes(m.TrainBytes), m.GroupPairs, cost.FormatBytes(m.Engine.PerPair), cost.FormatBytes(m.AttackBytes))
	if r.MemoryBudget > 0 {
		fmt.Fprintf(out, "; budget %s", cost.FormatBytes(r.MemoryBudget))
		if m.TrainBytes > r.MemoryBudget {
			fmt.Fprintf(out, " (warning: training needs a smaller --group-memory to fit)")
		}
		if m.AttackBytes > r.MemoryBudget {
			fmt.Fprintf(out, " (warning: the attack stage may not fit)")
		}
	}
	fmt.Fprintln(out)
	if r.Calibration != nil {
		c := r.Calibration
		fmt.Fprintf(out, "this machine: %sFLOP/s measured on %d pairs x %d rounds in %s: job %s, largest shard %s\n",
			si(c.FLOPS), c.Pairs, c.Rounds, c.Elapsed.Round(time.Millisecond), duration(r.CPUSeconds), duration(r.CPUShardSecs))
	} else if r.NotCalibrated != "" {
		fmt.Fprintf(out, "this machine: %s\n", r.NotCalibrated)
	} else {
		fmt.Fprintf(out, "this machine: not calibrated (--no-calibrate)\n")
	}
	fmt.Fprintf(out, "one GPU at %g TFLOP/s peak, %.0f%% efficiency (assumed): job %s, largest shard %s\n",
		r.GPU.PeakTFLOPS, 100*r.GPU.Efficiency, duration(r.GPU.Seconds), duration(r.GPU.ShardSeconds))
	fmt.Fprintf(out, "times cover training only; attacks and analysis come after, in one job\n")
}

// si formats x with an SI prefix and three significant digits.
func si(x float64) string {
	prefixes := []string{"", "k", "M", "G", "T", "P", "E"}
	i := 0
	for math.Abs(x) >= 1000 && i < len(prefixes)-1 {
		x /= 1000
		i++
	}
	return fmt.Sprintf("%.3g %s", x, prefixes[i])
}

// duration formats seconds for people: sub-second times in ms, long ones in h/m/s.
func duration(s float64) string {
	switch {
	case s < 1e-3:
		return "< 1ms"
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1e3)
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
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

// planCostReps is the number of simulated audits per size in the plan's cost table: fewer than
// `audit cost` (21), so that planning stays quick.
const planCostReps = 11

// planCosts simulates the cost table at --mu, or at the exact mu of the quadratic instance at
// the config's last checkpoint (final model and every iterate), or returns nothing.
func planCosts(ctx context.Context, e *env, cfg *experiment.Config, data *experiment.Data, mu float64) ([]planCost, error) {
	var want []planCost
	T := slices.Max(append([]int{0}, cfg.Train.Checkpoints...))
	switch {
	case mu > 0:
		want = append(want, planCost{Mu: mu, Source: "--mu"})
	case T > 0:
		if final, all, _, ok := experiment.ExactMu(cfg, data); ok {
			want = append(want, planCost{Mu: final(T), Source: fmt.Sprintf("exact mu of the final model at T = %d", T)},
				planCost{Mu: all(T), Source: fmt.Sprintf("exact mu of every iterate at T = %d", T)})
		} else if exact, ok := experiment.ExactMuOneRun(cfg, data); ok {
			for _, threat := range []string{"final", "all-iterates"} {
				if m := exact(threat, T); m > 0 {
					want = append(want, planCost{Mu: m, Source: fmt.Sprintf("exact mu of the canaries, %s, at T = %d", threat, T)})
				}
			}
		}
	}
	for i := range want {
		c := &want[i]
		if !(c.Mu > 0) || math.IsInf(c.Mu, 0) {
			continue
		}
		e.logf("plan: simulating the cost of an audit at mu = %.4g", c.Mu)
		rows, err := calibrate.CostTable(ctx, calibrate.CostOptions{Mu: c.Mu, Reps: planCostReps, Seed: 1})
		if err != nil {
			return nil, fmt.Errorf("plan: cost table: %w", err)
		}
		c.Reps, c.Rows = planCostReps, rows
	}
	return slices.DeleteFunc(want, func(c planCost) bool { return c.Rows == nil }), nil
}
