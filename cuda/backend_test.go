//go:build gpu

// These tests need an NVIDIA GPU: gorgonia.org/cu initialises the driver when the test binary
// starts and exits with an error message where there is none, so they cannot be skipped
// gracefully. Run them with make test-gpu on a GPU machine.

package cuda_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
	"github.com/fedaudit/fedaudit/train"
)

func open(t testing.TB, opt cuda.Options) *cuda.Backend {
	t.Helper()
	be, err := cuda.NewWithOptions(0, opt)
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// Every operation and whole small runs against the CPU backend, with the tolerances stated
// in package paritytest: the CUDA math library's tanh, exp, log, log1p and sincos are within
// 1-2 float64 ulps like glibc's, so the same float32 bounds hold.
func TestParity(t *testing.T) {
	be := open(t, cuda.Options{})
	t.Logf("device: %s", be.Name())
	be.Close()
	paritytest.All(t, func(t *testing.T, opt cuda.Options) paritytest.Backend {
		return syncOnClose{open(t, opt)}
	})
}

// syncOnClose surfaces asynchronous device errors (a kernel fault) before closing.
type syncOnClose struct{ *cuda.Backend }

func (s syncOnClose) Close() error {
	err := s.Sync()
	return errors.Join(err, s.Backend.Close())
}

// W1's configuration (784-64-10 tanh MLP, 10 clients, fixed batches of 32) for 3 rounds and
// 4 pairs on the GPU and the CPU. The backends differ by GEMM summation order (784-term float32
// dot products: relative differences near 1e-6) and 1-ulp math-library differences, which 150
// local steps at eta = 0.05 with clipping at 1 do not amplify beyond 1e-4 in any parameter
// (parameters are of order 0.05-1): tolerance 1e-3 absolute, losses 1e-3.
func TestW1MatchesCPU(t *testing.T) {
	c, cp, tgt := train.W1Data()
	cfg := train.W1Config()
	cfg.Rounds, cfg.Checkpoints, cfg.RecordParams = 3, []int{1, 3}, true
	pairs := train.PairRange{First: 0, Count: 4}
	var want, got recorder
	if err := train.Train(context.Background(), cfg, c, cp, tgt, nil, pairs, &want, nil); err != nil {
		t.Fatal(err)
	}
	be := open(t, cuda.Options{})
	defer be.Close()
	if err := train.TrainOn(context.Background(), be, cfg, c, cp, tgt, nil, pairs, cuda.CheckRecorder(be, &got), nil); err != nil {
		t.Fatal(err)
	}
	if len(got.cps) != len(want.cps) {
		t.Fatalf("%d checkpoints, want %d", len(got.cps), len(want.cps))
	}
	worst := 0.0
	for i, w := range want.cps {
		for r, wr := range w.Replicas {
			gr := got.cps[i].Replicas[r]
			if d := math.Abs(gr.TrainLoss - wr.TrainLoss); d > 1e-3 {
				t.Errorf("round %d replica %d: train loss %v, cpu %v", w.Round, r, gr.TrainLoss, wr.TrainLoss)
			}
			for k, v := range wr.Params {
				d := math.Abs(float64(gr.Params[k] - v))
				worst = max(worst, d)
				if d > 1e-3 {
					t.Fatalf("round %d replica %d param %d: %v, cpu %v", w.Round, r, k, gr.Params[k], v)
				}
			}
		}
	}
	t.Logf("largest parameter difference from the CPU backend: %g", worst)
}

type recorder struct{ cps []*train.Checkpoint }

func (r *recorder) Checkpoint(_ context.Context, cp *train.Checkpoint) error {
	r.cps = append(r.cps, cp)
	return nil
}

// A failed allocation is reported by Err, and no later operation does anything.
func TestOutOfMemoryIsAnError(t *testing.T) {
	be := open(t, cuda.Options{})
	defer be.Close()
	_, total, err := be.FreeMemory()
	if err != nil {
		t.Fatal(err)
	}
	be.Alloc(int(total/4) * 2) // twice the device's memory
	if be.Err() == nil {
		t.Fatal("allocating twice the device memory gave no error")
	}
	t.Logf("error as reported: %v", be.Err())
}
