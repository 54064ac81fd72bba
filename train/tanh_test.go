package train

import (
	"math"
	"testing"
)

// tanh32 and expApprox against the math package over the range that matters. Tolerances:
// expApprox 1e-13 relative (Taylor remainder, and k ln2 rounding for |k| up to 58), tanh32 one float32 ulp of the
// correctly rounded value (|error| <= 2^-23 |tanh x|, plus 1e-45 for subnormals).
func TestTanhApprox(t *testing.T) {
	for y := -40.0; y <= 40; y += 0.0137 {
		if got, want := expApprox(y), math.Exp(y); math.Abs(got-want) > 1e-13*want {
			t.Fatalf("expApprox(%g) = %g, want %g", y, got, want)
		}
	}
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
