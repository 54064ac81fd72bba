//go:build !purego

package train

// tanhAVX2 sets y[i] = tanh32(x[i]) for i < n, n a positive multiple of 4 (tanh_amd64.s).
//
//go:noescape
func tanhAVX2(n int, x, y *float32)

// tanhSlice sets y[i] = tanh32(x[i]), four values at a time with AVX2 and FMA.
func tanhSlice(x, y []float32) {
	y = y[:len(x)]
	n := len(x) &^ 3
	if useAVX2 && n > 0 {
		tanhAVX2(n, &x[0], &y[0])
		x, y = x[n:], y[n:]
	}
	tanhSliceGo(x, y)
}
