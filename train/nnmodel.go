package train

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/nn"
)

// isConvKind reports whether a model kind is one of package nn's models (lenet5, resnet,
// sequential), which train only in the direct local-step form on the CPU backend.
func isConvKind(kind string) bool {
	return kind == "lenet5" || kind == "resnet" || kind == "sequential"
}

// nnSpec returns the nn.Spec of an nn model kind for samples of the given shape (the data's
// Dataset.Shape; nil when not known yet, e.g. when a configuration is checked before any data
// is loaded) and dim features, with classes outputs. The input is, in order: model.input when
// set; the data's shape ([C, H, W]; [H, W] is one channel; [F] is F x 1 x 1); LeNet-5's
// 1x28x28 or the ResNet's 3x32x32. A sequential spec without model.input takes the data's
// shape, so before the data is known its shapes cannot be checked (ok false).
func nnSpec(mc ModelConfig, shape []int, dim, classes int) (spec nn.Spec, ok bool, err error) {
	in := slices.Clone(mc.Input)
	if len(in) == 0 {
		switch len(shape) {
		case 3:
			in = slices.Clone(shape)
		case 2:
			in = []int{1, shape[0], shape[1]}
		case 1:
			in = []int{shape[0], 1, 1}
		case 0:
		default:
			return nn.Spec{}, false, fmt.Errorf("model.input: the data's samples have shape %v; give model.input as [channels, height, width]", shape)
		}
	}
	if len(in) != 0 && len(in) != 3 {
		return nn.Spec{}, false, fmt.Errorf("model.input: want [channels, height, width], got %v", in)
	}
	if len(in) == 3 && dim > 0 && in[0]*in[1]*in[2] != dim {
		return nn.Spec{}, false, fmt.Errorf("model.input: %v is %d values per sample, the data's samples have %d", in, in[0]*in[1]*in[2], dim)
	}
	switch mc.Kind {
	case "lenet5":
		spec = nn.LeNet5(classes, mc.Classic)
	case "resnet":
		stages := mc.Stages
		if stages == 0 {
			stages = 3
		}
		spec = nn.ResNet(stages, mc.Blocks, mc.Width, mc.Groups, classes)
	case "sequential":
		if len(in) == 0 {
			return nn.Spec{}, false, nil
		}
		spec = nn.Spec{Kind: "sequential", Layers: mc.Layers}
	default:
		return nn.Spec{}, false, fmt.Errorf("model.kind: %q is not lenet5, resnet or sequential", mc.Kind)
	}
	if len(in) == 3 {
		spec.Input = in
	} else if dim > 0 && spec.Input[0]*spec.Input[1]*spec.Input[2] != dim {
		return nn.Spec{}, false, fmt.Errorf("model.input: %s takes %v by default (%d values), the data's samples have %d features; give model.input as [channels, height, width]",
			mc.Kind, spec.Input, spec.Input[0]*spec.Input[1]*spec.Input[2], dim)
	}
	return spec, true, nil
}

// NNSpec returns the nn.Spec that a model config of kind lenet5, resnet or sequential trains on
// samples of the given shape (the data's Dataset.Shape) and dim features with classes outputs:
// what the attacks rebuild to evaluate a recorded CNN on the host. It is an error for any other
// kind, or when the spec cannot be known (a sequential model without input shape).
func NNSpec(mc ModelConfig, shape []int, dim, classes int) (nn.Spec, error) {
	if !isConvKind(mc.Kind) {
		return nn.Spec{}, fmt.Errorf("model.kind: %q is not one of package nn's models (lenet5, resnet, sequential)", mc.Kind)
	}
	spec, ok, err := nnSpec(mc, shape, dim, classes)
	if err != nil {
		return nn.Spec{}, err
	}
	if !ok {
		return nn.Spec{}, errors.New("model.input: a sequential model needs the input shape: give model.input [channels, height, width]")
	}
	return spec, nil
}

// IsNNKind reports whether a model kind is one of package nn's models (lenet5, resnet,
// sequential).
func IsNNKind(kind string) bool { return isConvKind(kind) }

