package cuda

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

var _ compute.Convolver = (*Ops)(nil)

// GroupNormPartials is the number of float64 partial sums per group of GroupNorm's statistics
// (kernels.GroupNormPartials); its gradients' sums take kernels.GroupNormGradScratch.
const GroupNormPartials = kernels.GroupNormPartials

// imgAddr is the device address of x's element (0, 0, 0, 0) of batch element 0, or 0 without a
// buffer.
func imgAddr(x compute.Images) uint64 {
	if x.Buf == nil {
		return 0
	}
	return x.Buf.(*buffer).addr + 4*uint64(x.Off)
}

// span is the range of floats [lo, hi) of a buffer that a view reaches (empty for an empty
// view).
type span struct {
	buf    compute.Buffer
	lo, hi int
}

func matSpan(m compute.Mat) span {
	if m.Buf == nil || m.Batch <= 0 || m.Rows <= 0 || m.Cols <= 0 {
		return span{}
	}
	return span{m.Buf, m.Off, m.Off + (m.Batch-1)*m.BatchStride + (m.Rows-1)*m.Stride + m.Cols}
}

func imgSpan(x compute.Images) span {
	if x.Buf == nil || x.Batch <= 0 || x.Size() <= 0 {
		return span{}
	}
	return span{x.Buf, x.Off, x.Off + (x.Batch-1)*x.BatchStride + x.Size()}
}

// apart fails the backend when the output of operation op reaches floats that one of its
// inputs reaches. The image kernels take their pointers as __restrict__, so that a thread
// issues its loads before its stores (without it the compiler must assume that each store
// may change the next load's value: a load, a store, a load, ... each waiting for the last);
// with an overlap their results would depend on the schedule. compute.Convolver rules it out.
func (o *Ops) apart(op string, out span, in ...span) bool {
	if o.err != nil {
		return false
	}
	for _, x := range in {
		if out.buf != nil && x.buf == out.buf && x.lo < out.hi && out.lo < x.hi {
			o.fail(op, fmt.Errorf("the output (floats %d to %d of its buffer) overlaps an input (%d to %d)", out.lo, out.hi, x.lo, x.hi))
			return false
		}
	}
	return true
}

// planeFits fails the backend when a channel of x (H W N values) is too large for the pooling
// and Winograd kernels, which index a channel with 32-bit offsets: a 64-bit product and sum
// per pixel were most of their loops' instructions.
func (o *Ops) planeFits(op string, x compute.Images) bool {
	if o.err != nil {
		return false
	}
	if plane := int64(x.H) * int64(x.W) * int64(x.N); plane > math.MaxInt32 {
		o.fail(op, fmt.Errorf("a channel of %d x %d pixels of %d samples holds %d values, more than the image kernels' 32-bit offsets reach (%d)", x.H, x.W, x.N, plane, math.MaxInt32))
		return false
	}
	return true
}

// geom passes an image geometry and window: C, N, H, W, K, S, P, OH, OW.
func (a *args) geom(x compute.Images, w compute.Window) *args {
	return a.i64(x.C).i64(x.N).i64(x.H).i64(x.W).i64(w.Size).i64(w.Stride).i64(w.Pad).i64(w.Out(x.H)).i64(w.Out(x.W))
}

// rowGroup is how many threads share a row of n samples in the image kernels (GROUP_STRIDE_MD
// in conv.cu): the largest power of two up to Options.RowGroup that is at most n and divides
// the block size, so that every group is whole. The row's coordinates are computed once per
// group and each thread then handles n / group samples; each value is computed the same way
// whatever the group.
func (o *Ops) rowGroup(n int) int { return o.groupUpTo(n, o.rowGroupMax) }

// groupUpTo is the largest power of two up to limit that is at most n and divides the block
// size: the threads of a group sharing one row's work.
func (o *Ops) groupUpTo(n, limit int) int {
	g := 1
	for 2*g <= min(n, limit) && o.block%(2*g) == 0 {
		g *= 2
	}
	return g
}

