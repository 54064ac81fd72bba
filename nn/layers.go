package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// Shape is the shape of one sample: channels, height, width (a feature vector is F x 1 x 1).
type Shape struct{ C, H, W int }

// Size is the number of values of one sample.
func (s Shape) Size() int { return s.C * s.H * s.W }

func (s Shape) String() string { return fmt.Sprintf("%dx%dx%d", s.C, s.H, s.W) }

// run is the context of one pass: the GEMM, R replicas, B samples, d parameters per replica,
// the goroutines for the work outside the GEMM.
type run[T Float] struct {
	g                Gemm[T]
	R, B, d, threads int
}

// par calls fn on contiguous ranges covering 0..n-1, on up to c.threads goroutines. Callers
// split only work whose parts write disjoint memory and compute each value in one fixed order,
// so results do not depend on the thread count.
func (c *run[T]) par(n int, fn func(lo, hi int)) {
	t := min(c.threads, n)
	if t <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := 0; k < t; k++ {
		lo, hi := k*n/t, (k+1)*n/t
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// layer is one replica-batched layer. x holds R inputs at replica stride xs (0: one input shared
// by every replica, the first layer's client batch), y the R outputs one after another, w and dw
// the R x d parameters and their gradient (the layer reads and writes its own range only, dw
// overwritten). dx is nil when nobody needs the input's gradient.
type layer[T Float] interface {
	in() Shape
	out() Shape
	numParams() int
	setOffset(off int)
	init(w []T, rng *rand.Rand) // one replica's range of this layer
	forward(c *run[T], w, x []T, xs int, y []T)
	backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T)
}

// ---- conv2d ----

// conv is a 2-D convolution (square kernel k, stride s, zero padding p) computed as im2col
// followed by one strided-batched GEMM over the replicas.
type conv[T Float] struct {
	ish, osh     Shape
	k, s, p, off int
	cols, dcols  []T
}

func (l *conv[T]) in() Shape         { return l.ish }
func (l *conv[T]) out() Shape        { return l.osh }
func (l *conv[T]) numParams() int    { return l.osh.C*l.ckk() + l.osh.C }
func (l *conv[T]) setOffset(off int) { l.off = off }
func (l *conv[T]) ckk() int          { return l.ish.C * l.k * l.k }

// init draws PyTorch's default (uniform on +-1/sqrt(fan_in) for weights and bias).
func (l *conv[T]) init(w []T, rng *rand.Rand) { uniformInit(w, l.ckk(), rng) }

func uniformInit[T Float](w []T, fanIn int, rng *rand.Rand) {
	a := 1 / math.Sqrt(float64(fanIn))
	for i := range w {
		w[i] = T((2*rng.Float64() - 1) * a)
	}
}

// im2col writes rows q0..q1-1 of the patches of one input [C][B][H][W], cols [C*k*k][B*OH*OW]
// (row (c*k + i)*k + j holds input channel c shifted by kernel offset (i, j)).
func (l *conv[T]) im2col(x, cols []T, B, q0, q1 int) {
	H, W, OH, OW := l.ish.H, l.ish.W, l.osh.H, l.osh.W
	n := B * OH * OW
	kk := l.k * l.k
	for q := q0; q < q1; q++ {
		c, i, j := q/kk, q/l.k%l.k, q%l.k
		row := cols[q*n:][:n]
		for b := 0; b < B; b++ {
			src := x[(c*B+b)*H*W:]
			for oy := 0; oy < OH; oy++ {
				iy := oy*l.s - l.p + i
				dst := row[(b*OH+oy)*OW:][:OW]
				if iy < 0 || iy >= H {
					clear(dst)
					continue
				}
				for ox := range dst {
					ix := ox*l.s - l.p + j
					if ix < 0 || ix >= W {
						dst[ox] = 0
					} else {
						dst[ox] = src[iy*W+ix]
					}
				}
			}
		}
	}
}

// col2im adds the patch gradients dcols back into dx [C][B][H][W] (dx zeroed by the caller).
func (l *conv[T]) col2im(dcols, dx []T, B int) {
	H, W, OH, OW := l.ish.H, l.ish.W, l.osh.H, l.osh.W
	n := B * OH * OW
	for c := 0; c < l.ish.C; c++ {
		for i := 0; i < l.k; i++ {
			for j := 0; j < l.k; j++ {
				row := dcols[((c*l.k+i)*l.k+j)*n:][:n]
				for b := 0; b < B; b++ {
					dst := dx[(c*B+b)*H*W:]
					for oy := 0; oy < OH; oy++ {
						iy := oy*l.s - l.p + i
						if iy < 0 || iy >= H {
							continue
						}
						src := row[(b*OH+oy)*OW:][:OW]
						for ox, v := range src {
							ix := ox*l.s - l.p + j
							if ix >= 0 && ix < W {
								dst[iy*W+ix] += v
							}
						}
					}
				}
			}
		}
	}
}

// patches returns the im2col patches of x and their replica stride: computed once when x is
// shared (xs = 0), so every replica of a client reuses them, else once per replica.
func (l *conv[T]) patches(c *run[T], x []T, xs int) ([]T, int) {
	per := l.ckk() * c.B * l.osh.H * l.osh.W
	rows := l.ckk()
	if xs == 0 {
		l.cols = grow(l.cols, per)
		c.par(rows, func(q0, q1 int) { l.im2col(x, l.cols, c.B, q0, q1) })
		return l.cols, 0
	}
	l.cols = grow(l.cols, c.R*per)
	c.par(c.R*rows, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			r, q := t/rows, t%rows
			l.im2col(x[r*xs:], l.cols[r*per:], c.B, q, q+1)
		}
	})
	return l.cols, per
}

