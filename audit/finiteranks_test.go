package audit

import (
	"math"
	"slices"
	"testing"
)

// FiniteRanks gives +Inf and -Inf finite values just beyond the finite range, keeping every
// rank; NaN and finite values stay; all-infinite samples sit at +-1 around 0; beyond 2^53 the
// next float up is used, since adding 1 would tie.
func TestFiniteRanks(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct{ in, want []float64 }{
		{[]float64{inf, -2, 3, -inf, 0.5}, []float64{4, -2, 3, -3, 0.5}},
		{[]float64{inf, -inf}, []float64{1, -1}},
		{[]float64{1e300, inf}, []float64{1e300, math.Nextafter(1e300, inf)}},
		{[]float64{-1e300, -inf}, []float64{-1e300, math.Nextafter(-1e300, -inf)}},
		{[]float64{1, 2}, []float64{1, 2}},
	} {
		got := slices.Clone(tc.in)
		FiniteRanks(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("FiniteRanks(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	nan := []float64{math.NaN(), inf, 1}
	FiniteRanks(nan)
	if !math.IsNaN(nan[0]) || nan[1] != 2 || nan[2] != 1 {
		t.Errorf("with a NaN: %v, want [NaN 2 1]", nan)
	}
}