// defaultRowGroup is 8 threads to a row: 8 adjacent samples are one 32-byte memory sector, so
// a warp's accesses stay whole sectors, while a row of 32 samples (W2 and W3's minibatch) gives
// each thread 4 values for one computation of the row's coordinates. With 32 threads to a row
// (one value a thread) the index arithmetic was most of the image kernels' instructions.
const defaultRowGroup = 8

// launchRows launches an image kernel over rows rows of n samples, a group of threads per row.
// The group size is the kernel's last argument.
func (o *Ops) launchRows(k kernels.Kernel, rows, n int) { o.launchGroups(k, rows, o.rowGroup(n)) }

// launchGroups launches k over rows rows, a group of g threads per row, g its last argument.
func (o *Ops) launchGroups(k kernels.Kernel, rows, g int) {
	o.args.i64(g)
	o.launchLight(k, rows*g)
}

// Im2col implements compute.Convolver in one launch: at stride 1, im2col_rows, a group of
// threads per run of a patch row's OW N values (its output positions read adjacent input
// pixels); else im2col, a group of threads per row of N samples of cols.
func (o *Ops) Im2col(x compute.Images, w compute.Window, cols compute.Mat) {
	if !o.apart("im2col", matSpan(cols), imgSpan(x)) {
		return
	}
	if w.Stride == 1 {
		oh, ow := w.Out(x.H), w.Out(x.W)
		o.args.reset().ptr(addr(cols)).i64(cols.Stride).i64(cols.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).
			i64(x.C).i64(x.N).i64(x.H).i64(x.W).i64(w.Size).i64(w.Pad).i64(oh).i64(ow).i64(cols.Batch)
		// A warp a run: a run is OW N values, not a row of N samples.
		o.launchGroups(kernels.Im2colRows, cols.Batch*x.C*w.Size*w.Size*oh, o.groupUpTo(ow*x.N, 32))
		return
	}
	rows := cols.Batch * x.C * w.Size * w.Size * w.Out(x.H) * w.Out(x.W)
	o.args.reset().ptr(addr(cols)).i64(cols.Stride).i64(cols.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).
		geom(x, w).i64(cols.Batch)
	o.launchRows(kernels.Im2col, rows, x.N)
}

// Col2im implements compute.Convolver: each pixel of dx gathers what reaches it, in the
// contract's order, a group of threads per pixel's N samples; one launch.
func (o *Ops) Col2im(cols compute.Mat, w compute.Window, dx compute.Images) {
	if !o.apart("col2im", imgSpan(dx), matSpan(cols)) {
		return
	}
	o.args.reset().ptr(imgAddr(dx)).i64(dx.BatchStride).ptr(addr(cols)).i64(cols.Stride).i64(cols.BatchStride).
		geom(dx, w).i64(dx.Batch)
	o.launchRows(kernels.Col2im, dx.Batch*dx.C*dx.H*dx.W, dx.N)
}

func avgFlag(p compute.Pooling) uint32 {
	if p == compute.AvgPooling {
		return 1
	}
	return 0
}

// Pool implements compute.Convolver: a group of threads per output pixel's N samples, one
// launch.
func (o *Ops) Pool(p compute.Pooling, w compute.Window, x, y compute.Images) {
	o.pool("pool", p, w, x, y, 0, false)
}

// pool launches pool, with the window indices written at idx unless it is 0, and the ReLU
// applied to the maxima with relu.
func (o *Ops) pool(op string, p compute.Pooling, w compute.Window, x, y compute.Images, idx uint64, relu bool) {
	if !o.planeFits(op, x) || !o.apart(op, imgSpan(y), imgSpan(x)) {
		return
	}
	var r uint32
	if relu {
		r = 1
	}
	o.args.reset().u32(avgFlag(p)).ptr(imgAddr(y)).i64(y.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).ptr(idx).u32(r).
		geom(x, w).i64(y.Batch)
	o.launchRows(kernels.Pool, y.Batch*y.C*y.H*y.W, y.N)
}

var _ compute.PoolIndexKeeper = (*Ops)(nil)

