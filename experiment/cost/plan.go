package cost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

// Work is the size of an experiment's training stage, counted the way the engine does it, so
// that users can size a batch array before they submit it.
//
// FLOPs count a gradient on B rows as three forward passes per row (forward, weight gradient,
// input gradient) and an evaluation as one: the forward pass is 2·d per row for the dense
// models (the rule of thumb: 6·B·d per gradient) and counted layer by layer for convolutional
// ones (model.ForwardFLOPs), whose weights are used at every position of an image. The engine
// trains every one of the m clients for every replica in every round (clients that sit a round
// out are masked when averaging, not skipped), and with the informed statistics on it trains the
// target client a second time on the other world's data. Clipping, noise and averaging are O(d)
// per client step and left out.
type Work struct {
	Pairs      int `json:"pairs"`
	Replicas   int `json:"replicas"` // 2 per pair: one in C, one in C'
	Shards     int `json:"shards"`
	Rounds     int `json:"rounds"` // T
	LocalSteps int `json:"local_steps"`
	Clients    int `json:"clients"`
	// Params is d, the length of one replica's parameter vector.
	Params int `json:"params"`
	// ForwardFLOPs is one row's forward pass.
	ForwardFLOPs float64 `json:"forward_flops"`
	// BatchRows is the number of rows of one client step's gradient (the expected number for
	// Poisson batches).
	BatchRows int `json:"batch_rows"`
	// LocalTrainings is the number of clients' K-step local trainings per replica and round:
	// m, plus one with the informed statistics.
	LocalTrainings int `json:"local_trainings"`
	// Checkpoints is the number of recorded rounds; EvalRows the rows evaluated per replica at
	// each (every client's samples, the test set and the two target samples).
	Checkpoints int `json:"checkpoints"`
	EvalRows    int `json:"eval_rows"`

	ReplicaRounds int64   `json:"replica_rounds"`
	ClientSteps   int64   `json:"client_steps"` // gradient steps over all replicas, rounds and clients
	TrainFLOPs    float64 `json:"train_flops"`
	EvalFLOPs     float64 `json:"eval_flops"`
	// PretrainFLOPs is train.pretrain's work, once per shard (one model, full batches, every
	// client), over all shards.
	PretrainFLOPs float64 `json:"pretrain_flops,omitempty"`
	FLOPs         float64 `json:"flops"`
	// ShardPairs is the largest shard's number of pairs.
	ShardPairs int `json:"shard_pairs"`
	// ShardFLOPs is the work of the largest shard: the array's critical path.
	ShardFLOPs float64 `json:"shard_flops"`

	// Rows is the number of run-file rows; VectorBytes the bytes of recorded parameter and
	// upload vectors among them (float32), RunFileBytes an estimate of all run files together
	// (vectors plus the fixed, statistic and canary columns, uncompressed, without Arrow's
	// small framing).
	Rows         int64 `json:"rows"`
	VectorBytes  int64 `json:"vector_bytes"`
	RunFileBytes int64 `json:"run_file_bytes"`
}

