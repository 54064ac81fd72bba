//go:build gpu

package cuda_test

import (
	"context"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
)

// TestKitBenchW1GPU is the validation kit's GPU benchmark (skipped unless FEDAUDIT_BENCH_R is
// set): W1 at each requested replica count on device 0, one backend per count, with the
// device's SGEMM rate on 4096^3 products as the reference.
func TestKitBenchW1GPU(t *testing.T) {
	replicas, rounds, ok, err := paritytest.BenchPlan()
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
	for _, r := range replicas {
		be := open(t, cuda.Options{})
		res, err := paritytest.RunW1(context.Background(), be, be.Sync, r, rounds)
		res.Backend, res.Device, res.SGEMMPeak = "gpu", name, peak
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
