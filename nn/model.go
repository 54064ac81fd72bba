package nn

import (
	"fmt"
	"math/rand/v2"
	"runtime"

	"github.com/fedaudit/fedaudit/compute"
)

// seq is a chain of layers; it keeps each layer's input and output of the last forward pass
// for the backward pass.
type seq[T Float] struct {
	layers []layer[T]
	xs, ys []compute.Images
}

func newSeq[T Float](ls []layer[T]) seq[T] {
	return seq[T]{layers: ls, xs: make([]compute.Images, len(ls)), ys: make([]compute.Images, len(ls))}
}

func (s *seq[T]) forward(c *pass[T], x compute.Images) compute.Images {
	for i, l := range s.layers {
		s.xs[i] = x
		x = l.forward(c, x)
		s.ys[i] = x
	}
	return x
}

// backward propagates dy, the gradient of the last output, to the first layer's input (whose
// gradient is computed only when wantDX) and writes every layer's parameter gradient.
func (s *seq[T]) backward(c *pass[T], dy compute.Images, wantDX bool) compute.Images {
	for i := len(s.layers) - 1; i >= 0; i-- {
		dy = s.layers[i].backward(c, s.xs[i], s.ys[i], dy, i > 0 || wantDX)
	}
	return dy
}

// residual is out = relu(main(x) + shortcut(x)): main = conv3x3(stride) GN relu conv3x3 GN;
// shortcut = identity when the shape is kept, else conv1x1(stride) GN (ResNet's option B).
// The sum is formed in place in main's output (its last layer, a GroupNorm, does not need its
// output in the backward pass), which then holds the pre-activation.
type residual[T Float] struct {
	ish, osh    Shape
	main, short seq[T]
	pre         compute.Images
	y           scratch
}

func (l *residual[T]) in() Shape  { return l.ish }
func (l *residual[T]) out() Shape { return l.osh }
func (l *residual[T]) numParams() int {
	n := 0
	for _, s := range [][]layer[T]{l.main.layers, l.short.layers} {
		for _, sl := range s {
			n += sl.numParams()
		}
	}
	return n
}
func (l *residual[T]) setOffset(off int) {
	for _, s := range [][]layer[T]{l.main.layers, l.short.layers} {
		for _, sl := range s {
			sl.setOffset(off)
			off += sl.numParams()
		}
	}
}
func (l *residual[T]) flops() int64 {
	n := 2 * int64(l.osh.Size()) // the sum and its ReLU
	for _, s := range [][]layer[T]{l.main.layers, l.short.layers} {
		for _, sl := range s {
			n += sl.flops()
		}
	}
	return n
}

func (l *residual[T]) init(w []T, rng *rand.Rand) {
	for _, s := range [][]layer[T]{l.main.layers, l.short.layers} {
		for _, sl := range s {
			n := sl.numParams()
			sl.init(w[:n], rng)
			w = w[n:]
		}
	}
}

func (l *residual[T]) forward(c *pass[T], x compute.Images) compute.Images {
	a := l.main.forward(c, x)
	sc := x
	if len(l.short.layers) > 0 {
		sc = l.short.forward(c, x)
	}
	y := images(get(c.o, &l.y, c.R*l.osh.Size()*c.B), l.osh, c.B, c.R, false)
	if f := c.o.addReLU(); f != nil {
		// The sum is not kept: the ReLU's gradient reads its rule from y (y <= 0 exactly
		// where the sum is).
		f.AddReLU(flat(a), flat(sc), flat(y))
		l.pre = y
		return y
	}
	c.o.axpby(1, flat(sc), 1, flat(a))
	l.pre = a
	c.o.activate(compute.ReLU, flat(a), flat(y))
	return y
}

func (l *residual[T]) backward(c *pass[T], x, y, dy compute.Images, wantDX bool) compute.Images {
	c.o.activateGrad(compute.ReLU, flat(l.pre), flat(y), flat(dy)) // dy is now the sum's gradient
	dx := l.main.backward(c, dy, wantDX)
	if len(l.short.layers) == 0 {
		if wantDX {
			c.o.axpby(1, flat(dy), 1, flat(dx))
		}
		return dx
	}
	d2 := l.short.backward(c, dy, wantDX)
	if wantDX {
		c.o.axpby(1, flat(d2), 1, flat(dx))
	}
	return dx
}