// PoolIndexLen implements compute.PoolIndexKeeper: a byte a window and sample (four to a
// float32 unit) for max pooling whose windows tile x and hold at most 256 pixels, else 0.
func (o *Ops) PoolIndexLen(p compute.Pooling, w compute.Window, x compute.Images) int {
	if !compute.IndexablePooling(p, w, x) {
		return 0
	}
	return kernels.PoolIndexFloats(x.Batch, x.C, w.Out(x.H), w.Out(x.W), x.N)
}

// keptIndex is the device address of a window index buffer for x, or 0 (and the backend
// failed) where the pooling keeps none or the buffer is too short.
func (o *Ops) keptIndex(op string, w compute.Window, x compute.Images, idx compute.Buffer) uint64 {
	need := o.PoolIndexLen(compute.MaxPooling, w, x)
	switch {
	case o.err != nil:
		return 0
	case need == 0:
		o.fail(op, fmt.Errorf("window %+v over %d x %d pixels: no window indices kept (max pooling whose windows tile the image)", w, x.H, x.W))
		return 0
	}
	return o.keptAddr(op, "an index buffer", "PoolIndexLen", idx, need)
}

// PoolKeep implements compute.PoolIndexKeeper: Pool's launch, max pooling, with each window's
// first maximum's place written into idx.
func (o *Ops) PoolKeep(w compute.Window, x, y compute.Images, idx compute.Buffer) {
	if a := o.keptIndex("pool keeping its indices", w, x, idx); a != 0 {
		o.pool("pool keeping its indices", compute.MaxPooling, w, x, y, a, false)
	}
}

// PoolGradKept implements compute.PoolIndexKeeper: pool_grad_kept, a group of threads per
// window, reading its maximum's place from idx instead of x.
func (o *Ops) PoolGradKept(w compute.Window, x compute.Images, idx compute.Buffer, dy, dx compute.Images) {
	o.poolGradKept("pool gradient from kept indices", w, x, idx, compute.Images{}, dy, dx)
}

// poolGradKept launches pool_grad_kept, passing dy back through the ReLU whose output is y
// first where y.Buf is not nil.
func (o *Ops) poolGradKept(op string, w compute.Window, x compute.Images, idx compute.Buffer, y, dy, dx compute.Images) {
	a := o.keptIndex(op, w, x, idx)
	in := []span{imgSpan(dy)}
	if y.Buf != nil {
		in = append(in, imgSpan(y))
	}
	if a == 0 || !o.planeFits(op, x) || !o.apart(op, imgSpan(dx), in...) {
		return
	}
	oh, ow := w.Out(x.H), w.Out(x.W)
	o.args.reset().ptr(imgAddr(dx)).i64(dx.BatchStride).ptr(a).ptr(imgAddr(dy)).i64(dy.BatchStride).
		ptr(imgAddr(y)).i64(y.BatchStride).i64(x.C).i64(x.N).i64(x.H).i64(x.W).i64(w.Size).i64(oh).i64(ow).i64(dx.Batch)
	o.launchRows(kernels.PoolGradKept, dx.Batch*dx.C*oh*ow, dx.N)
}

var _ compute.PoolReLUKeeper = (*Ops)(nil)

// PoolKeepReLU implements compute.PoolReLUKeeper: PoolKeep's launch with the ReLU applied to
// each maximum before it is written.
func (o *Ops) PoolKeepReLU(w compute.Window, x, y compute.Images, idx compute.Buffer) {
	if a := o.keptIndex("pool and ReLU keeping its indices", w, x, idx); a != 0 {
		o.pool("pool and ReLU keeping its indices", compute.MaxPooling, w, x, y, a, true)
	}
}

// PoolGradKeptReLU implements compute.PoolReLUKeeper: PoolGradKept's launch, dy passed back
// through the ReLU (read from y) as it is read.
func (o *Ops) PoolGradKeptReLU(w compute.Window, x compute.Images, idx compute.Buffer, y, dy, dx compute.Images) {
	if y.Buf == nil {
		o.fail("pool and ReLU gradient from kept indices", fmt.Errorf("no ReLU output given"))
		return
	}
	o.poolGradKept("pool and ReLU gradient from kept indices", w, x, idx, y, dy, dx)
}

