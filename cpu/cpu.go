package cpu

import (
	"math"
	"runtime"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu/internal/simd"
	"github.com/fedaudit/fedaudit/internal/philox"
)

// cpuBuffer is host memory.
type cpuBuffer struct{ d []float32 }

func (b *cpuBuffer) Len() int { return len(b.d) }

func data(b compute.Buffer) []float32 { return b.(*cpuBuffer).d }

// HostData returns the host memory behind a buffer of this backend (not a copy): for tests
// that inspect or poison a replica's state. It panics on another backend's buffer.
func HostData(b compute.Buffer) []float32 { return data(b) }

// Backend is the pure-Go compute.Backend: operations split into tasks over batch elements and row or
// column blocks, run by a fixed pool of goroutines. Reductions are never split, so results do
// not depend on the thread count. It allocates nothing per operation.
type Backend struct {
	pool    *pool
	scratch []cpuScratch
	shared  [2][]float32 // packed shared GEMM operands

	gemm    gemmJob
	patches patchSource
	pack    packJob
	elem    elemJob
	clip    clipStepJob
	noise   noiseJob
	dots    dotsJob
	hidden  hiddenJob
	conv    convJob

	clipDots [2][]float64 // ClipCoefs' inner products
}

type cpuScratch struct {
	gemm   gemmScratch
	noise  [noiseBlock]float32
	hidden hiddenScratch
}

// New returns a CPU backend running on the given number of goroutines (GOMAXPROCS if
// threads <= 0).
func New(threads int) *Backend {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	c := &Backend{pool: newPool(threads), scratch: make([]cpuScratch, threads)}
	c.gemm.be = c
	c.elem.be = c
	c.noise.be = c
	return c
}

// growShared returns shared packing buffer i with at least n values; it allocates only when
// a larger size is first needed.
func (c *Backend) growShared(i, n int) []float32 {
	if cap(c.shared[i]) < n {
		c.shared[i] = make([]float32, n)
	}
	return c.shared[i][:n]
}

// CacheBytes implements compute.CacheSized: a few MiB, the part of the shared last-level
// cache that an intermediate buffer and its packed copy can keep while the next operation
// reads them.
func (c *Backend) CacheBytes() int { return 4 << 20 }

// Close stops the backend's goroutines.
func (c *Backend) Close() { c.pool.close() }

// Alloc implements compute.Backend.
func (c *Backend) Alloc(n int) compute.Buffer { return &cpuBuffer{d: make([]float32, n)} }

// Alias implements hostAliaser: the buffer is data itself.
func (c *Backend) Alias(d []float32) compute.Buffer { return &cpuBuffer{d: d} }

// Upload implements compute.Backend.
func (c *Backend) Upload(dst compute.Buffer, off int, src []float32) { copy(data(dst)[off:], src) }

// Download implements compute.Backend.
func (c *Backend) Download(dst []float32, src compute.Buffer, off int) { copy(dst, data(src)[off:]) }

// Gemm implements compute.Backend.
func (c *Backend) Gemm(transA, transB bool, alpha float32, a, b compute.Mat, beta float32, out compute.Mat) {
	c.gemm.patches = nil
	c.gemmJob(transA, transB, alpha, a, b, beta, out)
}