// Model is a sequential model over R replicas at once, on a backend (Build: the host, in any
// Float; BuildOn: a compute.Backend, in float32). It keeps its activations between the
// forward and backward passes of a call and is not safe for concurrent use.
type Model[T Float] struct {
	Input   Shape
	Classes int
	// Threads is the number of goroutines of a host model's work outside the GEMM (im2col,
	// col2im, pooling, activations, GroupNorm); 0 means GOMAXPROCS. Results do not depend on
	// it. A model built on a backend uses the backend's own threads.
	Threads int
	body    seq[T]
	info    []LayerInfo // the spec's layers (body may run some in another order)
	d       int
	o       ops[T]
	host    *hostOps[T] // o when the model runs on the host
	// cacheBytes is the backend's compute.CacheSized working set, 0 for no limit.
	cacheBytes int

	maxPix                          int // largest H*W of any layer's input or output
	ones, xin, z, dz, dlog, lossRow scratch
	tmp                             transients // the layers' buffers within a backward call
	// pass is the state of the current pass, held here so that a training step allocates
	// nothing (a new one took 192 bytes a step; a Model runs one pass at a time).
	pass    pass[T]
	onesLen int
	logits  []T // the last Forward's logits on the host
	rows    []T // per-sample losses read back
	labelsT []T
}

// Build checks spec, infers every layer's shape and returns the model running on the host with
// the GEMM g (NaiveGemm in the tests); every problem found is reported, each naming its layer
// and the shapes.
func Build[T Float](spec Spec, g Gemm[T]) (*Model[T], error) {
	m, err := build[T](spec)
	if err != nil {
		return nil, err
	}
	m.host = &hostOps[T]{g: g}
	m.o = m.host
	return m, nil
}

// BuildOn is Build for a model that runs in float32 on be, which must implement
// compute.Convolver (the CPU backend does, and the GPU backend): how package train runs CNNs.
func BuildOn(spec Spec, be compute.Backend) (*Model[float32], error) {
	cv, ok := be.(compute.Convolver)
	if !ok {
		return nil, fmt.Errorf("nn: backend %T cannot run convolutional models (it has no image operations)", be)
	}
	m, err := build[float32](spec)
	if err != nil {
		return nil, err
	}
	m.o = deviceOps{be: be, Convolver: cv}
	if cs, ok := be.(compute.CacheSized); ok {
		m.cacheBytes = cs.CacheBytes()
	}
	return m, nil
}

// Layers lists the model's layers with the shapes Build inferred (for a user checking a spec).
func (m *Model[T]) Layers() []LayerInfo {
	return append([]LayerInfo(nil), m.info...)
}

// ForwardFLOPs is the floating-point work of one sample's forward pass (2 per multiply-add of
// the convolutions and dense layers, the bias included, one per value of the elementwise
// layers), the softmax left out. A training step costs about three times that per sample
// (forward, weight gradient, input gradient), the usual rule of thumb.
func (m *Model[T]) ForwardFLOPs() int64 {
	var n int64
	for _, l := range m.body.layers {
		n += l.flops()
	}
	return n
}

// NumParams is d, the parameters of one replica.
func (m *Model[T]) NumParams() int { return m.d }

// Init writes w_0 of one replica (d values): PyTorch's default uniform +-1/sqrt(fan_in) for
// convolutions and dense layers, gamma = 1 and beta = 0 for GroupNorm; deterministic in seed.
func (m *Model[T]) Init(w []T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6e6e))
	for _, l := range m.body.layers {
		n := l.numParams()
		l.init(w[:n], rng)
		w = w[n:]
	}
}

// newPass prepares a pass over R replicas of B samples (the ones vector long enough for every
// layer).
func (m *Model[T]) newPass(R, B int, w, dw compute.Mat) *pass[T] {
	if m.host != nil {
		m.host.threads = m.Threads
		if m.host.threads <= 0 {
			m.host.threads = runtime.GOMAXPROCS(0)
		}
	}
	if m.maxPix == 0 {
		m.maxPix = 1
		for _, l := range m.body.layers {
			m.maxPix = max(m.maxPix, l.in().H*l.in().W, l.out().H*l.out().W)
		}
	}
	if n := B * m.maxPix; n > m.onesLen {
		v := make([]T, n)
		for i := range v {
			v[i] = 1
		}
		if m.ones.buf != nil {
			m.o.release(m.ones.buf)
		}
		m.ones.buf, m.onesLen = m.o.wrap(v), n
	}
	m.pass = pass[T]{o: m.o, R: R, B: B, w: w, dw: dw, ones: m.ones.buf, tmp: &m.tmp, cacheBytes: m.cacheBytes}
	return &m.pass
}

