package mathx

import (
	"math"
	"testing"
)

// TestLogOfSubnormals checks Log against log(m 2^e) = log(m) + e log(2) computed from normal
// parts, for subnormal inputs (exact: m 2^e is representable) where math.Log fails on amd64, and
// equality with math.Log on normal ones. Tolerance 1e-12 relative: a few ulps of the sum of two
// rounded logs.
func TestLogOfSubnormals(t *testing.T) {
	for _, tc := range []struct {
		m, e float64 // x = m 2^e
	}{
		{1, -1030},
		{3, -1066},
		{1, -1074}, // the smallest positive float64
		{1.5, -1023},
	} {
		tc := struct{ x, m, e float64 }{math.Ldexp(tc.m, int(tc.e)), tc.m, tc.e}
		want := math.Log(tc.m) + tc.e*math.Ln2
		if got := Log(tc.x); math.Abs(got-want) > 1e-12*math.Abs(want) {
			t.Errorf("Log(%g) = %.15g, want %.15g", tc.x, got, want)
		}
	}
	for _, x := range []float64{1e-300, 0x1p-1022, 1e-5, 0.5, 1, 3, 1e300} {
		if got, want := Log(x), math.Log(x); got != want {
			t.Errorf("Log(%g) = %v, math.Log gives %v", x, got, want)
		}
	}
	if !math.IsInf(Log(0), -1) || !math.IsNaN(Log(-1)) || !math.IsNaN(Log(math.NaN())) {
		t.Errorf("Log(0), Log(-1), Log(NaN) = %v, %v, %v", Log(0), Log(-1), Log(math.NaN()))
	}
}
