package train

import "math"

// tanh32 is tanh rounded to float32: 1 - 2/(e^{2|x|} + 1) with one call of math.Exp (assembly
// on amd64; math.Tanh costs about twice as much), and the odd Taylor polynomial below
// |x| = 1/64, where that difference would cancel.
func tanh32(v float32) float32 {
	x := math.Abs(float64(v))
	var t float64
	switch {
	case x < 1.0/64:
		x2 := x * x
		t = x * (1 - x2*(1.0/3-x2*(2.0/15-x2*(17.0/315))))
	case x < 20:
		t = 1 - 2/(math.Exp(2*x)+1)
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