// input returns x (B rows of C*H*W values per replica, or shared) as images [C][H][W][B]: the
// rows transposed, or x itself for a batch of one in contiguous rows.
func (m *Model[T]) input(c *pass[T], x compute.Mat) compute.Images {
	dim := m.Input.Size()
	shared := x.BatchStride == 0
	if c.B == 1 && x.Cols == dim {
		return compute.Images{Buf: x.Buf, Off: x.Off, C: m.Input.C, N: 1, H: m.Input.H, W: m.Input.W, Batch: c.R, BatchStride: x.BatchStride}
	}
	rows := c.R
	if shared {
		rows = 1
	}
	n := c.B * dim
	buf := get(m.o, &m.xin, rows*n)
	m.o.Transpose(1, compute.Mat{Buf: x.Buf, Off: x.Off, Rows: c.B, Cols: dim, Stride: x.Stride, Batch: rows, BatchStride: x.BatchStride},
		compute.Mat{Buf: buf, Rows: dim, Cols: c.B, Stride: c.B, Batch: rows, BatchStride: n})
	return images(buf, m.Input, c.B, c.R, shared)
}

// run is one pass: the forward pass, the per-sample losses and margins when their Buf is not
// nil, and when grad.Buf is not nil the backward pass writing grad and, when dx.Buf is not
// nil, the input gradient (in x's row layout, one batch per replica).
func (m *Model[T]) run(params, x, labels, grad, dx, loss, margin compute.Mat) {
	R, B, K := params.Batch, x.Rows, m.Classes
	c := m.newPass(R, B, params, grad)
	out := m.body.forward(c, m.input(c, x))
	wantLoss := loss.Buf != nil || margin.Buf != nil || grad.Buf != nil
	if !wantLoss {
		return
	}
	if cx := m.o.columnXent(); cx != nil {
		// The logits and their gradient as they are, [K][B]: the transpositions below, without
		// their passes and launches (the same bits).
		var dlog compute.Images
		if grad.Buf != nil {
			dlog = images(get(m.o, &m.dlog, R*K*B), Shape{K, 1, 1}, B, R, false)
		}
		cx.SoftmaxXentColumns(planes(out), labels, float32(1/T(B)), planes(dlog), loss, margin)
		if grad.Buf != nil {
			m.backward(c, dlog, dx)
		}
		return
	}
	// Logits [K][B] -> [B][K] rows for the softmax, and its gradient back.
	zm := compute.Mat{Buf: get(m.o, &m.z, R*B*K), Rows: B, Cols: K, Stride: K, Batch: R, BatchStride: B * K}
	m.o.Transpose(1, planes(out), zm)
	var dzm compute.Mat
	if grad.Buf != nil {
		dzm = zm
		dzm.Buf = get(m.o, &m.dz, R*B*K)
	}
	m.o.xent(zm, labels, 1/T(B), dzm, loss, margin)
	if grad.Buf == nil {
		return
	}
	dlog := images(get(m.o, &m.dlog, R*K*B), Shape{K, 1, 1}, B, R, false)
	m.o.Transpose(1, dzm, planes(dlog))
	m.backward(c, dlog, dx)
}

// backward runs the body's backward pass from the logits' gradient and, when dx.Buf is not
// nil, writes the input gradient in x's row layout.
func (m *Model[T]) backward(c *pass[T], dlog compute.Images, dx compute.Mat) {
	dxin := m.body.backward(c, dlog, dx.Buf != nil)
	if dx.Buf == nil {
		return
	}
	dim := m.Input.Size()
	m.o.Transpose(1, compute.Mat{Buf: dxin.Buf, Off: dxin.Off, Rows: dim, Cols: c.B, Stride: c.B, Batch: c.R, BatchStride: dxin.BatchStride}, dx)
}

// Grad writes into grad the gradient of each replica's mean softmax cross-entropy over a
// batch, on the model's backend: params and grad are batches of R rows of d (any batch
// strides; grad is overwritten), x holds the batch's B samples as rows of C*H*W values in the
// datasets' [C][H][W] order (a BatchStride of 0 shares them with every replica: the first
// layer's patches are then computed once), labels is B x 1, the class indices stored as
// numbers, shared. When loss.Buf is not nil each sample's loss is written there (B x 1 per
// replica).
func (m *Model[T]) Grad(params, x, labels, grad, loss compute.Mat) {
	m.run(params, x, labels, grad, compute.Mat{}, loss, compute.Mat{})
}

// Eval writes each replica's loss and logit margin (the true class's logit minus the largest
// other) on every sample into loss and margin (B x 1 per replica; a nil Buf skips one).
func (m *Model[T]) Eval(params, x, labels, loss, margin compute.Mat) {
	m.run(params, x, labels, compute.Mat{}, compute.Mat{}, loss, margin)
}

