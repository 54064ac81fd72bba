//go:build gpu

package cuda_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/traintest"
)

type discard struct{}

func (discard) Checkpoint(context.Context, *checkpoint.Checkpoint) error { return nil }

// sgemmRate measures the device's single-precision GEMM rate in GFLOP/s on square n x n
// products, as the reference for the achieved rate of the training runs.
func sgemmRate(b testing.TB, be *cuda.Backend, n, reps int) float64 {
	m := func() compute.Mat {
		return compute.Mat{Buf: be.Alloc(n * n), Rows: n, Cols: n, Stride: n, Batch: 1}
	}
	x, y, z := m(), m(), m()
	be.Gemm(false, false, 1, x, y, 0, z) // warm-up
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < reps; i++ {
		be.Gemm(false, false, 1, x, y, 0, z)
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	return 2 * float64(n) * float64(n) * float64(n) * float64(reps) / time.Since(start).Seconds() / 1e9
}

// BenchmarkW1 runs benchmark W1 (train/w1.go: T = 20 rounds, 10 clients, K = 5, B = 32,
// MLP 784-64-10) on the GPU with 64 replicas (W1 as the CPU benchmark runs it) and with 4096
// (the scaled workload), after a one-round warm-up, and reports replica-rounds per second
// and the dense-layer GEMM rate counted as traintest.RunW1 counts it, as a fraction of the
// SGEMM rate the device reaches on 4096 x 4096 products in the same run.
func BenchmarkW1(b *testing.B) {
	be := open(b, cuda.Options{})
	peak := sgemmRate(b, be, 4096, 20)
	b.Logf("device: %s; SGEMM 4096^3: %.0f GFLOP/s", be.Name(), peak)
	be.Close()
	for _, replicas := range []int{64, 4096} {
		b.Run(fmt.Sprintf("R=%d", replicas), func(b *testing.B) {
			c, cp, tgt := traintest.W1Data()
			cfg := traintest.W1Config()
			pairs := train.PairRange{First: 0, Count: replicas / 2}
			for i := 0; i < b.N; i++ {
				be := open(b, cuda.Options{})
				warm := cfg
				warm.Rounds = 1
				if err := train.TrainOn(context.Background(), be, train.Job{Config: warm, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: discard{}}); err != nil {
					b.Fatal(err)
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := train.TrainOn(context.Background(), be, train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: discard{}}); err != nil {
					b.Fatal(err)
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
				sec := time.Since(start).Seconds()
				free, total, _ := be.FreeMemory()
				be.Close()
				const dim, hidden, classes, clients, batch = 784, 64, 10, 10, 32
				perStep := 2.0 * batch * (2*(hidden*dim+classes*hidden) + classes*hidden)
				steps := float64(replicas * cfg.Rounds * clients * cfg.LocalSteps)
				gflops := steps * perStep / sec / 1e9
				rr := float64(replicas*cfg.Rounds) / sec
				b.ReportMetric(rr, "replica-rounds/s")
				b.ReportMetric(gflops, "GEMM-GFLOP/s")
				b.ReportMetric(gflops/peak, "of-SGEMM-peak")
				b.Logf("W1 replicas=%d rounds=%d seconds=%.3f replica_rounds_per_s=%.1f gemm_GFLOP/s=%.1f (%.1f%% of SGEMM %.0f) device memory used %.2f of %.2f GiB",
					replicas, cfg.Rounds, sec, rr, gflops, 100*gflops/peak, peak, float64(total-free)/(1<<30), float64(total)/(1<<30))
			}
		})
	}
}

// BenchmarkW2 runs benchmark W2 (traintest.RunW2: Noisy-FedAvg of LeNet-5, T = 10 rounds, 10
// clients, K = 5, B = 32) on the GPU with 64 replicas and with 1024 (the CPU benchmark runs 32), each after a one-round warm-up, and reports replica-rounds per second and the
// reference's nominal GFLOP/s (three times the forward FLOPs per image).
func BenchmarkW2(b *testing.B) {
	for _, replicas := range []int{64, 1024} {
		b.Run(fmt.Sprintf("R=%d", replicas), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				be := open(b, cuda.Options{})
				res, err := traintest.RunW2(context.Background(), be, replicas, traintest.W2Config().Rounds)
				if err == nil {
					err = be.Sync()
				}
				free, total, _ := be.FreeMemory()
				be.Close()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.ReplicaRoundsPerSec, "replica-rounds/s")
				b.ReportMetric(res.NominalGFlops, "nominal-GFLOP/s")
				b.Logf("%v; device memory used %.2f of %.2f GiB", res, float64(total-free)/(1<<30), float64(total)/(1<<30))
			}
		})
	}
}
