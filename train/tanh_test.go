package train

import (
	"math"
	"testing"
)

// tanh32 against math.Tanh over the range that matters: within one float32 ulp of the exact
// value (|error| <= 2^-23 |tanh x|, plus 1e-45 for subnormals).
func TestTanhApprox(t *testing.T) {
	for i := -200000; i <= 200000; i++ {
		x := float32(i) * 1e-4
		got, want := float64(tanh32(x)), math.Tanh(float64(x))
		if math.Abs(got-want) > math.Abs(want)*0x1p-23+1e-45 {
			t.Fatalf("tanh32(%g) = %g, want %g", x, got, want)
		}
	}
	for _, x := range []float32{1e-30, -1e-10, 0, 100, -100, float32(math.Inf(1))} {
		if got, want := float64(tanh32(x)), math.Tanh(float64(x)); math.Abs(got-want) > math.Abs(want)*0x1p-23 {
			t.Errorf("tanh32(%g) = %g, want %g", x, got, want)
		}
	}
	if !math.IsNaN(float64(tanh32(float32(math.NaN())))) {
		t.Error("tanh32(NaN) is not NaN")
	}
}
