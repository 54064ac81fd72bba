package simd

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/internal/philox"
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

// TanhSlice (SIMD on amd64) must give tanh32's bits exactly: every float32 of a dense sweep
// of the exponent range, both signs, and the special values, at every alignment of the tail.
func TestTanhSliceBits(t *testing.T) {
	var x []float32
	for e := -30; e <= 8; e++ {
		for m := 0; m < 2000; m++ {
			v := float32(math.Ldexp(1+float64(m)/2000, e))
			x = append(x, v, -v)
		}
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32,
		1e-4, -1e-4, math.Nextafter32(1e-4, 0), 20, 20.5, 9.0, 9.5)
	for _, off := range []int{0, 1, 2, 3} {
		in := x[off:]
		y := make([]float32, len(in))
		TanhSlice(in, y)
		for i, v := range in {
			want := tanh32(v)
			if math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) {
				t.Fatalf("TanhSlice(%g) = %g (%#x), tanh32 = %g (%#x)", v, y[i], math.Float32bits(y[i]), want, math.Float32bits(want))
			}
		}
	}
}

// Near-exactness: the float64 evaluation is the correctly rounded tanh on this sweep but for
// at most a few values (those within ~1e-15 of a rounding boundary), each within one ulp.
func TestTanhRounding(t *testing.T) {
	bad := 0
	for i := 1; i <= 400000; i++ {
		x := float32(i) * 2.5e-5
		if tanh32(x) != float32(math.Tanh(float64(x))) {
			bad++
		}
	}
	if bad > 4 {
		t.Errorf("tanh32 differs from float32(math.Tanh) on %d of 400000 values", bad)
	}
}

// TanhGrad (SIMD where there is one) gives tanhGradGo's bits on every length and offset.
func TestTanhGradBits(t *testing.T) {
	rng := philox.NewRand(6, 0, 0, 9, 0)
	h := make([]float32, 77)
	g := make([]float32, 77)
	for i := range h {
		h[i] = float32(2*rng.Float() - 1)
		g[i] = float32(rng.Float() - 0.5)
	}
	for off := 0; off < 4; off++ {
		a, b := append([]float32(nil), g[off:]...), append([]float32(nil), g[off:]...)
		TanhGrad(h[off:], a)
		tanhGradGo(h[off:], b)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("offset %d element %d: %v, want %v", off, i, a[i], b[i])
			}
		}
	}
}
