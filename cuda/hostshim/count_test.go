//go:build cgo

package hostshim

import (
	"context"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// countingDevice is the shim with every host-visible call counted: Read is a blocking copy to
// the host on a GPU (the host waits for every earlier launch), Launch a kernel launch, Gemm a
// cuBLAS call, Stage an upload of per-call arguments.
type countingDevice struct {
	*Device
	reads, launches, gemms, stages int
	perKernel                      map[kernels.Kernel]int
}

func (c *countingDevice) Read(dst []byte, src uint64) error {
	c.reads++
	return c.Device.Read(dst, src)
}

func (c *countingDevice) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	c.launches++
	c.perKernel[k]++
	return c.Device.Launch(k, grid, block, args)
}

func (c *countingDevice) Gemm(g cuda.GemmArgs) error {
	c.gemms++
	return c.Device.Gemm(g)
}

func (c *countingDevice) Stage(src []byte) (uint64, error) {
	c.stages++
	return c.Device.Stage(src)
}

// roundCounts is what one W1 round costs in device calls.
type roundCounts struct {
	reads, launches, gemms, stages int
	perKernel                      map[kernels.Kernel]int
}

// w1Counts runs W1 (one pair) for rounds rounds with a checkpoint after the last only, and
// returns the calls its device saw.
func w1Counts(t *testing.T, rounds int) roundCounts {
	t.Helper()
	c, cp, tgt := traintest.W1Data()
	cfg := traintest.W1Config()
	cfg.Rounds, cfg.Checkpoints = rounds, []int{rounds}
	d := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	job := train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: train.PairRange{Count: 1}, Recorder: cuda.CheckRecorder(ops, discardRec{})}
	if err := train.TrainOn(context.Background(), ops, job); err != nil {
		t.Fatal(err)
	}
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	return roundCounts{d.reads, d.launches, d.gemms, d.stages, d.perKernel}
}

// W1's host round-trips and launches per round, counted on the shim: a 2-round run minus a
// 1-round run (the same setup and final checkpoint) is the cost of one round. Goals of issue
// 18: at most 2 blocking reads per round (no read inside a local step: clip factors stay on
// the device) and at most 10 kernel launches per client step (m = 10 clients x K = 5 steps).
// docs/gpu.md quotes the numbers this logs.
func TestW1RoundCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("W1 on the shim takes several seconds")
	}
	one, two := w1Counts(t, 1), w1Counts(t, 2)
	cfg := traintest.W1Config()
	steps := 10 * cfg.LocalSteps // W1's clients (all participate) x local steps
	r := roundCounts{two.reads - one.reads, two.launches - one.launches, two.gemms - one.gemms, two.stages - one.stages, map[kernels.Kernel]int{}}
	for k, n := range two.perKernel {
		if m := n - one.perKernel[k]; m != 0 {
			r.perKernel[k] = m
		}
	}
	t.Logf("W1 per round (1 pair): %d blocking reads, %d kernel launches (%.1f per client step), %d cuBLAS calls, %d staged uploads",
		r.reads, r.launches, float64(r.launches)/float64(steps), r.gemms, r.stages)
	for _, k := range kernels.All() {
		if n := r.perKernel[k]; n != 0 {
			t.Logf("  %-20s %4d", k, n)
		}
	}
	if r.reads > 2 {
		t.Errorf("%d blocking reads per round, want at most 2", r.reads)
	}
	if r.launches > 10*steps {
		t.Errorf("%d kernel launches per round (%.1f per client step), want at most 10 per client step", r.launches, float64(r.launches)/float64(steps))
	}
}
