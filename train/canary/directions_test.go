package canary

import (
	"math"
	"slices"
	"testing"
)

// TestOrthonormalDirections: the rows are orthonormal to float32 rounding (|<u_i, u_j>| below
// 1e-6, against about 1/sqrt(d) = 0.09 for the Gaussian directions), deterministic from the
// seed, dense (no entry above sqrt(2/d)), and project a fixed vector like random directions:
// the mean square projection of x = (1, ..., 1) over 60 rows is ||x||^2/d = 1 within a factor 2
// (a direction aligned with x would give d; one supported on few coordinates, about 0 or more).
func TestOrthonormalDirections(t *testing.T) {
	const k, d = 60, 120
	out := OrthonormalDirections(3, k, d)
	if !slices.Equal(out, OrthonormalDirections(3, k, d)) || slices.Equal(out, OrthonormalDirections(4, k, d)) {
		t.Fatal("not deterministic from the seed")
	}
	in := GaussianDirections(3, k, d)
	maxIn := 0.0
	var ms float64
	ones := make([]float32, d)
	for i := range ones {
		ones[i] = 1
	}
	for i := 0; i < k; i++ {
		for q := 0; q < d; q++ {
			if math.Abs(float64(out[i*d+q])) > math.Sqrt(2.0/d)+1e-7 {
				t.Fatalf("entry %v of row %d above sqrt(2/d)", out[i*d+q], i)
			}
		}
		p := Dot(out[i*d:(i+1)*d], ones)
		ms += p * p / k
		for j := 0; j <= i; j++ {
			g := Dot(out[i*d:(i+1)*d], out[j*d:(j+1)*d])
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(g-want) > 1e-6 {
				t.Fatalf("<u_%d, u_%d> = %v, want %v", i, j, g, want)
			}
			if i != j {
				maxIn = math.Max(maxIn, math.Abs(Dot(in[i*d:(i+1)*d], in[j*d:(j+1)*d])))
			}
		}
	}
	if maxIn < 0.1 {
		t.Errorf("the Gaussian directions overlap by at most %v: the test shows nothing", maxIn)
	}
	if ms < 0.5 || ms > 2 {
		t.Errorf("mean square projection of the ones vector %v, want about 1", ms)
	}
}
