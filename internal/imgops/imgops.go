// Package imgops holds the host implementations of the image operations of a convolutional
// network (compute.Convolver's im2col, col2im, pooling, GroupNorm and block transpose), generic
// over float32 and float64. The CPU backend runs them in float32 on its goroutine pool and
// package nn's host models in float64; the CUDA kernels (package kernels) follow the same
// definitions, and the parity suite compares them with these.
//
// Each function computes one batch element's outputs, or a range of them, so that a caller
// can split the work over goroutines: every output value is computed by exactly one call, in
// one fixed order, so results never depend on how the work is split.
package imgops

import (
	"math"
	"unsafe"
)

// Float is the element type.
type Float interface{ ~float32 | ~float64 }

// Geom is the geometry of one batch element's images: C channels of N samples of H x W pixels,
// laid out [C][N][H][W].
type Geom struct{ C, N, H, W int }

// Win is a square window: K x K positions at stride S over the input padded by P on every side.
type Win struct{ K, S, P int }

// Out is the output extent along an input extent n.
func (w Win) Out(n int) int { return (n+2*w.P-w.K)/w.S + 1 }

// Im2col writes rows q0..q1-1 of the patches of x (geometry g) into cols, the (C*K*K) x
// (N*OH*OW) matrix with row stride ldc: row (c*K + i)*K + j holds channel c shifted by the
// window offset (i, j), zero in the padding.
func Im2col[T Float](x []T, g Geom, w Win, cols []T, ldc, q0, q1 int) {
	OH, OW := w.Out(g.H), w.Out(g.W)
	kk := w.K * w.K
	for q := q0; q < q1; q++ {
		c, i, j := q/kk, q/w.K%w.K, q%w.K
		row := cols[q*ldc:][:g.N*OH*OW]
		lo, hi := validRange(j-w.P, w.S, OW, g.W)
		for n := 0; n < g.N; n++ {
			src := x[(c*g.N+n)*g.H*g.W:][:g.H*g.W]
			for oy := 0; oy < OH; oy++ {
				iy := oy*w.S - w.P + i
				dst := row[(n*OH+oy)*OW:][:OW]
				if iy < 0 || iy >= g.H || lo >= hi {
					clear(dst)
					continue
				}
				clear(dst[:lo])
				clear(dst[hi:])
				line := src[iy*g.W:][:g.W]
				ix := lo*w.S + j - w.P
				if w.S == 1 {
					copy(dst[lo:hi], line[ix:ix+hi-lo])
					continue
				}
				for ox := lo; ox < hi; ox++ {
					dst[ox] = line[ix]
					ix += w.S
				}
			}
		}
	}
}

// validRange is the range [lo, hi) of output positions o in [0, out) whose input position
// o*s + start lies in [0, n).
func validRange(start, s, out, n int) (lo, hi int) {
	if start < 0 {
		lo = (-start + s - 1) / s
	}
	if last := n - 1 - start; last < 0 {
		hi = 0
	} else {
		hi = min(out, last/s+1)
	}
	return lo, max(hi, lo)
}

// Col2im writes channels c0..c1-1 of dx (geometry g), the adjoint of Im2col: every pixel is
// the sum of the patch entries copied from it, added row by row of cols in ascending order.
func Col2im[T Float](cols []T, ldc int, g Geom, w Win, dx []T, c0, c1 int) {
	OH, OW := w.Out(g.H), w.Out(g.W)
	hw := g.H * g.W
	clear(dx[c0*g.N*hw : c1*g.N*hw])
	for c := c0; c < c1; c++ {
		for i := 0; i < w.K; i++ {
			for j := 0; j < w.K; j++ {
				row := cols[((c*w.K+i)*w.K+j)*ldc:][:g.N*OH*OW]
				lo, hi := validRange(j-w.P, w.S, OW, g.W)
				if lo >= hi {
					continue
				}
				for n := 0; n < g.N; n++ {
					dst := dx[(c*g.N+n)*hw:][:hw]
					for oy := 0; oy < OH; oy++ {
						iy := oy*w.S - w.P + i
						if iy < 0 || iy >= g.H {
							continue
						}
						src := row[(n*OH+oy)*OW:][lo:hi]
						ix := lo*w.S + j - w.P
						if w.S == 1 {
							line := dst[iy*g.W+ix:][:len(src)]
							for k, v := range src {
								line[k] += v
							}
							continue
						}
						line := dst[iy*g.W:][:g.W]
						for _, v := range src {
							line[ix] += v
							ix += w.S
						}
					}
				}
			}
		}
	}
}

