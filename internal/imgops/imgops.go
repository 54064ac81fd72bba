// Package imgops holds the host implementations of the image operations of a convolutional
// network (compute.Convolver's im2col, col2im, pooling, GroupNorm and block transpose), generic
// over float32 and float64. The CPU backend runs them in float32 on its goroutine pool and
// package nn's host models in float64; the CUDA kernels (package kernels) follow the same
// definitions, and the parity suite compares them with these.
//
// Images are laid out [C][H][W][N]: the N samples of one pixel are contiguous, so every
// operation here works on runs of N (or more) consecutive values, and a convolution's patches
// copy whole runs of pixels times samples.
//
// Each function computes one batch element's outputs, or a range of them, so that a caller
// can split the work over goroutines: every output value is computed by exactly one call, in
// one fixed order, so results never depend on how the work is split. None allocates.
package imgops

import (
	"math"
	"unsafe"
)

// Float is the element type.
type Float interface{ ~float32 | ~float64 }

// Geom is the geometry of one batch element's images: C channels of H x W pixels of N samples,
// laid out [C][H][W][N].
type Geom struct{ C, N, H, W int }

// Win is a square window: K x K positions at stride S over the input padded by P on every side.
type Win struct{ K, S, P int }

// Out is the output extent along an input extent n.
func (w Win) Out(n int) int { return (n+2*w.P-w.K)/w.S + 1 }

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

// Im2col writes rows q0..q1-1 of the patches of x (geometry g) into cols, the (C*K*K) x
// (OH*OW*N) matrix with row stride ldc: row (c*K + i)*K + j, column (oy*OW + ox)*N + n holds
// x(c, oy*S - P + i, ox*S - P + j, n), zero in the padding.
func Im2col[T Float](x []T, g Geom, w Win, cols []T, ldc, q0, q1 int) {
	OH, OW, N := w.Out(g.H), w.Out(g.W), g.N
	kk := w.K * w.K
	for q := q0; q < q1; q++ {
		c, i, j := q/kk, q/w.K%w.K, q%w.K
		row := cols[q*ldc:][:OH*OW*N]
		lo, hi := validRange(j-w.P, w.S, OW, g.W)
		plane := x[c*g.H*g.W*N:][:g.H*g.W*N]
		for oy := 0; oy < OH; oy++ {
			iy := oy*w.S - w.P + i
			dst := row[oy*OW*N:][:OW*N]
			if iy < 0 || iy >= g.H || lo >= hi {
				clear(dst)
				continue
			}
			clear(dst[:lo*N])
			clear(dst[hi*N:])
			line := plane[iy*g.W*N:][:g.W*N]
			ix := lo*w.S + j - w.P
			if w.S == 1 {
				copy(dst[lo*N:hi*N], line[ix*N:(ix+hi-lo)*N])
				continue
			}
			for ox := lo; ox < hi; ox++ {
				copy(dst[ox*N:(ox+1)*N], line[ix*N:(ix+1)*N])
				ix += w.S
			}
		}
	}
}

// Col2im writes channels c0..c1-1 of dx (geometry g), the adjoint of Im2col: every value is
// the sum of the patch entries copied from it, added from zero row by row of cols in
// ascending order (window row i, then column j).
//
// add, when not nil, adds src into dst elementwise with the bits of dst[k] + src[k] (the CPU
// backend passes a SIMD loop); nil adds with a plain loop.
func Col2im[T Float](cols []T, ldc int, g Geom, w Win, dx []T, c0, c1 int, add func(dst, src []T)) {
	if add == nil {
		add = addGo[T]
	}
	OH, OW, N := w.Out(g.H), w.Out(g.W), g.N
	plane := g.H * g.W * N
	clear(dx[c0*plane : c1*plane])
	for c := c0; c < c1; c++ {
		dst := dx[c*plane:][:plane]
		for i := 0; i < w.K; i++ {
			for j := 0; j < w.K; j++ {
				row := cols[((c*w.K+i)*w.K+j)*ldc:][:OH*OW*N]
				lo, hi := validRange(j-w.P, w.S, OW, g.W)
				if lo >= hi {
					continue
				}
				for oy := 0; oy < OH; oy++ {
					iy := oy*w.S - w.P + i
					if iy < 0 || iy >= g.H {
						continue
					}
					ix := lo*w.S + j - w.P
					if w.S == 1 {
						src := row[(oy*OW+lo)*N : (oy*OW+hi)*N]
						add(dst[(iy*g.W+ix)*N:][:len(src)], src)
						continue
					}
					for ox := lo; ox < hi; ox++ {
						add(dst[(iy*g.W+ix)*N:][:N], row[(oy*OW+ox)*N:][:N])
						ix += w.S
					}
				}
			}
		}
	}
}

