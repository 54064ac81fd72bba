package nn

import (
	"math"
	"sync"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/imgops"
)

// ops is what the layers need from where they run, in their element type: the matrix product,
// a few elementwise operations and compute.Convolver's image operations, all on buffers
// addressed as compute.Mat and compute.Images views. Two implementations: deviceOps (float32 on
// any compute.Backend that is also a compute.Convolver: the CPU backend or the GPU) for
// training, and hostOps (any Float, plain slices) for the float64 models of the tests and the
// attacks.
type ops[T Float] interface {
	alloc(n int) compute.Buffer
	// release frees a buffer from alloc that is no longer used (a no-op where the collector
	// frees memory).
	release(b compute.Buffer)
	// wrap returns a buffer holding v: v itself where the memory is the host's, else a copy.
	wrap(v []T) compute.Buffer
	// read copies len(dst) values from src at off.
	read(dst []T, src compute.Buffer, off int)
	gemm(transA, transB bool, alpha T, a, b compute.Mat, beta T, c compute.Mat)
	// axpby computes y = alpha x + beta y.
	axpby(alpha T, x compute.Mat, beta T, y compute.Mat)
	activate(act compute.Activation, pre, post compute.Mat)
	activateGrad(act compute.Activation, pre, post, grad compute.Mat)
	// xent computes, per batch element, the softmax cross-entropy of logits z (Rows = samples,
	// Cols = classes) with labels (Rows x 1, class indices as T, shared by the batch): the
	// loss of each row into loss (Rows x 1) and, when dz.Buf is not nil, dz = scale (softmax -
	// onehot); the logit margin into margin when its Buf is not nil.
	xent(z, labels compute.Mat, scale T, dz, loss, margin compute.Mat)
	// patchGemmer returns the backend's product by patches made from the image itself, or
	// nil where there is none.
	patchGemmer() compute.PatchGemmer
	// directConv returns the backend's convolutions without patches, or nil where there are
	// none.
	directConv() compute.DirectConvolver
	// biasApart reports whether a convolution whose weights outweigh its output should read
	// the weights in place and add its bias by a product of its own (compute.BiasApart).
	biasApart() bool
	// winograd returns the backend's convolutions by Winograd's minimal filtering, or nil where
	// there are none.
	winograd() compute.Winograder
	// gnReLU returns the backend's GroupNorm with the ReLU after it in the same passes, or nil
	// where there is none.
	gnReLU() compute.GroupNormReLUer
	// addReLU returns the backend's sum of two matrices with a ReLU in one pass, or nil where
	// there is none.
	addReLU() compute.AddReLUer
	// gnKeeper returns the backend's GroupNorm that keeps its statistics for the gradient, or
	// nil where there is none.
	gnKeeper() compute.GroupNormStatsKeeper
	// poolKeeper returns the backend's max pooling that keeps its window indices for the
	// gradient, or nil where there is none.
	poolKeeper() compute.PoolIndexKeeper
	// poolReLU returns the backend's kept max pooling with the ReLU after it in the same
	// passes, or nil where there is none.
	poolReLU() compute.PoolReLUKeeper
	// columnBias returns the backend's kernels for a dense layer's bias, or nil where there
	// are none (the bias is then a product by ones).
	columnBias() compute.ColumnBiaser
	// columnXent returns the backend's softmax cross-entropy of logits stored classes by
	// samples, or nil where there is none (the logits are then transposed for xent).
	columnXent() compute.ColumnXent
	compute.Convolver
}

// deviceOps runs the layers in float32 on a compute.Backend and its compute.Convolver.
type deviceOps struct {
	be compute.Backend
	compute.Convolver
}

func (o deviceOps) alloc(n int) compute.Buffer { return o.be.Alloc(n) }