// gemmJob runs c.gemm: a product whose op(B) is b, or with c.gemm.patches set the patches it
// describes (b then gives only the shape and the batch stride).
func (c *Backend) gemmJob(transA, transB bool, alpha float32, a, b compute.Mat, beta float32, out compute.Mat) {
	g := &c.gemm
	g.transA, g.transB, g.alpha, g.beta, g.a, g.b, g.c = transA, transB, alpha, beta, a, b, out
	g.m, g.n = out.Rows, out.Cols
	if transA {
		g.k = a.Rows
	} else {
		g.k = a.Cols
	}
	if g.m == 0 || g.n == 0 {
		return
	}
	g.nBlocks = (g.n + gemmNC - 1) / gemmNC
	// c = a b^T as c^T = b a^T, b's rows read in place: when a is shared (a^T packed once),
	// and when a has few rows (a^T is then small, packed by each task, where packing b^T
	// would copy all of b: a convolution's weight gradient, b its patches). A b shared by the
	// batch (a first convolution's patches) is packed once per call by the plain path, which
	// then wastes no columns on a's few rows (6 output channels in a panel of 16).
	g.transposed = useAVX2 && transB && !transA && g.patches == nil &&
		(a.BatchStride == 0 || (g.m <= transposedRowsMax && (b.BatchStride != 0 || out.Batch < 2)))
	g.serial++
	g.prepack()
	g.nc = gemmNC
	if g.sharedB != nil && out.Batch >= 2*c.pool.workers {
		// op(B) is packed already: one task per batch element packs each block of op(A) once.
		g.nc, g.nBlocks = g.n, 1
	}
	if g.transposed && g.sharedA == nil && g.n <= 2*gemmNC && out.Batch >= 2*c.pool.workers {
		// One task per batch element packs its a^T once for all of c's columns (a second
		// convolution's weight gradient: 151 columns were two tasks, each packing a^T).
		g.nc, g.nBlocks = g.n, 1
	}
	c.pool.doSized(g, out.Batch*g.nBlocks, g.m*g.n*g.k*out.Batch)
}

// elemOp names a row-wise operation of elemJob.
type elemOp int

const (
	opAxpby elemOp = iota
	opAddRow
	opSumRows
	opGather
	opActivate
	opActivateGrad
	opSoftmax
	opClipExamples
)

// elemJob runs the row-independent operations, split into tasks of whole rows of one batch
// element (SumRows: of whole columns).
type elemJob struct {
	be            *Backend
	op            elemOp
	act           compute.Activation
	alpha, beta   float32
	x, y, z, w, v compute.Mat
	coef          []float32
	idx           []int32
	deltas        []compute.Mat
	inputs        []compute.Mat
	rowsPer       int
	blocks        int
}

func (c *Backend) runElem(rows, cols, batch int) {
	e := &c.elem
	if rows == 0 || batch == 0 {
		return
	}
	e.rowsPer = max(1, 16384/max(1, cols))
	e.blocks = (rows + e.rowsPer - 1) / e.rowsPer
	work := rows * cols * batch
	if e.op == opActivate || e.op == opSoftmax { // an exponential per element
		work *= 8
	}
	c.pool.doSized(e, batch*e.blocks, work)
}

func (e *elemJob) run(task, worker int) {
	b, blk := task/e.blocks, task%e.blocks
	r0 := blk * e.rowsPer
	switch e.op {
	case opAxpby:
		e.axpby(b, r0)
	case opAddRow:
		r1 := min(r0+e.rowsPer, e.y.Rows)
		y := data(e.y.Buf)
		v := data(e.v.Buf)[e.v.Off+b*e.v.BatchStride:][:e.y.Cols]
		for r := r0; r < r1; r++ {
			yr := y[e.y.Off+b*e.y.BatchStride+r*e.y.Stride:][:e.y.Cols]
			for j, u := range v {
				yr[j] += u
			}
		}
	case opSumRows: // blocks run over columns here
		c1 := min(r0+e.rowsPer, e.y.Cols)
		x := data(e.x.Buf)[e.x.Off+b*e.x.BatchStride:]
		y := data(e.y.Buf)[e.y.Off+b*e.y.BatchStride:]
		for j := r0; j < c1; j++ {
			var s float32
			for r := 0; r < e.x.Rows; r++ {
				s += x[r*e.x.Stride+j]
			}
			if e.beta == 0 {
				y[j] = e.alpha * s
			} else {
				y[j] = e.alpha*s + e.beta*y[j]
			}
		}
	case opGather:
		r1 := min(r0+e.rowsPer, len(e.idx))
		x, y := data(e.x.Buf), data(e.y.Buf)
		for r := r0; r < r1; r++ {
			src := x[e.x.Off+b*e.x.BatchStride+int(e.idx[r])*e.x.Stride:][:e.y.Cols]
			copy(y[e.y.Off+b*e.y.BatchStride+r*e.y.Stride:][:e.y.Cols], src)
		}
	case opActivate, opActivateGrad:
		r1 := min(r0+e.rowsPer, e.x.Rows)
		pre, post, g := data(e.x.Buf), data(e.y.Buf), []float32(nil)
		if e.op == opActivateGrad {
			g = data(e.z.Buf)
		}
		for r := r0; r < r1; r++ {
			pr := pre[e.x.Off+b*e.x.BatchStride+r*e.x.Stride:][:e.x.Cols]
			po := post[e.y.Off+b*e.y.BatchStride+r*e.y.Stride:][:e.x.Cols]
			if e.op == opActivate {
				activate(e.act, pr, po)
			} else {
				activateGrad(e.act, pr, po, g[e.z.Off+b*e.z.BatchStride+r*e.z.Stride:][:e.x.Cols])
			}
		}
	case opSoftmax:
		r1 := min(r0+e.rowsPer, e.x.Rows)
		e.softmax(b, r0, r1)
	case opClipExamples:
		e.clipExamples(b, r0)
	}
}

