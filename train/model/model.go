package model

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
)

// Model is a parametric model whose loss and gradient are computed for a batch of replicas at
// once through a Backend. Parameters of one replica are a 1 x NumParams row; a batch of them
// is a Mat with one row per batch element.
type Model interface {
	// NumParams is d, the length of one replica's parameter vector.
	NumParams() int
	// Init writes the initial parameters drawn from the seed.
	Init(w []float32, seed uint64)
	// NewWorkspace allocates scratch for up to maxRows input rows and maxBatch replicas.
	NewWorkspace(be compute.Backend, maxRows, maxBatch int) Workspace
	// Grad writes into grad (a batch like params) the gradient of the mean loss over the rows
	// of x (shared by the batch; labels y), or with perExample > 0 the sum over rows of each
	// example's gradient clipped to norm perExample.
	Grad(be compute.Backend, ws Workspace, params, x, y, grad compute.Mat, perExample float32)
	// Eval writes each replica's loss and logit margin on every row of x into loss and margin
	// (batch of Rows x 1).
	Eval(be compute.Backend, ws Workspace, params, x, y, loss, margin compute.Mat)
}

// Workspace is a model's scratch memory on a backend, made by NewWorkspace and passed back to
// the model's other methods; only the model that made it knows what it holds.
type Workspace interface{}

// FusedStepper is implemented by models that do a whole clipped local step for a batch of
// replicas without materializing every gradient: the step of ClipStep, with the norm of the
// first layer's weight gradient from Gram matrices (||delta^T x||_F^2 = <x x^T, delta delta^T>)
// and that layer updated by one GEMM accumulating into the parameters.
type FusedStepper interface {
	Step(be compute.Backend, ws Workspace, params, x, y, anchor, grad compute.Mat, eta, v, alpha float32)
}

// MLP is a fully connected network with softmax cross-entropy loss; with no hidden layers it
// is softmax (multinomial logistic) regression. Parameters are laid out layer by layer as the
// weight (out x in, row-major) then the bias, as PyTorch's nn.Linear does.
type MLP struct {
	Sizes []int // input dimension, hidden widths, number of classes
	Act   compute.Activation
	woff  []int
	boff  []int
	d     int
}

// NewMLP returns an MLP with the given layer sizes (at least input and classes).
func NewMLP(act compute.Activation, sizes ...int) (*MLP, error) {
	if len(sizes) < 2 {
		return nil, fmt.Errorf("mlp: need at least input and output sizes, got %v", sizes)
	}
	m := &MLP{Sizes: append([]int(nil), sizes...), Act: act}
	for l := 0; l+1 < len(sizes); l++ {
		if sizes[l] <= 0 || sizes[l+1] <= 0 {
			return nil, fmt.Errorf("mlp: layer sizes must be positive, got %v", sizes)
		}
		m.woff = append(m.woff, m.d)
		m.d += sizes[l] * sizes[l+1]
		m.boff = append(m.boff, m.d)
		m.d += sizes[l+1]
	}
	return m, nil
}

// NumParams implements Model.
func (m *MLP) NumParams() int { return m.d }

// Init draws every weight and bias uniformly from (-1/sqrt(in), 1/sqrt(in)), PyTorch's default
// for nn.Linear.
func (m *MLP) Init(w []float32, seed uint64) {
	r := philox.NewRand(seed, 0, 0, philox.DomainInit, 0)
	for l := 0; l+1 < len(m.Sizes); l++ {
		bound := 1 / math.Sqrt(float64(m.Sizes[l]))
		end := m.boff[l] + m.Sizes[l+1]
		for i := m.woff[l]; i < end; i++ {
			w[i] = float32((2*r.Float() - 1) * bound)
		}
	}
}

type mlpWorkspace struct {
	pre, post, delta []compute.Buffer
	deltas, inputs   []compute.Mat
	pres, posts      []compute.Mat // the views the last forward pass used
	hidden           compute.HiddenStepArgs
	gx, gd           compute.Buffer // Gram matrices x x^T (shared) and delta delta^T (per replica)
	ghost, rest      []float64      // squared norms: first-layer weights, all other parameters
	coef             []float32
	coefDev          compute.Buffer // the clip factors in a compute.DeviceClipper's memory
}

