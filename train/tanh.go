package train

import "math"

// expApprox is e^y for |y| <= 40 to about 1e-14 relative: y = k ln2 + r with k the nearest
// integer and |r| <= ln2/2, e^r by its Taylor series to degree 11 (remainder below 2e-16), and 2^k
// put into the exponent bits. It is a fraction of math.Exp's cost for the hidden layers.
func expApprox(y float64) float64 {
	k := math.Floor(y*math.Log2E + 0.5)
	r := y - k*math.Ln2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320+r*(1.0/362880+r*(1.0/3628800+r*(1.0/39916800)))))))))))
	return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// tanh32 is tanh rounded to float32: 1 - 2/(e^{2|x|} + 1), with the odd Taylor polynomial
// below |x| = 1/64 where that difference would cancel.
func tanh32(v float32) float32 {
	x := math.Abs(float64(v))
	var t float64
	switch {
	case x < 1.0/64:
		x2 := x * x
		t = x * (1 - x2*(1.0/3-x2*(2.0/15-x2*(17.0/315))))
	case x < 20:
		t = 1 - 2/(expApprox(2*x)+1)
	case x >= 20:
		t = 1
	default: // NaN stays NaN
		t = x
	}
	if v < 0 {
		t = -t
	}
	return float32(t)
}
