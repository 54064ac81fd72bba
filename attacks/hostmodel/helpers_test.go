package hostmodel

import (
	"math"
	"math/rand/v2"
	"slices"
)

func randomVec(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * rng.NormFloat64()
	}
	return v
}

func axpy(x []float64, a float64, v []float64) []float64 {
	out := slices.Clone(x)
	for i := range out {
		out[i] += a * v[i]
	}
	return out
}

// maxRelDiff is max_i |a_i - b_i| / max(max_j |b_j|, 1e-12).
func maxRelDiff(a, b []float64) float64 {
	var scale, d float64
	for i := range b {
		scale = math.Max(scale, math.Abs(b[i]))
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d / math.Max(scale, 1e-12)
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
