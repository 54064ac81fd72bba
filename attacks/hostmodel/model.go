package hostmodel

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train/model"
)

// Model evaluates train's models in float64 on the host, one sample at a time, with the
// parameter layout of package train/model: for an MLP (softmax regression is an MLP without hidden
// layers) layer by layer the weight (out x in, row-major) then the bias; for the quadratic model
// the vector w itself. Attacks need per-sample gradients and, unlike training, precision rather
// than speed.
//
// Package nn's convolutional models (train's kinds lenet5, resnet and sequential) are evaluated
// through cnnModel (kind "cnn"): New builds them from the data's shape.
type Model struct {
	kind  string // "mlp" (also softmax regression), "quadratic" or "cnn"
	act   string // "tanh", "softplus" or "relu"
	sizes []int  // input, hidden..., classes
	woff  []int
	boff  []int
	d     int
	a     float64 // quadratic curvature
	cnn   *cnnModel
	// classes is the softmax's classes (0 for the quadratic model, which has none).
	classes int
}

// New returns the host model of a config: a CNN of package nn (built for samples of the
// given shape) or one of train's flat models.
func New(cfg model.Config, shape []int, dim, classes int) (*Model, error) {
	if !model.IsNNKind(cfg.Kind) {
		return newFlat(cfg, dim, classes)
	}
	h, err := newCNN(cfg, shape, dim, classes)
	if err != nil {
		return nil, err
	}
	return &Model{kind: "cnn", cnn: h, d: h.d, sizes: []int{h.input.Size()}, classes: classes}, nil
}

// newFlat returns the host model of one of train's flat models (softmax, mlp, quadratic).
func newFlat(cfg model.Config, dim, classes int) (*Model, error) {
	if dim < 1 {
		return nil, fmt.Errorf("model: input dimension %d, need at least 1", dim)
	}
	switch cfg.Kind {
	case "quadratic":
		if cfg.Curvature == 0 || math.IsNaN(cfg.Curvature) || math.IsInf(cfg.Curvature, 0) {
			return nil, fmt.Errorf("model: quadratic needs a finite nonzero curvature, got %g", cfg.Curvature)
		}
		return &Model{kind: "quadratic", d: dim, a: cfg.Curvature, sizes: []int{dim}}, nil
	case "softmax", "mlp":
	case "lenet5", "resnet", "sequential":
		return nil, fmt.Errorf("model: kind %q: a convolutional model needs the input shape (hostmodel.New); this evaluator takes softmax, mlp and quadratic models", cfg.Kind)
	default:
		return nil, fmt.Errorf("model: kind %q is not softmax, mlp or quadratic", cfg.Kind)
	}
	if classes < 2 {
		return nil, fmt.Errorf("model: %s needs at least 2 classes, got %d", cfg.Kind, classes)
	}
	m := &Model{kind: "mlp", act: "tanh", sizes: []int{dim}, classes: classes}
	if cfg.Kind == "mlp" {
		switch cfg.Activation {
		case "tanh", "softplus", "relu":
			m.act = cfg.Activation
		default:
			return nil, fmt.Errorf("model: activation %q is not tanh, softplus or relu", cfg.Activation)
		}
		for _, h := range cfg.Hidden {
			if h < 1 {
				return nil, fmt.Errorf("model: hidden widths must be positive, got %v", cfg.Hidden)
			}
		}
		m.sizes = append(m.sizes, cfg.Hidden...)
	} else if len(cfg.Hidden) > 0 {
		return nil, fmt.Errorf("model: softmax regression has no hidden layers, got %v", cfg.Hidden)
	}
	m.sizes = append(m.sizes, classes)
	for l := 0; l+1 < len(m.sizes); l++ {
		m.woff = append(m.woff, m.d)
		m.d += m.sizes[l] * m.sizes[l+1]
		m.boff = append(m.boff, m.d)
		m.d += m.sizes[l+1]
	}
	return m, nil
}