// addGo is Col2im's portable addition.
func addGo[T Float](dst, src []T) {
	dst = dst[:len(src)]
	for k, v := range src {
		dst[k] += v
	}
}

// orderKey maps a value to an integer in the same order as the value, -0 and +0 to the same
// key, so that comparisons become integer ones the compiler turns into conditional moves: with
// a window's values in random order, branches on float comparisons mispredict about half the
// time.
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

// firstKey and laterKey are the keys of a window's first value and of the values after it for
// the rule "the first maximum by > comparisons": a NaN compares greater than nothing and
// nothing compares greater than it, so it wins as the first value and never later.
func firstKey[T Float](v T) int64 {
	if v != v {
		return math.MaxInt64
	}
	return orderKey(v)
}

func laterKey[T Float](v T) int64 {
	if v != v {
		return math.MinInt64
	}
	return orderKey(v)
}

// block is how many samples a pooling window handles at once: the per-sample best keys and
// positions live on the stack.
const block = 64

// windowArgmax writes into at[k] the offset (pixel*N) in the plane src of the first maximum,
// for sample n0+k, of window (oy, ox), for the samples n0..n0+len(at)-1. The window's pixels
// are visited in row-major order; padding is skipped (a window always holds a pixel).
func windowArgmax[T Float](src []T, g Geom, w Win, oy, ox, n0 int, at []int) {
	var best [block]int64
	N := g.N
	y0, x0 := oy*w.S-w.P, ox*w.S-w.P
	first := true
	for i := max(y0, 0); i < min(y0+w.K, g.H); i++ {
		for j := max(x0, 0); j < min(x0+w.K, g.W); j++ {
			p := (i*g.W + j) * N
			v := src[p+n0:][:len(at)]
			if first {
				for k, u := range v {
					best[k], at[k] = firstKey(u), p
				}
				first = false
				continue
			}
			for k, u := range v {
				if key := laterKey(u); key > best[k] {
					best[k], at[k] = key, p
				}
			}
		}
	}
}

// MaxPool writes output rows r0..r1-1 (row r = c*OH + oy) of the window maxima of x into y
// (geometry C, OH, OW, N): each sample's first maximum in row-major window order by >
// comparisons (-0 and +0 tie; a NaN wins only as the window's first value), padding excluded.
func MaxPool[T Float](x []T, g Geom, w Win, y []T, r0, r1 int) {
	OH, OW, N := w.Out(g.H), w.Out(g.W), g.N
	if w.K == 2 && w.S == 2 && w.P == 0 {
		MaxPool2(x, g, y, r0, r1, Max2Go[T]())
		return
	}
	var at [block]int
	for r := r0; r < r1; r++ {
		c, oy := r/OH, r%OH
		src := x[c*g.H*g.W*N:][:g.H*g.W*N]
		for ox := 0; ox < OW; ox++ {
			dst := y[((c*OH+oy)*OW+ox)*N:][:N]
			for n0 := 0; n0 < N; n0 += block {
				a := at[:min(block, N-n0)]
				windowArgmax(src, g, w, oy, ox, n0, a)
				for k, p := range a {
					dst[n0+k] = src[p+n0+k]
				}
			}
		}
	}
}

// Max2 holds the kernels of 2x2 max pooling at stride 2 over the windows of a pair of image
// rows, each window's pixels runs of n samples: window w has a = row0[2wn:], b = row0[(2w+1)n:]
// and c, d likewise in row1. Max writes out[wn+i], the first maximum of a[i], b[i], c[i], d[i]
// in that order by MaxPool's rule; Grad writes 0 + g[wn+i] to the winner's place in d0 or d1
// and 0 to the others. Max2Go is the portable pair; the CPU backend passes SIMD kernels with
// the same bits.
type Max2[T Float] struct {
	Max  func(row0, row1, out []T, windows, n int)
	Grad func(row0, row1, g, d0, d1 []T, windows, n int)
}