// PoolGrad implements compute.Convolver: each pixel of dx adds what the windows containing it
// send (max pooling recomputes each window's first maximum), a group of threads per pixel's N
// samples; one launch. Max pooling whose windows tile the image exactly (LeNet-5's) runs
// pool_grad_tiled instead, a group per window, with the same bits.
func (o *Ops) PoolGrad(p compute.Pooling, w compute.Window, x, dy, dx compute.Images) {
	if !o.planeFits("pool gradient", x) || !o.apart("pool gradient", imgSpan(dx), imgSpan(x), imgSpan(dy)) {
		return
	}
	oh, ow := w.Out(x.H), w.Out(x.W)
	if p == compute.MaxPooling && w.Tiles(x.H, x.W) {
		o.args.reset().ptr(imgAddr(dx)).i64(dx.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).
			ptr(imgAddr(dy)).i64(dy.BatchStride).i64(x.C).i64(x.N).i64(x.H).i64(x.W).i64(w.Size).
			i64(oh).i64(ow).i64(dx.Batch)
		o.launchRows(kernels.PoolGradTiled, dx.Batch*dx.C*oh*ow, dx.N)
		return
	}
	o.args.reset().u32(avgFlag(p)).ptr(imgAddr(dx)).i64(dx.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).
		ptr(imgAddr(dy)).i64(dy.BatchStride).geom(x, w).i64(dx.Batch)
	o.launchRows(kernels.PoolGrad, dx.Batch*dx.C*dx.H*dx.W, dx.N)
}

// Transpose implements compute.Convolver: one thread per value of dst, one launch.
func (o *Ops) Transpose(block int, src, dst compute.Mat) {
	if !o.apart("transpose", matSpan(dst), matSpan(src)) {
		return
	}
	o.args.reset().ptr(addr(dst)).i64(dst.Stride).i64(dst.BatchStride).ptr(addr(src)).i64(src.Stride).i64(src.BatchStride).
		i64(src.Rows).i64(src.Cols).i64(block).i64(dst.Batch)
	o.launch(kernels.TransposeBlocks, dst.Batch*src.Rows*src.Cols*block)
}

// gnScratch checks the group count and grows the scratch of GroupNorm's sums and statistics
// for batch batch elements of x. It returns rows = batch N groups, or 0 when there is nothing to
// do or an error.
func (o *Ops) gnScratch(op string, groups int, x compute.Images, batch int) (rows int) {
	if o.err != nil || batch <= 0 || x.Size() <= 0 {
		return 0
	}
	if groups <= 0 || x.C%groups != 0 {
		o.fail(op, fmt.Errorf("%d channels do not split into %d groups", x.C, groups))
		return 0
	}
	rows = batch * x.N * groups
	o.grow(&o.part, max(2*rows*GroupNormPartials, kernels.GroupNormGradScratch(batch, x.C, x.N, x.H*x.W)))
	o.grow(&o.gn, 4*rows)
	return rows
}

// groupStats writes the statistics of every (batch element, group, sample) of x at stats: the
// means, then the rstd rows values later, in float64 (two launches: the partial sums, then their
// reduction). gnScratch has grown the scratch.
func (o *Ops) groupStats(groups int, eps float32, x compute.Images, batch, rows int, stats uint64) {
	cg, hw := x.C/groups, x.H*x.W
	o.args.reset().ptr(o.part.addr).ptr(imgAddr(x)).i64(x.BatchStride).i64(cg).i64(x.N).i64(hw).i64(groups).
		i64(GroupNormPartials).i64(batch)
	o.launch(kernels.GNStatsPartials, rows*GroupNormPartials)
	o.args.reset().ptr(stats).ptr(o.part.addr).i64(rows).i64(GroupNormPartials).i64(cg * hw).f32(eps)
	o.launch(kernels.GNStats, rows)
}