// NewWorkspace implements Model.
func (m *MLP) NewWorkspace(be compute.Backend, maxRows, maxBatch int) Workspace {
	L := len(m.Sizes) - 1
	ws := &mlpWorkspace{deltas: make([]compute.Mat, L), inputs: make([]compute.Mat, L), pres: make([]compute.Mat, L), posts: make([]compute.Mat, L),
		ghost: make([]float64, maxBatch), rest: make([]float64, maxBatch), coef: make([]float32, maxBatch)}
	for l := 0; l < L; l++ {
		n := maxRows * maxBatch * m.Sizes[l+1]
		ws.pre = append(ws.pre, be.Alloc(n))
		ws.delta = append(ws.delta, be.Alloc(n))
		if l+1 < L {
			ws.post = append(ws.post, be.Alloc(n))
		}
	}
	return ws
}

func actMat(buf compute.Buffer, rows, cols, batch int) compute.Mat {
	return compute.Mat{Buf: buf, Rows: rows, Cols: cols, Stride: cols, Batch: batch, BatchStride: rows * cols}
}

// Weight views layer l's weight matrix (out x in) of every replica of p.
func (m *MLP) Weight(p compute.Mat, l int) compute.Mat {
	return compute.Mat{Buf: p.Buf, Off: p.Off + m.woff[l], Rows: m.Sizes[l+1], Cols: m.Sizes[l], Stride: m.Sizes[l], Batch: p.Batch, BatchStride: p.BatchStride}
}

func (m *MLP) bias(p compute.Mat, l int) compute.Mat {
	return compute.Mat{Buf: p.Buf, Off: p.Off + m.boff[l], Rows: 1, Cols: m.Sizes[l+1], Stride: m.Sizes[l+1], Batch: p.Batch, BatchStride: p.BatchStride}
}

// forward leaves pre-activations in ws.pres, activations in ws.posts and each layer's input
// in ws.inputs; it returns the logits without the last layer's bias, which the caller adds
// with the softmax (addRowSoftmaxXent). When pre0.Buf is not nil it holds the first layer's
// x W_0^T already, as the deferred step computes it (deferred.go); forward adds the bias.
func (m *MLP) forward(be compute.Backend, ws *mlpWorkspace, params, x, pre0 compute.Mat) compute.Mat {
	n, G, L := x.Rows, params.Batch, len(m.Sizes)-1
	in := x
	in.Batch = G
	for l := 0; l < L; l++ {
		ws.inputs[l] = in
		pre := actMat(ws.pre[l], n, m.Sizes[l+1], G)
		if l == 0 && pre0.Buf != nil {
			pre = pre0
		} else {
			be.Gemm(false, true, 1, in, m.Weight(params, l), 0, pre)
		}
		ws.pres[l] = pre
		if l+1 == L {
			return pre
		}
		post := actMat(ws.post[l], n, m.Sizes[l+1], G)
		addRowActivate(be, m.Act, pre, m.bias(params, l), post)
		ws.posts[l] = post
		in = post
	}
	panic("unreachable")
}

// addRowActivate, activateGradSumRows and addRowSoftmaxXent are the pairs of compute.Fuser,
// fused when the backend can (one GPU launch instead of two, the same bits).
func addRowActivate(be compute.Backend, act compute.Activation, pre, bias, post compute.Mat) {
	if f, ok := be.(compute.Fuser); ok {
		f.AddRowActivate(act, pre, bias, post)
		return
	}
	be.AddRow(pre, bias)
	be.Activate(act, pre, post)
}

func activateGradSumRows(be compute.Backend, act compute.Activation, pre, post, grad, y compute.Mat) {
	if f, ok := be.(compute.Fuser); ok {
		f.ActivateGradSumRows(act, pre, post, grad, 1, 0, y)
		return
	}
	be.ActivateGrad(act, pre, post, grad)
	be.SumRows(1, grad, 0, y)
}

func addRowSoftmaxXent(be compute.Backend, logits, bias, labels compute.Mat, scale float32, dlogits, loss, margin compute.Mat) {
	if f, ok := be.(compute.Fuser); ok {
		f.AddRowSoftmaxXent(logits, bias, labels, scale, dlogits, loss, margin)
		return
	}
	be.AddRow(logits, bias)
	be.SoftmaxXent(logits, labels, scale, dlogits, loss, margin)
}

