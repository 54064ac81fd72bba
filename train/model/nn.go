package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/nn"
)

// NN adapts a package nn model to Model, in the direct local-step form (no
// fused or deferred step), on any backend that implements compute.Convolver (the CPU backend
// and the GPU backend). nn reads the engine's parameter and gradient rows in place, whatever
// their replica stride (the two worlds of a pair are interleaved), and the minibatch rows as the
// engine gathered them.
type NN struct {
	spec nn.Spec
	d    int
}

// NewNN builds the model of spec and checks that it has classes outputs.
func NewNN(spec nn.Spec, classes int) (*NN, error) {
	m, err := nn.Build[float32](spec, nn.NaiveGemm[float32]{})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if m.Classes != classes {
		return nil, fmt.Errorf("model.layers: the last layer has %d outputs, the data has %d classes", m.Classes, classes)
	}
	return &NN{spec: spec, d: m.NumParams()}, nil
}

// NumParams implements Model.
func (m *NN) NumParams() int { return m.d }

// Init implements Model with nn's initialisation (PyTorch's defaults), deterministic in seed.
func (m *NN) Init(w []float32, seed uint64) {
	b, err := nn.Build[float32](m.spec, nn.NaiveGemm[float32]{})
	if err != nil {
		panic(fmt.Sprintf("train: nn model built before: %v", err)) // checked in NewNN
	}
	b.Init(w[:m.d], seed)
}

// NNEvalRows is the most rows an nn model evaluates at once, given the most rows of a
// training step: a CNN's activations take hundreds of kilobytes per row and replica, so the
// checkpoint's evaluation batches (256 rows by default) go through in slices instead of
// making the workspace, and so the memory estimate, several times larger than training needs
// (which would shrink the groups of pairs trained together).
func NNEvalRows(maxRows int) int { return max(maxRows, 32) }

type nnWorkspace struct {
	m        *nn.Model[float32]
	evalRows int
	// Per-example clipping (dpsgd): one example's gradient per replica, the clip factors.
	one         compute.Buffer
	coefs       compute.Buffer
	norms, hiSq []float64
	coefH       []float32
}

// NewWorkspace implements Model.
func (m *NN) NewWorkspace(be compute.Backend, maxRows, _ int) Workspace {
	b, err := nn.BuildOn(m.spec, be)
	if err != nil {
		// The engine refuses backends without compute.Convolver before this.
		panic(fmt.Sprintf("train: nn model: %v", err))
	}
	return &nnWorkspace{m: b, evalRows: NNEvalRows(maxRows)}
}

// Grad implements Model.
func (m *NN) Grad(be compute.Backend, w Workspace, params, x, y, grad compute.Mat, perExample float32) {
	ws := w.(*nnWorkspace)
	if perExample == 0 {
		ws.m.Grad(params, x, y, grad, compute.Mat{})
		return
	}
	// Per-example clipping: each example's gradient (a batch of one) clipped to perExample
	// and added up; nn has no per-example gradients of a batch, so B passes of one. The norm
	// is that of the two halves of the gradient added (two inner products, as the device
	// clip factors take them).
	R, d := params.Batch, m.d
	if ws.one == nil || ws.one.Len() < R*d {
		ws.one = be.Alloc(R * d)
		ws.coefs = be.Alloc(R)
	}
	one := compute.Mat{Buf: ws.one, Rows: 1, Cols: d, Stride: d, Batch: R, BatchStride: d}
	be.Axpby(0, grad, 0, grad, nil)
	h := d / 2
	lo := compute.Mat{Buf: ws.one, Rows: 1, Cols: h, Stride: h, Batch: R, BatchStride: d}
	hi := compute.Mat{Buf: ws.one, Off: h, Rows: 1, Cols: d - h, Stride: d - h, Batch: R, BatchStride: d}
	dc, onDevice := be.(compute.DeviceClipper)
	for b := 0; b < x.Rows; b++ {
		xb, yb := x, y
		xb.Off, xb.Rows = x.Off+b*x.Stride, 1
		yb.Off, yb.Rows = y.Off+b*y.Stride, 1
		ws.m.Grad(params, xb, yb, one, compute.Mat{})
		if onDevice {
			dc.ClipCoefs(perExample, lo, lo, hi, hi, ws.coefs)
			dc.AxpbyCoefs(1, one, 1, grad, ws.coefs)
			continue
		}
		ws.norms = slices.Grow(ws.norms[:0], R)[:R]
		ws.hiSq = slices.Grow(ws.hiSq[:0], R)[:R]
		ws.coefH = slices.Grow(ws.coefH[:0], R)[:R]
		be.Dots(lo, lo, ws.norms)
		be.Dots(hi, hi, ws.hiSq)
		for r := range ws.coefH {
			ws.coefH[r] = clipFactor(perExample, ws.norms[r]+ws.hiSq[r])
		}
		be.Axpby(1, one, 1, grad, ws.coefH)
	}
}

// clipFactor is the factor that clips a vector of squared norm sq to norm v: v/norm when the
// norm exceeds v, NaN when it is NaN, else 1 (compute.DeviceClipper's rule).
func clipFactor(v float32, sq float64) float32 {
	n := math.Sqrt(sq)
	switch {
	case math.IsNaN(n):
		return float32(math.NaN())
	case n > float64(v):
		return float32(float64(v) / n)
	}
	return 1
}

// Eval implements Model: loss and margin (the true class's logit minus the largest other) per
// row.
func (m *NN) Eval(be compute.Backend, w Workspace, params, x, y, loss, margin compute.Mat) {
	ws := w.(*nnWorkspace)
	for r0 := 0; r0 < x.Rows; r0 += ws.evalRows {
		n := min(ws.evalRows, x.Rows-r0)
		ws.m.Eval(params, rowRange(x, r0, n), rowRange(y, r0, n), rowRange(loss, r0, n), rowRange(margin, r0, n))
	}
}

// nnMemory is the parameter count of spec's model and its workspace's bytes per sample of a
// pass: every layer's output and the gradient of its input, and the im2col patches of the
// convolutions (a residual block counts as its two convolutions and norms, about six outputs).
// An estimate, not an exact count of nn's buffers.
func nnMemory(spec nn.Spec) (d int, perRowBytes float64, err error) {
	m, err := nn.Build[float32](spec, nn.NaiveGemm[float32]{})
	if err != nil {
		return 0, 0, fmt.Errorf("model: %w", err)
	}
	var vals float64
	for i, l := range m.Layers() {
		out := float64(l.Out.Size())
		switch l.Kind {
		case "residual":
			vals += 8 * out
		case "conv2d":
			k := float64(spec.Layers[i].Kernel)
			vals += 2*out + float64(l.In.C)*k*k*float64(l.Out.H*l.Out.W)
		default:
			vals += 2 * out
		}
	}
	return m.NumParams(), vals * 4, nil
}

// rowRange views rows r0..r0+n-1 of every batch element of m (a nil Buf stays nil), as the
// engine's own evaluation does.
func rowRange(m compute.Mat, r0, n int) compute.Mat {
	if m.Buf != nil {
		m.Off += r0 * m.Stride
		m.Rows = n
	}
	return m
}