// release frees b where the backend's memory is not garbage collected (the GPU's).
func (o deviceOps) release(b compute.Buffer) {
	if r, ok := o.be.(compute.Releaser); ok {
		r.Release(b)
	}
}
func (o deviceOps) wrap(v []float32) compute.Buffer {
	return compute.Upload(o.be, v)
}
func (o deviceOps) read(dst []float32, src compute.Buffer, off int) { o.be.Download(dst, src, off) }
func (o deviceOps) gemm(transA, transB bool, alpha float32, a, b compute.Mat, beta float32, c compute.Mat) {
	o.be.Gemm(transA, transB, alpha, a, b, beta, c)
}
func (o deviceOps) axpby(alpha float32, x compute.Mat, beta float32, y compute.Mat) {
	o.be.Axpby(alpha, x, beta, y, nil)
}
func (o deviceOps) activate(act compute.Activation, pre, post compute.Mat) {
	o.be.Activate(act, pre, post)
}
func (o deviceOps) activateGrad(act compute.Activation, pre, post, grad compute.Mat) {
	o.be.ActivateGrad(act, pre, post, grad)
}
func (o deviceOps) xent(z, labels compute.Mat, scale float32, dz, loss, margin compute.Mat) {
	o.be.SoftmaxXent(z, labels, scale, dz, loss, margin)
}
func (o deviceOps) patchGemmer() compute.PatchGemmer { return optional[compute.PatchGemmer](o.be) }
func (o deviceOps) directConv() compute.DirectConvolver {
	return optional[compute.DirectConvolver](o.be)
}
func (o deviceOps) winograd() compute.Winograder    { return optional[compute.Winograder](o.be) }
func (o deviceOps) addReLU() compute.AddReLUer      { return optional[compute.AddReLUer](o.be) }
func (o deviceOps) gnReLU() compute.GroupNormReLUer { return optional[compute.GroupNormReLUer](o.be) }
func (o deviceOps) gnKeeper() compute.GroupNormStatsKeeper {
	return optional[compute.GroupNormStatsKeeper](o.be)
}
func (o deviceOps) poolKeeper() compute.PoolIndexKeeper {
	return optional[compute.PoolIndexKeeper](o.be)
}
func (o deviceOps) poolReLU() compute.PoolReLUKeeper {
	return optional[compute.PoolReLUKeeper](o.be)
}
func (o deviceOps) columnBias() compute.ColumnBiaser { return optional[compute.ColumnBiaser](o.be) }
func (o deviceOps) columnXent() compute.ColumnXent   { return optional[compute.ColumnXent](o.be) }

// optional is the backend's implementation of the optional interface I, or I's zero value (nil)
// where it has none.
func optional[I any](be compute.Backend) I {
	i, _ := be.(I)
	return i
}

func (o deviceOps) biasApart() bool {
	ba, ok := o.be.(compute.BiasApart)
	return ok && ba.BiasApart()
}

// hostBuf is host memory for hostOps.
type hostBuf[T Float] struct{ d []T }

func (b *hostBuf[T]) Len() int { return len(b.d) }

// hostOps runs the layers on plain slices: the GEMM it is given, package imgops for the image
// operations (split over up to threads goroutines, which never changes a result), loops for
// the rest. The float64 models of the tests and the attacks use it.
type hostOps[T Float] struct {
	g       Gemm[T]
	threads int
	mean    []float64
	rstd    []float64
}

func hd[T Float](b compute.Buffer) []T { return b.(*hostBuf[T]).d }

func (o *hostOps[T]) alloc(n int) compute.Buffer                { return &hostBuf[T]{d: make([]T, n)} }
func (o *hostOps[T]) release(compute.Buffer)                    {} // the collector frees it
func (o *hostOps[T]) wrap(v []T) compute.Buffer                 { return &hostBuf[T]{d: v} }
func (o *hostOps[T]) read(dst []T, src compute.Buffer, off int) { copy(dst, hd[T](src)[off:]) }

// at returns batch element b of m's buffer from its first value.
func at[T Float](m compute.Mat, b int) []T { return hd[T](m.Buf)[m.Off+b*m.BatchStride:] }

func img[T Float](x compute.Images, b int) []T { return hd[T](x.Buf)[x.Off+b*x.BatchStride:] }

func (o *hostOps[T]) gemm(transA, transB bool, alpha T, a, b compute.Mat, beta T, c compute.Mat) {
	if c.Rows == 0 || c.Cols == 0 || c.Batch == 0 {
		return
	}
	k := a.Cols
	if transA {
		k = a.Rows
	}
	o.g.Gemm(transA, transB, c.Rows, c.Cols, k, alpha, hd[T](a.Buf)[a.Off:], a.Stride, a.BatchStride,
		hd[T](b.Buf)[b.Off:], b.Stride, b.BatchStride, beta, hd[T](c.Buf)[c.Off:], c.Stride, c.BatchStride, c.Batch)
}

