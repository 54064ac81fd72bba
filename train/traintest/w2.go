package traintest

import (
	"context"
	"fmt"
	"time"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// W2 (defined in docs/training.md): Noisy-FedAvg of LeNet-5 (ReLU, max pooling; 61,706 parameters)
// on synthetic 28x28 grey images (class prototypes plus pixel noise in [0, 1]), m = 10 clients x
// 600 images, 10 classes, T = 10, K = 5, B = 32, eta = 0.05, V = 1, sigma = 0.01; replicas are
// half on C, half on C' (client 0's image 0 replaced by one of another class).
const (
	w2Clients, W2PerClient, w2Classes, w2Side = 10, 600, 10, 28
	// W2ForwardFlops is the forward FLOPs of one image as the reference counts them: the two
	// convolutions' and three dense layers' multiply-adds, times 2.
	W2ForwardFlops = 2 * (28*28*6*25 + 10*10*16*150 + 400*120 + 120*84 + 84*10)
)

// W2Config is the training configuration of W2.
func W2Config() train.Config {
	return train.Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "lenet5"},
		Rounds: 10, LocalSteps: 5, LearningRate: 0.05, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.01,
		Batching: "fixed", BatchSize: 32, Seed: 1,
	}
}

// W2Data returns W2's two worlds: C and C' differ in image 0 of client 0, which C' replaces by
// an image of the next class.
func W2Data() (c, cp []*datasets.Dataset, target train.TargetInfo, err error) {
	return imageWorlds(datasets.SyntheticImageConfig{Name: "w2", N: w2Clients*W2PerClient + 1,
		Classes: w2Classes, Channels: 1, Height: w2Side, Width: w2Side, Noise: 0.3, Seed: 2}, w2Clients, W2PerClient)
}

// imageWorlds draws the synthetic images of ic (clients x perClient, and one spare) and returns
// the two worlds of a CNN benchmark: clients of perClient images each, and C' with client 0's
// image 0 replaced by the spare, relabelled to another class if it shares image 0's.
func imageWorlds(ic datasets.SyntheticImageConfig, clients, perClient int) (c, cp []*datasets.Dataset, target train.TargetInfo, err error) {
	all, err := datasets.SyntheticImages(ic)
	if err != nil {
		return nil, nil, train.TargetInfo{}, fmt.Errorf("%s data: %w", ic.Name, err)
	}
	dim := ic.Channels * ic.Height * ic.Width
	for i := 0; i < clients; i++ {
		lo := i * perClient
		c = append(c, &datasets.Dataset{Name: fmt.Sprintf("%s-client%d", ic.Name, i), Shape: all.Shape, Classes: ic.Classes,
			Features: all.Features[lo*dim : (lo+perClient)*dim], Labels: all.Labels[lo : lo+perClient]})
	}
	last := clients * perClient
	alt := &datasets.Dataset{Name: ic.Name + "-client0'", Shape: all.Shape, Classes: ic.Classes,
		Features: append([]float32(nil), c[0].Features...), Labels: append([]int32(nil), c[0].Labels...)}
	copy(alt.Features[:dim], all.Features[last*dim:(last+1)*dim])
	alt.Labels[0] = all.Labels[last]
	if alt.Labels[0] == c[0].Labels[0] {
		alt.Labels[0] = (alt.Labels[0] + 1) % int32(ic.Classes)
	}
	cp = append(cp, c...)
	cp[0] = alt
	return c, cp, train.TargetInfo{Client: 0, Index: 0}, nil
}

// CNNResult is the outcome of one W2 or W3 run.
type CNNResult struct {
	Workload         string // "W2" or "W3"
	Replicas, Rounds int
	Seconds          float64
	// ReplicaRoundsPerSec is Replicas * Rounds / Seconds, the benchmark's metric.
	ReplicaRoundsPerSec float64
	// FirstRoundSeconds and SteadyReplicaRoundsPerSec split the run at the end of its first
	// round (RoundClock).
	FirstRoundSeconds, SteadyReplicaRoundsPerSec float64
	// NominalGFlops is the reference's nominal count (3 x the forward FLOPs per image) per
	// second.
	NominalGFlops float64
}

func (r CNNResult) String() string {
	return fmt.Sprintf("%s replicas=%d rounds=%d seconds=%.3f replica_rounds_per_s=%.3f nominal_GFLOP/s=%.2f",
		r.Workload, r.Replicas, r.Rounds, r.Seconds, r.ReplicaRoundsPerSec, r.NominalGFlops)
}

