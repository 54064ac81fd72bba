package paritytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// The validation kit (make gpu-kit, docs/gpu.md) runs benchmarks W1 and W2 on each backend
// through test functions that are skipped unless it sets these variables.
const (
	// BenchEnv lists the replica counts to run, e.g. "64,1024,4096,16384".
	BenchEnv = "FEDAUDIT_BENCH_R"
	// BenchRoundsEnv overrides the workload's rounds (W1's 20, W2's 10; the kit's shim mode
	// uses fewer).
	BenchRoundsEnv = "FEDAUDIT_BENCH_ROUNDS"
	// BenchOutEnv is the file each result is appended to, one JSON object a line.
	BenchOutEnv = "FEDAUDIT_BENCH_OUT"
	// BenchPrecisionEnv, when "tf32" or "bf16", runs the GPU benchmarks with the matrix
	// products in that precision (compute.TF32, compute.BF16; the default is fp32).
	BenchPrecisionEnv = "FEDAUDIT_BENCH_PRECISION"
)

// The workloads the kit runs (defined in docs/training.md): W1, the MLP of traintest.RunW1, W2,
// LeNet-5 of traintest.RunW2, and W3, ResNet-18 of traintest.RunW3 (on the GPU only).
const (
	W1 = "W1"
	W2 = "W2"
	W3 = "W3"
)

// BenchPlan returns the replica counts and rounds the kit asked for (rounds defaulting to
// workload's); ok is false when the benchmark is not requested.
func BenchPlan(workload string) (replicas []int, rounds int, ok bool, err error) {
	list := os.Getenv(BenchEnv)
	if list == "" {
		return nil, 0, false, nil
	}
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		r, err := strconv.Atoi(f)
		if err != nil || r < 2 || r%2 != 0 {
			return nil, 0, false, fmt.Errorf("%s: %q is not an even replica count >= 2", BenchEnv, f)
		}
		replicas = append(replicas, r)
	}
	rounds = traintest.W1Config().Rounds
	switch workload {
	case W2:
		rounds = traintest.W2Config().Rounds
	case W3:
		rounds = traintest.W3DefaultRounds
	}
	if s := os.Getenv(BenchRoundsEnv); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil || rounds < 1 {
			return nil, 0, false, fmt.Errorf("%s: %q is not a positive round count", BenchRoundsEnv, s)
		}
	}
	return replicas, rounds, true, nil
}

