package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/compute"
)

// Shape is the shape of one sample: channels, height, width (a feature vector is F x 1 x 1).
type Shape struct{ C, H, W int }

// Size is the number of values of one sample.
func (s Shape) Size() int { return s.C * s.H * s.W }

func (s Shape) String() string { return fmt.Sprintf("%dx%dx%d", s.C, s.H, s.W) }

// pass is the context of one forward (and backward) pass: where it runs, R replicas of B
// samples, the parameters w and their gradient dw (R rows of d; dw.Buf nil in a forward-only
// pass), and a vector of ones for the channel biases and sums, which are matrix products with
// it.
type pass[T Float] struct {
	o     ops[T]
	R, B  int
	w, dw compute.Mat
	ones  compute.Buffer
	tmp   *transients
	// cacheBytes is the working set the backend asks intermediate buffers to fit
	// (compute.CacheSized), 0 for no limit.
	cacheBytes int
}

// param is the rows x cols block of parameters at offset off of every replica's row.
func (c *pass[T]) param(off, rows, cols int) compute.Mat {
	return compute.Mat{Buf: c.w.Buf, Off: c.w.Off + off, Rows: rows, Cols: cols, Stride: cols, Batch: c.R, BatchStride: c.w.BatchStride}
}

// grad is param's block in the gradient.
func (c *pass[T]) grad(off, rows, cols int) compute.Mat {
	return compute.Mat{Buf: c.dw.Buf, Off: c.dw.Off + off, Rows: rows, Cols: cols, Stride: cols, Batch: c.R, BatchStride: c.dw.BatchStride}
}

// onesRow is a 1 x n row of ones shared by the replicas; onesCol the n x 1 column.
func (c *pass[T]) onesRow(n int) compute.Mat {
	return compute.Mat{Buf: c.ones, Rows: 1, Cols: n, Stride: n, Batch: c.R}
}

func (c *pass[T]) onesCol(n int) compute.Mat {
	return compute.Mat{Buf: c.ones, Rows: n, Cols: 1, Stride: 1, Batch: c.R}
}

// transients are the buffers a layer uses only within one call of its backward pass: the
// model's layers share them, so a deep model holds the largest of them once rather than one
// per layer (ResNet-18 on 32 x 32 images: its convolutions' patch gradients, 75 MB a replica
// for each of stage 1's, about 530 MB a replica over all layers).
type transients struct {
	dcols, dw scratch
	// wu holds a Winograd convolution's transformed filters (compute.Winograder), made in the
	// forward pass for its products and again in the backward pass for the input gradient's.
	wu scratch
}

// scratch is a buffer of the backend that grows on demand and is reused between passes.
type scratch struct {
	buf compute.Buffer
	n   int
}

func get[T Float](o ops[T], s *scratch, n int) compute.Buffer {
	if s.buf == nil || s.n < n {
		if s.buf != nil {
			o.release(s.buf)
		}
		s.buf, s.n = o.alloc(max(n, 1)), n
	}
	return s.buf
}

// images views R replicas of activations of shape sh for B samples: one tensor shared by every
// replica when shared, else R of them one after another in buf.
func images(buf compute.Buffer, sh Shape, B, R int, shared bool) compute.Images {
	x := compute.Images{Buf: buf, C: sh.C, N: B, H: sh.H, W: sh.W, Batch: R, BatchStride: sh.Size() * B}
	if shared {
		x.BatchStride = 0
	}
	return x
}

// once is x for an operation that writes x: one batch element when x is shared.
func once(x compute.Images) compute.Images {
	if x.BatchStride == 0 {
		x.Batch = 1
	}
	return x
}

// flat views each replica of x as one row (for elementwise operations).
func flat(x compute.Images) compute.Mat {
	n := x.Size()
	return compute.Mat{Buf: x.Buf, Off: x.Off, Rows: 1, Cols: n, Stride: n, Batch: x.Batch, BatchStride: x.BatchStride}
}

// planes views each replica of x as the C x (N H W) matrix of its channels.
func planes(x compute.Images) compute.Mat {
	n := x.N * x.H * x.W
	return compute.Mat{Buf: x.Buf, Off: x.Off, Rows: x.C, Cols: n, Stride: n, Batch: x.Batch, BatchStride: x.BatchStride}
}

func flatOnce(x compute.Images) compute.Mat { return flat(once(x)) }

// layer is one replica-batched layer. forward computes the layer's output from x (a
// BatchStride of 0: one input shared by the replicas) into the layer's own memory and returns
// it, shared too when the layer has no parameters and x is shared; the views stay valid until
// the next forward. backward is given forward's x and y and dy, the gradient of y; it writes
// the gradient of the layer's parameters into the pass's dw (overwriting its range) and, when
// wantDX, returns dx, the gradient of x (never shared). It may overwrite dy.
type layer[T Float] interface {
	in() Shape
	out() Shape
	numParams() int
	setOffset(off int)
	init(w []T, rng *rand.Rand) // one replica's range of this layer
	// flops is the forward pass's floating-point operations for one sample: 2 per
	// multiply-add of the products, one per value for the elementwise work.
	flops() int64
	forward(c *pass[T], x compute.Images) compute.Images
	backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images
}

// ---- conv2d ----