// axpby is opAxpby on replica b's rows from r0 (one task's block): y = alpha x + beta y, with
// alpha scaled by the replica's coefficient; kept apart from run's dispatch like softmax.
func (e *elemJob) axpby(b, r0 int) {
	r1 := min(r0+e.rowsPer, e.y.Rows)
	alpha := e.alpha
	if e.coef != nil {
		alpha *= e.coef[b]
	}
	y := data(e.y.Buf)
	var x []float32
	if e.x.Buf != nil {
		x = data(e.x.Buf)
	}
	for r := r0; r < r1; r++ {
		if alpha == 0 && e.beta == 0 { // x is not read: zeroing never propagates NaN
			clear(y[e.y.Off+b*e.y.BatchStride+r*e.y.Stride:][:e.y.Cols])
			continue
		}
		xr := x[e.x.Off+b*e.x.BatchStride+r*e.x.Stride:][:e.y.Cols]
		yr := y[e.y.Off+b*e.y.BatchStride+r*e.y.Stride:][:e.y.Cols]
		switch {
		case e.beta == 0 && alpha == 1:
			copy(yr, xr)
		case e.beta == 0:
			scaleTo(alpha, xr, yr)
		case e.beta == 1:
			// y - (-alpha) x is y + alpha x bit for bit: negation is exact
			subScaled(-alpha, xr, yr)
		default:
			for j, v := range xr {
				yr[j] = alpha*v + e.beta*yr[j]
			}
		}
	}
}

// clipExamples is opClipExamples on replica b's rows from r0 (one task's block): each row's
// per-example gradient, spread over the layers' deltas and inputs, scaled to norm at most
// alpha; kept apart from run's dispatch like softmax.
func (e *elemJob) clipExamples(b, r0 int) {
	r1 := min(r0+e.rowsPer, e.deltas[0].Rows)
	for r := r0; r < r1; r++ {
		var n float64
		for l, d := range e.deltas {
			dr := data(d.Buf)[d.Off+b*d.BatchStride+r*d.Stride:][:d.Cols]
			in := e.inputs[l]
			ir := data(in.Buf)[in.Off+b*in.BatchStride+r*in.Stride:][:in.Cols]
			n += sumSq(dr) * (sumSq(ir) + 1)
		}
		s := float32(1)
		if nn := math.Sqrt(n); nn > float64(e.alpha) {
			s = float32(float64(e.alpha) / nn)
		}
		for _, d := range e.deltas {
			dr := data(d.Buf)[d.Off+b*d.BatchStride+r*d.Stride:][:d.Cols]
			for j := range dr {
				dr[j] *= s
			}
		}
	}
}

// sumSqLanes is the portable sumSq: lane l sums x_i^2 for i = l mod 4 (len(x) a multiple of 4).
func sumSqLanes(x []float32) [4]float64 {
	var s [4]float64
	for i := 0; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s[0] += float64(v[0]) * float64(v[0])
		s[1] += float64(v[1]) * float64(v[1])
		s[2] += float64(v[2]) * float64(v[2])
		s[3] += float64(v[3]) * float64(v[3])
	}
	return s
}

func activate(act compute.Activation, pre, post []float32) {
	post = post[:len(pre)]
	switch act {
	case compute.Tanh:
		simd.TanhSlice(pre, post)
	case compute.Softplus:
		for j, v := range pre {
			x := float64(v)
			// log(1+e^x) = max(x,0) + log1p(e^-|x|), stable for large |x|
			post[j] = float32(math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))))
		}
	case compute.ReLU:
		simd.ReLU(pre, post)
	}
}

