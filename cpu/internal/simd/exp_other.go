//go:build !amd64 || purego

package simd

// ExpSlice sets y[i] = Exp64(x[i]).
func ExpSlice(x, y []float64) { expSliceGo(x, y) }