func (l *conv[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	cols, cs := l.patches(c, x, xs)
	co, kk, n := l.osh.C, l.ckk(), c.B*l.osh.H*l.osh.W
	c.g.Gemm(false, false, co, n, kk, 1, w[l.off:], kk, c.d, cols, n, cs, 0, y, n, co*n, c.R)
	for r := 0; r < c.R; r++ {
		bias := w[r*c.d+l.off+co*kk:][:co]
		for o, bv := range bias {
			row := y[(r*co+o)*n:][:n]
			for i := range row {
				row[i] += bv
			}
		}
	}
}

// backward keeps the forward pass's patches (l.cols): forward and backward of one batch always
// come in pairs.
func (l *conv[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	co, kk, n := l.osh.C, l.ckk(), c.B*l.osh.H*l.osh.W
	cs := 0
	if xs != 0 {
		cs = kk * n
	}
	c.g.Gemm(false, true, co, kk, n, 1, dy, n, co*n, l.cols, n, cs, 0, dw[l.off:], kk, c.d, c.R)
	for r := 0; r < c.R; r++ {
		db := dw[r*c.d+l.off+co*kk:][:co]
		for o := range db {
			var s T
			for _, v := range dy[(r*co+o)*n:][:n] {
				s += v
			}
			db[o] = s
		}
	}
	if dx == nil {
		return
	}
	l.dcols = grow(l.dcols, c.R*kk*n)
	c.g.Gemm(true, false, kk, n, co, 1, w[l.off:], kk, c.d, dy, n, co*n, 0, l.dcols, n, kk*n, c.R)
	per := l.ish.Size() * c.B
	clear(dx[:c.R*per])
	c.par(c.R, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			l.col2im(l.dcols[r*kk*n:], dx[r*per:], c.B)
		}
	})
}

// ---- pooling ----

// pool is max or average pooling over k x k windows at stride s (no padding: the window always
// lies inside the input, so an average always divides by k*k).
type pool[T Float] struct {
	ish, osh Shape
	k, s     int
	max      bool
	arg      []int32 // max: the input offset (within the plane) of each output's maximum
}

func (l *pool[T]) in() Shape            { return l.ish }
func (l *pool[T]) out() Shape           { return l.osh }
func (l *pool[T]) numParams() int       { return 0 }
func (l *pool[T]) setOffset(int)        {}
func (l *pool[T]) init([]T, *rand.Rand) {}
func (l *pool[T]) planes(c *run[T]) (int, int, int) {
	return l.ish.C * c.B, l.ish.H * l.ish.W, l.osh.H * l.osh.W
}