// MaxPool writes planes p0..p1-1 (a plane is one (channel, sample) image, C*N of them) of the
// window maxima of x into y (geometry C, N, OH, OW): the first maximum in row-major window
// order, padding excluded (a window always holds at least one pixel when P < K).
func MaxPool[T Float](x []T, g Geom, w Win, y []T, p0, p1 int) {
	OH, OW := w.Out(g.H), w.Out(g.W)
	if w.K == 2 && w.S == 2 && w.P == 0 {
		maxPool2(x, g, y, p0, p1)
		return
	}
	for p := p0; p < p1; p++ {
		src := x[p*g.H*g.W:][:g.H*g.W]
		dst := y[p*OH*OW:][:OH*OW]
		for oy := 0; oy < OH; oy++ {
			for ox := 0; ox < OW; ox++ {
				dst[oy*OW+ox] = src[maxIndex(src, g, w, oy, ox)]
			}
		}
	}
}

// orderKey maps a value to an integer in the same order as the value, -0 and +0 to the same
// key, so that comparisons become integer ones the compiler turns into conditional moves: with
// a window's values in random order, branches on float comparisons mispredict about half the
// time. NaN has no place in the order: window4 handles it.
func orderKey[T Float](v T) int64 {
	if unsafe.Sizeof(v) == 4 {
		b := int32(math.Float32bits(float32(v)))
		s := b >> 31
		return int64((b ^ (s & math.MaxInt32)) - s)
	}
	b := int64(math.Float64bits(float64(v)))
	s := b >> 63
	return (b ^ (s & math.MaxInt64)) - s
}

// window4 returns the position (0..3) of the first maximum of a 2x2 window's values in
// row-major order, as the general path finds it with > comparisons. Without NaN that is the
// first key equal to the largest key, found without branches; a window holding a NaN (which
// the keys would order among the numbers) takes the comparisons: a NaN wins only as the first
// value, since nothing compares greater than it and it compares greater than nothing.
func window4[T Float](a, b, c, d T) int {
	if a != a || b != b || c != c || d != d {
		at, m := 0, a
		for k, v := range [3]T{b, c, d} {
			if v > m {
				at, m = k+1, v
			}
		}
		return at
	}
	return first4(orderKey(a), orderKey(b), orderKey(c), orderKey(d))
}

// first4 returns the position (0..3) of the first of four keys that equals their maximum.
func first4(ka, kb, kc, kd int64) int {
	m := max(max(ka, kb), max(kc, kd))
	at := 3
	if kc == m {
		at = 2
	}
	if kb == m {
		at = 1
	}
	if ka == m {
		at = 0
	}
	return at
}

// maxPool2 is MaxPool for 2x2 windows at stride 2 without padding, the common case, without
// data-dependent branches: the same first maximum in row-major order.
func maxPool2[T Float](x []T, g Geom, y []T, p0, p1 int) {
	OH, OW := g.H/2, g.W/2
	for p := p0; p < p1; p++ {
		src := x[p*g.H*g.W:][:g.H*g.W]
		dst := y[p*OH*OW:][:OH*OW]
		for oy := 0; oy < OH; oy++ {
			r0 := src[2*oy*g.W:][:2*OW]
			r1 := src[(2*oy+1)*g.W:][:2*OW]
			out := dst[oy*OW:][:OW]
			for ox := range out {
				w := [4]T{r0[2*ox], r0[2*ox+1], r1[2*ox], r1[2*ox+1]}
				out[ox] = w[window4(w[0], w[1], w[2], w[3])&3]
			}
		}
	}
}

// maxPool2Grad is MaxPoolGrad for 2x2 windows at stride 2 without padding: the windows do not
// overlap, so every pixel is written once (dy at its window's first maximum, else 0) and a
// last odd row or column, in no window, is zeroed.
func maxPool2Grad[T Float](x []T, g Geom, dy, dx []T, p0, p1 int) {
	OH, OW := g.H/2, g.W/2
	hw := g.H * g.W
	for p := p0; p < p1; p++ {
		src, dst := x[p*hw:][:hw], dx[p*hw:][:hw]
		gy := dy[p*OH*OW:][:OH*OW]
		for oy := 0; oy < OH; oy++ {
			r0 := src[2*oy*g.W:][:2*OW]
			r1 := src[(2*oy+1)*g.W:][:2*OW]
			d0 := dst[2*oy*g.W:][:2*OW]
			d1 := dst[(2*oy+1)*g.W:][:2*OW]
			for ox, v := range gy[oy*OW:][:OW] {
				at := window4(r0[2*ox], r0[2*ox+1], r1[2*ox], r1[2*ox+1])
				var z [4]T
				z[at&3] += v // 0 + v, as the general path adds into zeros: -0 becomes +0
				d0[2*ox], d0[2*ox+1], d1[2*ox], d1[2*ox+1] = z[0], z[1], z[2], z[3]
			}
			if g.W%2 == 1 {
				dst[2*oy*g.W+g.W-1], dst[(2*oy+1)*g.W+g.W-1] = 0, 0
			}
		}
		if g.H%2 == 1 {
			clear(dst[(g.H-1)*g.W:])
		}
	}
}

