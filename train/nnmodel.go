package train

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
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
		spec = nn.ResNet(mc.Blocks, mc.Width, mc.Groups, classes)
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
	if mc.Kind != "resnet" && (mc.Blocks != 0 || mc.Width != 0 || mc.Groups != 0) {
		p.add("model", "only resnet takes blocks, width and groups")
	}
	if mc.Kind != "sequential" && len(mc.Layers) > 0 {
		p.add("model.layers", "only sequential takes layers; %s has its own", mc.Kind)
	}
	if mc.Kind == "resnet" {
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
	m, err := nn.Build[float32](spec, nn.CPUGemm{})
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

// nnModel adapts a package nn model to the engine's Model: the direct local-step form only
// (no fused or deferred step), on the CPU backend only (its GEMM is cpu.Backend's). The
// engine's replicas of a group may be strided (the two worlds of a pair are interleaved); nn
// wants them contiguous, so the workspace gathers them and scatters the gradients back.
type nnModel struct {
	spec    nn.Spec
	d       int
	threads int
}

func newNNModel(mc ModelConfig, shape []int, dim, classes, threads int) (*nnModel, error) {
	spec, ok, err := nnSpec(mc, shape, dim, classes)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("model.input: a sequential model needs the input shape: give model.input [channels, height, width]")
	}
	m, err := nn.Build[float32](spec, nn.CPUGemm{})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if m.Classes != classes {
		return nil, fmt.Errorf("model.layers: the last layer has %d outputs, the data has %d classes", m.Classes, classes)
	}
	return &nnModel{spec: spec, d: m.NumParams(), threads: threads}, nil
}

// NumParams implements Model.
func (m *nnModel) NumParams() int { return m.d }

// Init implements Model with nn's initialisation (PyTorch's defaults), deterministic in seed.
func (m *nnModel) Init(w []float32, seed uint64) {
	b, err := nn.Build[float32](m.spec, nn.CPUGemm{})
	if err != nil {
		panic(fmt.Sprintf("train: nn model built before: %v", err)) // checked in newNNModel
	}
	b.Init(w[:m.d], seed)
}

type nnWorkspace struct {
	m       *nn.Model[float32]
	w, g    []float32 // the group's parameters and gradients, contiguous
	one     []float32 // per-example gradients (dpsgd)
	labels  []int32
	loss    []float64
	norms   []float64
	classes int
}

func (m *nnModel) newWorkspace(be compute.Backend, _, maxBatch int) workspace {
	cb, ok := be.(*cpu.Backend)
	if !ok {
		// newEngine refuses nn models on other backends before this.
		panic("train: nn models run on the CPU backend only")
	}
	b, err := nn.Build[float32](m.spec, nn.CPUGemm{Backend: cb})
	if err != nil {
		panic(fmt.Sprintf("train: nn model built before: %v", err))
	}
	b.Threads = m.threads
	return &nnWorkspace{m: b, classes: b.Classes, loss: make([]float64, maxBatch), norms: make([]float64, maxBatch)}
}

// replicas returns the group's parameters as count contiguous rows of d: params' own memory
// when they are contiguous already, else a copy in buf.
func (m *nnModel) replicas(p compute.Mat, buf *[]float32) []float32 {
	src := cpu.HostData(p.Buf)
	if p.Batch == 1 || p.BatchStride == m.d {
		return src[p.Off : p.Off+p.Batch*m.d]
	}
	*buf = grow32(*buf, p.Batch*m.d)
	for r := 0; r < p.Batch; r++ {
		copy((*buf)[r*m.d:(r+1)*m.d], src[p.Off+r*p.BatchStride:][:m.d])
	}
	return *buf
}