// GroupNorm implements compute.Convolver in three launches: partial sums of x and x^2 per
// group, the statistics, then y.
func (o *Ops) GroupNorm(groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images) {
	o.groupNorm("groupnorm", groups, eps, x, gamma, beta, y, false, nil)
}

var _ compute.GroupNormReLUer = (*Ops)(nil)

// GroupNormReLU implements compute.GroupNormReLUer: GroupNorm's launches, the ReLU applied by
// gn_forward as it writes y.
func (o *Ops) GroupNormReLU(groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images) {
	o.groupNorm("groupnorm and relu", groups, eps, x, gamma, beta, y, true, nil)
}

var _ compute.GroupNormStatsKeeper = (*Ops)(nil)

// GroupNormStatsLen implements compute.GroupNormStatsKeeper: the float64 mean and rstd of every
// (batch element, group, sample), as float32 units.
func (o *Ops) GroupNormStatsLen(groups int, x compute.Images) int {
	return kernels.GroupNormStatsFloats(x.Batch, x.N, groups)
}

// GroupNormKeep implements compute.GroupNormStatsKeeper: GroupNorm's launches with the
// statistics written into stats instead of the backend's scratch.
func (o *Ops) GroupNormKeep(groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images, relu bool, stats compute.Buffer) {
	o.groupNorm("groupnorm keeping its statistics", groups, eps, x, gamma, beta, y, relu, stats)
}

// GroupNormGradKept implements compute.GroupNormStatsKeeper: GroupNormGrad's launches without
// the two of the statistics, which it reads from stats.
func (o *Ops) GroupNormGradKept(groups int, eps float32, x compute.Images, gamma compute.Mat, relu, dy, dx compute.Images, dgamma, dbeta compute.Mat, stats compute.Buffer) {
	o.groupNormGrad("groupnorm gradient from kept statistics", groups, eps, x, gamma, relu, dy, dx, dgamma, dbeta, stats)
}

// keptStats is the device address of a kept statistics buffer for batch elements of x, or 0
// (and the backend failed) where it is too short.
func (o *Ops) keptStats(op string, stats compute.Buffer, groups int, x compute.Images, batch int) uint64 {
	return o.keptAddr(op, "a statistics buffer", "GroupNormStatsLen", stats, kernels.GroupNormStatsFloats(batch, x.N, groups))
}

// keptAddr is the device address of a buffer of the caller's kept from a forward pass for its
// backward pass, or 0 (and the backend failed, naming the buffer as what and the method that
// gives its length) where it is shorter than need.
func (o *Ops) keptAddr(op, what, lenMethod string, b compute.Buffer, need int) uint64 {
	if b == nil || b.Len() < need {
		n := 0
		if b != nil {
			n = b.Len()
		}
		o.fail(op, fmt.Errorf("%s of %d values, %d needed (%s)", what, n, need, lenMethod))
		return 0
	}
	return b.(*buffer).addr
}

func (o *Ops) groupNorm(op string, groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images, relu bool, keep compute.Buffer) {
	if !o.apart(op, imgSpan(y), imgSpan(x), matSpan(gamma), matSpan(beta)) {
		return
	}
	rows := o.gnScratch(op, groups, x, y.Batch)
	if rows == 0 {
		return
	}
	stats := o.gn.addr
	if keep != nil {
		if stats = o.keptStats(op, keep, groups, x, y.Batch); stats == 0 {
			return
		}
	}
	o.groupStats(groups, eps, x, y.Batch, rows, stats)
	flag := uint32(0)
	if relu {
		flag = 1
	}
	o.args.reset().ptr(imgAddr(y)).i64(y.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).
		ptr(addr(gamma)).i64(gamma.BatchStride).ptr(addr(beta)).i64(beta.BatchStride).ptr(stats).
		i64(x.C / groups).i64(x.N).i64(x.H * x.W).i64(groups).i64(y.Batch).u32(flag)
	o.launchRows(kernels.GNForward, y.Batch*x.C*x.H*x.W, x.N)
}