// conv is a 2-D convolution (square kernel, stride, zero padding) computed as im2col followed
// by one strided-batched GEMM over the replicas. The bias rides in the same product: the
// patches get a last row of ones and the weights a last column holding the bias (a copy of
// the replica's weights and bias side by side, wb, Cout x (Cin k k + 1)), so neither the bias
// nor its gradient costs a pass of its own over the output. Where the weights outweigh the
// output and the backend asks for it (compute.BiasApart: the GPU's), the products read the
// weights in place and the bias is a product of its own instead. A backend with
// compute.DirectConvolver may take the layer instead (its DirectConv says so from the
// geometry): then the convolution and its gradients read the image and the parameters in place,
// and the layer makes neither patches nor weight copies.
type conv[T Float] struct {
	ish, osh        Shape
	win             compute.Window
	off             int
	cols, y, dx, wb scratch // the patch gradients and the weight gradient are pass.tmp's
	colsShared      bool
	colsHeld        bool // l.cols holds the patches of every replica (or the shared ones)
	// biasApart: the products read the weights where they lie in the parameters and the bias
	// is a product of its own (compute.BiasApart), so no [weights | bias] copies are made.
	biasApart bool
	// direct is the backend's convolution without patches when it takes this layer
	// (compute.DirectConvolver), else nil: then neither patches nor weight copies are made.
	direct compute.DirectConvolver
	// wino is the backend's Winograd convolution when it takes this layer
	// (compute.Winograder), in form winoTile, else nil: then l.cols holds the transformed
	// inputs, kept for the weight gradient, instead of the patches.
	wino     compute.Winograder
	winoTile compute.WinogradTile
	// onesAt is the patches' layout whose ones row is in place (buffer, columns, copies).
	onesAt struct {
		buf   compute.Buffer
		n, cb int
	}
}

func (l *conv[T]) in() Shape         { return l.ish }
func (l *conv[T]) out() Shape        { return l.osh }
func (l *conv[T]) numParams() int    { return l.osh.C*l.ckk() + l.osh.C }
func (l *conv[T]) setOffset(off int) { l.off = off }
func (l *conv[T]) ckk() int          { return l.ish.C * l.win.Size * l.win.Size }
func (l *conv[T]) flops() int64 {
	return int64(2*l.ckk()+1) * int64(l.osh.Size()) // the bias: one add per output
}

// init draws PyTorch's default (uniform on +-1/sqrt(fan_in) for weights and bias).
func (l *conv[T]) init(w []T, rng *rand.Rand) { uniformInit(w, l.ckk(), rng) }

func uniformInit[T Float](w []T, fanIn int, rng *rand.Rand) {
	a := 1 / math.Sqrt(float64(fanIn))
	for i := range w {
		w[i] = T((2*rng.Float64() - 1) * a)
	}
}

// patches views the im2col patches with their row of ones ((Cin k k + 1) x (B OH OW)) of
// count replicas: one matrix shared by the replicas when the input is shared (the first
// layer's client batch), else one per replica.
func (l *conv[T]) patches(c *pass[T], count int) compute.Mat {
	kk, n := l.ckk()+1, c.B*l.osh.H*l.osh.W
	m := compute.Mat{Buf: l.cols.buf, Rows: kk, Cols: n, Stride: n, Batch: count, BatchStride: kk * n}
	if l.colsShared {
		m.BatchStride = 0
	}
	return m
}

// patchRows is patches without their row of ones: Cin k k x (B OH OW).
func (l *conv[T]) patchRows(c *pass[T], count int) compute.Mat {
	m := l.patches(c, count)
	m.Rows--
	return m
}

// wbMat views the replicas' [weights | bias] copies (Cout x (Cin k k + 1)); weights only the
// first Cin k k columns.
func (l *conv[T]) wbMat(c *pass[T], buf compute.Buffer, weightsOnly bool) compute.Mat {
	co, kk := l.osh.C, l.ckk()
	m := compute.Mat{Buf: buf, Rows: co, Cols: kk + 1, Stride: kk + 1, Batch: c.R, BatchStride: co * (kk + 1)}
	if weightsOnly {
		m.Cols = kk
	}
	return m
}

// chunk is how many replicas' patches the backward pass makes and uses at a time: all of
// them, unless the backend asks for working sets of a cache's size (compute.CacheSized, the
// CPU backend) and a replica's patches (a convolution's input copied Cin k k times) are
// large. Per-replica patches of every replica at once (a second LeNet-5 convolution on 32
// samples: 1.9 MB per replica) would leave the cache before the products read them; a chunk
// is made and used by the weight and input gradients while the input is still in cache.
// Replicas are independent, so the chunk never changes a result.
func (l *conv[T]) chunk(c *pass[T]) int {
	if l.colsShared || c.cacheBytes <= 0 {
		return c.R
	}
	per := (l.ckk() + 1) * c.B * l.osh.H * l.osh.W * 4
	return max(1, min(c.R, c.cacheBytes/per))
}

// im2col makes the patches of replicas r0..r0+count-1 (or the shared ones) in l.cols.
func (l *conv[T]) im2col(c *pass[T], x compute.Images, r0, count int) {
	kk, n := l.ckk(), c.B*l.osh.H*l.osh.W
	cb := count
	if l.colsShared {
		cb = 1
	}
	buf := get(c.o, &l.cols, cb*(kk+1)*n)
	c.o.Im2col(sub(once(x), r0, cb), l.win, compute.Mat{Buf: buf, Rows: kk, Cols: n, Stride: n, Batch: cb, BatchStride: (kk + 1) * n})
	if l.onesAt.buf != buf || l.onesAt.n != n || l.onesAt.cb != cb {
		ones := c.onesRow(n)
		ones.Batch = cb
		c.o.axpby(1, ones, 0, compute.Mat{Buf: buf, Off: kk * n, Rows: 1, Cols: n, Stride: n, Batch: cb, BatchStride: (kk + 1) * n})
		l.onesAt.buf, l.onesAt.n, l.onesAt.cb = buf, n, cb
	}
}

