package simd

import "math"

// Constants of Exp64: the same range reduction as tanh32 (tanh.go) with a degree-13 Taylor
// polynomial, whose truncation error (below 1e-17 relative on |r| <= 0.35) leaves only the
// roundings of the evaluation, a few float64 ulp.
const (
	expLow  = -708 // below, the result is 0 (e^-708 is near the smallest normal float64)
	expHigh = 709  // arguments are clamped here: 2^n must stay a normal number
)

// expPoly holds 1/i!, i = 13 down to 0, the Horner order.
var expPoly = [14]float64{
	1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
	1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1, 1,
}

// Exp64 is e^x within a few float64 ulp for expLow <= x <= expHigh, 0 below, e^709 above, NaN
// for NaN. It is the reference for ExpSlice's SIMD version, which performs the same IEEE
// operations in the same order (math.FMA where the assembly fuses) and gives identical bits.
func Exp64(x float64) float64 {
	if x < expLow {
		return 0
	}
	if x > expHigh {
		x = expHigh
	}
	t := math.FMA(x, tanhLog2e, tanhMagic)
	n := t - tanhMagic
	r := math.FMA(-n, tanhLn2Hi, x)
	r = math.FMA(-n, tanhLn2Lo, r)
	p := expPoly[0]
	for _, c := range expPoly[1:] {
		p = math.FMA(p, r, c)
	}
	// t's low mantissa bits hold n (-1022 <= n <= 1023) in two's complement: shifted into the
	// exponent field and biased, 2^n.
	s := math.Float64frombits(math.Float64bits(t)<<52 + tanhOneBit)
	return float64(p * s)
}

// expSliceGo sets y[i] = Exp64(x[i]).
func expSliceGo(x, y []float64) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = Exp64(v)
	}
}
