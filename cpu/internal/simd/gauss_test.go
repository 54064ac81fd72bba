package simd

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/internal/philox"
)

// The SIMD noise (GaussianFloats) gives philox.GaussianBlock's values bit for bit, at every offset
// and length (the SIMD part takes whole groups of 16, the rest is scalar).
func TestGaussianFloatsBits(t *testing.T) {
	for _, tc := range []struct {
		seed                 uint64
		j0, round, stream, n uint32
	}{{1, 0, 0, 0, 64}, {7, 3, 1, 9, 48}, {0x9e3779b97f4a7c15, 12345, 17, 0xFFFFFFFF, 1000}, {0xFFFFFFFFFFFFFFFF, 0xFFFFFFF0, 3, 5, 133}, {42, 7, 0, 2, 16}} {
		key := philox.Key(tc.seed)
		got := make([]float32, tc.n)
		GaussianFloats(got, key, tc.j0, tc.round, tc.stream)
		want := make([]float32, tc.n)
		philox.GaussianFloats(want, key, tc.j0, tc.round, tc.stream)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("seed %x j0 %d: value %d: %v (%08x), want %v (%08x)", tc.seed, tc.j0, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
}
