package simd

import (
	"math"
	"testing"
)

// Exp64 against math.Exp on [-708, 709]: within 4 float64 ulp (relative 2^-50); outside, 0 below
// and the clamped value above; NaN stays NaN.
func TestExp64(t *testing.T) {
	for i := 0; i <= 1417000; i++ {
		x := -708 + float64(i)*1e-3
		if x > 709 {
			break
		}
		got, want := Exp64(x), math.Exp(x)
		if math.Abs(got-want) > want*0x1p-50 {
			t.Fatalf("Exp64(%v) = %v, want %v", x, got, want)
		}
	}
	for _, c := range []struct{ x, want float64 }{
		{0, 1}, {-708.5, 0}, {math.Inf(-1), 0}, {-1e300, 0}, {800, Exp64(709)}, {math.Inf(1), Exp64(709)},
	} {
		if got := Exp64(c.x); got != c.want {
			t.Errorf("Exp64(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if !math.IsNaN(Exp64(math.NaN())) {
		t.Error("Exp64(NaN) is not NaN")
	}
}

// ExpSlice (SIMD on amd64) must give Exp64's bits exactly, at every alignment of the tail.
func TestExpSliceBits(t *testing.T) {
	var x []float64
	for i := -3000; i <= 3000; i++ {
		x = append(x, float64(i)*0.2371, float64(i)*1e-7)
	}
	x = append(x, 0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), -708, -708.0000001, 709, 709.5,
		math.SmallestNonzeroFloat64, -math.MaxFloat64)
	for _, off := range []int{0, 1, 2, 3} {
		in := x[off:]
		y := make([]float64, len(in))
		ExpSlice(in, y)
		for i, v := range in {
			want := Exp64(v)
			if math.Float64bits(y[i]) != math.Float64bits(want) && !(math.IsNaN(want) && math.IsNaN(y[i])) {
				t.Fatalf("ExpSlice(%v) = %v, Exp64 = %v", v, y[i], want)
			}
		}
	}
}