// maxIndex is the offset in the plane src of the first maximum of window (oy, ox).
func maxIndex[T Float](src []T, g Geom, w Win, oy, ox int) int {
	y0, x0 := oy*w.S-w.P, ox*w.S-w.P
	best, bi := T(0), -1
	for i := max(y0, 0); i < min(y0+w.K, g.H); i++ {
		for j := max(x0, 0); j < min(x0+w.K, g.W); j++ {
			if v := src[i*g.W+j]; bi < 0 || v > best {
				best, bi = v, i*g.W+j
			}
		}
	}
	return bi
}

// AvgPool writes planes p0..p1-1 of the window averages of x into y, padding counted as zeros
// (the divisor is always K*K).
func AvgPool[T Float](x []T, g Geom, w Win, y []T, p0, p1 int) {
	OH, OW := w.Out(g.H), w.Out(g.W)
	inv := 1 / T(w.K*w.K)
	for p := p0; p < p1; p++ {
		src := x[p*g.H*g.W:][:g.H*g.W]
		dst := y[p*OH*OW:][:OH*OW]
		for oy := 0; oy < OH; oy++ {
			y0 := oy*w.S - w.P
			for ox := 0; ox < OW; ox++ {
				x0 := ox*w.S - w.P
				var s T
				for i := max(y0, 0); i < min(y0+w.K, g.H); i++ {
					for j := max(x0, 0); j < min(x0+w.K, g.W); j++ {
						s += src[i*g.W+j]
					}
				}
				dst[oy*OW+ox] = s * inv
			}
		}
	}
}

// MaxPoolGrad writes planes p0..p1-1 of dx: each dy value added to its window's first maximum
// in x, windows in row-major order.
func MaxPoolGrad[T Float](x []T, g Geom, w Win, dy, dx []T, p0, p1 int) {
	if w.K == 2 && w.S == 2 && w.P == 0 {
		maxPool2Grad(x, g, dy, dx, p0, p1)
		return
	}
	OH, OW := w.Out(g.H), w.Out(g.W)
	hw := g.H * g.W
	clear(dx[p0*hw : p1*hw])
	for p := p0; p < p1; p++ {
		src, dst := x[p*hw:][:hw], dx[p*hw:][:hw]
		gy := dy[p*OH*OW:][:OH*OW]
		for oy := 0; oy < OH; oy++ {
			for ox := 0; ox < OW; ox++ {
				dst[maxIndex(src, g, w, oy, ox)] += gy[oy*OW+ox]
			}
		}
	}
}

// AvgPoolGrad writes planes p0..p1-1 of dx: each dy value divided by K*K and added to the
// pixels of its window, windows in row-major order.
func AvgPoolGrad[T Float](g Geom, w Win, dy, dx []T, p0, p1 int) {
	OH, OW := w.Out(g.H), w.Out(g.W)
	hw := g.H * g.W
	inv := 1 / T(w.K*w.K)
	clear(dx[p0*hw : p1*hw])
	for p := p0; p < p1; p++ {
		dst := dx[p*hw:][:hw]
		gy := dy[p*OH*OW:][:OH*OW]
		for oy := 0; oy < OH; oy++ {
			y0 := oy*w.S - w.P
			for ox := 0; ox < OW; ox++ {
				x0 := ox*w.S - w.P
				v := gy[oy*OW+ox] * inv
				for i := max(y0, 0); i < min(y0+w.K, g.H); i++ {
					for j := max(x0, 0); j < min(x0+w.K, g.W); j++ {
						dst[i*g.W+j] += v
					}
				}
			}
		}
	}
}

// GroupStats writes the statistics of samples n0..n1-1 of x: for group gr of sample n (channels
// gr*C/groups .. (gr+1)*C/groups - 1, all their pixels, summed in channel then pixel order, in
// float64), mean[n*groups + gr] and rstd[n*groups + gr] = 1/sqrt(variance + eps), the variance
// being E[x^2] - E[x]^2 floored at 0.
func GroupStats[T Float](x []T, g Geom, groups int, eps float64, mean, rstd []float64, n0, n1 int) {
	cg, hw := g.C/groups, g.H*g.W
	cnt := float64(cg * hw)
	for n := n0; n < n1; n++ {
		for gr := 0; gr < groups; gr++ {
			var s, ss float64
			for c := gr * cg; c < (gr+1)*cg; c++ {
				for _, v := range x[(c*g.N+n)*hw:][:hw] {
					s += float64(v)
					ss += float64(v) * float64(v)
				}
			}
			mu := s / cnt
			mean[n*groups+gr] = mu
			rstd[n*groups+gr] = 1 / math.Sqrt(max(ss/cnt-mu*mu, 0)+eps)
		}
	}
}

