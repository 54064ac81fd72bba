//go:build !purego

package simd

// tanhAVX2 sets y[i] = tanh32(x[i]) for i < n, n a positive multiple of 4 (tanh_amd64.s).
//
//go:noescape
func tanhAVX2(n int, x, y *float32)

// tanhAVX512 is tanhAVX2 eight values at a time, n a positive multiple of 8.
//
//go:noescape
func tanhAVX512(n int, x, y *float32)

// TanhSlice sets y[i] = tanh32(x[i]), eight or four values at a time with AVX-512 or AVX2 and
// FMA (the same operations on every value).
func TanhSlice(x, y []float32) {
	y = y[:len(x)]
	if n := len(x) &^ 7; useAVX512 && n > 0 {
		tanhAVX512(n, &x[0], &y[0])
		x, y = x[n:], y[n:]
	}
	n := len(x) &^ 3
	if useAVX2 && n > 0 {
		tanhAVX2(n, &x[0], &y[0])
		x, y = x[n:], y[n:]
	}
	tanhSliceGo(x, y)
}

//go:noescape
func tanhGradAVX2(n int, post, grad *float32)

// TanhGrad sets g[i] *= 1 - h[i]^2 (h = tanh of the pre-activation), eight at a time with AVX2.
func TanhGrad(h, g []float32) {
	g = g[:len(h)]
	if n := len(h) &^ 7; useAVX2 && n > 0 {
		tanhGradAVX2(n, &h[0], &g[0])
		h, g = h[n:], g[n:]
	}
	tanhGradGo(h, g)
}
