package train

import (
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/internal/philox"
)

// The CPU backend's noise (SIMD where it can) is the host reference's, and an element with the
// same seed and twice the scale gets twice the noise.
func TestBackendNoiseIsHostStream(t *testing.T) {
	full := make([]float32, 1000)
	philox.AddGaussian(full, 99, 2, 5, 0, 1)
	be := cpu.New(3)
	defer be.Close()
	buf := be.Alloc(3 * 10001)
	seeds := []uint64{99, 99, 7}
	be.AddGaussian(compute.Mat{Buf: buf, Rows: 1, Cols: 10001, Stride: 10001, Batch: 3, BatchStride: 10001}, seeds, []float32{1, 2, 1}, 2, 5)
	got := cpu.HostData(buf)
	if !slices.Equal(got[:1000], full) {
		t.Error("backend noise differs from philox.AddGaussian")
	}
	for i := 0; i < 10001; i++ {
		if got[10001+i] != 2*got[i] {
			t.Fatalf("element with equal seed and scale 2: coordinate %d is %g, want %g", i, got[10001+i], 2*got[i])
		}
	}
}

func TestRunSeedDistinct(t *testing.T) {
	seen := map[uint64]int{}
	for p := 0; p < 10000; p++ {
		s := RunSeed(42, p)
		if q, ok := seen[s]; ok {
			t.Fatalf("pairs %d and %d share seed %x", q, p, s)
		}
		seen[s] = p
	}
	if RunSeed(42, 0) == RunSeed(43, 0) {
		t.Error("master seeds 42 and 43 give pair 0 the same seed")
	}
}
