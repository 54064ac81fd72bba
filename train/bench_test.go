package train_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// BenchmarkW1Step is one local step of W1 (all 64 replicas): of a non-target client, and of the
// target client in a step whose batch holds the target sample (two world groups).
func BenchmarkW1Step(b *testing.B) {
	c, cp, tgt := traintest.W1Data()
	e, err := train.NewBenchEngine(cpu.New(0), train.Job{Config: traintest.W1Config(), WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: train.PairRange{First: 0, Count: 32}})
	if err != nil {
		b.Fatal(err)
	}
	// find a (round, step) whose batch of client 0 holds sample 0
	hitT, hitK := -1, -1
	perm := make([]int32, traintest.W1PerClient)
	for t := 0; t < 100 && hitT < 0; t++ {
		for k := 0; k < 5; k++ {
			rng := philox.NewRand(traintest.W1Config().Seed, uint32(t), 0, philox.DomainBatch, uint32(k))
			philox.SamplePrefix(&rng, perm, 32)
			if slices.Contains(perm[:32], 0) {
				hitT, hitK = t, k
				break
			}
		}
	}
	for _, tc := range []struct {
		name         string
		t, client, k int
	}{{"shared", 0, 1, 0}, {"target-grouped", hitT, 0, hitK}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := e.BenchStep(tc.t, tc.client, tc.k, 0.05); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkW1Client is one client's K local steps for 64 replicas, by chunk size (pairs).
func BenchmarkW1Client(b *testing.B) {
	c, cp, tgt := traintest.W1Data()
	for _, chunk := range []int{1, 2, 4, 8, 32} {
		b.Run(fmt.Sprint("chunk", chunk), func(b *testing.B) {
			cfg := traintest.W1Config()
			cfg.ChunkPairs = chunk
			e, err := train.NewBenchEngine(cpu.New(0), train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: train.PairRange{First: 0, Count: 32}})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := e.BenchClient(context.Background(), 0, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkW1(b *testing.B) {
	for i := 0; i < b.N; i++ {
		r, err := traintest.RunW1(context.Background(), 64)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.ReplicaRoundsPerSec, "replica-rounds/s")
	}
}

// BenchmarkW2 is the whole W2 workload (LeNet-5; docs/training.md defines it, names its
// PyTorch reference and records the measured ratios) for 32 replicas and 10 rounds on the CPU
// backend.
func BenchmarkW2(b *testing.B) {
	for i := 0; i < b.N; i++ {
		r, err := traintest.RunW2(context.Background(), nil, 32, 10)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.ReplicaRoundsPerSec, "replica-rounds/s")
		b.ReportMetric(r.NominalGFlops, "nominal-GFLOP/s")
	}
}

// BenchmarkInformedW1 is W1 with the informed adversary (64 pairs, its 20 rounds) on the CPU
// backend: the shadow's training copied from the target's in the rounds whose minibatches are
// the same in both worlds (17 of 20), and trained every round as before that copy.
func BenchmarkInformedW1(b *testing.B) {
	c, cp, tgt := traintest.W1Data()
	cfg := traintest.W1Config()
	cfg.Informed, cfg.Checkpoints = true, []int{cfg.Rounds}
	job := train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: train.PairRange{Count: 64}, Recorder: discard{}}
	for _, tc := range []struct {
		name string
		run  func(context.Context, compute.Backend, train.Job) error
	}{{"shadow-copied", train.TrainOn}, {"shadow-trained", train.TrainOnRetrainingShadow}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				be := cpu.New(0)
				if err := tc.run(context.Background(), be, job); err != nil {
					b.Fatal(err)
				}
				be.Close()
			}
		})
	}
}

// discard is a recorder that keeps nothing.
type discard struct{}

func (discard) Checkpoint(context.Context, *checkpoint.Checkpoint) error { return nil }
