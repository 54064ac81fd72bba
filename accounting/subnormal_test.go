package accounting

import (
	"math"
	"strings"
	"testing"
)

// TestEpsilonAtSubnormalDelta: at a delta below the smallest normal float64 (which every
// validation accepts: it lies in (0, 1)) the conversion used math.Log(delta), which on amd64
// is about -709.09 for any subnormal, so epsilon came out too small, the unsafe side (a claim too
// small turns a correct deployment violated). One order of the standard conversion has the
// exact answer eps = rdp + log(1/delta)/(alpha - 1), with log(1/delta) = k log 2 for delta 2^-k.
func TestEpsilonAtSubnormalDelta(t *testing.T) {
	for _, k := range []int{1030, 1060, 1074} {
		delta := math.Ldexp(1, -k)
		eps, _, err := EpsilonFromRDP([]float64{2}, []float64{1}, delta, Standard)
		if err != nil {
			t.Fatal(err)
		}
		// Tolerance: a few ulps of a sum near 745.
		if want := 1 + float64(k)*math.Ln2; math.Abs(eps-want) > 1e-12*want {
			t.Errorf("delta 2^-%d: eps %.12g, want %.12g", k, eps, want)
		}
	}
}

// TestSampledGaussianTinySigmaRefused: 2 sigma^2 underflowing made the curve NaN (0/0), which
// surfaced after training as "value NaN at order 2"; it is an error that says why.
func TestSampledGaussianTinySigmaRefused(t *testing.T) {
	for _, sigma := range []float64{1e-300, 1e-170} {
		v, err := SampledGaussianRDPAt(0.5, sigma, 2)
		if err == nil || !strings.Contains(err.Error(), "too small to account") {
			t.Errorf("sigma %g: %v, %v; want the error", sigma, v, err)
		}
	}
	if v, err := SampledGaussianRDPAt(0.5, 1e-150, 2); err != nil || !(v > 0) {
		t.Errorf("sigma 1e-150, still representable: %v, %v", v, err)
	}
}