// BenchResult is one W1 or W2 measurement, as the kit's summary reads it.
type BenchResult struct {
	Workload string  `json:"workload,omitempty"` // W1, W2 or W3 ("" is W1)
	Backend  string  `json:"backend"`            // cpu, gpu or shim
	Device   string  `json:"device"`
	Replicas int     `json:"replicas"`
	Rounds   int     `json:"rounds"`
	Seconds  float64 `json:"seconds"`
	// ReplicaRoundsPerSec is replicas x rounds / seconds: the benchmark's metric.
	ReplicaRoundsPerSec float64 `json:"replica_rounds_per_s"`
	// FirstRoundSeconds is the time to the end of the first round, the set-up included (the
	// data's upload, the allocations, w_0), and SteadyReplicaRoundsPerSec the rate of the
	// rounds after it (traintest.RoundClock; 0 with one round): the PyTorch references put
	// their data on the device before their clock starts.
	FirstRoundSeconds         float64 `json:"first_round_seconds,omitempty"`
	SteadyReplicaRoundsPerSec float64 `json:"steady_replica_rounds_per_s,omitempty"`
	// GEMMGFlops is the work per second: for W1 the dense-layer GEMMs counted as
	// traintest.RunW1 counts them, for W2 the reference's nominal count (three times the
	// forward FLOPs per image, traintest.W2ForwardFlops).
	GEMMGFlops float64 `json:"gemm_gflops"`
	// SGEMMPeak is the device's measured SGEMM rate on 4096^3 products (GPU only), and
	// OfPeak = GEMMGFlops / SGEMMPeak.
	SGEMMPeak float64 `json:"sgemm_peak_gflops,omitempty"`
	OfPeak    float64 `json:"of_sgemm_peak,omitempty"`
	// MemoryUsed is the device memory in use at the end of the run (GPU only), bytes.
	MemoryUsed int64 `json:"memory_used,omitempty"`
	// Profile is where the device time went (cuda.Ops.Profile) when the run was profiled
	// (FEDAUDIT_CUDA_PROFILE=1, backend "...+profile"): the whole run, its warm-up round and
	// checkpoint evaluation included.
	Profile []cuda.OpTime `json:"profile,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// W1 dimensions (train/w1.go) for the GEMM count.
const w1Dim, w1Hidden, w1Classes, w1Clients = 784, 64, 10, 10

// RunW1 runs W1 with the given replicas and rounds on be (nil: the CPU backend through
// train.Train), after a one-round warm-up; sync waits for the device (nil: nothing to wait
// for) and is called before each clock reading.
func RunW1(ctx context.Context, be compute.Backend, sync func() error, replicas, rounds int) (BenchResult, error) {
	c, cp, tgt := traintest.W1Data()
	cfg := traintest.W1Config()
	cfg.Rounds = rounds
	warm := cfg
	warm.Rounds = 1
	pairs := train.PairRange{First: 0, Count: replicas / 2}
	var clock traintest.RoundClock
	run := func(cfg train.Config) error {
		var err error
		job := train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: discard{}, Progress: clock.Progress}
		if be == nil {
			err = train.Train(ctx, job)
		} else {
			err = train.TrainOn(ctx, be, job)
		}
		if err == nil && sync != nil {
			err = sync()
		}
		return err
	}
	r := BenchResult{Workload: W1, Replicas: replicas, Rounds: rounds}
	if err := run(warm); err != nil {
		return r, fmt.Errorf("w1 warm-up: %w", err)
	}
	if err := traintest.FreeAll(be); err != nil {
		return r, fmt.Errorf("w1 warm-up: release its memory: %w", err)
	}
	clock.Start()
	if err := run(cfg); err != nil {
		return r, fmt.Errorf("w1: %w", err)
	}
	r.Seconds, r.FirstRoundSeconds, r.SteadyReplicaRoundsPerSec = clock.Split(replicas, rounds)
	perStep := 2.0 * float64(cfg.BatchSize) * (2*(w1Hidden*w1Dim+w1Classes*w1Hidden) + w1Classes*w1Hidden)
	steps := float64(replicas * rounds * w1Clients * cfg.LocalSteps)
	r.ReplicaRoundsPerSec = float64(replicas*rounds) / r.Seconds
	r.GEMMGFlops = steps * perStep / r.Seconds / 1e9
	return r, nil
}

// RunW2 runs W2 (traintest.RunW2: LeNet-5) with the given replicas and rounds on be (nil: the
// CPU backend), after a one-round warm-up; sync waits for the device before the result is
// taken (each round already ends with a read of the divergence check, so the timed rounds
// have finished on the device when traintest.RunW2 reads its clock). Its work is the
// reference's nominal count.
func RunW2(ctx context.Context, be compute.Backend, sync func() error, replicas, rounds int) (BenchResult, error) {
	return runCNN(ctx, W2, traintest.RunW2, be, sync, replicas, rounds)
}

// RunW3 is benchmark W3 (traintest.RunW3) on be; sync waits for the device. Its work is the
// nominal three forward passes per image.
func RunW3(ctx context.Context, be compute.Backend, sync func() error, replicas, rounds int) (BenchResult, error) {
	return runCNN(ctx, W3, traintest.RunW3, be, sync, replicas, rounds)
}

// runCNN runs one of traintest's CNN benchmarks as a BenchResult.
func runCNN(ctx context.Context, workload string, run func(context.Context, compute.Backend, int, int) (traintest.CNNResult, error),
	be compute.Backend, sync func() error, replicas, rounds int) (BenchResult, error) {
	r := BenchResult{Workload: workload, Replicas: replicas, Rounds: rounds}
	res, err := run(ctx, be, replicas, rounds)
	if err == nil && sync != nil {
		err = sync()
	}
	if err != nil {
		return r, err
	}
	r.Seconds, r.ReplicaRoundsPerSec, r.GEMMGFlops = res.Seconds, res.ReplicaRoundsPerSec, res.NominalGFlops
	r.FirstRoundSeconds, r.SteadyReplicaRoundsPerSec = res.FirstRoundSeconds, res.SteadyReplicaRoundsPerSec
	return r, nil
}

type discard struct{}

func (discard) Checkpoint(context.Context, *checkpoint.Checkpoint) error { return nil }

// AppendBench appends r to the file named by FEDAUDIT_BENCH_OUT (if set) as one JSON line.
func AppendBench(r BenchResult) error {
	path := os.Getenv(BenchOutEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("benchmark results: %w", err)
	}
	b, _ := json.Marshal(r)
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