// Grad implements Model.
func (m *MLP) Grad(be compute.Backend, w Workspace, params, x, y, grad compute.Mat, perExample float32) {
	ws := w.(*mlpWorkspace)
	fused := m.backward(be, ws, params, x, y, perExample, compute.Mat{}, grad)
	for l := 0; l < len(m.Sizes)-1; l++ {
		be.Gemm(true, false, 1, ws.deltas[l], ws.inputs[l], 0, m.Weight(grad, l))
		if !fused || l == len(m.Sizes)-2 {
			be.SumRows(1, ws.deltas[l], 0, m.bias(grad, l))
		}
	}
}

// backward leaves every layer's delta (gradient of the loss with respect to its
// pre-activation, per example) in ws.deltas. Without per-example clipping and with grad given,
// it also writes the bias gradients of every layer but the last into grad while it computes
// the deltas (activateGradSumRows) and returns true; the caller sums the last layer's.
func (m *MLP) backward(be compute.Backend, ws *mlpWorkspace, params, x, y compute.Mat, perExample float32, pre0, grad compute.Mat) bool {
	n, G, L := x.Rows, params.Batch, len(m.Sizes)-1
	logits := m.forward(be, ws, params, x, pre0)
	scale := 1 / float32(n)
	if perExample > 0 {
		scale = 1
	}
	labels := y
	labels.Batch = G
	dl := actMat(ws.delta[L-1], n, m.Sizes[L], G)
	addRowSoftmaxXent(be, logits, m.bias(params, L-1), labels, scale, dl, compute.Mat{}, compute.Mat{})
	ws.deltas[L-1] = dl
	// Per-example clipping rescales the deltas after this loop, so the bias sums must wait.
	fused := perExample == 0 && grad.Buf != nil
	for l := L - 1; l > 0; l-- {
		d := actMat(ws.delta[l-1], n, m.Sizes[l], G)
		be.Gemm(false, false, 1, ws.deltas[l], m.Weight(params, l), 0, d)
		if fused {
			activateGradSumRows(be, m.Act, ws.pres[l-1], ws.posts[l-1], d, m.bias(grad, l-1))
		} else {
			be.ActivateGrad(m.Act, ws.pres[l-1], ws.posts[l-1], d)
		}
		ws.deltas[l-1] = d
	}
	if perExample > 0 {
		be.ClipExamples(perExample, ws.deltas, ws.inputs)
	}
	return fused
}

// Step implements FusedStepper: w <- w - eta (c g + alpha (w - anchor)), c = 1/max(1, ||g||/v).
// grad receives the gradient of every parameter but the first layer's weights.
func (m *MLP) Step(be compute.Backend, w Workspace, params, x, y, anchor, grad compute.Mat, eta, v, alpha float32) {
	ws := w.(*mlpWorkspace)
	fused := m.backward(be, ws, params, x, y, 0, compute.Mat{}, grad)
	coef := m.stepRest(be, ws, params, x, anchor, grad, eta, v, alpha, fused)
	if alpha != 0 {
		be.Axpby(eta*alpha, m.Weight(anchor, 0), 1-eta*alpha, m.Weight(params, 0), nil)
	}
	d0 := ws.deltas[0]
	coef.axpby(be, -eta, d0, 0, d0)
	be.Gemm(true, false, 1, d0, ws.inputs[0], 1, m.Weight(params, 0))
}

// DeferredStep is Step in the deferred form of the engine's deferred first-layer updates
// (train/deferred.go), for the first weight matrix
// W = W_0 + prev^T X_prev (whose copy in params is not read or written): pre0 holds x W_0^T
// on entry; the step adds the correction gram prev (gram = x X_prev^T) and the bias, and
// writes u = -eta c delta_0, the step's factor of W's update (W <- W + u^T x). FedProx also
// scales the earlier factors prev by 1 - eta alpha. gx, when its Buf is set, is x x^T (the
// caller's block of a larger Gram matrix), which the fused one-hidden-layer step then reads
// instead of computing it.
func (m *MLP) DeferredStep(be compute.Backend, w Workspace, params, x, y, pre0, gram, gx, anchor, grad, u, prev compute.Mat, eta, v, alpha float32) {
	ws := w.(*mlpWorkspace)
	if m.HasHiddenStep(be) {
		// One hidden layer: the whole step but the Gram matrix of x in one fused operation.
		if v <= 0 {
			gx = compute.Mat{}
		} else if gx.Buf == nil {
			gx = m.xGram(be, ws, x)
		}
		ys := y
		ys.Batch = 1
		ws.hidden = compute.HiddenStepArgs{Act: m.Act, Pre: pre0, Gram: gram, Prev: prev, Params: params, Anchor: anchor, Labels: ys, GX: gx, U: u,
			B1: m.boff[0], W2: m.woff[1], B2: m.boff[1], H: m.Sizes[1], Cls: m.Sizes[2],
			Eta: eta, V: v, Alpha: alpha}
		be.(compute.HiddenStepper).HiddenStep(&ws.hidden) // the arguments live in the workspace: no allocation per step
		return
	}
	if prev.Rows > 0 {
		be.Gemm(false, false, 1, gram, prev, 1, pre0)
		if alpha != 0 {
			be.Axpby(1-eta*alpha, prev, 0, prev, nil)
		}
	}
	fused := m.backward(be, ws, params, x, y, 0, pre0, grad)
	coef := m.stepRest(be, ws, params, x, anchor, grad, eta, v, alpha, fused)
	coef.axpby(be, -eta, ws.deltas[0], 0, u)
}