// GroupNormGrad implements compute.Convolver in six launches (one fewer when dx.Buf is nil, and
// one fewer where a channel's pixels are one run, kernels.GroupNormPixelSlices): the statistics
// (two; none from kept statistics, GroupNormGradKept), the sums of d and d xhat per channel,
// sample and run of pixels (gn_grad_sums), their folds over the runs (gn_grad_fold), the
// parameter gradients and the means dx needs (gn_grad_reduce), then dx.
func (o *Ops) GroupNormGrad(groups int, eps float32, x compute.Images, gamma compute.Mat, dy, dx compute.Images, dgamma, dbeta compute.Mat) {
	o.groupNormGrad("groupnorm gradient", groups, eps, x, gamma, compute.Images{}, dy, dx, dgamma, dbeta, nil)
}

// GroupNormReLUGrad implements compute.GroupNormReLUer: GroupNormGrad's launches, the kernels
// that read dy passing it through the ReLU, from its output y, as they read it.
func (o *Ops) GroupNormReLUGrad(groups int, eps float32, x compute.Images, gamma compute.Mat, y, dy, dx compute.Images, dgamma, dbeta compute.Mat) {
	o.groupNormGrad("groupnorm and relu gradient", groups, eps, x, gamma, y, dy, dx, dgamma, dbeta, nil)
}

func (o *Ops) groupNormGrad(op string, groups int, eps float32, x compute.Images, gamma compute.Mat, mask, dy, dx compute.Images, dgamma, dbeta compute.Mat, kept compute.Buffer) {
	batch := dgamma.Batch
	if !o.apart(op, imgSpan(dx), imgSpan(x), matSpan(gamma), imgSpan(dy), imgSpan(mask)) {
		return
	}
	rows := o.gnScratch(op, groups, x, batch)
	if rows == 0 {
		return
	}
	stats, gstats := o.gn.addr, o.gn.addr+8*uint64(2*rows)
	if kept != nil {
		if stats = o.keptStats(op, kept, groups, x, batch); stats == 0 {
			return
		}
	} else {
		o.groupStats(groups, eps, x, batch, rows, stats)
	}
	cg, hw := x.C/groups, x.H*x.W
	wantDX := uint32(0)
	if dx.Buf != nil {
		wantDX = 1
	}
	runs := kernels.GroupNormPixelSlices(hw)
	bcn := batch * x.C * x.N
	sums, folded := o.part.addr, o.part.addr
	o.args.reset().ptr(sums).ptr(imgAddr(x)).i64(x.BatchStride).ptr(imgAddr(dy)).i64(dy.BatchStride).
		ptr(imgAddr(mask)).i64(mask.BatchStride).ptr(stats).i64(cg).i64(x.N).i64(hw).i64(groups).i64(runs).i64(batch)
	o.launch(kernels.GNGradSums, bcn*runs)
	if runs > 1 {
		folded = sums + 8*uint64(2*bcn*runs)
		o.args.reset().ptr(folded).ptr(sums).i64(x.C).i64(x.N).i64(runs).i64(batch)
		o.launch(kernels.GNGradFold, bcn)
	}
	o.args.reset().ptr(gstats).ptr(addr(dgamma)).i64(dgamma.BatchStride).ptr(addr(dbeta)).i64(dbeta.BatchStride).
		ptr(folded).ptr(addr(gamma)).i64(gamma.BatchStride).i64(cg).i64(x.N).i64(hw).i64(groups).i64(batch).u32(wantDX)
	o.launch(kernels.GNGradReduce, max(int(wantDX)*rows, batch*x.C))
	if wantDX == 0 {
		return
	}
	o.args.reset().ptr(imgAddr(dx)).i64(dx.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).
		ptr(addr(gamma)).i64(gamma.BatchStride).ptr(imgAddr(dy)).i64(dy.BatchStride).
		ptr(imgAddr(mask)).i64(mask.BatchStride).ptr(stats).ptr(gstats).
		i64(cg).i64(x.N).i64(hw).i64(groups).i64(batch)
	o.launchRows(kernels.GNGradX, batch*x.C*hw, x.N)
}

