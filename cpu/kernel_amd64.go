//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// kernelAVX2 is kernelGo with AVX2 and FMA (kernel_amd64.s).
//
//go:noescape
func kernelAVX2(kc int, a, b *float32, acc *[gemmMR * gemmNR]float32)

var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// useAVX512 selects the zmm kernels; they perform the same operations as the AVX2 ones.
var useAVX512 = useAVX2 && cpu.X86.HasAVX512F

//go:noescape
func kernelAVX512(kc int, a, b *float32, acc *[gemmMR * gemmNR]float32)

//go:noescape
func kernelAVX512S(kc int, a *float32, lda int, b *float32, acc *[gemmMR * gemmNR]float32)

//go:noescape
func kernelAVX512C(kc int, a, b, c *float32, ldc int, alpha float32, store bool)

func kernel(kc int, a, b []float32, acc *[gemmMR * gemmNR]float32) {
	if useAVX2 && kc > 0 {
		_ = a[kc*gemmMR-1]
		_ = b[kc*gemmNR-1]
		if useAVX512 {
			kernelAVX512(kc, &a[0], &b[0], acc)
			return
		}
		kernelAVX2(kc, &a[0], &b[0], acc)
		return
	}
	kernelGo(kc, a, b, acc)
}

// kernelAVX2C adds alpha times the tile to c in place (kernel_amd64.s).
//
//go:noescape
func kernelAVX2C(kc int, a, b, c *float32, ldc int, alpha float32)

// zeroTile is what the AVX-512 kernels add alpha acc to instead of c when they store (c's
// old values are then never read): one row of a double-width tile, read at stride 0.
var zeroTile [2 * gemmNR]float32

// kernelToC adds alpha times the full MR x NR tile of panels a and b to c (row stride ldc) and
// reports whether it could; if not, the caller goes through kernel and an explicit update.
// With store, c's old values are replaced instead: c = alpha acc + 0, the bits of adding into
// a cleared tile (AVX-512 only).
func kernelToC(kc int, a, b, c []float32, ldc int, alpha float32, store bool) bool {
	if !useAVX2 || kc == 0 || store && !useAVX512 {
		return false
	}
	_ = a[kc*gemmMR-1]
	_ = b[kc*gemmNR-1]
	_ = c[(gemmMR-1)*ldc+gemmNR-1]
	if useAVX512 {
		kernelAVX512C(kc, &a[0], &b[0], &c[0], ldc, alpha, store)
		return true
	}
	kernelAVX2C(kc, &a[0], &b[0], &c[0], ldc, alpha)
	return true
}

//go:noescape
func kernelAVX2S(kc int, a *float32, lda int, b *float32, acc *[gemmMR * gemmNR]float32)

//go:noescape
func axpyAVX2(n int, alpha float32, x, y *float32)

//go:noescape
func sumSqAVX2(n int, x *float32, out *[4]float64)

// kernelStrided is kernel with the MR rows of A read in place (row i at a[i*lda:]).
func kernelStrided(kc int, a []float32, lda int, b []float32, acc *[gemmMR * gemmNR]float32) bool {
	if !useAVX2 || kc == 0 {
		return false
	}
	_ = a[(gemmMR-1)*lda+kc-1]
	_ = b[kc*gemmNR-1]
	if useAVX512 {
		kernelAVX512S(kc, &a[0], lda, &b[0], acc)
		return true
	}
	kernelAVX2S(kc, &a[0], lda, &b[0], acc)
	return true
}

// subScaled sets y -= alpha x elementwise (multiply, then subtract).
func subScaled(alpha float32, x, y []float32) {
	n := len(y) &^ 7
	if useAVX2 && n > 0 {
		_ = x[n-1]
		axpyAVX2(n, alpha, &x[0], &y[0])
	}
	for i := n; i < len(y); i++ {
		y[i] -= alpha * x[i]
	}
}

//go:noescape
func scaleAVX2(n int, alpha float32, x, y *float32)

//go:noescape
func dotAVX2(n int, x, y *float32) float32

//go:noescape
func mulSmallAVX2(rows, k, cols int, a *float32, ars, acs int, v *float32, vs int, out *float32, os int)

//go:noescape
func mulSmallAVX512(rows, k, cols int, a *float32, ars, acs int, v *float32, vs int, out *float32, os int)