func (l *pool[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	P, ip, op := l.planes(c)
	if l.max {
		l.arg = grow(l.arg, c.R*P*op)
	}
	inv := 1 / T(l.k*l.k)
	c.par(c.R, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			for pl := 0; pl < P; pl++ {
				src := x[r*xs+pl*ip:][:ip]
				o := (r*P + pl) * op
				for oy := 0; oy < l.osh.H; oy++ {
					for ox := 0; ox < l.osh.W; ox++ {
						base := oy*l.s*l.ish.W + ox*l.s
						if l.max {
							best, bi := src[base], base
							for i := 0; i < l.k; i++ {
								for j := 0; j < l.k; j++ {
									if v := src[base+i*l.ish.W+j]; v > best {
										best, bi = v, base+i*l.ish.W+j
									}
								}
							}
							y[o] = best
							l.arg[o] = int32(bi)
						} else {
							var s T
							for i := 0; i < l.k; i++ {
								for j := 0; j < l.k; j++ {
									s += src[base+i*l.ish.W+j]
								}
							}
							y[o] = s * inv
						}
						o++
					}
				}
			}
		}
	})
}

func (l *pool[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	if dx == nil {
		return
	}
	P, ip, op := l.planes(c)
	clear(dx[:c.R*P*ip])
	inv := 1 / T(l.k*l.k)
	c.par(c.R, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			for pl := 0; pl < P; pl++ {
				dst := dx[(r*P+pl)*ip:][:ip]
				o := (r*P + pl) * op
				for oy := 0; oy < l.osh.H; oy++ {
					for ox := 0; ox < l.osh.W; ox++ {
						g := dy[o]
						if l.max {
							dst[l.arg[o]] += g
						} else {
							base := oy*l.s*l.ish.W + ox*l.s
							for i := 0; i < l.k; i++ {
								for j := 0; j < l.k; j++ {
									dst[base+i*l.ish.W+j] += g * inv
								}
							}
						}
						o++
					}
				}
			}
		}
	})
}

// ---- activations ----

// act is ReLU or tanh, elementwise; the backward pass uses the output only.
type act[T Float] struct {
	sh   Shape
	tanh bool
}

func (l *act[T]) in() Shape            { return l.sh }
func (l *act[T]) out() Shape           { return l.sh }
func (l *act[T]) numParams() int       { return 0 }
func (l *act[T]) setOffset(int)        {}
func (l *act[T]) init([]T, *rand.Rand) {}

func (l *act[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	n := l.sh.Size() * c.B
	c.par(c.R, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			src, dst := x[r*xs:][:n], y[r*n:][:n]
			for i, v := range src {
				if l.tanh {
					dst[i] = T(math.Tanh(float64(v)))
				} else {
					dst[i] = max(v, 0)
				}
			}
		}
	})
}

