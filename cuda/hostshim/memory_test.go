//go:build cgo

package hostshim

import (
	"context"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// w1PairBytes is the device memory one W1 pair needs, as docs/gpu.md states it ("Memory"):
// 2 replicas x 4 bytes x (5 d parameter-sized buffers + the deferred first-layer factors
// u: window K B h and p: K B h) + the MLP workspace 24 rows (h + classes) with rows = 256
// (eval_batch) + 4 KiB of reduction scratch; d = 50 890, K B = 160, h = 64, window = 10.
const w1PairBytes = 2*4*(5*50890+10*160*64+160*64) + 24*256*(64+10) + 4096

// The memory model of docs/gpu.md against what the engine allocates for W1 (with a checkpoint,
// so the evaluation buffers are included): the growth from 1 to 2 pairs must be
// within 2% of w1PairBytes. Clients run one at a time here (Options.ClientBatch 1): grouped
// clients take a bounded amount on top (TestDeviceMemoryEstimateOfW1).
func TestW1MemoryPerPair(t *testing.T) {
	if testing.Short() {
		t.Skip("W1 on the shim takes several seconds")
	}
	c, cp, tgt := traintest.W1Data()
	cfg := traintest.W1Config()
	cfg.Rounds, cfg.Checkpoints = 1, []int{1}
	peak := func(pairs int) int {
		d := device(t)
		ops := cuda.NewOps(d, cuda.Options{ClientBatch: 1})
		defer ops.Close()
		if err := train.TrainOn(context.Background(), ops, train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: train.PairRange{Count: pairs}, Recorder: cuda.CheckRecorder(ops, discardRec{})}); err != nil {
			t.Fatal(err)
		}
		return d.PeakBytes()
	}
	p1, p2 := peak(1), peak(2)
	per := float64(p2 - p1)
	t.Logf("W1 device memory: 1 pair %d bytes, 2 pairs %d bytes: %.0f bytes (%.2f MB) per pair, model %d", p1, p2, per, per/1e6, w1PairBytes)
	if r := per / w1PairBytes; r < 0.98 || r > 1.02 {
		t.Errorf("%.0f bytes per pair, the documented model says %d", per, w1PairBytes)
	}
}

type discardRec struct{}

func (discardRec) Checkpoint(context.Context, *checkpoint.Checkpoint) error { return nil }
