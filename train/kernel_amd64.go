//go:build !purego

package train

import "golang.org/x/sys/cpu"

// kernelAVX2 is kernelGo with AVX2 and FMA (kernel_amd64.s).
//
//go:noescape
func kernelAVX2(kc int, a, b *float32, acc *[gemmMR * gemmNR]float32)

var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func kernel(kc int, a, b []float32, acc *[gemmMR * gemmNR]float32) {
	if useAVX2 && kc > 0 {
		_ = a[kc*gemmMR-1]
		_ = b[kc*gemmNR-1]
		kernelAVX2(kc, &a[0], &b[0], acc)
		return
	}
	kernelGo(kc, a, b, acc)
}