// Max2Go returns the portable kernels.
func Max2Go[T Float]() Max2[T] { return Max2[T]{Max: max4Rows[T], Grad: max4GradRows[T]} }

func max4Rows[T Float](row0, row1, out []T, windows, n int) {
	for w := 0; w < windows; w++ {
		max4(row0[2*w*n:][:n], row0[(2*w+1)*n:][:n], row1[2*w*n:][:n], row1[(2*w+1)*n:][:n], out[w*n:][:n])
	}
}

func max4GradRows[T Float](row0, row1, g, d0, d1 []T, windows, n int) {
	for w := 0; w < windows; w++ {
		a, b := 2*w*n, (2*w+1)*n
		max4Grad(row0[a:][:n], row0[b:][:n], row1[a:][:n], row1[b:][:n], g[w*n:][:n], d0[a:][:n], d0[b:][:n], d1[a:][:n], d1[b:][:n])
	}
}

func max4[T Float](a, b, c, d, out []T) {
	a, b, c, d = a[:len(out)], b[:len(out)], c[:len(out)], d[:len(out)]
	for i := range out {
		m := a[i]
		if b[i] > m {
			m = b[i]
		}
		if c[i] > m {
			m = c[i]
		}
		if d[i] > m {
			m = d[i]
		}
		out[i] = m
	}
}

func max4Grad[T Float](a, b, c, d, g, da, db, dc, dd []T) {
	for i, v := range g {
		m, at := a[i], 0
		if b[i] > m {
			m, at = b[i], 1
		}
		if c[i] > m {
			m, at = c[i], 2
		}
		if d[i] > m {
			at = 3
		}
		var z [4]T
		z[at] += v // 0 + v, as the general path adds into zeros: -0 becomes +0
		da[i], db[i], dc[i], dd[i] = z[0], z[1], z[2], z[3]
	}
}

// MaxPool2 is MaxPool for 2x2 windows at stride 2 without padding, the common case, with the
// run kernels k: output rows r0..r1-1.
func MaxPool2[T Float](x []T, g Geom, y []T, r0, r1 int, k Max2[T]) {
	OH, OW, N := g.H/2, g.W/2, g.N
	for r := r0; r < r1; r++ {
		c, oy := r/OH, r%OH
		row0 := x[((c*g.H+2*oy)*g.W)*N:][:2*OW*N]
		row1 := x[((c*g.H+2*oy+1)*g.W)*N:][:2*OW*N]
		k.Max(row0, row1, y[(c*OH+oy)*OW*N:][:OW*N], OW, N)
	}
}

// MaxPoolGrad writes channels c0..c1-1 of dx: each dy value added, from zero, to its window's
// first maximum in x, windows in row-major order.
func MaxPoolGrad[T Float](x []T, g Geom, w Win, dy, dx []T, c0, c1 int) {
	if w.K == 2 && w.S == 2 && w.P == 0 {
		MaxPool2Grad(x, g, dy, dx, c0, c1, Max2Go[T]())
		return
	}
	OH, OW, N := w.Out(g.H), w.Out(g.W), g.N
	plane := g.H * g.W * N
	clear(dx[c0*plane : c1*plane])
	var at [block]int
	for c := c0; c < c1; c++ {
		src, dst := x[c*plane:][:plane], dx[c*plane:][:plane]
		for oy := 0; oy < OH; oy++ {
			for ox := 0; ox < OW; ox++ {
				gy := dy[((c*OH+oy)*OW+ox)*N:][:N]
				for n0 := 0; n0 < N; n0 += block {
					a := at[:min(block, N-n0)]
					windowArgmax(src, g, w, oy, ox, n0, a)
					for k, p := range a {
						dst[p+n0+k] += gy[n0+k]
					}
				}
			}
		}
	}
}

