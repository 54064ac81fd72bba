package simd

import "math"

// Constants of tanh32. The exponential is 2^n p(r) with n = round(y log2 e), r = y - n ln 2 in
// [-0.35, 0.35] (ln 2 split in two parts so that the reduction is exact) and p the degree-11
// Taylor polynomial of e^r, whose truncation error (below 1e-14 relative) is far under the
// float32 rounding of the result.
const (
	tanhClamp  = 40   // e^40 + 1 makes 1 - 2/(e+1) round to 1 in float64
	tanhSmall  = 1e-4 // below, tanh x = x to within float32 rounding
	tanhLog2e  = 1.4426950408889634
	tanhMagic  = 0x1.8p52 // adding it rounds to an integer held in the low mantissa bits
	tanhLn2Hi  = 6.93147180369123816490e-01
	tanhLn2Lo  = 1.90821492927058770002e-10
	tanhOneBit = 0x3FF0000000000000
)

// tanhPoly holds 1/i!, i = 11 down to 0, the Horner order.
var tanhPoly = [12]float64{
	1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720,
	1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1, 1,
}

// tanh32 is tanh rounded to float32, computed in float64 as sign(x) (1 - 2/(e^{2|x|} + 1)):
// about 1e-15 relative error before the final rounding, so the result is the correctly rounded
// tanh except when the exact value lies within that distance of a rounding boundary. It is the
// reference for the SIMD version (tanhVec), which performs the same IEEE operations in the same
// order (math.FMA where the assembly fuses), so both give identical bits. Below |x| = 1e-4,
// tanh x = x to within float32 rounding (the next term is x^3/3); large |x| gives 1; NaN stays
// NaN.
func tanh32(v float32) float32 {
	x := float64(v)
	a := math.Abs(x)
	if a < tanhSmall {
		return v
	}
	y := a + a
	if y > tanhClamp {
		y = tanhClamp
	}
	t := math.FMA(y, tanhLog2e, tanhMagic)
	n := t - tanhMagic
	r := math.FMA(-n, tanhLn2Hi, y)
	r = math.FMA(-n, tanhLn2Lo, r)
	p := tanhPoly[0]
	for _, c := range tanhPoly[1:] {
		p = math.FMA(p, r, c)
	}
	// t's low mantissa bits hold n (0 <= n <= 58): shifted into the exponent field, 2^n.
	s := math.Float64frombits(math.Float64bits(t)<<52 + tanhOneBit)
	e := float64(p * s) // the conversion forbids fusing this product into e + 1
	th := 1 - 2/(e+1)
	return float32(math.Copysign(th, x))
}

// tanhSliceGo sets y[i] = tanh32(x[i]).
func tanhSliceGo(x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = tanh32(v)
	}
}

// tanhGradGo sets g[i] *= 1 - h[i]^2, h = tanh of the pre-activation: TanhGrad without SIMD.
func tanhGradGo(h, g []float32) {
	g = g[:len(h)]
	for j, v := range h {
		g[j] *= 1 - v*v
	}
}