// Plan counts the work of training cfg in the given number of shards (0 means 1). data is the
// experiment's prepared data (Prepare), which fixes the input dimension and classes.
func Plan(cfg *spec.Config, data *spec.Data, shards int) (Work, error) {
	shards = max(shards, 1)
	if shards > cfg.Pairs {
		return Work{}, &spec.ConfigError{Err: fmt.Errorf("plan: %d shards for %d pairs: a shard needs at least one pair", shards, cfg.Pairs)}
	}
	dim := 1
	for _, s := range data.Shape {
		dim *= s
	}
	d, err := model.ParamCountShape(cfg.Train.Model, data.Shape, data.Classes)
	if errors.Is(err, model.ErrExternal) {
		return Work{}, &spec.ConfigError{Err: fmt.Errorf("plan: %w", err)}
	}
	if err != nil {
		return Work{}, fmt.Errorf("plan: %w", err)
	}
	fwd, err := model.ForwardFLOPs(cfg.Train.Model, data.Shape, data.Classes)
	if err != nil {
		return Work{}, fmt.Errorf("plan: %w", err)
	}
	tc := cfg.Train
	w := Work{
		Pairs: cfg.Pairs, Replicas: 2 * cfg.Pairs, Shards: shards,
		Rounds: tc.Rounds, LocalSteps: tc.LocalSteps, Clients: cfg.Data.Clients,
		Params: d, ForwardFLOPs: fwd, BatchRows: cfg.Data.PerClient, LocalTrainings: cfg.Data.Clients,
		Checkpoints: len(tc.Checkpoints),
		EvalRows:    cfg.Data.Clients*cfg.Data.PerClient + cfg.Data.TestSamples + 2,
	}
	if tc.Batching != "full" {
		w.BatchRows = tc.BatchSize
	}
	if tc.Informed {
		w.LocalTrainings++
	}
	w.count(cfg)
	largest := experiment.ShardPairs(cfg.Pairs, runs.Shard{Index: shards - 1, Count: shards}).Count
	for i := 0; i < shards; i++ {
		largest = max(largest, experiment.ShardPairs(cfg.Pairs, runs.Shard{Index: i, Count: shards}).Count)
	}
	w.ShardPairs = largest
	w.ShardFLOPs = w.FLOPs * float64(largest) / float64(cfg.Pairs)
	if p := tc.Pretrain; p != nil && data.Initial == nil {
		// Every shard pretrains the one w_0 before its pairs (data.Initial: prepared already).
		perShard := float64(p.Rounds) * float64(cfg.Data.Clients) * float64(cmp.Or(p.LocalSteps, tc.LocalSteps)) *
			3 * float64(cfg.Data.PerClient) * fwd
		w.PretrainFLOPs = perShard * float64(shards)
		w.FLOPs += w.PretrainFLOPs
		w.ShardFLOPs += perShard
	}
	return w, nil
}

// count fills the totals from the per-replica sizes.
func (w *Work) count(cfg *spec.Config) {
	R, fwd := int64(w.Replicas), w.ForwardFLOPs
	w.ReplicaRounds = R * int64(w.Rounds)
	w.ClientSteps = w.ReplicaRounds * int64(w.LocalTrainings) * int64(w.LocalSteps)
	w.TrainFLOPs = float64(w.ClientSteps) * 3 * float64(w.BatchRows) * fwd
	w.EvalFLOPs = float64(R) * float64(w.Checkpoints) * fwd * float64(w.EvalRows)
	w.FLOPs = w.TrainFLOPs + w.EvalFLOPs

	w.Rows = R * int64(w.Checkpoints)
	vec, fixed := rowBytes(cfg, w.Params)
	w.VectorBytes = memory.SatMul(w.Rows, vec)
	w.RunFileBytes = memory.SatAdd(w.VectorBytes, memory.SatMul(w.Rows, fixed))
}

// rowBytes is the size of one run-file row of cfg for a model of d parameters, uncompressed,
// in the columns training writes (spec.PlannedMeta, the shard recorder's columns in
// experiment/trainstage.go): vec the recorded parameter and upload vectors (float32, an upper
// bound: rows without an upload may be shorter), fixed the rest. The rest is run, pair, seed,
// loss, accuracy (8 bytes each), round (4), world, diverged (1), 8 bytes per statistic, a
// 4-byte list offset per vector, and with canaries the inclusion bits (one bit per canary and
// an offset) and k float64 per canary statistic: with 1000 direction canaries about 24 kB a
// row, which dwarfs the rest. Sums saturate (memory.SatMul), so that 10^8 pairs of a large
// model cannot overflow.
func rowBytes(cfg *spec.Config, d int) (vec, fixed int64) {
	m := spec.PlannedMeta(cfg)
	vectors := int64(0)
	if m.HasParams {
		vectors++
	}
	if m.HasUpload {
		vectors++
	}
	vec = memory.SatMul(vectors*4, int64(d))
	fixed = int64(5*8+4+2) + 8*int64(len(m.StatNames)) + 4*vectors
	if k := int64(m.Canaries); k > 0 {
		fixed += (k+7)/8 + 4 + int64(len(m.CanaryStatNames))*(8*k+4)
	}
	return vec, fixed
}