// RunW2 runs benchmark W2 with the given (even) number of replicas and rounds on be (nil: the
// CPU backend through train.Train), after a one-round warm-up, and returns its timing.
func RunW2(ctx context.Context, be compute.Backend, replicas, rounds int) (CNNResult, error) {
	c, cp, tgt, err := W2Data()
	if err != nil {
		return CNNResult{}, err
	}
	return runCNN(ctx, be, "W2", W2Config(), c, cp, tgt, replicas, rounds, W2ForwardFlops)
}

// runCNN times workload (cfg on the worlds c and cp) for rounds rounds of the given replicas
// after a one-round warm-up, on be (nil: the CPU backend through train.Train); its nominal
// work is three forward passes of forwardFlops per image.
func runCNN(ctx context.Context, be compute.Backend, workload string, cfg train.Config, c, cp []*datasets.Dataset, tgt train.TargetInfo,
	replicas, rounds int, forwardFlops float64) (CNNResult, error) {
	if replicas < 2 || replicas%2 != 0 || rounds < 1 {
		return CNNResult{}, fmt.Errorf("%s: need an even replica count >= 2 and rounds >= 1, got %d and %d", workload, replicas, rounds)
	}
	cfg.Rounds = rounds
	warm := cfg
	warm.Rounds = 1
	pairs := train.PairRange{First: 0, Count: replicas / 2}
	var clock RoundClock
	run := func(cfg train.Config) error {
		job := train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: discard{}, Progress: clock.Progress}
		if be == nil {
			return train.Train(ctx, job)
		}
		return train.TrainOn(ctx, be, job)
	}
	if err := run(warm); err != nil {
		return CNNResult{}, fmt.Errorf("%s warm-up: %w", workload, err)
	}
	if err := FreeAll(be); err != nil {
		return CNNResult{}, fmt.Errorf("%s warm-up: release its memory: %w", workload, err)
	}
	clock.Start()
	if err := run(cfg); err != nil {
		return CNNResult{}, fmt.Errorf("%s: %w", workload, err)
	}
	sec, first, steady := clock.Split(replicas, cfg.Rounds)
	rr := float64(replicas * cfg.Rounds)
	flops := rr * float64(len(c)) * float64(cfg.LocalSteps) * float64(cfg.BatchSize) * 3 * forwardFlops
	return CNNResult{Workload: workload, Replicas: replicas, Rounds: cfg.Rounds, Seconds: sec, ReplicaRoundsPerSec: rr / sec,
		FirstRoundSeconds: first, SteadyReplicaRoundsPerSec: steady, NominalGFlops: flops / sec / 1e9}, nil
}

// RoundClock times a benchmark's training and the end of its first round, so that a rate can
// leave out the set-up (the data's upload, the allocations, w_0), which both sides of a
// comparison may not time alike: the PyTorch references put their data on the device before
// their clock starts. Its Progress is a train.Job's: each round of the engine ends with the
// host reading the divergence check, so on a device the round has run when it is called.
type RoundClock struct {
	start, first time.Time
}

// Start starts the clock and forgets an earlier first round (a warm-up's).
func (c *RoundClock) Start() { c.start, c.first = time.Now(), time.Time{} }

// Progress is train.Job.Progress: it notes the end of round 1.
func (c *RoundClock) Progress(done, _ int) {
	if done == 1 {
		c.first = time.Now()
	}
}

// Split stops the clock and returns the seconds since Start, those to the end of round 1,
// and the replica-rounds per second of the rounds after it (0 with one round, or where no
// round ended).
func (c *RoundClock) Split(replicas, rounds int) (seconds, first, steady float64) {
	end := time.Now()
	seconds = end.Sub(c.start).Seconds()
	if c.first.IsZero() {
		return seconds, 0, 0
	}
	first = c.first.Sub(c.start).Seconds()
	if rest := end.Sub(c.first).Seconds(); rounds > 1 && rest > 0 {
		steady = float64(replicas*(rounds-1)) / rest
	}
	return seconds, first, steady
}

// FreeAll frees the buffers a training left on a device backend (cuda's FreeAll, what
// train.TrainInGroups' caller does between two groups of pairs): the timed run then finds the
// device as free as the warm-up did, instead of holding both runs' buffers (W3 at 48 replicas
// ran out of an 80 GB GPU that way, at twice its memory estimate).
func FreeAll(be compute.Backend) error {
	if f, ok := be.(interface{ FreeAll() error }); ok {
		return f.FreeAll()
	}
	return nil
}
