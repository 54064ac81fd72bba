package runs

import (
	"math"
	"testing"
)

// An upload is absent when empty, all NaN or all zeros; a single finite non-zero value (or a
// NaN among zeros) makes it present.
func TestUploadAbsent(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		up     []float32
		absent bool
	}{
		{nil, true},
		{[]float32{nan, nan}, true},
		{[]float32{0, 0, 0}, true},
		{[]float32{nan, 0.5}, false},
		{[]float32{0, 0, -1e-30}, false},
		{[]float32{0, nan}, false},
	} {
		if got := UploadAbsent(tc.up); got != tc.absent {
			t.Errorf("UploadAbsent(%v) = %v, want %v", tc.up, got, tc.absent)
		}
	}
}
