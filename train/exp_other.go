//go:build !amd64 || purego

package train

// expSlice sets y[i] = exp64(x[i]).
func expSlice(x, y []float64) { expSliceGo(x, y) }