func (o *hostOps[T]) axpby(alpha T, x compute.Mat, beta T, y compute.Mat) {
	for b := 0; b < y.Batch; b++ {
		xs, ys := at[T](x, b), at[T](y, b)
		for i := 0; i < y.Rows; i++ {
			xr, yr := xs[i*x.Stride:][:y.Cols], ys[i*y.Stride:][:y.Cols]
			for j, v := range xr {
				if beta == 0 {
					yr[j] = alpha * v
				} else {
					yr[j] = alpha*v + beta*yr[j]
				}
			}
		}
	}
}

func (o *hostOps[T]) activate(act compute.Activation, pre, post compute.Mat) {
	for b := 0; b < post.Batch; b++ {
		ps, qs := at[T](pre, b), at[T](post, b)
		for i := 0; i < post.Rows; i++ {
			pr, qr := ps[i*pre.Stride:][:post.Cols], qs[i*post.Stride:][:post.Cols]
			for j, v := range pr {
				if act == compute.Tanh {
					qr[j] = T(math.Tanh(float64(v)))
				} else {
					qr[j] = max(v, 0)
				}
			}
		}
	}
}

func (o *hostOps[T]) activateGrad(act compute.Activation, pre, post, grad compute.Mat) {
	for b := 0; b < grad.Batch; b++ {
		ps, qs, gs := at[T](pre, b), at[T](post, b), at[T](grad, b)
		for i := 0; i < grad.Rows; i++ {
			pr, qr, gr := ps[i*pre.Stride:][:grad.Cols], qs[i*post.Stride:][:grad.Cols], gs[i*grad.Stride:][:grad.Cols]
			for j := range gr {
				switch {
				case act == compute.Tanh:
					gr[j] *= 1 - qr[j]*qr[j]
				case pr[j] <= 0:
					gr[j] = 0
				}
			}
		}
	}
}

func (o *hostOps[T]) patchGemmer() compute.PatchGemmer    { return nil }
func (o *hostOps[T]) directConv() compute.DirectConvolver { return nil }
func (o *hostOps[T]) biasApart() bool                     { return false }
func (o *hostOps[T]) winograd() compute.Winograder        { return nil }
func (o *hostOps[T]) gnReLU() compute.GroupNormReLUer     { return nil }
func (o *hostOps[T]) addReLU() compute.AddReLUer          { return nil }
func (o *hostOps[T]) gnKeeper() compute.GroupNormStatsKeeper {
	return nil
}
func (o *hostOps[T]) poolKeeper() compute.PoolIndexKeeper { return nil }
func (o *hostOps[T]) poolReLU() compute.PoolReLUKeeper    { return nil }
func (o *hostOps[T]) columnBias() compute.ColumnBiaser    { return nil }
func (o *hostOps[T]) columnXent() compute.ColumnXent      { return nil }

// xent computes the log-sum-exp in float64.
func (o *hostOps[T]) xent(z, labels compute.Mat, scale T, dz, loss, margin compute.Mat) {
	K := z.Cols
	for b := 0; b < z.Batch; b++ {
		zs, ls := at[T](z, b), at[T](labels, b)
		for i := 0; i < z.Rows; i++ {
			row := zs[i*z.Stride:][:K]
			y := int(ls[i*labels.Stride])
			mx, other := math.Inf(-1), math.Inf(-1)
			for k, v := range row {
				mx = max(mx, float64(v))
				if k != y {
					other = max(other, float64(v))
				}
			}
			var s float64
			for _, v := range row {
				s += math.Exp(float64(v) - mx)
			}
			lse := mx + math.Log(s)
			if loss.Buf != nil {
				at[T](loss, b)[i*loss.Stride] = T(lse - float64(row[y]))
			}
			if margin.Buf != nil {
				at[T](margin, b)[i*margin.Stride] = T(float64(row[y]) - other)
			}
			if dz.Buf != nil {
				out := at[T](dz, b)[i*dz.Stride:][:K]
				for k, v := range row {
					p := math.Exp(float64(v) - lse)
					if k == y {
						p--
					}
					out[k] = scale * T(p)
				}
			}
		}
	}
}