// Calibration is a measured training speed of this machine on a slice of an experiment.
type Calibration struct {
	Pairs   int           `json:"pairs"`  // pairs of the slice
	Rounds  int           `json:"rounds"` // rounds of the slice
	Elapsed time.Duration `json:"elapsed_ns"`
	// FLOPS is the slice's work (as Plan counts it) per second, over the rounds: from the
	// difference of two timings of different rounds where there are two, so that what a
	// training costs whatever its rounds (Setup) is not charged to them.
	FLOPS float64 `json:"flops_per_second"`
	// Setup is the slice's time that does not grow with the rounds (1000 orthonormal canary
	// directions: 5 s of a training of 0.7 s a round), once a shard.
	Setup time.Duration `json:"setup_ns,omitempty"`
}

// Calibrate times the real training of a slice of cfg (up to 4 pairs, a number of rounds grown
// until the slice takes about budget/2, one checkpoint at its end) on the CPU backend, and
// returns the speed in Plan's FLOPs. A small slice batches fewer replicas than the real job,
// so the speed, and every time derived from it, errs on the slow side.
func Calibrate(ctx context.Context, cfg *spec.Config, data *spec.Data, budget time.Duration) (Calibration, error) {
	return CalibrateWith(ctx, cfg, data, budget, 4, func(ctx context.Context, job train.Job) error {
		// The CPU computes in float32 whatever precision the GPU is to use.
		job.Config.Precision = ""
		return train.Train(ctx, job)
	})
}

// CalibrateWith is Calibrate with a slice of up to pairs pairs trained by trainJob: on a GPU,
// the backend's training in groups (experiment.GPUTrainer), with as many pairs as a shard's
// group holds, since a GPU's rate depends on the replicas it batches.
func CalibrateWith(ctx context.Context, cfg *spec.Config, data *spec.Data, budget time.Duration, pairs int, trainJob func(context.Context, train.Job) error) (Calibration, error) {
	slice, err := calibrationSlice(cfg, data, budget, pairs)
	if err != nil {
		return Calibration{}, err
	}
	var cal, prev Calibration
	for rounds := 1; ; rounds = min(2*rounds, cfg.Train.Rounds) {
		slice.Train = withRounds(cfg, rounds).Train
		slice.Train.Pretrain = nil // as calibrationSlice's
		tc := slice.Train
		start := time.Now()
		err := trainJob(ctx, train.Job{Config: tc, WorldC: data.Pair.C, WorldCPrime: data.Pair.CPrime, Target: data.Target,
			Test: data.Test, Pairs: train.PairRange{First: 0, Count: slice.Pairs}, Recorder: discard{}})
		if err != nil {
			return Calibration{}, fmt.Errorf("calibrate: %w", err)
		}
		prev, cal = cal, Calibration{Pairs: slice.Pairs, Rounds: rounds, Elapsed: time.Since(start)}
		// Two timings at least where the config has the rounds: their difference is what the
		// rounds cost (a training of 64 rounds was planned at 7 min where it took 36 s, a fixed
		// 5 s of it charged to each of the one round timed).
		if rounds == cfg.Train.Rounds || cal.Elapsed >= budget/2 && prev.Rounds > 0 {
			break
		}
	}
	work := func(rounds int) (float64, error) {
		w, err := Plan(withRounds(&slice, rounds), data, 1)
		return w.FLOPs, err
	}
	w, err := work(cal.Rounds)
	if err != nil {
		return Calibration{}, err
	}
	cal.FLOPS = w / max(cal.Elapsed.Seconds(), 1e-9)
	if prev.Rounds > 0 && cal.Rounds > prev.Rounds {
		wp, err := work(prev.Rounds)
		if err != nil {
			return Calibration{}, err
		}
		// A difference that timing noise made small or negative says nothing: the whole
		// timing stands then.
		if dt := (cal.Elapsed - prev.Elapsed).Seconds(); dt > 0.1*cal.Elapsed.Seconds() && w > wp {
			rate := (w - wp) / dt
			if setup := cal.Elapsed.Seconds() - w/rate; setup > 0 {
				cal.FLOPS, cal.Setup = rate, time.Duration(setup*float64(time.Second))
			}
		}
	}
	return cal, nil
}