// MaxPool2Grad is MaxPoolGrad for 2x2 windows at stride 2 without padding with the run
// kernels k: channels c0..c1-1. The windows do not overlap, so every value is written once
// and a last odd row or column, in no window, is zeroed.
func MaxPool2Grad[T Float](x []T, g Geom, dy, dx []T, c0, c1 int, k Max2[T]) {
	OH, OW, N := g.H/2, g.W/2, g.N
	plane := g.H * g.W * N
	for c := c0; c < c1; c++ {
		src, dst := x[c*plane:][:plane], dx[c*plane:][:plane]
		for oy := 0; oy < OH; oy++ {
			r0, r1 := (2*oy*g.W)*N, ((2*oy+1)*g.W)*N
			k.Grad(src[r0:][:2*OW*N], src[r1:][:2*OW*N], dy[(c*OH+oy)*OW*N:][:OW*N], dst[r0:][:2*OW*N], dst[r1:][:2*OW*N], OW, N)
			if g.W%2 == 1 {
				clear(dst[r0+(g.W-1)*N:][:N])
				clear(dst[r1+(g.W-1)*N:][:N])
			}
		}
		if g.H%2 == 1 {
			clear(dst[(g.H-1)*g.W*N:])
		}
	}
}

// AvgPool writes output rows r0..r1-1 (row r = c*OH + oy) of the window averages of x into y,
// padding counted as zeros (the divisor is always K*K): each sample's window values added in
// row-major order, then multiplied by 1/(K*K) rounded to T.
func AvgPool[T Float](x []T, g Geom, w Win, y []T, r0, r1 int) {
	OH, OW, N := w.Out(g.H), w.Out(g.W), g.N
	inv := 1 / T(w.K*w.K)
	for r := r0; r < r1; r++ {
		c, oy := r/OH, r%OH
		src := x[c*g.H*g.W*N:][:g.H*g.W*N]
		y0 := oy*w.S - w.P
		for ox := 0; ox < OW; ox++ {
			x0 := ox*w.S - w.P
			dst := y[((c*OH+oy)*OW+ox)*N:][:N]
			clear(dst)
			for i := max(y0, 0); i < min(y0+w.K, g.H); i++ {
				for j := max(x0, 0); j < min(x0+w.K, g.W); j++ {
					for n, v := range src[(i*g.W+j)*N:][:N] {
						dst[n] += v
					}
				}
			}
			for n := range dst {
				dst[n] *= inv
			}
		}
	}
}

// AvgPoolGrad writes channels c0..c1-1 of dx: each dy value times 1/(K*K) added, from zero,
// to the pixels of its window, windows in row-major order.
func AvgPoolGrad[T Float](g Geom, w Win, dy, dx []T, c0, c1 int) {
	OH, OW, N := w.Out(g.H), w.Out(g.W), g.N
	plane := g.H * g.W * N
	inv := 1 / T(w.K*w.K)
	clear(dx[c0*plane : c1*plane])
	for c := c0; c < c1; c++ {
		dst := dx[c*plane:][:plane]
		for oy := 0; oy < OH; oy++ {
			y0 := oy*w.S - w.P
			for ox := 0; ox < OW; ox++ {
				x0 := ox*w.S - w.P
				gy := dy[((c*OH+oy)*OW+ox)*N:][:N]
				for i := max(y0, 0); i < min(y0+w.K, g.H); i++ {
					for j := max(x0, 0); j < min(x0+w.K, g.W); j++ {
						d := dst[(i*g.W+j)*N:][:N]
						for n, v := range gy {
							d[n] += v * inv
						}
					}
				}
			}
		}
	}
}

// GroupStats writes the statistics of groups gr0..gr1-1 of x: for group gr (channels
// gr*C/groups .. (gr+1)*C/groups - 1, all their pixels, summed in channel then pixel order, in
// float64) of sample n, mean[n*groups + gr] and rstd[n*groups + gr] = 1/sqrt(variance + eps),
// the variance being E[x^2] - E[x]^2 floored at 0.
func GroupStats[T Float](x []T, g Geom, groups int, eps float64, mean, rstd []float64, gr0, gr1 int) {
	cg, hw, N := g.C/groups, g.H*g.W, g.N
	cnt := float64(cg * hw)
	var s, ss [block]float64
	for gr := gr0; gr < gr1; gr++ {
		for n0 := 0; n0 < N; n0 += block {
			nb := min(block, N-n0)
			clear(s[:nb])
			clear(ss[:nb])
			for c := gr * cg; c < (gr+1)*cg; c++ {
				for p := 0; p < hw; p++ {
					for k, v := range x[(c*hw+p)*N+n0:][:nb] {
						s[k] += float64(v)
						ss[k] += float64(v) * float64(v)
					}
				}
			}
			for k := 0; k < nb; k++ {
				mu := s[k] / cnt
				mean[(n0+k)*groups+gr] = mu
				rstd[(n0+k)*groups+gr] = 1 / math.Sqrt(max(ss[k]/cnt-mu*mu, 0)+eps)
			}
		}
	}
}