func (l *conv[T]) forward(c *pass[T], x compute.Images) compute.Images {
	co, kk, n := l.osh.C, l.ckk(), c.B*l.osh.H*l.osh.W
	l.colsShared = x.BatchStride == 0
	l.direct, l.wino, l.winoTile = nil, nil, 0
	y := images(get(c.o, &l.y, c.R*co*n), l.osh, c.B, c.R, false)
	if wg := c.o.winograd(); wg != nil {
		if t := wg.Winograd(co, x, l.win); t != 0 {
			l.wino, l.winoTile = wg, t
			l.winoForward(c, x, y)
			return y
		}
	}
	if dc := c.o.directConv(); dc != nil && dc.DirectConv(co, x, l.win) {
		l.direct = dc
		dc.ConvDirect(c.param(l.off, co, kk), c.param(l.off+co*kk, co, 1), x, l.win, y)
		return y
	}
	l.biasApart = c.o.biasApart() && 4*(kk+1) > 3*n
	if l.biasApart {
		// The weights outweigh the output (ResNet-18's later stages: 512 x 4608 weights a
		// replica for 512 x 512 outputs): copying them beside the bias, and the gradient
		// back, moves more than a pass of the bias over the output does.
		l.im2col(c, x, 0, c.R)
		l.colsHeld = true
		c.o.gemm(false, false, 1, c.param(l.off, co, kk), l.patchRows(c, c.R), 0, planes(y))
		c.o.gemm(false, false, 1, c.param(l.off+co*kk, co, 1), c.onesRow(n), 1, planes(y))
		return y
	}
	wb := get(c.o, &l.wb, c.R*co*(kk+1))
	c.o.axpby(1, c.param(l.off, co, kk), 0, l.wbMat(c, wb, true))
	bias := l.wbMat(c, wb, false)
	bias.Off, bias.Cols = kk, 1
	c.o.axpby(1, c.param(l.off+co*kk, co, 1), 0, bias)
	if pg := c.o.patchGemmer(); pg != nil && !l.colsShared {
		// Per-replica patches are not written at all: the backend packs them from x for the
		// product, and the backward pass makes them (a chunk at a time) where it needs them.
		pg.ConvForward(l.wbMat(c, wb, false), x, l.win, planes(y))
		l.colsHeld = false
		return y
	}
	l.im2col(c, x, 0, c.R)
	l.colsHeld = true
	c.o.gemm(false, false, 1, l.wbMat(c, wb, false), l.patches(c, c.R), 0, planes(y))
	return y
}

