//go:build cgo

package hostshim

import (
	"context"
	"os"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// TestKitBenchW1Shim and TestKitBenchW2Shim are the validation kit's benchmark steps in its
// --shim mode (skipped unless FEDAUDIT_BENCH_R is set): W1 or W2 through Ops on the host shim,
// the same code path as the GPU benchmark with the shim in place of the device. The shim runs
// kernels one thread at a time (a host thread per GPU thread for the block kernel) and has a
// naive SGEMM, so its rates say nothing about a GPU; the steps show the kit works. With
// FEDAUDIT_CUDA_PROFILE=1 the result carries the profile (host time per operation on the shim);
// with FEDAUDIT_CUDA_PATCHCONV=1 every convolution runs by its patches ("shim+patches").
func TestKitBenchW1Shim(t *testing.T) { kitBenchShim(t, paritytest.W1) }
func TestKitBenchW2Shim(t *testing.T) { kitBenchShim(t, paritytest.W2) }

func kitBenchShim(t *testing.T, workload string) {
	replicas, rounds, ok, err := paritytest.BenchPlan(workload)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("set %s to run", paritytest.BenchEnv)
	}
	backend := "shim"
	profiled := os.Getenv(cuda.ProfileEnv) == "1"
	if profiled {
		backend = "shim+profile"
	}
	if os.Getenv(cuda.PatchConvEnv) == "1" {
		backend += "+patches"
	}
	for _, r := range replicas {
		d := device(t)
		ops := cuda.NewOps(d, cuda.Options{})
		run := paritytest.RunW1
		if workload == paritytest.W2 {
			run = paritytest.RunW2
		}
		res, err := run(context.Background(), ops, ops.Err, r, rounds)
		res.Backend, res.Device = backend, "host shim (kernels compiled as C++, run on one CPU thread)"
		if profiled && err == nil {
			res.Profile, err = ops.Profile()
		}
		if cerr := ops.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			res.Error = err.Error()
			t.Errorf("R=%d: %v", r, err)
		}
		if aerr := paritytest.AppendBench(res); aerr != nil {
			t.Fatal(aerr)
		}
		t.Logf("%+v", res)
	}
}

// The kit's CPU benchmarks and summary in the shim's test binary, so that --shim mode needs no
// other binary than this one and the gpu-tagged ones (paritytest.KitBenchCPU,
// paritytest.WriteKitSummary; the gpu test binary has the same three).
func TestKitBenchW1CPU(t *testing.T) { paritytest.KitBenchCPU(t, paritytest.W1) }
func TestKitBenchW2CPU(t *testing.T) { paritytest.KitBenchCPU(t, paritytest.W2) }
func TestKitSummary(t *testing.T)    { paritytest.WriteKitSummary(t) }

// The kit's benchmarks train a warm-up run and then the timed one on the same backend; the
// warm-up's buffers must be freed in between (traintest.FreeAll), as audit train frees a group
// of pairs before the next, or the timed run holds both and a size that fits the device runs
// out of it (W3 at 48 replicas on an 80 GB H100, at twice its estimate). W2 at 2 replicas: the
// benchmark's peak must stay that of one training (measured: equal; both runs' buffers
// together would be about twice).
func TestKitBenchFreesTheWarmUp(t *testing.T) {
	if testing.Short() {
		t.Skip("W2 on the shim takes several seconds")
	}
	d := device(t)
	one := cuda.NewOps(d, cuda.Options{})
	c, cp, tgt, err := traintest.W2Data()
	if err != nil {
		t.Fatal(err)
	}
	cfg := traintest.W2Config()
	cfg.Rounds = 1
	job := train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: train.PairRange{Count: 1}, Recorder: discardRec{}}
	if err := train.TrainOn(context.Background(), one, job); err != nil {
		t.Fatal(err)
	}
	_, single := one.MemoryStats()
	if err := one.Close(); err != nil {
		t.Fatal(err)
	}
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	if _, err := paritytest.RunW2(context.Background(), ops, ops.Err, 2, 1); err != nil {
		t.Fatal(err)
	}
	_, bench := ops.MemoryStats()
	t.Logf("device peak: one training %d bytes, the benchmark (warm-up and timed run) %d", single, bench)
	if float64(bench) > 1.1*float64(single) {
		t.Errorf("the benchmark's peak %d bytes is %.2fx one training's %d: the warm-up's buffers stayed", bench, float64(bench)/float64(single), single)
	}
}
