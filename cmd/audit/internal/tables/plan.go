package tables

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/fedaudit/fedaudit/audit/calibrate"
	"github.com/fedaudit/fedaudit/experiment/cost"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/internal/numfmt"
)

// PlanReport is `audit plan --json`, and what Plan writes for people.
type PlanReport struct {
	Config string    `json:"config"`
	Work   cost.Work `json:"work"`
	// Calibration and the CPU times are absent with --no-calibrate.
	Calibration *cost.Calibration `json:"calibration,omitempty"`
	// NotCalibrated says why the calibration was skipped when its smallest slice would have
	// outlasted --calibrate-time.
	NotCalibrated string      `json:"not_calibrated,omitempty"`
	CPUSeconds    float64     `json:"cpu_seconds,omitempty"`
	CPUShardSecs  float64     `json:"cpu_shard_seconds,omitempty"`
	GPU           GPUEstimate `json:"gpu"`
	// Memory is the estimated peak memory of training (bounded by one group of pairs) and of
	// the attack stage, beside the budget it was checked against (0: not checked).
	Memory       cost.MemoryEstimate `json:"memory"`
	MemoryBudget int64               `json:"memory_budget"`
	// Cost is the simulated cost table of each audit method at each mu the plan knows (the
	// exact mu of the quadratic instance at the last checkpoint, or --mu); absent otherwise.
	Cost []PlanCost `json:"cost,omitempty"`
	// InvgradReconstructions is how many runs invgrad reconstructs (each an optimization of
	// hundreds of passes through the model), 0 when it is not planned.
	InvgradReconstructions int  `json:"invgrad_reconstructions,omitempty"`
	InvgradCapped          bool `json:"invgrad_capped,omitempty"`
}

// PlanCost is the cost table at one mu.
type PlanCost struct {
	Mu     float64 `json:"mu"`
	Source string  `json:"source"`
	Reps   int     `json:"reps"`
	// Confidence is the confidence each row of the audit is certified at: JointConfidence
	// (audit.confidence) shared by FamilyRows rows (Bonferroni). Delta is audit.delta.
	Confidence      float64             `json:"confidence"`
	JointConfidence float64             `json:"joint_confidence"`
	FamilyRows      int                 `json:"family_rows"`
	Delta           float64             `json:"delta"`
	Rows            []calibrate.CostRow `json:"rows"`
}

// GPUEstimate is the training time on one GPU at an assumed efficiency.
type GPUEstimate struct {
	PeakTFLOPS   float64 `json:"peak_tflops"`
	Efficiency   float64 `json:"efficiency"`
	Seconds      float64 `json:"seconds"`       // the whole job on one GPU
	ShardSeconds float64 `json:"shard_seconds"` // the largest shard on one GPU
	// Memory is the training's device memory on a GPU of --gpu-memory bytes.
	Memory cost.DeviceEstimate `json:"memory"`
	// Device and Calibration are set by `audit plan --backend gpu`: the times are then from
	// the rate measured on that device, not from PeakTFLOPS and Efficiency.
	Device      string            `json:"device,omitempty"`
	Calibration *cost.Calibration `json:"calibration,omitempty"`
}

// PlanCosts writes the plan's cost tables, or says how to get one when no mu was known (and
// the tables were not turned off: noCost).
func PlanCosts(w io.Writer, rep PlanReport, noCost bool) {
	for _, c := range rep.Cost {
		fmt.Fprintf(w, "\ncost of an audit at mu = %.4g (%s); each of its %d rows certified at confidence %s (%g jointly):\n",
			c.Mu, c.Source, c.FamilyRows, numfmt.LowerConfidence(c.Confidence, 'g', 4), c.JointConfidence)
		Cost(w, calibrate.CostOptions{Mu: c.Mu, Fraction: 0.8, Confidence: c.Confidence, Delta: c.Delta, Reps: c.Reps, MaxPairs: 102400, MaxCanaries: 102400}, c.Rows)
	}
	if len(rep.Cost) == 0 && !noCost {
		fmt.Fprintf(w, "cost: no mu known before training; --mu X (e.g. a pilot's realized mu) prints the trainings each audit method needs\n")
	}
}