// checkNN adds the problems of an nn model's fields to p; shape and dim as for nnSpec.
func (c *Config) checkNN(p *problems, shape []int, dim, classes int) {
	mc := c.Model
	if len(mc.Hidden) > 0 || mc.Activation != "" || mc.Curvature != 0 {
		p.add("model", "%s takes no hidden, activation or curvature (those are the mlp's and the quadratic model's)", mc.Kind)
	}
	if mc.Kind != "lenet5" && mc.Classic {
		p.add("model.classic", "only lenet5 takes classic")
	}
	if mc.Kind != "resnet" && (mc.Stages != 0 || mc.Blocks != 0 || mc.Width != 0 || mc.Groups != 0) {
		p.add("model", "only resnet takes stages, blocks, width and groups")
	}
	if mc.Kind != "sequential" && len(mc.Layers) > 0 {
		p.add("model.layers", "only sequential takes layers; %s has its own", mc.Kind)
	}
	if mc.Kind == "resnet" {
		if mc.Stages < 0 || mc.Stages > 6 {
			p.add("model.stages", "resnet takes 1 to 6 stages (3: ResNet-20 style, 4: ResNet-18 style), got %d", mc.Stages)
			return
		}
		if mc.Blocks < 1 || mc.Width < 1 || mc.Groups < 1 {
			p.add("model", "resnet needs blocks >= 1, width >= 1 and groups >= 1 (ResNet-20: blocks 3, width 16), got blocks %d, width %d, groups %d", mc.Blocks, mc.Width, mc.Groups)
			return
		}
		if mc.Width%mc.Groups != 0 {
			p.add("model.groups", "groups %d must divide width %d", mc.Groups, mc.Width)
			return
		}
	}
	if mc.Kind == "sequential" && len(mc.Layers) == 0 {
		p.add("model.layers", "sequential needs at least one layer")
		return
	}
	if classes < 2 {
		p.add("model.kind", "%s needs at least 2 classes, the data has %d", mc.Kind, classes)
		return
	}
	spec, ok, err := nnSpec(mc, shape, dim, classes)
	if err != nil {
		*p = append(*p, fmt.Errorf("config: %w", err))
		return
	}
	if !ok {
		return // checked against the data's shape once it is loaded
	}
	m, err := nn.Build[float32](spec, nn.NaiveGemm[float32]{})
	if err != nil {
		p.add("model", "%v", err)
		return
	}
	// Before the data is loaded (no shape) the classes may be a stand-in (experiment checks
	// named datasets with 2): the engine compares them with the data's.
	if shape != nil && m.Classes != classes {
		p.add("model.layers", "the last layer has %d outputs, the data has %d classes", m.Classes, classes)
	}
}

// nnModel adapts a package nn model to the engine's Model, in the direct local-step form (no
// fused or deferred step), on any backend that implements compute.Convolver (the CPU backend
// and the GPU backend). nn reads the engine's parameter and gradient rows in place, whatever
// their replica stride (the two worlds of a pair are interleaved), and the minibatch rows as the
// engine gathered them.
type nnModel struct {
	spec nn.Spec
	d    int
}

func newNNModel(mc ModelConfig, shape []int, dim, classes int) (*nnModel, error) {
	spec, ok, err := nnSpec(mc, shape, dim, classes)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("model.input: a sequential model needs the input shape: give model.input [channels, height, width]")
	}
	m, err := nn.Build[float32](spec, nn.NaiveGemm[float32]{})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if m.Classes != classes {
		return nil, fmt.Errorf("model.layers: the last layer has %d outputs, the data has %d classes", m.Classes, classes)
	}
	return &nnModel{spec: spec, d: m.NumParams()}, nil
}

// NumParams implements Model.
func (m *nnModel) NumParams() int { return m.d }

// Init implements Model with nn's initialisation (PyTorch's defaults), deterministic in seed.
func (m *nnModel) Init(w []float32, seed uint64) {
	b, err := nn.Build[float32](m.spec, nn.NaiveGemm[float32]{})
	if err != nil {
		panic(fmt.Sprintf("train: nn model built before: %v", err)) // checked in newNNModel
	}
	b.Init(w[:m.d], seed)
}

// nnEvalRows is the most rows an nn model evaluates at once, given the most rows of a
// training step: a CNN's activations take hundreds of kilobytes per row and replica, so the
// checkpoint's evaluation batches (256 rows by default) go through in slices instead of
// making the workspace, and so the memory estimate, several times larger than training needs
// (which would shrink the groups of pairs trained together).
func nnEvalRows(maxRows int) int { return max(maxRows, 32) }

type nnWorkspace struct {
	m        *nn.Model[float32]
	evalRows int
	// Per-example clipping (dpsgd): one example's gradient per replica, the clip factors.
	one         compute.Buffer
	coefs       compute.Buffer
	norms, hiSq []float64
	coefH       []float32
}

func (m *nnModel) newWorkspace(be compute.Backend, maxRows, _ int) workspace {
	b, err := nn.BuildOn(m.spec, be)
	if err != nil {
		// newEngine refuses backends without compute.Convolver before this.
		panic(fmt.Sprintf("train: nn model: %v", err))
	}
	return &nnWorkspace{m: b, evalRows: nnEvalRows(maxRows)}
}

func (m *nnModel) grad(be compute.Backend, w workspace, params, x, y, grad compute.Mat, perExample float32) {
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

// eval writes loss and margin (the true class's logit minus the largest other) per row.
func (m *nnModel) eval(be compute.Backend, w workspace, params, x, y, loss, margin compute.Mat) {
	ws := w.(*nnWorkspace)
	for r0 := 0; r0 < x.Rows; r0 += ws.evalRows {
		n := min(ws.evalRows, x.Rows-r0)
		ws.m.Eval(params, rowRange(x, r0, n), rowRange(y, r0, n), rowRange(loss, r0, n), rowRange(margin, r0, n))
	}
}

// nnMemory is MemoryOf's per-replica bytes of an nn model's workspace and its parameter count:
// per sample of a pass (wsRows of them), every layer's output and the gradient of its input,
// and the im2col patches of the convolutions (a residual block counts as its two convolutions
// and norms, about six outputs). An estimate, not an exact count of nn's buffers.
func nnMemory(mc ModelConfig, s DataSizes) (d int, perRowBytes float64, err error) {
	dim := s.Dim
	if s.Shape == nil {
		dim = 0 // before the data is loaded Sizes has no shape: the dim is a stand-in
	}
	spec, ok, err := nnSpec(mc, s.Shape, dim, s.Classes)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, errors.New("model.input: a sequential model needs the input shape before the data is loaded: give model.input [channels, height, width]")
	}
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