// GroupNorm writes groups gr0..gr1-1 of y from x and its statistics (GroupStats): with
// a = rstd gamma[c] and b = beta[c] - mean rstd gamma[c], each rounded to T, y = a x + b.
func GroupNorm[T Float](x []T, g Geom, groups int, mean, rstd []float64, gamma, beta, y []T, gr0, gr1 int) {
	cg, hw, N := g.C/groups, g.H*g.W, g.N
	var a, b [block]T
	for gr := gr0; gr < gr1; gr++ {
		for c := gr * cg; c < (gr+1)*cg; c++ {
			for n0 := 0; n0 < N; n0 += block {
				nb := min(block, N-n0)
				for k := 0; k < nb; k++ {
					mu, rs := mean[(n0+k)*groups+gr], rstd[(n0+k)*groups+gr]
					a[k] = T(rs) * gamma[c]
					b[k] = beta[c] - T(mu*rs)*gamma[c]
				}
				for p := 0; p < hw; p++ {
					o := (c*hw+p)*N + n0
					dst := y[o:][:nb]
					for k, v := range x[o:][:nb] {
						dst[k] = a[k]*v + b[k]
					}
				}
			}
		}
	}
}

// GroupNormGradX writes groups gr0..gr1-1 of dx, the input gradient of GroupNorm given dy:
// with xhat = (x - mean) rstd and gy = dy gamma[c], dx = rstd (gy - mean(gy) - xhat mean(gy
// xhat)), the means over the group, in float64.
func GroupNormGradX[T Float](x []T, g Geom, groups int, mean, rstd []float64, gamma, dy, dx []T, gr0, gr1 int) {
	cg, hw, N := g.C/groups, g.H*g.W, g.N
	cnt := float64(cg * hw)
	var sg, sgx, mu, rs [block]float64
	for gr := gr0; gr < gr1; gr++ {
		for n0 := 0; n0 < N; n0 += block {
			nb := min(block, N-n0)
			for k := 0; k < nb; k++ {
				sg[k], sgx[k] = 0, 0
				mu[k], rs[k] = mean[(n0+k)*groups+gr], rstd[(n0+k)*groups+gr]
			}
			for c := gr * cg; c < (gr+1)*cg; c++ {
				gm := float64(gamma[c])
				for p := 0; p < hw; p++ {
					o := (c*hw+p)*N + n0
					d := dy[o:][:nb]
					for k, v := range x[o:][:nb] {
						gy := float64(d[k]) * gm
						sg[k] += gy
						sgx[k] += gy * (float64(v) - mu[k]) * rs[k]
					}
				}
			}
			for k := 0; k < nb; k++ {
				sg[k], sgx[k] = sg[k]/cnt, sgx[k]/cnt
			}
			for c := gr * cg; c < (gr+1)*cg; c++ {
				gm := float64(gamma[c])
				for p := 0; p < hw; p++ {
					o := (c*hw+p)*N + n0
					d, dst := dy[o:][:nb], dx[o:][:nb]
					for k, v := range x[o:][:nb] {
						xh := (float64(v) - mu[k]) * rs[k]
						dst[k] = T(rs[k] * (float64(d[k])*gm - sg[k] - xh*sgx[k]))
					}
				}
			}
		}
	}
}

// GroupNormGradParams writes channels c0..c1-1 of dgamma = sum of dy xhat and dbeta = sum of dy
// over the pixels and samples (in memory order), in float64.
func GroupNormGradParams[T Float](x []T, g Geom, groups int, mean, rstd []float64, dy, dgamma, dbeta []T, c0, c1 int) {
	cg, hw, N := g.C/groups, g.H*g.W, g.N
	for c := c0; c < c1; c++ {
		gr := c / cg
		var dga, dbe float64
		for p := 0; p < hw; p++ {
			o := (c*hw + p) * N
			d := dy[o:][:N]
			for n, v := range x[o:][:N] {
				mu, rs := mean[n*groups+gr], rstd[n*groups+gr]
				dga += float64(d[n]) * (float64(v) - mu) * rs
				dbe += float64(d[n])
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