var _ compute.DirectConvolver = (*Ops)(nil)

// The direct convolution's limits (unless Options.PatchConv or NoDirectConv): one thread computes a few output
// pixels of a sample for 8 or 16 output channels at a time, so the kernels pay where a product
// by patches would mostly move patches (few channels: LeNet-5's 16 of 150 rows) and lose to
// cuBLAS's tiled products where the channels are many (ResNet's 64 to 512 of 576 to 4,608
// rows).
const (
	directMaxOut  = 32
	directMaxRows = 512
	// directMaxParts is the most partial sums per weight of the weight gradient (conv_direct_dw):
	// a warp's worth of adjacent samples.
	directMaxParts = 32
)

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// directParts is how many partial sums conv_direct_dw splits each weight's gradient into for
// n samples: one per sample up to directMaxParts. It depends only on n, so the order of the
// sums never depends on the launch or the device.
func directParts(n int) int { return max(1, min(n, directMaxParts)) }

// directOutPitch and directInPitch are the row strides of conv_direct_wt's copies of a
// replica's weights: output channels rounded up to conv_direct's channel tile (8 up to 8
// channels, else 16), input channels to conv_direct_dx's CONV_CT, so that every 16-byte load
// of four weights is aligned and inside the copy.
func directOutPitch(cout int) int {
	if cout <= 8 {
		return 8
	}
	return ceilDiv(cout, 16) * 16
}

func directInPitch(cin int) int { return ceilDiv(cin, kernels.ConvCT) * kernels.ConvCT }

// directWeightFloats is the size of the larger of conv_direct_wt's two copies of a replica's
// weights.
func directWeightFloats(cout, cin, size int) int {
	kk := size * size
	return max(cin*kk*directOutPitch(cout), cout*kk*directInPitch(cin))
}

// DirectConv implements compute.DirectConvolver: unless Options.PatchConv or NoDirectConv, for at most 32
// output channels of at most 512 patch rows, of an input per replica, whose weight gradient's
// partial sums (directParts per weight) and weight copies take no more memory than the patches
// they replace, so that train's device memory estimate, which counts the patches, stays an
// upper bound. An input shared by the replicas (the first layer's minibatch) stays with the
// patch form: its products are one cuBLAS call over every replica's weights stacked
// (Execution model in docs/gpu.md), as large as a product gets. The kernels index a replica's
// images with 32-bit offsets, so its input and output hold fewer than 2^31 values.
func (o *Ops) DirectConv(cout int, x compute.Images, win compute.Window) bool {
	rows := x.C * win.Size * win.Size
	oh, ow := win.Out(x.H), win.Out(x.W)
	pixels := oh * ow
	if !o.direct || x.BatchStride == 0 || cout < 1 || cout > directMaxOut || rows < 1 || rows > directMaxRows || pixels < 1 {
		return false
	}
	const most = 1<<31 - 1
	if x.C*x.H*x.W*x.N > most || cout*pixels*x.N > most {
		return false
	}
	return directParts(x.N)*cout*(rows+1)+directWeightFloats(cout, x.C, win.Size) <= x.N*pixels*(rows+1)
}

// ConvDirect implements compute.DirectConvolver in two launches: conv_direct_wt's copy of the
// weights (output channels innermost), then conv_direct, a thread per run of CONV_PX (4) output
// pixels of a row and a sample.
func (o *Ops) ConvDirect(w, bias compute.Mat, x compute.Images, win compute.Window, y compute.Images) {
	if o.err != nil || y.Batch <= 0 {
		return
	}
	pitch := directOutPitch(y.C)
	wt := o.directWeights(w, x.C, win.Size, pitch, 0)
	o.args.reset().ptr(imgAddr(y)).i64(y.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride).
		ptr(wt).i64(pitch).ptr(addr(bias)).i64(bias.Stride).i64(bias.BatchStride).
		i64(y.C).geom(x, win).i64(y.Batch)
	o.launch(kernels.ConvDirect, y.Batch*y.H*ceilDiv(y.W, kernels.ConvPX)*y.N)
}