// hostArgs wraps the slice API's arguments as buffers of the model's backend.
func (m *Model[T]) hostArgs(op string, w []T, R int, x []T, B int) (params, xm compute.Mat, err error) {
	n := B * m.Input.Size()
	if R < 1 || B < 1 || len(w) < R*m.d {
		return params, xm, fmt.Errorf("nn: %s: R = %d, B = %d, %d parameters for %d per replica", op, R, B, len(w), m.d)
	}
	xs := 0
	switch len(x) {
	case n:
	case R * n:
		xs = n
	default:
		return params, xm, fmt.Errorf("nn: %s: input has %d values; want B x %v = %d (shared) or R times that", op, len(x), m.Input, n)
	}
	dim := m.Input.Size()
	params = compute.Mat{Buf: m.o.wrap(w[:R*m.d]), Rows: 1, Cols: m.d, Stride: m.d, Batch: R, BatchStride: m.d}
	xm = compute.Mat{Buf: m.o.wrap(x), Rows: B, Cols: dim, Stride: dim, Batch: R, BatchStride: xs}
	return params, xm, nil
}

// Forward runs R replicas (parameters w, R x d) on a batch of B samples. x is either one batch
// [B][C][H][W] shared by every replica (a client's minibatch: the first layer's patches are then
// computed once) or R batches one after another. It returns the logits [R][classes][B], valid
// until the next call.
func (m *Model[T]) Forward(w []T, R int, x []T, B int) ([]T, error) {
	params, xm, err := m.hostArgs("forward", w, R, x, B)
	if err != nil {
		return nil, err
	}
	c := m.newPass(R, B, params, compute.Mat{})
	out := m.body.forward(c, m.input(c, xm))
	n := m.Classes * B
	m.logits = grow(m.logits, R*n)
	for r := 0; r < R; r++ {
		m.o.read(m.logits[r*n:(r+1)*n], out.Buf, out.Off+r*out.BatchStride)
	}
	return m.logits, nil
}

// LossGrad runs Forward, then the softmax cross-entropy averaged over the batch (labels shared
// by every replica) and its gradient: loss[r] (float64) and grad (R x d, overwritten).
func (m *Model[T]) LossGrad(w []T, R int, x []T, labels []int32, grad []T, loss []float64) error {
	return m.lossGrad("loss", w, R, x, labels, grad, nil, loss)
}

// LossGradInput is LossGrad that also writes dx, the gradient of each replica's loss with
// respect to its input: R batches [B][C][H][W] one after another (R x B x C x H x W values),
// whether x was shared by the replicas or given per replica. The attacks that reconstruct
// inputs (gradient inversion) need it; training never does.
func (m *Model[T]) LossGradInput(w []T, R int, x []T, labels []int32, grad, dx []T, loss []float64) error {
	n := len(labels) * m.Input.Size()
	if len(dx) < R*n {
		return fmt.Errorf("nn: input gradient: dx has %d values; want R x B x %v = %d", len(dx), m.Input, R*n)
	}
	return m.lossGrad("input gradient", w, R, x, labels, grad, dx[:R*n], loss)
}

func (m *Model[T]) lossGrad(op string, w []T, R int, x []T, labels []int32, grad, dx []T, loss []float64) error {
	B := len(labels)
	params, xm, err := m.hostArgs(op, w, R, x, B)
	if err != nil {
		return err
	}
	if len(grad) < R*m.d || len(loss) < R {
		return fmt.Errorf("nn: %s: grad has %d values and loss %d; want %d and %d", op, len(grad), len(loss), R*m.d, R)
	}
	m.labelsT = grow(m.labelsT, B)
	for i, y := range labels {
		if y < 0 || int(y) >= m.Classes {
			return fmt.Errorf("nn: %s: label %d outside 0..%d", op, y, m.Classes-1)
		}
		m.labelsT[i] = T(y)
	}
	lab := compute.Mat{Buf: m.o.wrap(m.labelsT), Rows: B, Cols: 1, Stride: 1, Batch: R}
	g := compute.Mat{Buf: m.o.wrap(grad[:R*m.d]), Rows: 1, Cols: m.d, Stride: m.d, Batch: R, BatchStride: m.d}
	lr := compute.Mat{Buf: get(m.o, &m.lossRow, R*B), Rows: B, Cols: 1, Stride: 1, Batch: R, BatchStride: B}
	var dxm compute.Mat
	dim := m.Input.Size()
	if dx != nil {
		dxm = compute.Mat{Buf: m.o.wrap(dx), Rows: B, Cols: dim, Stride: dim, Batch: R, BatchStride: B * dim}
	}
	m.run(params, xm, lab, g, dxm, lr, compute.Mat{})
	m.o.read(grad[:R*m.d], g.Buf, 0)
	if dx != nil {
		m.o.read(dx, dxm.Buf, 0)
	}
	m.rows = grow(m.rows, R*B)
	m.o.read(m.rows, lr.Buf, 0)
	for r := 0; r < R; r++ {
		var s float64
		for _, v := range m.rows[r*B : (r+1)*B] {
			s += float64(v)
		}
		loss[r] = s / float64(B)
	}
	return nil
}
