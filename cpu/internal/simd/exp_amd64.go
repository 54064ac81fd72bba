//go:build !purego

package simd

// expAVX2 sets y[i] = Exp64(x[i]) for i < n, n a positive multiple of 4 (exp_amd64.s).
//
//go:noescape
func expAVX2(n int, x, y *float64)

// ExpSlice sets y[i] = Exp64(x[i]), four values at a time with AVX2 and FMA.
func ExpSlice(x, y []float64) {
	y = y[:len(x)]
	n := len(x) &^ 3
	if useAVX2 && n > 0 {
		expAVX2(n, &x[0], &y[0])
		x, y = x[n:], y[n:]
	}
	expSliceGo(x, y)
}