// directWeights launches conv_direct_wt: the batch's weights w (cout x (cin size size) a
// replica) copied into o.convW in the given mode (0: [k][cout], 1: [cout][i j][cin]) with rows
// of pitch floats, padding zero. It returns the copy's address.
func (o *Ops) directWeights(w compute.Mat, cin, size, pitch, mode int) uint64 {
	outer := cin * size * size
	if mode == 1 {
		outer = w.Rows * size * size
	}
	floats := w.Batch * outer * pitch
	wt := o.grow(&o.convW, (floats+1)/2)
	o.args.reset().ptr(wt).ptr(addr(w)).i64(w.Stride).i64(w.BatchStride).i64(w.Rows).i64(cin).i64(size).
		i64(pitch).i64(mode).i64(w.Batch)
	o.launch(kernels.ConvDirectWT, floats)
	return wt
}

// ConvDirectGrad implements compute.DirectConvolver in three launches (five with dx):
// conv_direct_dw's partial sums, splitk_reduce adding them into dw and into dbias, and
// conv_direct_wt's copy of the weights (input channels innermost) for conv_direct_dx.
func (o *Ops) ConvDirectGrad(w compute.Mat, x compute.Images, win compute.Window, dy compute.Images, dw, dbias compute.Mat, dx compute.Images) {
	batch, co, rows := dy.Batch, dy.C, x.C*win.Size*win.Size
	if o.err != nil || batch <= 0 {
		return
	}
	pp := directParts(x.N)
	floats := pp * batch * co * (rows + 1)
	part := o.grow(&o.slices, (floats+1)/2)
	o.args.reset().ptr(part).ptr(imgAddr(x)).i64(x.BatchStride).ptr(imgAddr(dy)).i64(dy.BatchStride).
		i64(co).geom(x, win).i64(pp).i64(batch)
	if t := o.dwRows; t != 0 && win.Stride == 1 && x.N <= pp && (win.Size == 3 || win.Size == 5) {
		// A thread per t output channels, input channel (or the bias) and partial.
		k := kernels.ConvDirectDWWin2
		if t == 4 {
			k = kernels.ConvDirectDWWin4
		}
		o.launch(k, batch*ceilDiv(co, t)*(x.C+1)*pp)
	} else {
		// A thread per CONV_COT output channels, window row (or the bias) and partial.
		o.launch(kernels.ConvDirectDW, batch*ceilDiv(co, kernels.ConvCOT)*(x.C*win.Size+1)*pp)
	}
	o.args.reset().ptr(addr(dw)).i64(dw.Stride).i64(dw.BatchStride).ptr(part).i64(pp).
		f32(1).f32(0).i64(co).i64(rows).i64(batch)
	o.launch(kernels.SplitKReduce, batch*co*rows)
	o.args.reset().ptr(addr(dbias)).i64(dbias.Stride).i64(dbias.BatchStride).ptr(part + 4*uint64(pp*batch*co*rows)).i64(pp).
		f32(1).f32(0).i64(co).i64(1).i64(batch)
	o.launch(kernels.SplitKReduce, batch*co)
	if dx.Buf == nil {
		return
	}
	pitch := directInPitch(dx.C)
	wt := o.directWeights(w, dx.C, win.Size, pitch, 1)
	px := 1 // adjacent pixels share their window offsets only at stride 1
	if win.Stride == 1 {
		px = kernels.ConvDXPX
	}
	o.args.reset().ptr(imgAddr(dx)).i64(dx.BatchStride).ptr(wt).i64(pitch).
		ptr(imgAddr(dy)).i64(dy.BatchStride).i64(co).geom(dx, win).i64(px).i64(batch)
	o.launch(kernels.ConvDirectDX, batch*ceilDiv(dx.C, kernels.ConvCT)*dx.H*ceilDiv(dx.W, px)*dx.N)
}