// NumParams is the length of the model's parameter vector.
func (m *Model) NumParams() int { return m.d }

// Dim is the number of input features.
func (m *Model) Dim() int { return m.sizes[0] }

// IsCNN reports whether the model is one of package nn's (train's kinds lenet5, resnet and
// sequential), evaluated through an nn.Model (Acquire).
func (m *Model) IsCNN() bool { return m.kind == "cnn" }

// Acquire returns an nn.Model of a CNN (IsCNN) for the caller's exclusive use until it gives it
// back with Release: an nn.Model keeps its activations between calls and is not safe for
// concurrent use.
func (m *Model) Acquire() *nn.Model[float64] { return m.cnn.get() }

// Release gives back an nn.Model that Acquire returned.
func (m *Model) Release(nm *nn.Model[float64]) { m.cnn.put(nm) }

func (m *Model) layers() int { return len(m.sizes) - 1 }

// HasClasses reports whether the model ends in a softmax over classes (label attacks apply).
func (m *Model) HasClasses() bool { return m.kind == "mlp" || m.kind == "cnn" }

// Classes is the number of classes of the softmax (0 without one: HasClasses).
func (m *Model) Classes() int { return m.classes }

// LastDense returns the offsets of the last layer's weight (classes x in, row-major) and bias
// when the model ends in a dense layer (every MLP; a CNN whose spec ends in one).
func (m *Model) LastDense() (woff, boff, in int, ok bool) {
	switch m.kind {
	case "cnn":
		return m.cnn.lastDense()
	case "mlp":
		L := m.layers()
		return m.woff[L-1], m.boff[L-1], m.sizes[L-1], true
	}
	return 0, 0, 0, false
}

// LastDenseReadsNonNegative reports whether the features the last dense layer reads are never
// negative whatever the input: after a ReLU (or a residual block, which ends in one), through
// pooling, flattening and global average pooling, or after an MLP's ReLU or softplus. LLG's
// sign rule needs it; after tanh, a convolution, GroupNorm or the raw input it does not hold.
func (m *Model) LastDenseReadsNonNegative() bool {
	switch m.kind {
	case "cnn":
		return m.cnn.lastDenseReadsNonNegative()
	case "mlp":
		return m.layers() > 1 && (m.act == "relu" || m.act == "softplus")
	}
	return false
}

// lastBias returns the range of the last dense layer's bias in the parameter vector; the
// caller checked LastDense.
func (m *Model) LastBias() (lo, hi int) {
	_, b, _, _ := m.LastDense()
	return b, m.d
}

// FirstLayer returns the offsets of the first layer's weight (rows x in) and bias when it is a
// dense layer on the raw input (every MLP; a CNN spec that starts with flatten and dense).
func (m *Model) FirstLayer() (woff, boff, rows, in int, ok bool) {
	switch m.kind {
	case "cnn":
		return m.cnn.firstDense()
	case "mlp":
		return m.woff[0], m.boff[0], m.sizes[1], m.sizes[0], true
	}
	return 0, 0, 0, 0, false
}

// MeanProbabilities is the model's mean softmax output over samples xs at w.
func (m *Model) MeanProbabilities(w []float64, xs [][]float32) []float64 {
	if m.kind == "cnn" {
		return m.cnn.meanProbabilities(w, xs)
	}
	mean := make([]float64, m.sizes[len(m.sizes)-1])
	for _, x := range xs {
		for c, p := range m.probabilities(w, to64(x)) {
			mean[c] += p / float64(len(xs))
		}
	}
	return mean
}

func (m *Model) activate(v float64) float64 {
	switch m.act {
	case "softplus":
		return math.Max(v, 0) + math.Log1p(math.Exp(-math.Abs(v)))
	case "relu":
		return math.Max(v, 0)
	}
	return math.Tanh(v)
}

// activateGrad is the derivative at pre-activation v with activation h.
func (m *Model) activateGrad(v, h float64) float64 {
	switch m.act {
	case "softplus":
		return 1 / (1 + math.Exp(-v))
	case "relu":
		if v <= 0 {
			return 0
		}
		return 1
	}
	return 1 - h*h
}

