package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// reluInputs holds every special value (signed zeros, infinities, NaNs of both signs,
// subnormals) in every lane position, then random values of both signs.
func reluInputs() []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0xffc00001), 1e-45, -1e-45, 1, -1, math.MaxFloat32, -math.MaxFloat32}
	var x []float32
	for shift := 0; shift < 8; shift++ {
		x = append(x, make([]float32, shift)...)
		x = append(x, special...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1003; i++ {
		x = append(x, float32(rng.NormFloat64()))
	}
	return x
}

// The SIMD ReLU and its gradient give Go's bits on every value; a NaN stays a NaN (ReLU's
// may differ from Go's max in its sign bit, which nothing downstream reads).
func TestReLUMatchesGo(t *testing.T) {
	pre := reluInputs()
	got, want := make([]float32, len(pre)), make([]float32, len(pre))
	ReLU(pre, got)
	reluGo(pre, want)
	for i := range got {
		if math.IsNaN(float64(want[i])) && math.IsNaN(float64(got[i])) {
			continue
		}
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("ReLU(%g) (bits %x) = %x, Go gives %x", pre[i], math.Float32bits(pre[i]), math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
	g0 := make([]float32, len(pre))
	for i := range g0 {
		g0[i] = float32(i%7) - 3.5
		if i%11 == 0 {
			g0[i] = float32(math.NaN())
		}
	}
	gotG, wantG := append([]float32(nil), g0...), append([]float32(nil), g0...)
	ReLUGrad(pre, gotG)
	reluGradGo(pre, wantG)
	for i := range gotG {
		if math.Float32bits(gotG[i]) != math.Float32bits(wantG[i]) {
			t.Fatalf("ReLUGrad at %g with g %g = %x, Go gives %x", pre[i], g0[i], math.Float32bits(gotG[i]), math.Float32bits(wantG[i]))
		}
	}
	if !useAVX2 {
		t.Log("no AVX2 here: the portable loops were compared with themselves")
	}
}