func grow32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// batch returns x's rows (shared by the replicas) and y's labels on the host.
func (ws *nnWorkspace) batch(x, y compute.Mat) ([]float32, []int32) {
	n := x.Rows
	xs := cpu.HostData(x.Buf)[x.Off:]
	if x.Stride != x.Cols {
		panic("train: nn model: rows of x must be contiguous")
	}
	ys := cpu.HostData(y.Buf)[y.Off:]
	ws.labels = slices.Grow(ws.labels[:0], n)[:n]
	for i := range ws.labels {
		ws.labels[i] = int32(ys[i*y.Stride])
	}
	return xs[:n*x.Cols], ws.labels
}

func (m *nnModel) grad(be compute.Backend, w workspace, params, x, y, grad compute.Mat, perExample float32) {
	ws := w.(*nnWorkspace)
	R, d := params.Batch, m.d
	pw := m.replicas(params, &ws.w)
	xs, labels := ws.batch(x, y)
	ws.g = grow32(ws.g, R*d)
	if perExample == 0 {
		if err := ws.m.LossGrad(pw, R, xs, labels, ws.g, ws.loss[:R]); err != nil {
			panic(fmt.Sprintf("train: nn model: %v", err)) // sizes and labels were checked
		}
	} else {
		// Per-example clipping: each example's gradient (a batch of one) clipped to
		// perExample, summed. nn has no per-example gradient of a batch; B passes of one.
		clear(ws.g)
		ws.one = grow32(ws.one, R*d)
		dim := x.Cols
		for b := range labels {
			if err := ws.m.LossGrad(pw, R, xs[b*dim:(b+1)*dim], labels[b:b+1], ws.one, ws.loss[:R]); err != nil {
				panic(fmt.Sprintf("train: nn model: %v", err))
			}
			for r := 0; r < R; r++ {
				g := ws.one[r*d : (r+1)*d]
				var s float64
				for _, v := range g {
					s += float64(v) * float64(v)
				}
				c := float32(1)
				if nrm := math.Sqrt(s); nrm > float64(perExample) {
					c = float32(float64(perExample) / nrm)
				} else if math.IsNaN(nrm) {
					c = float32(math.NaN())
				}
				acc := ws.g[r*d : (r+1)*d]
				for i, v := range g {
					acc[i] += c * v
				}
			}
		}
	}
	dst := cpu.HostData(grad.Buf)
	for r := 0; r < R; r++ {
		copy(dst[grad.Off+r*grad.BatchStride:][:d], ws.g[r*d:(r+1)*d])
	}
}

// eval writes loss and margin (the true class's logit minus the largest other) per row, from
// the logits in float64 as nn's loss does.
func (m *nnModel) eval(be compute.Backend, w workspace, params, x, y, loss, margin compute.Mat) {
	ws := w.(*nnWorkspace)
	R := params.Batch
	pw := m.replicas(params, &ws.w)
	xs, labels := ws.batch(x, y)
	B := len(labels)
	z, err := ws.m.Forward(pw, R, xs, B)
	if err != nil {
		panic(fmt.Sprintf("train: nn model: %v", err))
	}
	K := ws.classes
	var lo, mo []float32
	if loss.Buf != nil {
		lo = cpu.HostData(loss.Buf)
	}
	if margin.Buf != nil {
		mo = cpu.HostData(margin.Buf)
	}
	for r := 0; r < R; r++ {
		zr := z[r*K*B:]
		for b := 0; b < B; b++ {
			yb := int(labels[b])
			mx, other := math.Inf(-1), math.Inf(-1)
			for k := 0; k < K; k++ {
				v := float64(zr[k*B+b])
				mx = max(mx, v)
				if k != yb {
					other = max(other, v)
				}
			}
			var s float64
			for k := 0; k < K; k++ {
				s += math.Exp(float64(zr[k*B+b]) - mx)
			}
			zy := float64(zr[yb*B+b])
			if lo != nil {
				lo[loss.Off+r*loss.BatchStride+b*loss.Stride] = float32(mx + math.Log(s) - zy)
			}
			if mo != nil {
				mo[margin.Off+r*margin.BatchStride+b*margin.Stride] = float32(zy - other)
			}
		}
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
	m, err := nn.Build[float32](spec, nn.CPUGemm{})
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
