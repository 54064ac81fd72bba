//go:build !amd64 || purego

package train

var useAVX2 = false

func kernel(kc int, a, b []float32, acc *[gemmMR * gemmNR]float32) { kernelGo(kc, a, b, acc) }