// RestHiddenArgs returns the parts of a compute.HiddenStepArgs that the model fixes, for a
// one-hidden-layer MLP whose step reads and writes rest, rows of Rest's layout (b1, W2, b2,
// with nothing before them), pulled towards anchor's Rest (FedProx): the engine's grouped
// clients keep only these parameters (train/deferred.go).
func (m *MLP) RestHiddenArgs(rest, anchor compute.Mat) compute.HiddenStepArgs {
	h, c := m.Sizes[1], m.Sizes[2]
	return compute.HiddenStepArgs{Act: m.Act, Params: rest, Anchor: m.Rest(anchor), B1: 0, W2: h, B2: h + c*h, H: h, Cls: c}
}

// HasHiddenStep says whether the model's deferred step runs as one fused HiddenStep on be.
func (m *MLP) HasHiddenStep(be compute.Backend) bool {
	_, ok := be.(compute.HiddenStepper)
	return ok && len(m.Sizes) == 3
}

// Rest views every parameter but the first weight matrix (b_0, W_1, b_1, ...: contiguous).
func (m *MLP) Rest(p compute.Mat) compute.Mat {
	p.Off += m.boff[0]
	p.Cols = m.d - m.boff[0]
	return p
}

// xGram computes x x^T (shared by the batch) into the workspace and returns it, n x n.
func (m *MLP) xGram(be compute.Backend, ws *mlpWorkspace, x compute.Mat) compute.Mat {
	n := x.Rows
	if ws.gx == nil || ws.gx.Len() < n*n { // first step only: the batch size is fixed
		ws.gx = be.Alloc(n * n)
	}
	xs := x
	xs.Batch = 1
	gx := compute.Mat{Buf: ws.gx, Rows: n, Cols: n, Stride: n, Batch: 1}
	be.Gemm(false, true, 1, xs, xs, 0, gx)
	return gx
}

// clipCoefs are a step's clip factors, one per replica: on the host (host), or in the
// backend's memory (dev) when it is a compute.DeviceClipper, so that a GPU never copies them
// back; the two hold the same values.
type clipCoefs struct {
	host []float32
	dev  compute.Buffer
}

// axpby is be.Axpby with the factors as coefficients.
func (c clipCoefs) axpby(be compute.Backend, alpha float32, x compute.Mat, beta float32, y compute.Mat) {
	if c.dev != nil {
		be.(compute.DeviceClipper).AxpbyCoefs(alpha, x, beta, y, c.dev)
		return
	}
	be.Axpby(alpha, x, beta, y, c.host)
}

