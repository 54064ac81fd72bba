//go:build !amd64 || purego

package cpu

var useAVX2, useAVX512 = false, false

func kernel(kc int, a, b []float32, acc *[gemmMR * gemmNR]float32) { kernelGo(kc, a, b, acc) }

func kernelToC(int, []float32, []float32, []float32, int, float32, bool) bool {
	return false
}

func kernelStrided(int, []float32, int, []float32, *[gemmMR * gemmNR]float32) bool { return false }

func subScaled(alpha float32, x, y []float32) {
	for i := range y {
		y[i] -= alpha * x[i]
	}
}

func scaleTo(alpha float32, x, y []float32) {
	for i := range y {
		y[i] = alpha * x[i]
	}
}

func sumSq(x []float32) float64 {
	n := len(x) &^ 3
	s := sumSqLanes(x[:n])
	for i := n; i < len(x); i++ {
		s[0] += float64(x[i]) * float64(x[i])
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

func kernelToC2(int, []float32, []float32, []float32, int, float32, bool) bool {
	return false
}

func kernelStrided2(int, []float32, int, []float32, *[gemmMR * 2 * gemmNR]float32) bool {
	return false
}

func dot32(x, y []float32) float32 {
	n := len(x) &^ 15
	s := dotLanes(x[:n], y[:n])
	for i := n; i < len(x); i++ {
		s += x[i] * y[i]
	}
	return s
}

func mulSmall(rows, k, cols int, a []float32, ars, acs int, v []float32, vs int, out []float32, os int) {
	mulSmallGo(rows, k, cols, a, ars, acs, v, vs, out, os)
}

func kernelStrided4(int, []float32, int, []float32, *[2 * gemmMR * 2 * gemmNR]float32) bool {
	return false
}

func kernelToC4(int, []float32, []float32, []float32, int, float32, bool) bool {
	return false
}