// logits returns the output of an MLP and the per-layer inputs and pre-activations it needs for
// the backward pass.
func (m *Model) forward(w []float64, x []float64) (inputs, pres [][]float64) {
	L := m.layers()
	in := x
	for l := 0; l < L; l++ {
		nin, nout := m.sizes[l], m.sizes[l+1]
		pre := make([]float64, nout)
		for o := 0; o < nout; o++ {
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			s := w[m.boff[l]+o]
			for i, v := range row {
				s += v * in[i]
			}
			pre[o] = s
		}
		inputs = append(inputs, in)
		pres = append(pres, pre)
		if l+1 < L {
			post := make([]float64, nout)
			for o, v := range pre {
				post[o] = m.activate(v)
			}
			in = post
		}
	}
	return inputs, pres
}

// probabilities returns the softmax of the logits of x.
func (m *Model) probabilities(w, x []float64) []float64 {
	_, pres := m.forward(w, x)
	return softmax(pres[len(pres)-1])
}

func softmax(z []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, v)
	}
	p := make([]float64, len(z))
	var s float64
	for j, v := range z {
		p[j] = math.Exp(v - mx)
		s += p[j]
	}
	for j := range p {
		p[j] /= s
	}
	return p
}

// LossGrad returns the loss and logit margin of sample (x, y) at w, as train defines them
// (softmax cross-entropy and true logit minus the largest other; for the quadratic model
// (a/2)||w||^2 - <x, w> and <x, w>), and adds scale times the gradient of the loss to grad
// when grad is not nil.
func (m *Model) LossGrad(w, x []float64, y int, scale float64, grad []float64) (loss, margin float64) {
	if m.kind == "cnn" {
		return m.cnn.sampleLoss(w, x, y, scale, grad)
	}
	if m.kind == "quadratic" {
		var ww, xw float64
		for i, v := range w {
			ww += v * v
			xw += x[i] * v
		}
		if grad != nil {
			for i, v := range w {
				grad[i] += scale * (m.a*v - x[i])
			}
		}
		return m.a/2*ww - xw, xw
	}
	inputs, pres := m.forward(w, x)
	L := m.layers()
	logits := pres[L-1]
	p := softmax(logits)
	loss = -math.Log(p[y])
	if p[y] == 0 {
		// log-sum-exp form keeps the loss finite when p[y] underflows.
		mx := math.Inf(-1)
		for _, v := range logits {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range logits {
			s += math.Exp(v - mx)
		}
		loss = mx + math.Log(s) - logits[y]
	}
	other := math.Inf(-1)
	for j, v := range logits {
		if j != y {
			other = math.Max(other, v)
		}
	}
	margin = logits[y] - other
	if grad == nil {
		return loss, margin
	}
	delta := p
	delta[y]--
	for l := L - 1; l >= 0; l-- {
		nin := m.sizes[l]
		in := inputs[l]
		for o, dv := range delta {
			if dv == 0 {
				continue
			}
			g := grad[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			for i, v := range in {
				g[i] += scale * dv * v
			}
			grad[m.boff[l]+o] += scale * dv
		}
		if l == 0 {
			break
		}
		prev := make([]float64, nin)
		for o, dv := range delta {
			if dv == 0 {
				continue
			}
			row := w[m.woff[l]+o*nin : m.woff[l]+(o+1)*nin]
			for i, v := range row {
				prev[i] += dv * v
			}
		}
		for i := range prev {
			prev[i] *= m.activateGrad(pres[l-1][i], in[i])
		}
		delta = prev
	}
	return loss, margin
}

// gradient returns the gradient of the loss of one sample at w.
func (m *Model) gradient(w, x []float64, y int) []float64 {
	g := make([]float64, m.d)
	m.LossGrad(w, x, y, 1, g)
	return g
}

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