func activateGrad(act compute.Activation, pre, post, g []float32) {
	g = g[:len(pre)]
	switch act {
	case compute.Tanh:
		simd.TanhGrad(post[:len(pre)], g)
	case compute.Softplus:
		for j, v := range pre {
			g[j] *= float32(1 / (1 + math.Exp(-float64(v))))
		}
	case compute.ReLU:
		simd.ReLUGrad(pre, g)
	}
}

// softmaxCols is the longest row whose exponentials softmax computes as one vector.
const softmaxCols = 64

// softmax handles rows [r0, r1) of batch element b: x logits, y labels, z dlogits, w loss,
// v margin.
func (e *elemJob) softmax(b, r0, r1 int) {
	cols := e.x.Cols
	lg := data(e.x.Buf)
	lab := data(e.y.Buf)
	// A row's exponentials go through expSlice together (SIMD); rows longer than the buffer
	// take exp64 one at a time, with the same results.
	var arg, ex [softmaxCols]float64
	for r := r0; r < r1; r++ {
		row := lg[e.x.Off+b*e.x.BatchStride+r*e.x.Stride:][:cols]
		y := int(lab[e.y.Off+b*e.y.BatchStride+r*e.y.Stride])
		mx := row[0]
		for _, v := range row {
			mx = max(mx, v)
		}
		var s float64
		if cols <= softmaxCols {
			for j, v := range row {
				arg[j] = float64(v - mx)
			}
			simd.ExpSlice(arg[:cols], ex[:cols])
			for _, v := range ex[:cols] {
				s += v
			}
		} else {
			for _, v := range row {
				s += simd.Exp64(float64(v - mx))
			}
		}
		lse := float64(mx) + math.Log(s)
		if e.w.Buf != nil {
			data(e.w.Buf)[e.w.Off+b*e.w.BatchStride+r*e.w.Stride] = float32(lse - float64(row[y]))
		}
		if e.v.Buf != nil {
			other := float32(math.Inf(-1))
			for j, v := range row {
				if j != y {
					other = max(other, v)
				}
			}
			data(e.v.Buf)[e.v.Off+b*e.v.BatchStride+r*e.v.Stride] = row[y] - other
		}
		if e.z.Buf != nil {
			out := data(e.z.Buf)[e.z.Off+b*e.z.BatchStride+r*e.z.Stride:][:cols]
			if cols <= softmaxCols {
				for j, v := range row {
					arg[j] = float64(v) - lse
				}
				simd.ExpSlice(arg[:cols], ex[:cols])
			}
			for j, v := range row {
				var p float32
				if cols <= softmaxCols {
					p = float32(ex[j])
				} else {
					p = float32(simd.Exp64(float64(v) - lse))
				}
				if j == y {
					p--
				}
				out[j] = e.alpha * p
			}
		}
	}
}

// Axpby implements compute.Backend.
func (c *Backend) Axpby(alpha float32, x compute.Mat, beta float32, y compute.Mat, coef []float32) {
	e := &c.elem
	e.op, e.alpha, e.beta, e.x, e.y, e.coef = opAxpby, alpha, beta, x, y, coef
	c.runElem(y.Rows, y.Cols, y.Batch)
	e.coef = nil
}

// AddRow implements compute.Backend.
func (c *Backend) AddRow(y, v compute.Mat) {
	e := &c.elem
	e.op, e.y, e.v = opAddRow, y, v
	c.runElem(y.Rows, y.Cols, y.Batch)
}

// SumRows implements compute.Backend.
func (c *Backend) SumRows(alpha float32, x compute.Mat, beta float32, y compute.Mat) {
	e := &c.elem
	e.op, e.alpha, e.x, e.beta, e.y = opSumRows, alpha, x, beta, y
	// tasks run over blocks of columns
	e.rowsPer = 1024
	e.blocks = (y.Cols + e.rowsPer - 1) / e.rowsPer
	c.pool.doSized(e, y.Batch*e.blocks, x.Rows*x.Cols*x.Batch)
}