// Plan writes the plan of cfg for people: the work, files, memory and times of its training.
func Plan(out io.Writer, cfg *spec.Config, r PlanReport) {
	w := r.Work
	fmt.Fprintf(out, "%s: %d pairs (%d replicas) x %d rounds = %d replica-rounds, in %d shard(s)\n",
		cfg.Name, w.Pairs, w.Replicas, w.Rounds, w.ReplicaRounds, w.Shards)
	fmt.Fprintf(out, "model: d = %d parameters; %d local trainings x %d steps per replica-round, %d rows per step\n",
		w.Params, w.LocalTrainings, w.LocalSteps, w.BatchRows)
	if p := cfg.Train.Pretrain; p != nil {
		fmt.Fprintf(out, "w_0:   pretrained without privacy (FedAvg, full batches, %d rounds at rate %g) on the data both worlds share, once per shard before its pairs\n",
			p.Rounds, cmp.Or(p.LearningRate, cfg.Train.LearningRate))
	}
	if cfg.Adjacency.Canary == spec.CanaryCANIFE {
		fmt.Fprintf(out, "canary: canife, crafted at w_0 against the shared data's gradients whenever the data is prepared (seconds on the host)\n")
	}
	pretrain := ""
	if w.PretrainFLOPs > 0 {
		pretrain = fmt.Sprintf(", pretraining %s", SI(w.PretrainFLOPs))
	}
	fmt.Fprintf(out, "work:  %s FLOP (train %s, eval %s at %d checkpoints%s); largest shard %s\n",
		SI(w.FLOPs), SI(w.TrainFLOPs), SI(w.EvalFLOPs), w.Checkpoints, pretrain, SI(w.ShardFLOPs))
	fmt.Fprintf(out, "files: %d rows, about %sB of run files (%sB of parameter/upload vectors)\n",
		w.Rows, SI(float64(w.RunFileBytes)), SI(float64(w.VectorBytes)))
	m := r.Memory
	attack := cost.FormatBytes(m.AttackBytes)
	if m.AttackWorkers > 0 {
		attack += fmt.Sprintf(" (the host model %s a worker, for %d workers: this machine's cores; a node of more cores needs more, `audit attack --workers N` caps them)",
			cost.FormatBytes(m.HostModelBytes), m.AttackWorkers)
	}
	fmt.Fprintf(out, "memory: training about %s per shard (groups of %d pairs, %s per pair), attack stage about %s, analysis about %s (%d score rows)",
		cost.FormatBytes(m.TrainBytes), m.GroupPairs, cost.FormatBytes(m.Engine.PerPair), attack, cost.FormatBytes(m.AnalyzeBytes), m.Scores)
	if r.MemoryBudget > 0 {
		fmt.Fprintf(out, "; budget %s", cost.FormatBytes(r.MemoryBudget))
		if m.TrainBytes > r.MemoryBudget {
			fmt.Fprintf(out, " (warning: training needs a smaller --group-memory to fit)")
		}
		if m.AttackBytes > r.MemoryBudget {
			fmt.Fprintf(out, " (warning: the attack stage may not fit)")
		}
		if m.AnalyzeBytes > r.MemoryBudget {
			fmt.Fprintf(out, " (warning: the analysis may not fit)")
		}
	}
	fmt.Fprintln(out)
	if r.Calibration != nil {
		c := r.Calibration
		setup := ""
		if c.Setup > 0 {
			setup = fmt.Sprintf(" (rounds apart from a set-up of %s a shard)", c.Setup.Round(time.Millisecond))
		}
		fmt.Fprintf(out, "this machine: %sFLOP/s measured on %d pairs x %d rounds in %s%s: job %s, largest shard %s\n",
			SI(c.FLOPS), c.Pairs, c.Rounds, c.Elapsed.Round(time.Millisecond), setup, Duration(r.CPUSeconds), Duration(r.CPUShardSecs))
	} else if r.NotCalibrated != "" {
		fmt.Fprintf(out, "this machine: %s\n", r.NotCalibrated)
	} else {
		fmt.Fprintf(out, "this machine: not calibrated (--no-calibrate)\n")
	}
	if c := r.GPU.Calibration; c != nil {
		fmt.Fprintf(out, "this GPU (%s): %s FLOP/s measured on %d pairs x %d rounds (%s): job %s, largest shard %s\n",
			r.GPU.Device, SI(c.FLOPS), c.Pairs, c.Rounds, Duration(c.Elapsed.Seconds()), Duration(r.GPU.Seconds), Duration(r.GPU.ShardSeconds))
	} else {
		fmt.Fprintf(out, "one GPU at %g TFLOP/s peak, %.0f%% efficiency (assumed): job %s, largest shard %s\n",
			r.GPU.PeakTFLOPS, 100*r.GPU.Efficiency, Duration(r.GPU.Seconds), Duration(r.GPU.ShardSeconds))
	}
	if m := r.GPU.Memory; m.Problem != "" {
		fmt.Fprintf(out, "GPU memory (%s): %s\n", cost.FormatBytes(m.DeviceBytes), m.Problem)
	} else {
		form := ""
		if m.Winograd {
			form = " (3x3 convolutions by Winograd's " + m.WinogradForm + "; FEDAUDIT_CUDA_PATCHCONV=1 for patches)"
		}
		fmt.Fprintf(out, "GPU memory (%s): %s per pair, %s fixed: groups of %d pairs%s\n",
			cost.FormatBytes(m.DeviceBytes), cost.FormatBytes(m.Engine.PerPair), cost.FormatBytes(m.Engine.Fixed), m.GroupPairs, form)
	}
	fmt.Fprintf(out, "times cover training only; attacks and analysis come after, in one job\n")
	if n := r.InvgradReconstructions; n > 0 {
		capped := "every pair's runs at each audited round"
		if r.InvgradCapped {
			capped = "the runs of its first audit.invgrad_pairs pairs at each audited round"
		}
		fmt.Fprintf(out, "attacks: invgrad reconstructs %d runs (%s), each an optimization of hundreds of passes through the model on the CPU; it can take far longer than the training (an MLP of 203,530 parameters: 4.5 s of CPU a reconstruction, 120 in 9 min where the training took 20 s); audit.invgrad_pairs caps the pairs, audit.attacks leaves it out\n", n, capped)
	}
}

// SI formats x with an SI prefix and three significant digits.
func SI(x float64) string {
	prefixes := []string{"", "k", "M", "G", "T", "P", "E"}
	i := 0
	for math.Abs(x) >= 1000 && i < len(prefixes)-1 {
		x /= 1000
		i++
	}
	return fmt.Sprintf("%.3g %s", x, prefixes[i])
}

// Duration formats seconds for people: sub-second times in ms, long ones in h/m/s.
func Duration(s float64) string {
	switch {
	case s < 1e-3:
		return "< 1ms"
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1e3)
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