// par calls fn on contiguous ranges covering 0..n-1, on up to o.threads goroutines; callers
// split only work whose parts write disjoint memory.
func (o *hostOps[T]) par(n int, fn func(lo, hi int)) {
	t := min(o.threads, n)
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

func geom(x compute.Images) imgops.Geom  { return imgops.Geom{C: x.C, N: x.N, H: x.H, W: x.W} }
func window(w compute.Window) imgops.Win { return imgops.Win{K: w.Size, S: w.Stride, P: w.Pad} }

// perElem runs fn(b, lo, hi) over units 0..units-1 of each of batch elements, split over the
// goroutines.
func (o *hostOps[T]) perElem(batch, units int, fn func(b, lo, hi int)) {
	o.par(batch*units, func(lo, hi int) {
		for t := lo; t < hi; {
			b, u := t/units, t%units
			e := min(hi-t, units-u)
			fn(b, u, u+e)
			t += e
		}
	})
}

func (o *hostOps[T]) Im2col(x compute.Images, w compute.Window, cols compute.Mat) {
	o.perElem(cols.Batch, cols.Rows, func(b, lo, hi int) {
		imgops.Im2col(img[T](x, b), geom(x), window(w), at[T](cols, b), cols.Stride, lo, hi)
	})
}

func (o *hostOps[T]) Col2im(cols compute.Mat, w compute.Window, dx compute.Images) {
	o.perElem(dx.Batch, dx.C, func(b, lo, hi int) {
		imgops.Col2im(at[T](cols, b), cols.Stride, geom(dx), window(w), img[T](dx, b), lo, hi, nil)
	})
}

func (o *hostOps[T]) Pool(p compute.Pooling, w compute.Window, x, y compute.Images) {
	o.perElem(y.Batch, y.C*y.H, func(b, lo, hi int) {
		if p == compute.MaxPooling {
			imgops.MaxPool(img[T](x, b), geom(x), window(w), img[T](y, b), lo, hi)
		} else {
			imgops.AvgPool(img[T](x, b), geom(x), window(w), img[T](y, b), lo, hi)
		}
	})
}

func (o *hostOps[T]) PoolGrad(p compute.Pooling, w compute.Window, x, dy, dx compute.Images) {
	o.perElem(dx.Batch, dx.C, func(b, lo, hi int) {
		if p == compute.MaxPooling {
			imgops.MaxPoolGrad(img[T](x, b), geom(x), window(w), img[T](dy, b), img[T](dx, b), lo, hi)
		} else {
			imgops.AvgPoolGrad(geom(dx), window(w), img[T](dy, b), img[T](dx, b), lo, hi)
		}
	})
}

// stats computes the group statistics of every batch element of x into o.mean, o.rstd.
func (o *hostOps[T]) stats(x compute.Images, batch, groups int, eps float32) int {
	per := x.N * groups
	o.mean, o.rstd = grow(o.mean, batch*per), grow(o.rstd, batch*per)
	o.perElem(batch, groups, func(b, lo, hi int) {
		imgops.GroupStats(img[T](x, b), geom(x), groups, float64(eps), o.mean[b*per:][:per], o.rstd[b*per:][:per], lo, hi)
	})
	return per
}

func (o *hostOps[T]) GroupNorm(groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images) {
	per := o.stats(x, y.Batch, groups, eps)
	o.perElem(y.Batch, groups, func(b, lo, hi int) {
		imgops.GroupNorm(img[T](x, b), geom(x), groups, o.mean[b*per:][:per], o.rstd[b*per:][:per], at[T](gamma, b), at[T](beta, b), img[T](y, b), lo, hi)
	})
}

func (o *hostOps[T]) GroupNormGrad(groups int, eps float32, x compute.Images, gamma compute.Mat, dy, dx compute.Images, dgamma, dbeta compute.Mat) {
	batch := dgamma.Batch
	per := o.stats(x, batch, groups, eps)
	if dx.Buf != nil {
		o.perElem(batch, groups, func(b, lo, hi int) {
			imgops.GroupNormGradX(img[T](x, b), geom(x), groups, o.mean[b*per:][:per], o.rstd[b*per:][:per], at[T](gamma, b), img[T](dy, b), img[T](dx, b), lo, hi)
		})
	}
	o.perElem(batch, x.C, func(b, lo, hi int) {
		imgops.GroupNormGradParams(img[T](x, b), geom(x), groups, o.mean[b*per:][:per], o.rstd[b*per:][:per], img[T](dy, b), at[T](dgamma, b), at[T](dbeta, b), lo, hi)
	})
}

func (o *hostOps[T]) Transpose(block int, src, dst compute.Mat) {
	o.perElem(dst.Batch, src.Rows, func(b, lo, hi int) {
		imgops.Transpose(block, at[T](src, b), src.Stride, src.Cols, at[T](dst, b), dst.Stride, lo, hi)
	})
}
