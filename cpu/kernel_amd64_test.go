//go:build !purego

package cpu

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/internal/philox"
)

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

// The double-width kernels must give each element exactly what two calls of the single-width
// ones give: which of them a tile goes through depends on the column blocking, which depends
// on the batch size and the thread count.
func TestWideKernelsAgree(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 on this machine")
	}
	const kc, ldc = 300, 40
	a, _ := randData(5, kc, gemmMR, 2)
	b, _ := randData(6, 2*kc, gemmNR, 2)
	c0, _ := randData(7, gemmMR, ldc, 2)
	narrow, wide := append([]float32(nil), c0...), append([]float32(nil), c0...)
	kernelAVX512C(kc, &a[0], &b[0], &narrow[0], ldc, -0.7, false)
	kernelAVX512C(kc, &a[0], &b[kc*gemmNR], &narrow[gemmNR], ldc, -0.7, false)
	kernelAVX512C2(kc, &a[0], &b[0], &wide[0], ldc, -0.7, false)
	for i := range narrow {
		if math.Float32bits(narrow[i]) != math.Float32bits(wide[i]) {
			t.Fatalf("kernelAVX512C2 element %d = %g, two kernelAVX512C give %g", i, wide[i], narrow[i])
		}
	}
	// two panels of a: two kernelAVX512C2 on consecutive panels
	a2, _ := randData(10, 2*kc, gemmMR, 2)
	c4a, c4b := append([]float32(nil), c0...), append([]float32(nil), c0...)
	c4a = append(c4a, c0...)
	c4b = append(c4b, c0...)
	kernelAVX512C2(kc, &a2[0], &b[0], &c4a[0], ldc, -0.7, false)
	kernelAVX512C2(kc, &a2[kc*gemmMR], &b[0], &c4a[gemmMR*ldc], ldc, -0.7, false)
	kernelAVX512C4(kc, &a2[0], &b[0], &c4b[0], ldc, -0.7, false)
	for i := range c4a {
		if math.Float32bits(c4a[i]) != math.Float32bits(c4b[i]) {
			t.Fatalf("kernelAVX512C4 element %d = %g, two kernelAVX512C2 give %g", i, c4b[i], c4a[i])
		}
	}
	// strided: rows of a at stride lda
	const lda = 311
	as, _ := randData(8, gemmMR, lda, 2)
	var x0, x1 [gemmMR * gemmNR]float32
	var y [gemmMR * 2 * gemmNR]float32
	kernelAVX512S(kc, &as[0], lda, &b[0], &x0)
	kernelAVX512S(kc, &as[0], lda, &b[kc*gemmNR], &x1)
	kernelAVX512S2(kc, &as[0], lda, &b[0], &y)
	for i := 0; i < gemmMR; i++ {
		for j := 0; j < gemmNR; j++ {
			if y[i*2*gemmNR+j] != x0[i*gemmNR+j] || y[i*2*gemmNR+gemmNR+j] != x1[i*gemmNR+j] {
				t.Fatalf("kernelAVX512S2 row %d col %d differs from kernelAVX512S", i, j)
			}
		}
	}
	// twelve rows: two six-row kernels at a and a + 6 lda
	a12, _ := randData(9, 2*gemmMR, lda, 2)
	var z0, z1 [gemmMR * 2 * gemmNR]float32
	var z [2 * gemmMR * 2 * gemmNR]float32
	kernelAVX512S2(kc, &a12[0], lda, &b[0], &z0)
	kernelAVX512S2(kc, &a12[gemmMR*lda], lda, &b[0], &z1)
	kernelAVX512S4(kc, &a12[0], lda, &b[0], &z)
	for i := range z0 {
		if math.Float32bits(z[i]) != math.Float32bits(z0[i]) || math.Float32bits(z[len(z0)+i]) != math.Float32bits(z1[i]) {
			t.Fatalf("kernelAVX512S4 element %d differs from two kernelAVX512S2", i)
		}
	}
}

// The AVX-512 and AVX2 forms of mulSmall give the same bits (the same fused multiply-adds per
// element), so the choice, which depends on the shape, never changes results.
func TestMulSmallVariantsAgree(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 here")
	}
	rng := philox.NewRand(5, 0, 0, 9, 0)
	// 64 columns take the two-row path of the AVX-512 form (odd row counts its one-row tail).
	for _, sh := range [][2]int{{7, 80}, {7, 64}, {2, 64}, {1, 64}, {10, 32}} {
		rows, cols := sh[0], sh[1]
		const k = 33
		a := make([]float32, rows*k)
		v := make([]float32, k*cols)
		for i := range a {
			a[i] = float32(rng.Float() - 0.5)
		}
		for i := range v {
			v[i] = float32(rng.Float() - 0.5)
		}
		o1, o2 := make([]float32, rows*cols), make([]float32, rows*cols)
		mulSmallAVX512(rows, k, cols, &a[0], k, 1, &v[0], cols, &o1[0], cols)
		mulSmallAVX2(rows, k, cols, &a[0], k, 1, &v[0], cols, &o2[0], cols)
		for i := range o1 {
			if math.Float32bits(o1[i]) != math.Float32bits(o2[i]) {
				t.Fatalf("%d x %d: element %d: AVX-512 %v, AVX2 %v", rows, cols, i, o1[i], o2[i])
			}
		}
	}
}

// A storing kernel gives the bits of the adding kernel on a cleared c, whatever c held
// before (NaN here, which must never be read), including the sign of zero: a row of a that is
// all zeros with a negative alpha makes alpha acc = -0, which added into +0 is +0.
func TestStoringKernelsEqualAddingIntoZeros(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512 on this machine")
	}
	const kc, ldc, alpha = 77, 40, -0.3
	a, _ := randData(11, kc, 2*gemmMR, 2)
	for p := 0; p < kc; p++ {
		a[p*gemmMR+2] = 0 // row 2 of the first panel
	}
	b, _ := randData(12, 2*kc, gemmNR, 2)
	for _, k := range []struct {
		name       string
		rows, cols int
		run        func(c []float32, store bool)
	}{
		{"C", gemmMR, gemmNR, func(c []float32, store bool) { kernelAVX512C(kc, &a[0], &b[0], &c[0], ldc, alpha, store) }},
		{"C2", gemmMR, 2 * gemmNR, func(c []float32, store bool) { kernelAVX512C2(kc, &a[0], &b[0], &c[0], ldc, alpha, store) }},
		{"C4", 2 * gemmMR, 2 * gemmNR, func(c []float32, store bool) { kernelAVX512C4(kc, &a[0], &b[0], &c[0], ldc, alpha, store) }},
	} {
		zeros := make([]float32, 2*gemmMR*ldc)
		nans := make([]float32, len(zeros))
		for i := range nans {
			nans[i] = float32(math.NaN())
		}
		k.run(zeros, false)
		k.run(nans, true)
		for row := 0; row < k.rows; row++ {
			for col := 0; col < k.cols; col++ {
				z, n := zeros[row*ldc+col], nans[row*ldc+col]
				if math.Float32bits(z) != math.Float32bits(n) {
					t.Fatalf("kernel %s element (%d, %d): store %g, add into zeros %g", k.name, row, col, n, z)
				}
			}
		}
		if bits := math.Float32bits(nans[2*ldc]); bits != 0 {
			t.Fatalf("kernel %s: the zero row stored bits %x, want +0", k.name, bits)
		}
	}
}