// Gather implements compute.Backend.
func (c *Backend) Gather(dst, src compute.Mat, idx []int32) {
	e := &c.elem
	e.op, e.x, e.y, e.idx = opGather, src, dst, idx
	c.runElem(len(idx), dst.Cols, dst.Batch)
	e.idx = nil
}

// Activate implements compute.Backend.
func (c *Backend) Activate(act compute.Activation, pre, post compute.Mat) {
	e := &c.elem
	e.op, e.act, e.x, e.y = opActivate, act, pre, post
	c.runElem(pre.Rows, pre.Cols, pre.Batch)
}

// ActivateGrad implements compute.Backend.
func (c *Backend) ActivateGrad(act compute.Activation, pre, post, grad compute.Mat) {
	e := &c.elem
	e.op, e.act, e.x, e.y, e.z = opActivateGrad, act, pre, post, grad
	c.runElem(pre.Rows, pre.Cols, pre.Batch)
}

// SoftmaxXent implements compute.Backend.
func (c *Backend) SoftmaxXent(logits, labels compute.Mat, scale float32, dlogits, loss, margin compute.Mat) {
	e := &c.elem
	e.op, e.x, e.y, e.alpha, e.z, e.w, e.v = opSoftmax, logits, labels, scale, dlogits, loss, margin
	c.runElem(logits.Rows, logits.Cols, logits.Batch)
}

// ClipExamples implements compute.Backend.
func (c *Backend) ClipExamples(v float32, deltas, inputs []compute.Mat) {
	e := &c.elem
	e.op, e.alpha, e.deltas, e.inputs = opClipExamples, v, deltas, inputs
	c.runElem(deltas[0].Rows, deltas[0].Cols, deltas[0].Batch)
	e.deltas, e.inputs = nil, nil
}

// clipStepJob: one task per batch element, so each norm is one sequential float64 sum.
type clipStepJob struct {
	eta, v, alpha float32
	w, g, anchor  compute.Mat
}

func (j *clipStepJob) run(b, _ int) {
	d := j.w.Cols
	w := data(j.w.Buf)[j.w.Off+b*j.w.BatchStride:][:d]
	g := data(j.g.Buf)[j.g.Off+b*j.g.BatchStride:][:d]
	s := float32(1)
	if j.v > 0 {
		if n := math.Sqrt(sumSq(g)); n > float64(j.v) {
			s = float32(float64(j.v) / n)
		} else if math.IsNaN(n) {
			s = float32(math.NaN())
		}
	}
	c := j.eta * s
	if j.alpha == 0 {
		subScaled(c, g, w)
		return
	}
	an := data(j.anchor.Buf)[j.anchor.Off+b*j.anchor.BatchStride:][:d]
	ea := j.eta * j.alpha
	for i, gi := range g {
		w[i] -= c*gi + ea*(w[i]-an[i])
	}
}

// ClipStep implements compute.Backend.
func (c *Backend) ClipStep(eta, v, alpha float32, w, g, anchor compute.Mat) {
	j := &c.clip
	j.eta, j.v, j.alpha, j.w, j.g, j.anchor = eta, v, alpha, w, g, anchor
	c.pool.doSized(j, w.Batch, 2*w.Cols*w.Batch)
}

// noiseBlock is the number of coordinates of one noise task (a multiple of 4).
const noiseBlock = 4096

// noiseJob: tasks are (run of adjacent batch elements with equal seed, coordinate block); the
// block's noise is drawn once and added to every element of the run.
type noiseJob struct {
	be     *Backend
	dst    compute.Mat
	seeds  []uint64
	scale  []float32
	round  uint32
	stream uint32
	runs   []int // start index of each run, plus the end
	blocks int
}

func (j *noiseJob) run(task, worker int) {
	ri, blk := task/j.blocks, task%j.blocks
	c0 := blk * noiseBlock
	n := min(noiseBlock, j.dst.Cols-c0)
	z := j.be.scratch[worker].noise[:n]
	b0, b1 := j.runs[ri], j.runs[ri+1]
	key := philox.Key(j.seeds[b0])
	simd.GaussianFloats(z, key, uint32(c0>>2), j.round, j.stream)
	dst := data(j.dst.Buf)
	for b := b0; b < b1; b++ {
		row := dst[j.dst.Off+b*j.dst.BatchStride+c0:][:n]
		s := j.scale[b]
		for i, v := range z {
			row[i] += s * v
		}
	}
}