func (l *act[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	if dx == nil {
		return
	}
	c.par(c.R*l.sh.Size()*c.B, func(lo, hi int) {
		for i, v := range y[lo:hi] {
			i += lo
			switch {
			case l.tanh:
				dx[i] = dy[i] * (1 - v*v)
			case v > 0:
				dx[i] = dy[i]
			default:
				dx[i] = 0
			}
		}
	})
}

// ---- GroupNorm ----

// groupNorm normalises each sample over groups of channels (and all their pixels), then applies
// a per-channel scale gamma and shift beta. It is used instead of BatchNorm on purpose: BatchNorm
// normalises across the samples of a batch and keeps running statistics, state computed from
// other clients' examples that is carried between steps. That couples the examples of a batch
// (per-example clipping no longer bounds one example's influence) and the running averages
// would be one more release the DP accounting does not cover. GroupNorm's statistics are per
// sample, so the model stays a pure function of its parameters and one example.
type groupNorm[T Float] struct {
	sh          Shape
	groups, off int
	mean, rstd  []float64 // per (replica, sample, group), kept for the backward pass
}

const gnEps = 1e-5

func (l *groupNorm[T]) in() Shape         { return l.sh }
func (l *groupNorm[T]) out() Shape        { return l.sh }
func (l *groupNorm[T]) numParams() int    { return 2 * l.sh.C }
func (l *groupNorm[T]) setOffset(off int) { l.off = off }
func (l *groupNorm[T]) init(w []T, _ *rand.Rand) {
	for c := 0; c < l.sh.C; c++ {
		w[c], w[l.sh.C+c] = 1, 0
	}
}

// Statistics accumulate in float64: a group holds up to thousands of values and the variance
// is a difference of nearly equal sums.
func (l *groupNorm[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	C, hw, B := l.sh.C, l.sh.H*l.sh.W, c.B
	cg := C / l.groups
	cnt := float64(cg * hw)
	n := C * B * hw
	l.mean = grow(l.mean, c.R*B*l.groups)
	l.rstd = grow(l.rstd, c.R*B*l.groups)
	c.par(c.R, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			src, dst := x[r*xs:], y[r*n:]
			gamma, beta := w[r*c.d+l.off:][:C], w[r*c.d+l.off+C:][:C]
			for b := 0; b < B; b++ {
				for g := 0; g < l.groups; g++ {
					var s, ss float64
					for ch := g * cg; ch < (g+1)*cg; ch++ {
						for _, v := range src[(ch*B+b)*hw:][:hw] {
							s += float64(v)
							ss += float64(v) * float64(v)
						}
					}
					mu := s / cnt
					rs := 1 / math.Sqrt(max(ss/cnt-mu*mu, 0)+gnEps)
					i := (r*B+b)*l.groups + g
					l.mean[i], l.rstd[i] = mu, rs
					for ch := g * cg; ch < (g+1)*cg; ch++ {
						a := T(rs) * gamma[ch]
						sh := beta[ch] - T(mu*rs)*gamma[ch]
						o := (ch*B + b) * hw
						for j, v := range src[o:][:hw] {
							dst[o+j] = a*v + sh
						}
					}
				}
			}
		}
	})
}

// backward: with xhat = (x - mu) rstd and g = dy gamma,
// dx = rstd (g - mean(g) - xhat mean(g xhat)) over the group; dgamma = sum dy xhat, dbeta = sum dy.
func (l *groupNorm[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	C, hw, B := l.sh.C, l.sh.H*l.sh.W, c.B
	cg := C / l.groups
	cnt := float64(cg * hw)
	n := C * B * hw
	c.par(c.R, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			src, gy := x[r*xs:], dy[r*n:]
			gamma := w[r*c.d+l.off:][:C]
			dgamma, dbeta := dw[r*c.d+l.off:][:C], dw[r*c.d+l.off+C:][:C]
			clear(dgamma)
			clear(dbeta)
			for b := 0; b < B; b++ {
				for g := 0; g < l.groups; g++ {
					i := (r*B+b)*l.groups + g
					mu, rs := l.mean[i], l.rstd[i]
					var sg, sgx float64
					for ch := g * cg; ch < (g+1)*cg; ch++ {
						o := (ch*B + b) * hw
						var dga, dbe float64
						for j, v := range src[o:][:hw] {
							xh := (float64(v) - mu) * rs
							d := float64(gy[o+j])
							dga += d * xh
							dbe += d
							sg += d * float64(gamma[ch])
							sgx += d * float64(gamma[ch]) * xh
						}
						dgamma[ch] += T(dga)
						dbeta[ch] += T(dbe)
					}
					if dx == nil {
						continue
					}
					mg, mgx := sg/cnt, sgx/cnt
					for ch := g * cg; ch < (g+1)*cg; ch++ {
						o := (ch*B + b) * hw
						gm := float64(gamma[ch])
						for j, v := range src[o:][:hw] {
							xh := (float64(v) - mu) * rs
							dx[r*n+o+j] = T(rs * (float64(gy[o+j])*gm - mg - xh*mgx))
						}
					}
				}
			}
		}
	})
}

// ---- global average pooling and flatten ----

// gap averages each channel over its pixels: C x H x W -> C x 1 x 1.
type gap[T Float] struct{ ish Shape }

func (l *gap[T]) in() Shape            { return l.ish }
func (l *gap[T]) out() Shape           { return Shape{l.ish.C, 1, 1} }
func (l *gap[T]) numParams() int       { return 0 }
func (l *gap[T]) setOffset(int)        {}
func (l *gap[T]) init([]T, *rand.Rand) {}