func (l *conv[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	co, kk, n := l.osh.C, l.ckk(), c.B*l.osh.H*l.osh.W
	var dx compute.Images
	if wantDX {
		dx = images(get(c.o, &l.dx, c.R*l.ish.Size()*c.B), l.ish, c.B, c.R, false)
	}
	if l.direct != nil {
		l.direct.ConvDirectGrad(c.param(l.off, co, kk), x, l.win, dy, c.grad(l.off, co, kk), c.grad(l.off+co*kk, co, 1), dx)
		return dx
	}
	if l.wino != nil {
		l.winoBackward(c, dy, dx)
		return dx
	}
	dym := planes(dy)
	if l.biasApart {
		// The forward pass kept every replica's patches. Each gradient is written where it
		// lies, the weights' from the patches without their row of ones, the bias's as the
		// product of dy with a column of ones: the sums the [weights | bias] product makes.
		c.o.gemm(false, true, 1, dym, l.patchRows(c, c.R), 0, c.grad(l.off, co, kk))
		l.biasGrad(c, dym)
		if wantDX {
			dcols := compute.Mat{Buf: get(c.o, &c.tmp.dcols, c.R*kk*n), Rows: kk, Cols: n, Stride: n, Batch: c.R, BatchStride: kk * n}
			c.o.gemm(true, false, 1, c.param(l.off, co, kk), dym, 0, dcols)
			c.o.Col2im(dcols, l.win, dx)
		}
		return dx
	}
	dw := get(c.o, &c.tmp.dw, c.R*co*(kk+1))
	step := c.R // the forward pass's patches of every replica, when it wrote them
	if !l.colsHeld {
		step = l.chunk(c)
	}
	for r0 := 0; r0 < c.R; r0 += step {
		count := min(step, c.R-r0)
		if !l.colsHeld {
			l.im2col(c, x, r0, count)
		}
		c.o.gemm(false, true, 1, subMat(dym, r0, count), l.patches(c, count), 0, subMat(l.wbMat(c, dw, false), r0, count))
		if !wantDX {
			continue
		}
		dcols := compute.Mat{Buf: get(c.o, &c.tmp.dcols, count*kk*n), Rows: kk, Cols: n, Stride: n, Batch: count, BatchStride: kk * n}
		c.o.gemm(true, false, 1, subMat(l.wbMat(c, l.wb.buf, true), r0, count), subMat(dym, r0, count), 0, dcols)
		c.o.Col2im(dcols, l.win, sub(dx, r0, count))
	}
	c.o.axpby(1, l.wbMat(c, dw, true), 0, c.grad(l.off, co, kk))
	db := l.wbMat(c, dw, false)
	db.Off, db.Cols = kk, 1
	c.o.axpby(1, db, 0, c.grad(l.off+co*kk, co, 1))
	return dx
}

// winoMat views a transformed operand of a Winograd convolution (compute.Winograder) of
// form t: t.Positions() rows x cols matrices per replica, one after another.
func winoMat[T Float](c *pass[T], t compute.WinogradTile, buf compute.Buffer, rows, cols int) compute.Mat {
	return compute.Mat{Buf: buf, Rows: rows, Cols: cols, Stride: cols, Batch: t.Positions() * c.R, BatchStride: rows * cols}
}

// winoShapes is the transformed operands' sizes: the output channels, the input channels and
// the columns (tiles times samples).
func (l *conv[T]) winoShapes(c *pass[T]) (co, ci, cols int) {
	th, tw := l.winoTile.Grid(l.osh.H, l.osh.W)
	return l.osh.C, l.ish.C, th * tw * c.B
}

// winoForward computes the convolution by Winograd's form l.winoTile: the filters' and the
// input's transforms, their 16 (or 36) products per replica over the input channels in one
// call, and the
// output's transform with the bias, into y. The transformed input stays in l.cols for the
// weight gradient; the filters' transform and the products are transients.
func (l *conv[T]) winoForward(c *pass[T], x, y compute.Images) {
	co, ci, cols := l.winoShapes(c)
	t := l.winoTile
	tiles := t.Positions()
	u := winoMat(c, t, get(c.o, &c.tmp.wu, tiles*c.R*co*ci), co, ci)
	v := winoMat(c, t, get(c.o, &l.cols, tiles*c.R*ci*cols), ci, cols)
	m := winoMat(c, t, get(c.o, &c.tmp.dcols, tiles*c.R*co*cols), co, cols)
	l.wino.WinogradFilter(t, c.param(l.off, co, l.ckk()), u)
	l.wino.WinogradInput(t, x, v)
	c.o.gemm(false, false, 1, u, v, 0, m)
	l.wino.WinogradOutput(t, m, c.param(l.off+co*l.ckk(), co, 1), y)
	l.colsHeld = false // l.cols holds no patches, nor their row of ones
	l.onesAt.buf = nil
}

// biasGrad writes the bias gradient, where the bias is not a column of the product's weights:
// dy (Cout x B OH OW per replica) times a column of ones.
func (l *conv[T]) biasGrad(c *pass[T], dy compute.Mat) {
	co, kk := l.osh.C, l.ckk()
	c.o.gemm(false, false, 1, dy, c.onesCol(dy.Cols), 0, c.grad(l.off+co*kk, co, 1))
}

// winoBackward writes the gradients of winoForward's inputs given dy: the products' gradient
// dm = A dy A^T, the transformed filters' gradient dm v^T (over every tile and sample), the
// weights' from it, the bias's as the product of dy with a column of ones, and, with dx.Buf
// set, the transformed input's gradient u^T dm (into l.cols: the transformed input is not
// needed after the filters' gradient) and the input's from it.
func (l *conv[T]) winoBackward(c *pass[T], dy, dx compute.Images) {
	co, ci, cols := l.winoShapes(c)
	kk := l.ckk()
	t := l.winoTile
	tiles := t.Positions()
	dm := winoMat(c, t, get(c.o, &c.tmp.dcols, tiles*c.R*co*cols), co, cols)
	du := winoMat(c, t, get(c.o, &c.tmp.dw, tiles*c.R*co*ci), co, ci)
	v := winoMat(c, t, l.cols.buf, ci, cols)
	l.wino.WinogradOutputGrad(t, dy, dm)
	c.o.gemm(false, true, 1, dm, v, 0, du)
	l.wino.WinogradFilterGrad(t, du, c.grad(l.off, co, kk))
	l.biasGrad(c, planes(dy))
	if dx.Buf == nil {
		return
	}
	u := winoMat(c, t, get(c.o, &c.tmp.wu, tiles*c.R*co*ci), co, ci)
	l.wino.WinogradFilter(t, c.param(l.off, co, kk), u)
	c.o.gemm(true, false, 1, u, dm, 0, v)
	l.wino.WinogradInputGrad(t, v, dx)
}

// subMat and sub view batch elements r0..r0+count-1 of m and x (a shared operand stays
// shared).
func subMat(m compute.Mat, r0, count int) compute.Mat {
	m.Off += r0 * m.BatchStride
	m.Batch = count
	return m
}

func sub(x compute.Images, r0, count int) compute.Images {
	x.Off += r0 * x.BatchStride
	x.Batch = count
	return x
}

// ---- pooling ----

// pool is max or average pooling over square windows (padding: minus infinity for max
// pooling, zeros counted in the divisor for average pooling, as PyTorch's defaults).
type pool[T Float] struct {
	ish, osh Shape
	win      compute.Window
	kind     compute.Pooling
	y, dx    scratch
	// idx holds the window indices of the forward pass's max pooling where the backend keeps
	// them (compute.PoolIndexKeeper) and kept says that it did: the backward pass reads them
	// instead of finding each window's maximum again in x.
	idx  scratch
	kept bool
}

func (l *pool[T]) in() Shape            { return l.ish }
func (l *pool[T]) out() Shape           { return l.osh }
func (l *pool[T]) numParams() int       { return 0 }
func (l *pool[T]) setOffset(int)        {}
func (l *pool[T]) init([]T, *rand.Rand) {}
func (l *pool[T]) flops() int64         { return int64(l.win.Size*l.win.Size) * int64(l.osh.Size()) }

func (l *pool[T]) forward(c *pass[T], x compute.Images) compute.Images {
	shared := x.BatchStride == 0
	y := images(get(c.o, &l.y, c.R*l.osh.Size()*c.B), l.osh, c.B, c.R, shared)
	l.kept = false
	if k := c.o.poolKeeper(); k != nil && !shared {
		if n := k.PoolIndexLen(l.kind, l.win, x); n > 0 {
			k.PoolKeep(l.win, x, y, get(c.o, &l.idx, n))
			l.kept = true
			return y
		}
	}
	c.o.Pool(l.kind, l.win, x, once(y))
	return y
}

func (l *pool[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	if !wantDX {
		return compute.Images{}
	}
	dx := images(get(c.o, &l.dx, c.R*l.ish.Size()*c.B), l.ish, c.B, c.R, false)
	if l.kept {
		c.o.poolKeeper().PoolGradKept(l.win, x, l.idx.buf, dy, dx)
		return dx
	}
	c.o.PoolGrad(l.kind, l.win, x, dy, dx)
	return dx
}

// poolReLU is a max pooling and the ReLU after it (LeNet-5's two, once poolFirst has moved
// each ReLU after its pooling). On a backend with compute.PoolReLUKeeper that keeps the
// pooling's indices, both run in the pooling's passes and only the ReLU's output is kept (its
// backward pass reads the ReLU's rule from it); elsewhere it runs the two layers, with their
// own buffers and bits.
type poolReLU[T Float] struct {
	pool  *pool[T]
	relu  *act[T]
	pre   compute.Images // the pooling's output, when the two layers ran apart
	fused bool
}

func (l *poolReLU[T]) in() Shape            { return l.pool.ish }
func (l *poolReLU[T]) out() Shape           { return l.pool.osh }
func (l *poolReLU[T]) numParams() int       { return 0 }
func (l *poolReLU[T]) setOffset(int)        {}
func (l *poolReLU[T]) init([]T, *rand.Rand) {}
func (l *poolReLU[T]) flops() int64         { return l.pool.flops() + l.relu.flops() }

func (l *poolReLU[T]) forward(c *pass[T], x compute.Images) compute.Images {
	p := l.pool
	l.fused = false
	if k := c.o.poolReLU(); k != nil && x.BatchStride != 0 {
		if n := k.PoolIndexLen(p.kind, p.win, x); n > 0 {
			y := images(get(c.o, &l.relu.buf, c.R*p.osh.Size()*c.B), p.osh, c.B, c.R, false)
			k.PoolKeepReLU(p.win, x, y, get(c.o, &p.idx, n))
			l.fused = true
			return y
		}
	}
	l.pre = p.forward(c, x)
	return l.relu.forward(c, l.pre)
}

func (l *poolReLU[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	p := l.pool
	if !l.fused {
		l.relu.backward(c, l.pre, y, dy, true)
		return p.backward(c, x, l.pre, dy, wantDX)
	}
	if !wantDX {
		return compute.Images{}
	}
	dx := images(get(c.o, &p.dx, c.R*p.ish.Size()*c.B), p.ish, c.B, c.R, false)
	c.o.poolReLU().PoolGradKeptReLU(p.win, x, p.idx.buf, y, dy, dx)
	return dx
}

// fusePoolReLU returns the layers with every max pooling followed by a ReLU as one poolReLU.
func fusePoolReLU[T Float](ls []layer[T]) []layer[T] {
	var out []layer[T]
	for i := 0; i < len(ls); i++ {
		p, isPool := ls[i].(*pool[T])
		if i+1 < len(ls) && isPool && p.kind == compute.MaxPooling {
			if a, isAct := ls[i+1].(*act[T]); isAct && a.fn == compute.ReLU {
				out = append(out, &poolReLU[T]{pool: p, relu: a})
				i++
				continue
			}
		}
		out = append(out, ls[i])
	}
	return out
}

// ---- activations ----

// act is ReLU or tanh, elementwise; its backward pass scales dy in place.
type act[T Float] struct {
	sh  Shape
	fn  compute.Activation
	buf scratch
}

func (l *act[T]) in() Shape            { return l.sh }
func (l *act[T]) out() Shape           { return l.sh }
func (l *act[T]) numParams() int       { return 0 }
func (l *act[T]) setOffset(int)        {}
func (l *act[T]) init([]T, *rand.Rand) {}
func (l *act[T]) flops() int64         { return int64(l.sh.Size()) }

func (l *act[T]) forward(c *pass[T], x compute.Images) compute.Images {
	y := images(get(c.o, &l.buf, c.R*l.sh.Size()*c.B), l.sh, c.B, c.R, x.BatchStride == 0)
	c.o.activate(l.fn, flatOnce(x), flatOnce(y))
	return y
}

func (l *act[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	if !wantDX {
		return compute.Images{}
	}
	c.o.activateGrad(l.fn, flat(x), flat(y), flat(dy))
	return dy
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
	y, dx       scratch
	// stats holds the statistics of kept, the input of the last forward pass, on a backend
	// that keeps them for the gradient (compute.GroupNormStatsKeeper).
	stats scratch
	kept  compute.Images
}

const gnEps = 1e-5

func (l *groupNorm[T]) in() Shape         { return l.sh }
func (l *groupNorm[T]) out() Shape        { return l.sh }
func (l *groupNorm[T]) numParams() int    { return 2 * l.sh.C }
func (l *groupNorm[T]) setOffset(off int) { l.off = off }
func (l *groupNorm[T]) flops() int64      { return 4 * int64(l.sh.Size()) } // statistics, then a x + b
func (l *groupNorm[T]) init(w []T, _ *rand.Rand) {
	for c := 0; c < l.sh.C; c++ {
		w[c], w[l.sh.C+c] = 1, 0
	}
}

func (l *groupNorm[T]) forward(c *pass[T], x compute.Images) compute.Images {
	y := images(get(c.o, &l.y, c.R*l.sh.Size()*c.B), l.sh, c.B, c.R, false)
	l.normalize(c, x, y, false)
	return y
}

// normalize writes GroupNorm(x), or with relu its ReLU (compute.GroupNormReLUer), into y, and
// keeps x's statistics for the gradient where the backend can.
func (l *groupNorm[T]) normalize(c *pass[T], x, y compute.Images, relu bool) {
	C := l.sh.C
	gamma, beta := c.param(l.off, 1, C), c.param(l.off+C, 1, C)
	l.kept = compute.Images{}
	switch k := c.o.gnKeeper(); {
	case k != nil:
		k.GroupNormKeep(l.groups, gnEps, x, gamma, beta, y, relu, get(c.o, &l.stats, k.GroupNormStatsLen(l.groups, x)))
		l.kept = x
	case relu:
		c.o.gnReLU().GroupNormReLU(l.groups, gnEps, x, gamma, beta, y)
	default:
		c.o.GroupNorm(l.groups, gnEps, x, gamma, beta, y)
	}
}

func (l *groupNorm[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	return l.gradient(c, x, compute.Images{}, dy, wantDX)
}

// gradient writes GroupNorm's gradients given dy, or with relu.Buf set (the ReLU's output) those
// of GroupNorm then the ReLU (compute.GroupNormReLUer), from the statistics the forward pass
// kept where it kept them for this x.
func (l *groupNorm[T]) gradient(c *pass[T], x, relu, dy compute.Images, wantDX bool) compute.Images {
	C := l.sh.C
	var dx compute.Images
	if wantDX {
		dx = images(get(c.o, &l.dx, c.R*l.sh.Size()*c.B), l.sh, c.B, c.R, false)
	}
	gamma, dgamma, dbeta := c.param(l.off, 1, C), c.grad(l.off, 1, C), c.grad(l.off+C, 1, C)
	switch k := c.o.gnKeeper(); {
	case k != nil && l.kept == x:
		k.GroupNormGradKept(l.groups, gnEps, x, gamma, relu, dy, dx, dgamma, dbeta, l.stats.buf)
	case relu.Buf != nil:
		c.o.gnReLU().GroupNormReLUGrad(l.groups, gnEps, x, gamma, relu, dy, dx, dgamma, dbeta)
	default:
		c.o.GroupNormGrad(l.groups, gnEps, x, gamma, dy, dx, dgamma, dbeta)
	}
	return dx
}

// gnReLU is a GroupNorm and the ReLU after it (ResNet's stem and the first of each block's
// two). On a backend with compute.GroupNormReLUer both run in GroupNorm's passes and only the
// ReLU's output is kept (its backward pass reads the ReLU's rule from it); elsewhere it runs
// the two layers, with their own buffers and bits.
type gnReLU[T Float] struct {
	gn   *groupNorm[T]
	relu *act[T]
	pre  compute.Images // the GroupNorm's output, when the two layers ran apart
}

func (l *gnReLU[T]) in() Shape                  { return l.gn.sh }
func (l *gnReLU[T]) out() Shape                 { return l.gn.sh }
func (l *gnReLU[T]) numParams() int             { return l.gn.numParams() }
func (l *gnReLU[T]) setOffset(off int)          { l.gn.setOffset(off) }
func (l *gnReLU[T]) flops() int64               { return l.gn.flops() + l.relu.flops() }
func (l *gnReLU[T]) init(w []T, rng *rand.Rand) { l.gn.init(w, rng) }

func (l *gnReLU[T]) forward(c *pass[T], x compute.Images) compute.Images {
	f := c.o.gnReLU()
	if f == nil {
		l.pre = l.gn.forward(c, x)
		return l.relu.forward(c, l.pre)
	}
	g := l.gn
	y := images(get(c.o, &l.relu.buf, c.R*g.sh.Size()*c.B), g.sh, c.B, c.R, false)
	g.normalize(c, x, y, true)
	return y
}

func (l *gnReLU[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	f := c.o.gnReLU()
	if f == nil {
		l.relu.backward(c, l.pre, y, dy, true)
		return l.gn.backward(c, x, l.pre, dy, wantDX)
	}
	return l.gn.gradient(c, x, y, dy, wantDX)
}

// fuseGroupNormReLU returns the layers with every GroupNorm followed by a ReLU as one gnReLU.
func fuseGroupNormReLU[T Float](ls []layer[T]) []layer[T] {
	var out []layer[T]
	for i := 0; i < len(ls); i++ {
		g, isGN := ls[i].(*groupNorm[T])
		if i+1 < len(ls) && isGN {
			if a, isAct := ls[i+1].(*act[T]); isAct && a.fn == compute.ReLU {
				out = append(out, &gnReLU[T]{gn: g, relu: a})
				i++
				continue
			}
		}
		out = append(out, ls[i])
	}
	return out
}

// ---- global average pooling and flatten ----

// gap averages each channel over its pixels: C x H x W -> C x 1 x 1, for each channel a product
// of a row of ones with its (H W) x N pixels.
type gap[T Float] struct {
	ish   Shape
	y, dx scratch
}

func (l *gap[T]) in() Shape            { return l.ish }
func (l *gap[T]) out() Shape           { return Shape{l.ish.C, 1, 1} }
func (l *gap[T]) numParams() int       { return 0 }
func (l *gap[T]) setOffset(int)        {}
func (l *gap[T]) init([]T, *rand.Rand) {}
func (l *gap[T]) flops() int64         { return int64(l.ish.Size()) }

// channelMats views the channels of x and y as batches of matrices for the products of gap:
// channel c of x as an xr x N matrix (its pixels' runs of samples) and of y as yr x N, batched
// over (replica, channel) when all is set (the replicas lie one after another), else over the
// channels of replica r only.
func channelMats(x compute.Images, xr int, y compute.Images, yr int, r int, all bool) (compute.Mat, compute.Mat) {
	N := x.N
	xm := compute.Mat{Buf: x.Buf, Off: x.Off, Rows: xr, Cols: N, Stride: N, Batch: x.C, BatchStride: xr * N}
	ym := compute.Mat{Buf: y.Buf, Off: y.Off, Rows: yr, Cols: N, Stride: N, Batch: y.C, BatchStride: yr * N}
	if all {
		xm.Batch *= x.Batch
		ym.Batch = xm.Batch
		return xm, ym
	}
	xm.Off += r * x.BatchStride
	ym.Off += r * y.BatchStride
	return xm, ym
}

// contiguous reports whether x's replicas lie one after another (or x is one shared tensor
// viewed once), so that (replica, channel) is one batch of uniform stride.
func contiguous(x compute.Images) bool {
	return x.Batch == 1 || x.BatchStride == x.Size()
}

func (l *gap[T]) forward(c *pass[T], x compute.Images) compute.Images {
	hw := l.ish.H * l.ish.W
	y := once(images(get(c.o, &l.y, c.R*l.ish.C*c.B), l.out(), c.B, c.R, x.BatchStride == 0))
	xo := once(x)
	l.each(c, xo, hw, y, 1, func(xm, ym compute.Mat) {
		ones := c.onesRow(hw)
		ones.Batch = xm.Batch
		c.o.gemm(false, false, 1/T(hw), ones, xm, 0, ym)
	})
	y.Batch = c.R
	return y
}

// each calls fn with the (replica, channel) batches of x (xr x N per channel) and y (yr x N).
func (l *gap[T]) each(c *pass[T], x compute.Images, xr int, y compute.Images, yr int, fn func(xm, ym compute.Mat)) {
	if contiguous(x) && contiguous(y) {
		fn(channelMats(x, xr, y, yr, 0, true))
		return
	}
	for r := 0; r < y.Batch; r++ {
		fn(channelMats(x, xr, y, yr, r, false))
	}
}

func (l *gap[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	if !wantDX {
		return compute.Images{}
	}
	hw := l.ish.H * l.ish.W
	dx := images(get(c.o, &l.dx, c.R*l.ish.Size()*c.B), l.ish, c.B, c.R, false)
	l.each(c, dx, hw, dy, 1, func(dxm, dym compute.Mat) {
		ones := c.onesCol(hw)
		ones.Batch = dxm.Batch
		c.o.gemm(false, false, 1/T(hw), ones, dym, 0, dxm)
	})
	return dx
}

// flatten turns C x H x W images into features C*H*W x 1 x 1 (feature index (c*H + y)*W + x,
// the order of PyTorch's flatten of an NCHW tensor, so dense weights match nn.Linear's): with
// the samples innermost ([C][H][W][N]) that is the same memory, so it copies nothing.
type flatten[T Float] struct{ ish Shape }

func (l *flatten[T]) in() Shape            { return l.ish }
func (l *flatten[T]) out() Shape           { return Shape{l.ish.Size(), 1, 1} }
func (l *flatten[T]) numParams() int       { return 0 }
func (l *flatten[T]) setOffset(int)        {}
func (l *flatten[T]) init([]T, *rand.Rand) {}
func (l *flatten[T]) flops() int64         { return 0 }

func (l *flatten[T]) forward(c *pass[T], x compute.Images) compute.Images {
	x.C, x.H, x.W = l.ish.Size(), 1, 1
	return x
}

func (l *flatten[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	if !wantDX {
		return compute.Images{}
	}
	dy.C, dy.H, dy.W = l.ish.C, l.ish.H, l.ish.W
	return dy
}

// ---- dense ----

// dense is y = W x + b on features (input F x 1 x 1): per replica Y_r (out x B) = W_r X_r.
type dense[T Float] struct {
	ish       Shape
	outF, off int
	y, dx     scratch
}

func (l *dense[T]) in() Shape                  { return l.ish }
func (l *dense[T]) out() Shape                 { return Shape{l.outF, 1, 1} }
func (l *dense[T]) numParams() int             { return l.outF*l.ish.C + l.outF }
func (l *dense[T]) setOffset(off int)          { l.off = off }
func (l *dense[T]) flops() int64               { return int64(2*l.ish.C+1) * int64(l.outF) }
func (l *dense[T]) init(w []T, rng *rand.Rand) { uniformInit(w, l.ish.C, rng) }

func (l *dense[T]) forward(c *pass[T], x compute.Images) compute.Images {
	y := l.product(c, x)
	ym := planes(y)
	if cb := c.o.columnBias(); cb != nil {
		cb.AddColumn(ym, l.bias(c))
	} else {
		c.o.gemm(false, false, 1, l.bias(c), c.onesRow(c.B), 1, ym)
	}
	return y
}

// product returns W x in the layer's output buffer: the forward pass but for the bias.
func (l *dense[T]) product(c *pass[T], x compute.Images) compute.Images {
	F, O := l.ish.C, l.outF
	y := images(get(c.o, &l.y, c.R*O*c.B), l.out(), c.B, c.R, false)
	c.o.gemm(false, false, 1, c.param(l.off, O, F), planes(x), 0, planes(y))
	return y
}

// bias and biasGrad view the replicas' bias and its gradient (out x 1).
func (l *dense[T]) bias(c *pass[T]) compute.Mat {
	return c.param(l.off+l.outF*l.ish.C, l.outF, 1)
}

func (l *dense[T]) biasGrad(c *pass[T]) compute.Mat {
	return c.grad(l.off+l.outF*l.ish.C, l.outF, 1)
}

func (l *dense[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	dym := planes(dy)
	if cb := c.o.columnBias(); cb != nil {
		cb.SumColumns(dym, l.biasGrad(c))
	} else {
		c.o.gemm(false, false, 1, dym, c.onesCol(c.B), 0, l.biasGrad(c))
	}
	return l.backwardProducts(c, x, dym, wantDX)
}

// backwardProducts writes the weight gradient dy x^T and returns dx = W^T dy when wantDX: the
// backward pass but for the bias.
func (l *dense[T]) backwardProducts(c *pass[T], x compute.Images, dym compute.Mat, wantDX bool) compute.Images {
	F, O := l.ish.C, l.outF
	c.o.gemm(false, true, 1, dym, planes(x), 0, c.grad(l.off, O, F))
	if !wantDX {
		return compute.Images{}
	}
	dx := images(get(c.o, &l.dx, c.R*F*c.B), l.ish, c.B, c.R, false)
	c.o.gemm(true, false, 1, c.param(l.off, O, F), dym, 0, planes(dx))
	return dx
}

// denseAct is a dense layer and the activation after it (LeNet-5's first two dense layers). On
// a backend with compute.ColumnBiaser the bias and the activation run in one pass and the
// activation's gradient and the bias gradient in another (AddColumnActivate,
// ActivateGradSumColumns: the bits of the pairs they stand for); elsewhere it runs the two
// layers. Either way the dense layer's output is kept as the activation's input.
type denseAct[T Float] struct {
	dense *dense[T]
	act   *act[T]
	pre   compute.Images // the dense layer's output
	fused bool
}

func (l *denseAct[T]) in() Shape                  { return l.dense.ish }
func (l *denseAct[T]) out() Shape                 { return l.dense.out() }
func (l *denseAct[T]) numParams() int             { return l.dense.numParams() }
func (l *denseAct[T]) setOffset(off int)          { l.dense.setOffset(off) }
func (l *denseAct[T]) init(w []T, rng *rand.Rand) { l.dense.init(w, rng) }
func (l *denseAct[T]) flops() int64               { return l.dense.flops() + l.act.flops() }

func (l *denseAct[T]) forward(c *pass[T], x compute.Images) compute.Images {
	cb := c.o.columnBias()
	l.fused = cb != nil
	if !l.fused {
		l.pre = l.dense.forward(c, x)
		return l.act.forward(c, l.pre)
	}
	d := l.dense
	l.pre = d.product(c, x)
	y := images(get(c.o, &l.act.buf, c.R*d.outF*c.B), d.out(), c.B, c.R, false)
	cb.AddColumnActivate(l.act.fn, planes(l.pre), d.bias(c), planes(y))
	return y
}

func (l *denseAct[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	if !l.fused {
		l.act.backward(c, l.pre, y, dy, true)
		return l.dense.backward(c, x, l.pre, dy, wantDX)
	}
	dym := planes(dy)
	c.o.columnBias().ActivateGradSumColumns(l.act.fn, planes(l.pre), planes(y), dym, l.dense.biasGrad(c))
	return l.dense.backwardProducts(c, x, dym, wantDX)
}

// fuseDenseAct returns the layers with every dense layer followed by an activation as one
// denseAct.
func fuseDenseAct[T Float](ls []layer[T]) []layer[T] {
	var out []layer[T]
	for i := 0; i < len(ls); i++ {
		if d, isDense := ls[i].(*dense[T]); isDense && i+1 < len(ls) {
			if a, isAct := ls[i+1].(*act[T]); isAct {
				out = append(out, &denseAct[T]{dense: d, act: a})
				i++
				continue
			}
		}
		out = append(out, ls[i])
	}
	return out
}
