//go:build !amd64 || purego

package train

// tanhSlice sets y[i] = tanh32(x[i]).
func tanhSlice(x, y []float32) { tanhSliceGo(x, y) }

func tanhGrad(h, g []float32) { tanhGradGo(h, g) }