// mulSmall sets out[i os + j] = sum_{c<k} a[i ars + c acs] v[c vs + j] for i < rows, j < cols:
// a small matrix product with the accumulators in registers (no packing), for the fused step.
func mulSmall(rows, k, cols int, a []float32, ars, acs int, v []float32, vs int, out []float32, os int) {
	if rows == 0 || cols == 0 {
		return
	}
	// The last elements each side reads or writes: bounds checked once here.
	_ = a[(rows-1)*ars+max(k-1, 0)*acs]
	_ = out[(rows-1)*os+cols-1]
	if k > 0 {
		_ = v[(k-1)*vs+cols-1]
	}
	// Each output element is the same chain of fused multiply-adds in every variant.
	if useAVX512 && k > 0 && acs > 0 && cols%16 == 0 {
		mulSmallAVX512(rows, k, cols, &a[0], ars, acs, &v[0], vs, &out[0], os)
		return
	}
	if useAVX2 && k > 0 && acs > 0 && cols%8 == 0 {
		mulSmallAVX2(rows, k, cols, &a[0], ars, acs, &v[0], vs, &out[0], os)
		return
	}
	mulSmallGo(rows, k, cols, a, ars, acs, v, vs, out, os)
}

// dot32 is sum x_i y_i in float32 with the lane structure of dotLanes.
func dot32(x, y []float32) float32 {
	n := len(x) &^ 15
	var s float32
	if useAVX2 && n > 0 {
		_ = y[n-1]
		s = dotAVX2(n, &x[0], &y[0])
	} else {
		s = dotLanes(x[:n], y[:n])
	}
	for i := n; i < len(x); i++ {
		s += x[i] * y[i]
	}
	return s
}

// scaleTo sets y = alpha x elementwise.
func scaleTo(alpha float32, x, y []float32) {
	n := len(y) &^ 7
	if useAVX2 && n > 0 {
		_ = x[n-1]
		scaleAVX2(n, alpha, &x[0], &y[0])
	}
	for i := n; i < len(y); i++ {
		y[i] = alpha * x[i]
	}
}

// sumSq is sum x_i^2 in float64: four accumulators, lane l holding i = l mod 4.
func sumSq(x []float32) float64 {
	n := len(x) &^ 3
	var s [4]float64
	if useAVX2 && n > 0 {
		sumSqAVX2(n, &x[0], &s)
	} else {
		s = sumSqLanes(x[:n])
	}
	for i := n; i < len(x); i++ {
		s[0] += float64(x[i]) * float64(x[i])
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

//go:noescape
func kernelAVX512C2(kc int, a, b, c *float32, ldc int, alpha float32, store bool)

//go:noescape
func kernelAVX512S2(kc int, a *float32, lda int, b *float32, acc *[gemmMR * 2 * gemmNR]float32)

// kernelToC2 is kernelToC on two adjacent panels of b (b and b[16 kc:]) and the MR x 2NR tile
// of c: the same operations on every element, with twice the independent accumulators.
func kernelToC2(kc int, a, b, c []float32, ldc int, alpha float32, store bool) bool {
	if !useAVX512 || kc == 0 {
		return false
	}
	_ = a[kc*gemmMR-1]
	_ = b[2*kc*gemmNR-1]
	_ = c[(gemmMR-1)*ldc+2*gemmNR-1]
	kernelAVX512C2(kc, &a[0], &b[0], &c[0], ldc, alpha, store)
	return true
}

// kernelStrided2 is kernelStrided on two adjacent panels of b; acc is MR x 2NR.
func kernelStrided2(kc int, a []float32, lda int, b []float32, acc *[gemmMR * 2 * gemmNR]float32) bool {
	if !useAVX512 || kc == 0 {
		return false
	}
	_ = a[(gemmMR-1)*lda+kc-1]
	_ = b[2*kc*gemmNR-1]
	kernelAVX512S2(kc, &a[0], lda, &b[0], acc)
	return true
}

//go:noescape
func kernelAVX512S4(kc int, a *float32, lda int, b *float32, acc *[2 * gemmMR * 2 * gemmNR]float32)

// kernelStrided4 is kernelStrided2 on 2 MR rows of a (read in place); acc is 2MR x 2NR.
func kernelStrided4(kc int, a []float32, lda int, b []float32, acc *[2 * gemmMR * 2 * gemmNR]float32) bool {
	if !useAVX512 || kc == 0 {
		return false
	}
	_ = a[(2*gemmMR-1)*lda+kc-1]
	_ = b[2*kc*gemmNR-1]
	kernelAVX512S4(kc, &a[0], lda, &b[0], acc)
	return true
}

//go:noescape
func kernelAVX512C4(kc int, a, b, c *float32, ldc int, alpha float32, store bool)

// kernelToC4 is kernelToC2 on two consecutive packed panels of a: the 2MR x 2NR tile of c.
func kernelToC4(kc int, a, b, c []float32, ldc int, alpha float32, store bool) bool {
	if !useAVX512 || kc == 0 {
		return false
	}
	_ = a[2*kc*gemmMR-1]
	_ = b[2*kc*gemmNR-1]
	_ = c[(2*gemmMR-1)*ldc+2*gemmNR-1]
	kernelAVX512C4(kc, &a[0], &b[0], &c[0], ldc, alpha, store)
	return true
}
