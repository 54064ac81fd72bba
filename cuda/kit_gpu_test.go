//go:build gpu

package cuda_test

import (
	"context"
	"os"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
)

// TestKitBenchW1GPU and TestKitBenchW2GPU are the validation kit's GPU benchmarks (skipped
// unless FEDAUDIT_BENCH_R is set): W1 or W2 at each requested replica count on device 0, one
// backend per count, with the device's SGEMM rate on 4096^3 products as the reference. With
// FEDAUDIT_CUDA_GRAPHS=1 the backend runs its batches as CUDA graphs ("gpu+graphs").
func TestKitBenchW1GPU(t *testing.T) { kitBenchGPU(t, paritytest.W1) }
func TestKitBenchW2GPU(t *testing.T) { kitBenchGPU(t, paritytest.W2) }

func kitBenchGPU(t *testing.T, workload string) {
	replicas, rounds, ok, err := paritytest.BenchPlan(workload)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("set %s to run", paritytest.BenchEnv)
	}
	be := open(t, cuda.Options{})
	peak := sgemmRate(t, be, 4096, 20)
	name := be.Name()
	be.Close()
	t.Logf("device: %s; SGEMM 4096^3: %.0f GFLOP/s", name, peak)
	backend := "gpu"
	if os.Getenv(cuda.GraphEnv) == "1" {
		backend = "gpu+graphs"
	}
	for _, r := range replicas {
		be := open(t, cuda.Options{})
		run := paritytest.RunW1
		if workload == paritytest.W2 {
			run = paritytest.RunW2
		}
		res, err := run(context.Background(), be, be.Sync, r, rounds)
		res.Backend, res.Device, res.SGEMMPeak = backend, name, peak
		if st := be.GraphStats(); st.Disabled != "" {
			res.Error = "graphs disabled: " + st.Disabled
		}
		if peak > 0 {
			res.OfPeak = res.GEMMGFlops / peak
		}
		if free, total, merr := be.FreeMemory(); merr == nil {
			res.MemoryUsed = total - free
		}
		be.Close()
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