// stepRest finishes a clipped step after backward: it computes the clip factors c (the first
// layer's weight-gradient norm from Gram matrices) and updates every parameter but the first
// weight matrix, which the caller updates from ws.deltas[0] and c. It returns c. With
// biasDone, backward has written the bias gradients of every layer but the last.
func (m *MLP) stepRest(be compute.Backend, ws *mlpWorkspace, params, x, anchor, grad compute.Mat, eta, v, alpha float32, biasDone bool) clipCoefs {
	n, G, L := x.Rows, params.Batch, len(m.Sizes)-1
	for l := 0; l < L; l++ {
		if l > 0 {
			be.Gemm(true, false, 1, ws.deltas[l], ws.inputs[l], 0, m.Weight(grad, l))
		}
		if !biasDone || l == L-1 {
			be.SumRows(1, ws.deltas[l], 0, m.bias(grad, l))
		}
	}
	coef := clipCoefs{host: ws.coef[:G]}
	for r := range coef.host {
		coef.host[r] = 1
	}
	if v > 0 {
		if ws.gd == nil || ws.gd.Len() < len(ws.coef)*n*n { // first step only: the batch size is fixed
			ws.gd = be.Alloc(len(ws.coef) * n * n)
		}
		gx := m.xGram(be, ws, x)
		d0 := ws.deltas[0]
		gd := compute.Mat{Buf: ws.gd, Rows: n, Cols: n, Stride: n, Batch: G, BatchStride: n * n}
		be.Gemm(false, true, 1, d0, d0, 0, gd)
		gx = compute.Mat{Buf: ws.gx, Rows: 1, Cols: n * n, Stride: n * n, Batch: G}
		gd = compute.Mat{Buf: ws.gd, Rows: 1, Cols: n * n, Stride: n * n, Batch: G, BatchStride: n * n}
		if dc, ok := be.(compute.DeviceClipper); ok {
			// The factors stay in the backend's memory: no read back to the host per step.
			if ws.coefDev == nil {
				ws.coefDev = be.Alloc(len(ws.coef))
			}
			dc.ClipCoefs(v, gx, gd, m.Rest(grad), m.Rest(grad), ws.coefDev)
			coef = clipCoefs{dev: ws.coefDev}
		} else {
			be.Dots(gx, gd, ws.ghost[:G])
			be.Dots(m.Rest(grad), m.Rest(grad), ws.rest[:G])
			for r := range coef.host {
				coef.host[r] = clipFactor(v, ws.ghost[r]+ws.rest[r])
			}
		}
	}
	if alpha != 0 {
		be.Axpby(eta*alpha, m.Rest(anchor), 1-eta*alpha, m.Rest(params), nil)
	}
	coef.axpby(be, -eta, m.Rest(grad), 1, m.Rest(params))
	return coef
}

// Eval implements Model.
func (m *MLP) Eval(be compute.Backend, w Workspace, params, x, y, loss, margin compute.Mat) {
	ws := w.(*mlpWorkspace)
	logits := m.forward(be, ws, params, x, compute.Mat{})
	labels := y
	labels.Batch = params.Batch
	addRowSoftmaxXent(be, logits, m.bias(params, len(m.Sizes)-2), labels, 0, compute.Mat{}, loss, margin)
}

// Quadratic is the exact reference model of docs/theory.md ("The exact reference instance"): client i's local loss is
// f_i(w) = (a/2)||w||^2 - <b_i, w> with b_i the mean of the client's samples' features, so a
// sample x contributes (a/2)||w||^2 - <x, w>. Its "logit margin" is <x, w>. Labels are unused.
type Quadratic struct {
	A   float32
	Dim int
}

// NumParams implements Model.
func (q *Quadratic) NumParams() int { return q.Dim }

// Init sets w_0 = 0.
func (q *Quadratic) Init(w []float32, _ uint64) { clear(w[:q.Dim]) }

type quadWorkspace struct{ norms compute.Buffer }

// NewWorkspace implements Model.
func (q *Quadratic) NewWorkspace(be compute.Backend, _, maxBatch int) Workspace {
	return &quadWorkspace{norms: be.Alloc(maxBatch)}
}

// Grad implements Model.
func (q *Quadratic) Grad(be compute.Backend, _ Workspace, params, x, _, grad compute.Mat, _ float32) {
	be.Axpby(q.A, params, 0, grad, nil)
	xs := x
	xs.Batch = params.Batch
	be.SumRows(-1/float32(x.Rows), xs, 1, grad)
}

// Eval implements Model.
func (q *Quadratic) Eval(be compute.Backend, w Workspace, params, x, _, loss, margin compute.Mat) {
	ws := w.(*quadWorkspace)
	xs := x
	xs.Batch = params.Batch
	be.Gemm(false, true, 1, xs, params, 0, margin)
	norms := compute.Mat{Buf: ws.norms, Rows: 1, Cols: 1, Stride: 1, Batch: params.Batch, BatchStride: 1}
	be.Gemm(false, true, q.A/2, params, params, 0, norms)
	be.Axpby(-1, margin, 0, loss, nil)
	be.AddRow(loss, norms)
}
