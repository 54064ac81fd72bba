package theory

import "math"

// relErr is |got - want| / |want|, 0 when they are equal (infinities included).
func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), math.SmallestNonzeroFloat64)
}
