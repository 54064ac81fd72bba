//go:build !purego

package train

import "testing"

// The AVX-512 and AVX2 kernels must agree bit for bit (same fused operations in the same
// order), so results do not depend on which one a machine has.
func TestKernelsAgree(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 on this machine")
	}
	a, _ := randData(3, 300, 6, 2)
	bb, _ := randData(4, 300, 16, 2)
	var x, y [gemmMR * gemmNR]float32
	kernelAVX2(300, &a[0], &bb[0], &x)
	kernelAVX512(300, &a[0], &bb[0], &y)
	if x != y {
		t.Error("AVX2 and AVX-512 kernels differ")
	}
}