// AddGaussian implements compute.Backend.
func (c *Backend) AddGaussian(dst compute.Mat, seeds []uint64, scale []float32, round, stream uint32) {
	j := &c.noise
	j.dst, j.seeds, j.scale, j.round, j.stream = dst, seeds, scale, round, stream
	j.runs = j.runs[:0]
	for b := 0; b < dst.Batch; b++ {
		if b == 0 || seeds[b] != seeds[b-1] {
			j.runs = append(j.runs, b)
		}
	}
	j.runs = append(j.runs, dst.Batch)
	j.blocks = (dst.Cols + noiseBlock - 1) / noiseBlock
	c.pool.do(j, (len(j.runs)-1)*j.blocks)
	j.seeds, j.scale = nil, nil
}

type dotsJob struct {
	a, b compute.Mat
	out  []float64
}

func (j *dotsJob) run(b, _ int) {
	d := j.a.Cols
	x := data(j.a.Buf)[j.a.Off+b*j.a.BatchStride:][:d]
	y := data(j.b.Buf)[j.b.Off+b*j.b.BatchStride:][:d]
	var s float64
	for i, v := range x {
		s += float64(v) * float64(y[i])
	}
	j.out[b] = s
}

// Dots implements compute.Backend.
func (c *Backend) Dots(a, b compute.Mat, out []float64) {
	j := &c.dots
	j.a, j.b, j.out = a, b, out
	c.pool.doSized(j, a.Batch, a.Cols*a.Batch)
	j.out = nil
}

var _ compute.DeviceClipper = (*Backend)(nil)

// ClipCoefs implements compute.DeviceClipper by the host arithmetic it stands for (two Dots
// and the factor in float64), so the engine's results are the same bits whether or not it
// uses it.
func (c *Backend) ClipCoefs(v float32, a, b, cm, d compute.Mat, coef compute.Buffer) {
	n := a.Batch
	for i := range c.clipDots {
		if cap(c.clipDots[i]) < n {
			c.clipDots[i] = make([]float64, n)
		}
	}
	s1, s2 := c.clipDots[0][:n], c.clipDots[1][:n]
	c.Dots(a, b, s1)
	c.Dots(cm, d, s2)
	out := data(coef)[:n]
	for r := range out {
		nn := math.Sqrt(s1[r] + s2[r])
		switch {
		case nn > float64(v):
			out[r] = float32(float64(v) / nn)
		case math.IsNaN(nn):
			out[r] = float32(math.NaN())
		default:
			out[r] = 1
		}
	}
}

// AxpbyCoefs implements compute.DeviceClipper: the coefficients are host memory already.
func (c *Backend) AxpbyCoefs(alpha float32, x compute.Mat, beta float32, y compute.Mat, coef compute.Buffer) {
	c.Axpby(alpha, x, beta, y, data(coef)[:y.Batch])
}

var _ compute.Fuser = (*Backend)(nil)

// AddRowActivate implements compute.Fuser by the two operations: the CPU backend's passes are
// cache-blocked already, and doing exactly them keeps its results unchanged.
func (c *Backend) AddRowActivate(act compute.Activation, pre, bias, post compute.Mat) {
	c.AddRow(pre, bias)
	c.Activate(act, pre, post)
}

// ActivateGradSumRows implements compute.Fuser by the two operations.
func (c *Backend) ActivateGradSumRows(act compute.Activation, pre, post, grad compute.Mat, alpha, beta float32, y compute.Mat) {
	c.ActivateGrad(act, pre, post, grad)
	c.SumRows(alpha, grad, beta, y)
}

// AddRowSoftmaxXent implements compute.Fuser by the two operations.
func (c *Backend) AddRowSoftmaxXent(logits, bias, labels compute.Mat, scale float32, dlogits, loss, margin compute.Mat) {
	c.AddRow(logits, bias)
	c.SoftmaxXent(logits, labels, scale, dlogits, loss, margin)
}