func (l *gap[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	hw, P := l.ish.H*l.ish.W, l.ish.C*c.B
	inv := 1 / T(hw)
	for r := 0; r < c.R; r++ {
		for p := 0; p < P; p++ {
			var s T
			for _, v := range x[r*xs+p*hw:][:hw] {
				s += v
			}
			y[r*P+p] = s * inv
		}
	}
}

func (l *gap[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	if dx == nil {
		return
	}
	hw, P := l.ish.H*l.ish.W, l.ish.C*c.B
	inv := 1 / T(hw)
	for i := 0; i < c.R*P; i++ {
		g := dy[i] * inv
		for j := range dx[i*hw:][:hw] {
			dx[i*hw+j] = g
		}
	}
}

// flatten turns [C][B][H][W] into features [C*H*W][B] (feature index c*H*W + y*W + x, the
// order of PyTorch's flatten of an NCHW tensor, so dense weights match nn.Linear's).
type flatten[T Float] struct{ ish Shape }

func (l *flatten[T]) in() Shape            { return l.ish }
func (l *flatten[T]) out() Shape           { return Shape{l.ish.Size(), 1, 1} }
func (l *flatten[T]) numParams() int       { return 0 }
func (l *flatten[T]) setOffset(int)        {}
func (l *flatten[T]) init([]T, *rand.Rand) {}

func (l *flatten[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	C, hw, B := l.ish.C, l.ish.H*l.ish.W, c.B
	n := C * hw * B
	for r := 0; r < c.R; r++ {
		for ch := 0; ch < C; ch++ {
			for b := 0; b < B; b++ {
				for s, v := range x[r*xs+(ch*B+b)*hw:][:hw] {
					y[r*n+(ch*hw+s)*B+b] = v
				}
			}
		}
	}
}

func (l *flatten[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	if dx == nil {
		return
	}
	C, hw, B := l.ish.C, l.ish.H*l.ish.W, c.B
	n := C * hw * B
	for r := 0; r < c.R; r++ {
		for ch := 0; ch < C; ch++ {
			for b := 0; b < B; b++ {
				d := dx[r*n+(ch*B+b)*hw:][:hw]
				for s := range d {
					d[s] = dy[r*n+(ch*hw+s)*B+b]
				}
			}
		}
	}
}

// ---- dense ----

// dense is y = W x + b on features (input F x 1 x 1): per replica Y_r (out x B) = W_r X_r.
type dense[T Float] struct {
	ish       Shape
	outF, off int
}

func (l *dense[T]) in() Shape                  { return l.ish }
func (l *dense[T]) out() Shape                 { return Shape{l.outF, 1, 1} }
func (l *dense[T]) numParams() int             { return l.outF*l.ish.C + l.outF }
func (l *dense[T]) setOffset(off int)          { l.off = off }
func (l *dense[T]) init(w []T, rng *rand.Rand) { uniformInit(w, l.ish.C, rng) }

func (l *dense[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	F, O, B := l.ish.C, l.outF, c.B
	c.g.Gemm(false, false, O, B, F, 1, w[l.off:], F, c.d, x, B, xs, 0, y, B, O*B, c.R)
	for r := 0; r < c.R; r++ {
		bias := w[r*c.d+l.off+O*F:][:O]
		for o, bv := range bias {
			row := y[(r*O+o)*B:][:B]
			for i := range row {
				row[i] += bv
			}
		}
	}
}

func (l *dense[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	F, O, B := l.ish.C, l.outF, c.B
	c.g.Gemm(false, true, O, F, B, 1, dy, B, O*B, x, B, xs, 0, dw[l.off:], F, c.d, c.R)
	for r := 0; r < c.R; r++ {
		db := dw[r*c.d+l.off+O*F:][:O]
		for o := range db {
			var s T
			for _, v := range dy[(r*O+o)*B:][:B] {
				s += v
			}
			db[o] = s
		}
	}
	if dx != nil {
		c.g.Gemm(true, false, F, B, O, 1, w[l.off:], F, c.d, dy, B, O*B, 0, dx, B, F*B, c.R)
	}
}
