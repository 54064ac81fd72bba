//go:build !amd64 || purego

package simd

// TanhSlice sets y[i] = tanh32(x[i]).
func TanhSlice(x, y []float32) { tanhSliceGo(x, y) }

func TanhGrad(h, g []float32) { tanhGradGo(h, g) }