// GroupNorm writes samples n0..n1-1 of y from x and its statistics (GroupStats): with
// a = rstd gamma[c] and b = beta[c] - mean rstd gamma[c], each rounded to T, y = a x + b.
func GroupNorm[T Float](x []T, g Geom, groups int, mean, rstd []float64, gamma, beta, y []T, n0, n1 int) {
	cg, hw := g.C/groups, g.H*g.W
	for n := n0; n < n1; n++ {
		for gr := 0; gr < groups; gr++ {
			mu, rs := mean[n*groups+gr], rstd[n*groups+gr]
			for c := gr * cg; c < (gr+1)*cg; c++ {
				a := T(rs) * gamma[c]
				b := beta[c] - T(mu*rs)*gamma[c]
				o := (c*g.N + n) * hw
				dst := y[o:][:hw]
				for k, v := range x[o:][:hw] {
					dst[k] = a*v + b
				}
			}
		}
	}
}

// GroupNormGradX writes samples n0..n1-1 of dx, the input gradient of GroupNorm given dy:
// with xhat = (x - mean) rstd and gy = dy gamma[c], dx = rstd (gy - mean(gy) - xhat mean(gy
// xhat)), the means over the group, in float64.
func GroupNormGradX[T Float](x []T, g Geom, groups int, mean, rstd []float64, gamma, dy, dx []T, n0, n1 int) {
	cg, hw := g.C/groups, g.H*g.W
	cnt := float64(cg * hw)
	for n := n0; n < n1; n++ {
		for gr := 0; gr < groups; gr++ {
			mu, rs := mean[n*groups+gr], rstd[n*groups+gr]
			var sg, sgx float64
			for c := gr * cg; c < (gr+1)*cg; c++ {
				o := (c*g.N + n) * hw
				gm := float64(gamma[c])
				d := dy[o:][:hw]
				for k, v := range x[o:][:hw] {
					gy := float64(d[k]) * gm
					sg += gy
					sgx += gy * (float64(v) - mu) * rs
				}
			}
			mg, mgx := sg/cnt, sgx/cnt
			for c := gr * cg; c < (gr+1)*cg; c++ {
				o := (c*g.N + n) * hw
				gm := float64(gamma[c])
				d, dst := dy[o:][:hw], dx[o:][:hw]
				for k, v := range x[o:][:hw] {
					xh := (float64(v) - mu) * rs
					dst[k] = T(rs * (float64(d[k])*gm - mg - xh*mgx))
				}
			}
		}
	}
}

// GroupNormGradParams writes channels c0..c1-1 of dgamma = sum of dy xhat and dbeta = sum of dy
// over the samples (in order) and their pixels, in float64.
func GroupNormGradParams[T Float](x []T, g Geom, groups int, mean, rstd []float64, dy, dgamma, dbeta []T, c0, c1 int) {
	cg, hw := g.C/groups, g.H*g.W
	for c := c0; c < c1; c++ {
		gr := c / cg
		var dga, dbe float64
		for n := 0; n < g.N; n++ {
			mu, rs := mean[n*groups+gr], rstd[n*groups+gr]
			o := (c*g.N + n) * hw
			d := dy[o:][:hw]
			for k, v := range x[o:][:hw] {
				dga += float64(d[k]) * (float64(v) - mu) * rs
				dbe += float64(d[k])
			}
		}
		dgamma[c], dbeta[c] = T(dga), T(dbe)
	}
}

// Transpose moves rows i0..i1-1 of src, a rows x cols matrix of blocks of block values (block
// (i, j) at i*lds + j*block), into dst (block (j, i) at j*ldd + i*block).
func Transpose[T Float](block int, src []T, lds, cols int, dst []T, ldd, i0, i1 int) {
	if block == 1 {
		for i := i0; i < i1; i++ {
			row := src[i*lds:][:cols]
			for j, v := range row {
				dst[j*ldd+i] = v
			}
		}
		return
	}
	for i := i0; i < i1; i++ {
		for j := 0; j < cols; j++ {
			copy(dst[j*ldd+i*block:][:block], src[i*lds+j*block:][:block])
		}
	}
}