// CalibrationFits reports whether Calibrate can time a slice of cfg within budget: nil, or the
// *CalibrationTooLongError Calibrate would return, found without training anything.
func CalibrationFits(cfg *spec.Config, data *spec.Data, budget time.Duration) error {
	_, err := calibrationSlice(cfg, data, budget, 4)
	return err
}

// calibrationSlice is the configuration Calibrate times: up to pairs pairs of cfg. The smallest
// slice is one round of one pair, which for a large model (ResNet-18: several TFLOP) takes
// minutes: it is estimated at an optimistic rate first, and refused rather than overrun a
// budget the user was promised by a factor of a hundred.
func calibrationSlice(cfg *spec.Config, data *spec.Data, budget time.Duration, pairs int) (spec.Config, error) {
	slice := *cfg
	slice.Pairs = max(1, min(cfg.Pairs, pairs))
	// The rounds are timed from a w_0 at hand: a pretrained one would be pretrained again on
	// every try, inside the clock, and charged to the slice's rounds (100 rounds of pretraining
	// made a 48 s training a plan of 36 min). Plan counts the pretraining's work apart.
	slice.Train.Pretrain = nil
	for {
		est, err := Plan(withRounds(&slice, 1), data, 1)
		if err != nil {
			return spec.Config{}, err
		}
		guess := time.Duration(Seconds(est.FLOPs, CalibrationRateGuess) * float64(time.Second))
		if guess <= budget/2 {
			return slice, nil
		}
		if slice.Pairs == 1 {
			return spec.Config{}, &CalibrationTooLongError{FLOPs: est.FLOPs, Guess: guess, Budget: budget}
		}
		slice.Pairs = 1
	}
}

// CalibrationRateGuess is the FLOP rate Calibrate assumes when it decides whether its slice
// fits the budget: above what the CPU engine reaches on a workstation (tens of GFLOP/s), so
// that a slice is only refused when it would surely take longer than asked.
const CalibrationRateGuess = 200e9

// CalibrationTooLongError says that even one round of one pair would outlast the calibration
// budget: FLOPs is its work, Guess its duration at CalibrationRateGuess (a lower estimate).
type CalibrationTooLongError struct {
	FLOPs         float64
	Guess, Budget time.Duration
}

func (e *CalibrationTooLongError) Error() string {
	return fmt.Sprintf("calibrate: one round of one pair is %.3g FLOP, at least %s even at %.0f GFLOP/s: above the budget of %s",
		e.FLOPs, e.Guess.Round(time.Second), CalibrationRateGuess/1e9, e.Budget)
}

// withRounds is cfg trained for its first rounds only, checkpointed at the end.
func withRounds(cfg *spec.Config, rounds int) *spec.Config {
	c := *cfg
	tc := cfg.Train
	tc.Rounds = rounds
	tc.Checkpoints = []int{rounds}
	if tc.Schedule == "table" {
		tc.ScheduleTable = tc.ScheduleTable[:rounds]
	}
	c.Train = tc
	return &c
}

// discard is a recorder that keeps nothing: calibration times training, not writing.
type discard struct{}

func (discard) Checkpoint(context.Context, *checkpoint.Checkpoint) error { return nil }

// DefaultGPUEfficiency is the fraction of a GPU's peak FLOP rate Plan's estimates assume. The
// engine's GEMMs are many small per-replica products (rows B by d), which reach a fraction of
// the peak that dense benchmarks see; 0.25 is a planning figure, not a measurement.
const DefaultGPUEfficiency = 0.25

// Seconds is the time of work at a rate of flops per second.
func Seconds(work, flops float64) float64 {
	if !(flops > 0) {
		return 0
	}
	return work / flops
}
