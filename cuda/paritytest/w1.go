package paritytest

import (
	"context"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// W1MatchesCPU runs W1's configuration (784-64-10 tanh MLP, 10 clients, fixed batches of 32)
// for the given rounds and pairs on be and on the CPU backend, recording parameters at every
// round, and requires every parameter and training loss to agree within 1e-3 absolute. The
// backends differ by GEMM summation order (784-term float32 dot products: relative differences
// near 1e-6) and 1-ulp math-library differences, which 50 local steps a round at eta = 0.05
// with clipping at 1 do not amplify beyond 1e-4 over a few rounds (parameters are of order
// 0.05-1). It returns the largest parameter difference.
func W1MatchesCPU(t *testing.T, be Backend, rounds, pairs int) float64 {
	t.Helper()
	c, cp, tgt := traintest.W1Data()
	cfg := traintest.W1Config()
	cfg.Rounds, cfg.RecordParams = rounds, true
	cfg.Checkpoints = nil
	for r := 1; r <= rounds; r++ {
		cfg.Checkpoints = append(cfg.Checkpoints, r)
	}
	pr := train.PairRange{First: 0, Count: pairs}
	var want, got memRecorder
	if err := train.Train(context.Background(), train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pr, Recorder: &want}); err != nil {
		t.Fatal(err)
	}
	if err := train.TrainOn(context.Background(), be, train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pr, Recorder: cuda.CheckRecorder(be, &got)}); err != nil {
		t.Fatal(err)
	}
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got.cps) != len(want.cps) {
		t.Fatalf("%d checkpoints, want %d", len(got.cps), len(want.cps))
	}
	worst := 0.0
	for i, w := range want.cps {
		for r, wr := range w.Replicas {
			gr := got.cps[i].Replicas[r]
			if d := math.Abs(gr.TrainLoss - wr.TrainLoss); d > 1e-3 || math.IsNaN(d) {
				t.Errorf("round %d replica %d: train loss %v, cpu %v", w.Round, r, gr.TrainLoss, wr.TrainLoss)
			}
			for k, v := range wr.Params {
				d := math.Abs(float64(gr.Params[k] - v))
				if d > 1e-3 || math.IsNaN(d) {
					t.Fatalf("round %d replica %d param %d: %v, cpu %v", w.Round, r, k, gr.Params[k], v)
				}
				worst = max(worst, d)
			}
		}
	}
	t.Logf("W1, %d rounds, %d pairs: largest parameter difference from the CPU backend %g", rounds, pairs, worst)
	return worst
}
