//go:build cgo

package hostshim

import (
	"context"
	"os"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
)

// TestKitBenchW1Shim and TestKitBenchW2Shim are the validation kit's benchmark steps in its
// --shim mode (skipped unless FEDAUDIT_BENCH_R is set): W1 or W2 through Ops on the host shim,
// the same code path as the GPU benchmark with the shim in place of the device. The shim runs
// kernels one thread at a time (a host thread per GPU thread for the block kernel) and has a
// naive SGEMM, so its rates say nothing about a GPU; the steps show the kit works. With
// FEDAUDIT_CUDA_PROFILE=1 the result carries the profile (host time per operation on the shim).
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
	if os.Getenv(cuda.DirectConvEnv) == "1" {
		backend += "+direct"
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
