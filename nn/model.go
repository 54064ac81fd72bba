package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
)

// Spec describes a model: what a YAML `model: {kind: sequential, input: [1, 28, 28], layers:
// [...]}` decodes into. The last layer's output must be a feature vector (classes x 1 x 1); the
// loss is softmax cross-entropy over it.
type Spec struct {
	Kind   string      `json:"kind" yaml:"kind"`   // "sequential"
	Input  []int       `json:"input" yaml:"input"` // C, H, W of one sample
	Layers []LayerSpec `json:"layers" yaml:"layers"`
}

// LayerSpec is one layer. Kind is conv2d, maxpool, avgpool, relu, tanh, groupnorm, residual,
// globalavgpool, flatten or dense. Out is the output channels (conv2d, residual) or features
// (dense); Kernel, Stride (default 1 for conv2d and residual, Kernel for pooling) and Padding
// apply to conv2d and pooling (Stride also to residual); Groups is GroupNorm's group count (for
// residual, that of its GroupNorms).
type LayerSpec struct {
	Kind    string `json:"kind" yaml:"kind"`
	Out     int    `json:"out,omitempty" yaml:"out,omitempty"`
	Kernel  int    `json:"kernel,omitempty" yaml:"kernel,omitempty"`
	Stride  int    `json:"stride,omitempty" yaml:"stride,omitempty"`
	Padding int    `json:"padding,omitempty" yaml:"padding,omitempty"`
	Groups  int    `json:"groups,omitempty" yaml:"groups,omitempty"`
}

// seq is a chain of layers with its activation and gradient buffers.
type seq[T Float] struct {
	layers []layer[T]
	acts   [][]T // output of each layer, [R][out]
	grads  [][]T // gradient of each layer's input (index i: input of layer i; 0 unused)
}

func (s *seq[T]) forward(c *run[T], w, x []T, xs int) []T {
	for i, l := range s.layers {
		s.acts[i] = grow(s.acts[i], c.R*c.B*l.out().Size())
		l.forward(c, w, x, xs, s.acts[i])
		x, xs = s.acts[i], c.B*l.out().Size()
	}
	return x
}

// backward propagates dy (gradient of the last output) to dx (nil: not wanted), writing dw.
func (s *seq[T]) backward(c *run[T], w, x []T, xs int, dy, dx, dw []T) {
	for i := len(s.layers) - 1; i >= 0; i-- {
		l := s.layers[i]
		in, ins := x, xs
		if i > 0 {
			in, ins = s.acts[i-1], c.B*l.in().Size()
		}
		var d []T
		switch {
		case i > 0:
			s.grads[i] = grow(s.grads[i], c.R*c.B*l.in().Size())
			d = s.grads[i]
		default:
			d = dx
		}
		l.backward(c, w, in, ins, s.acts[i], dy, d, dw)
		dy = d
	}
}

// residual is out = relu(main(x) + shortcut(x)): main = conv3x3(stride) GN relu conv3x3 GN;
// shortcut = identity when the shape is kept, else conv1x1(stride) GN (ResNet's option B).
type residual[T Float] struct {
	ish, osh    Shape
	main, short seq[T]
	dsum, dx2   []T
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
func (l *residual[T]) init(w []T, rng *rand.Rand) {
	for _, s := range [][]layer[T]{l.main.layers, l.short.layers} {
		for _, sl := range s {
			n := sl.numParams()
			sl.init(w[:n], rng)
			w = w[n:]
		}
	}
}

func (l *residual[T]) forward(c *run[T], w, x []T, xs int, y []T) {
	a := l.main.forward(c, w, x, xs)
	n := c.B * l.osh.Size()
	sc, ss := x, xs
	if len(l.short.layers) > 0 {
		sc, ss = l.short.forward(c, w, x, xs), n
	}
	for r := 0; r < c.R; r++ {
		for i := 0; i < n; i++ {
			y[r*n+i] = max(a[r*n+i]+sc[r*ss+i], 0)
		}
	}
}

func (l *residual[T]) backward(c *run[T], w, x []T, xs int, y, dy, dx, dw []T) {
	n := c.B * l.osh.Size()
	l.dsum = grow(l.dsum, c.R*n)
	for i, v := range y[:c.R*n] {
		if v > 0 {
			l.dsum[i] = dy[i]
		} else {
			l.dsum[i] = 0
		}
	}
	l.main.backward(c, w, x, xs, l.dsum, dx, dw)
	if len(l.short.layers) == 0 {
		if dx != nil {
			for i, v := range l.dsum {
				dx[i] += v
			}
		}
		return
	}
	var d2 []T
	if dx != nil {
		l.dx2 = grow(l.dx2, c.R*c.B*l.ish.Size())
		d2 = l.dx2
	}
	l.short.backward(c, w, x, xs, l.dsum, d2, dw)
	for i, v := range d2 {
		dx[i] += v
	}
}

func newSeq[T Float](ls []layer[T]) seq[T] {
	return seq[T]{layers: ls, acts: make([][]T, len(ls)), grads: make([][]T, len(ls))}
}

// Model is a sequential model over R replicas. It keeps its activations between Forward and
// Backward and is not safe for concurrent use.
type Model[T Float] struct {
	Input   Shape
	Classes int
	// Threads is the number of goroutines of the work outside the GEMM (im2col, col2im,
	// pooling, activations, GroupNorm); 0 means GOMAXPROCS. Results do not depend on it.
	Threads int
	body    seq[T]
	kinds   []string
	d       int
	g       Gemm[T]
	xin     []T // the input transposed to [C][B][H][W]
	dxin    []T // the gradient of xin (LossGradInput)
	logits  []T
	dlogits []T
	r       run[T]
	xs      int
}

// ShapeError is a layer whose input shape does not fit it.
type ShapeError struct {
	Layer int // 1-based index in Spec.Layers
	Kind  string
	In    Shape
	Msg   string
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("nn: layer %d (%s): input %v: %s", e.Layer, e.Kind, e.In, e.Msg)
}

// Build checks spec, infers every layer's shape and returns the model; every problem found is
// reported, each naming its layer and the shapes.
func Build[T Float](spec Spec, g Gemm[T]) (*Model[T], error) {
	if spec.Kind != "" && spec.Kind != "sequential" {
		return nil, fmt.Errorf("nn: model kind %q: only sequential specs build here", spec.Kind)
	}
	if len(spec.Input) != 3 || spec.Input[0] < 1 || spec.Input[1] < 1 || spec.Input[2] < 1 ||
		spec.Input[0] > maxDim || spec.Input[1] > maxDim || spec.Input[2] > maxDim || spec.Input[0]*spec.Input[1]*spec.Input[2] > maxValues {
		return nil, fmt.Errorf("nn: input %v: want [channels, height, width], each in 1..%d, at most %d values", spec.Input, maxDim, maxValues)
	}
	if len(spec.Layers) == 0 {
		return nil, errors.New("nn: no layers")
	}
	in := Shape{spec.Input[0], spec.Input[1], spec.Input[2]}
	sh := in
	var ls []layer[T]
	var errs []error
	for i, s := range spec.Layers {
		l, err := buildLayer[T](s, sh)
		if err == nil {
			err = checkSize(l)
		}
		if err != nil {
			errs = append(errs, &ShapeError{Layer: i + 1, Kind: s.Kind, In: sh, Msg: err.Error()})
			break // later shapes are unknown
		}
		ls = append(ls, l)
		sh = l.out()
	}
	if len(errs) == 0 && (sh.H != 1 || sh.W != 1 || sh.C < 2) {
		last := len(spec.Layers)
		errs = append(errs, &ShapeError{Layer: last, Kind: spec.Layers[last-1].Kind, In: ls[last-1].in(),
			Msg: fmt.Sprintf("the model's output is %v; the loss needs class scores, classes x 1 x 1 with at least 2 classes (end with flatten and dense)", sh)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m := &Model[T]{Input: in, Classes: sh.C, body: newSeq(ls), g: g}
	for _, s := range spec.Layers {
		m.kinds = append(m.kinds, strings.ToLower(s.Kind))
	}
	for _, l := range ls {
		l.setOffset(m.d)
		m.d += l.numParams()
	}
	return m, nil
}

// Limits that keep every size computation far from int overflow and refuse specs that could
// not be trained anyway (a spec is outside data).
const (
	maxDim    = 1 << 16 // channels, features, height, width, kernel, stride, padding
	maxValues = 1 << 26 // values of one sample's activation, parameters of one layer
)

func checkSize[T Float](l layer[T]) error {
	o := l.out()
	if o.C > maxDim || o.H > maxDim || o.W > maxDim || o.Size() > maxValues || l.numParams() > maxValues {
		return fmt.Errorf("output %v with %d parameters is beyond the limits (%d per dimension, %d values)", o, l.numParams(), maxDim, maxValues)
	}
	return nil
}

func convOut(n, k, s, p int) int { return (n+2*p-k)/s + 1 }

func buildLayer[T Float](s LayerSpec, in Shape) (layer[T], error) {
	stride := s.Stride
	for _, v := range []int{s.Out, s.Kernel, s.Stride, s.Padding, s.Groups} {
		if v > maxDim || v < -maxDim {
			return nil, fmt.Errorf("a size of %d is beyond the limit %d", v, maxDim)
		}
	}
	switch strings.ToLower(s.Kind) {
	case "conv2d":
		if s.Out < 1 || s.Kernel < 1 || s.Stride < 0 || s.Padding < 0 {
			return nil, fmt.Errorf("needs out >= 1 and kernel >= 1, stride and padding >= 0 (have out %d, kernel %d, stride %d, padding %d)", s.Out, s.Kernel, s.Stride, s.Padding)
		}
		if stride == 0 {
			stride = 1
		}
		if in.H+2*s.Padding < s.Kernel || in.W+2*s.Padding < s.Kernel {
			return nil, fmt.Errorf("kernel %d is larger than the input padded by %d", s.Kernel, s.Padding)
		}
		return &conv[T]{ish: in, osh: Shape{s.Out, convOut(in.H, s.Kernel, stride, s.Padding), convOut(in.W, s.Kernel, stride, s.Padding)},
			k: s.Kernel, s: stride, p: s.Padding}, nil
	case "maxpool", "avgpool":
		if s.Kernel < 1 || s.Stride < 0 {
			return nil, fmt.Errorf("needs kernel >= 1 (have %d)", s.Kernel)
		}
		if s.Padding != 0 {
			return nil, errors.New("pooling takes no padding")
		}
		if stride == 0 {
			stride = s.Kernel
		}
		if in.H < s.Kernel || in.W < s.Kernel {
			return nil, fmt.Errorf("window %d is larger than the input", s.Kernel)
		}
		return &pool[T]{ish: in, osh: Shape{in.C, convOut(in.H, s.Kernel, stride, 0), convOut(in.W, s.Kernel, stride, 0)},
			k: s.Kernel, s: stride, max: strings.EqualFold(s.Kind, "maxpool")}, nil
	case "relu", "tanh":
		return &act[T]{sh: in, tanh: strings.EqualFold(s.Kind, "tanh")}, nil
	case "groupnorm":
		if s.Groups < 1 || in.C%s.Groups != 0 {
			return nil, fmt.Errorf("groups %d must be >= 1 and divide the %d channels", s.Groups, in.C)
		}
		return &groupNorm[T]{sh: in, groups: s.Groups}, nil
	case "globalavgpool":
		return &gap[T]{ish: in}, nil
	case "flatten":
		return &flatten[T]{ish: in}, nil
	case "dense":
		if s.Out < 1 {
			return nil, fmt.Errorf("needs out >= 1 (have %d)", s.Out)
		}
		if in.H != 1 || in.W != 1 {
			return nil, errors.New("dense takes features (F x 1 x 1); put a flatten or globalavgpool layer before it")
		}
		return &dense[T]{ish: in, outF: s.Out}, nil
	case "residual":
		return buildResidual[T](s, in)
	}
	return nil, fmt.Errorf("unknown layer kind %q (conv2d, maxpool, avgpool, relu, tanh, groupnorm, residual, globalavgpool, flatten, dense)", s.Kind)
}

func buildResidual[T Float](s LayerSpec, in Shape) (layer[T], error) {
	out, stride, groups := s.Out, s.Stride, s.Groups
	if out == 0 {
		out = in.C
	}
	if out < 0 || stride < 0 || s.Kernel != 0 || s.Padding != 0 {
		return nil, fmt.Errorf("takes out >= 0 (0 keeps the channels), stride >= 0 and no kernel or padding (its convolutions are 3x3; have out %d, stride %d, kernel %d, padding %d)", s.Out, s.Stride, s.Kernel, s.Padding)
	}
	if stride == 0 {
		stride = 1
	}
	if groups < 1 || out%groups != 0 {
		return nil, fmt.Errorf("groups %d must be >= 1 and divide the %d output channels", groups, out)
	}
	c1 := &conv[T]{ish: in, osh: Shape{out, convOut(in.H, 3, stride, 1), convOut(in.W, 3, stride, 1)}, k: 3, s: stride, p: 1}
	if c1.osh.H < 1 || c1.osh.W < 1 {
		return nil, fmt.Errorf("stride %d leaves no output", stride)
	}
	o := c1.osh
	main := []layer[T]{c1, &groupNorm[T]{sh: o, groups: groups}, &act[T]{sh: o},
		&conv[T]{ish: o, osh: o, k: 3, s: 1, p: 1}, &groupNorm[T]{sh: o, groups: groups}}
	var short []layer[T]
	if o != in {
		sc := &conv[T]{ish: in, osh: Shape{out, convOut(in.H, 1, stride, 0), convOut(in.W, 1, stride, 0)}, k: 1, s: stride}
		if sc.osh != o {
			return nil, fmt.Errorf("shortcut shape %v differs from the main path's %v", sc.osh, o)
		}
		short = []layer[T]{sc, &groupNorm[T]{sh: o, groups: groups}}
	}
	return &residual[T]{ish: in, osh: o, main: newSeq(main), short: newSeq(short)}, nil
}

// LayerInfo is one layer of a built model: its 1-based index in Spec.Layers, kind, input and
// output shapes and parameter count.
type LayerInfo struct {
	Layer   int
	Kind    string
	In, Out Shape
	Params  int
}

// Layers lists the model's layers with the shapes Build inferred (for a user checking a spec).
func (m *Model[T]) Layers() []LayerInfo {
	out := make([]LayerInfo, len(m.body.layers))
	for i, l := range m.body.layers {
		out[i] = LayerInfo{Layer: i + 1, Kind: m.kinds[i], In: l.in(), Out: l.out(), Params: l.numParams()}
	}
	return out
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

// Forward runs R replicas (parameters w, R x d) on a batch of B samples. x is either one batch
// [B][C][H][W] shared by every replica (a client's minibatch: the first layer's patches are then
// computed once) or R batches one after another. It returns the logits [R][classes][B], valid
// until the next call.
func (m *Model[T]) Forward(w []T, R int, x []T, B int) ([]T, error) {
	n := B * m.Input.Size()
	if R < 1 || B < 1 || len(w) < R*m.d {
		return nil, fmt.Errorf("nn: forward: R = %d, B = %d, %d parameters for %d per replica", R, B, len(w), m.d)
	}
	per := 1
	switch len(x) {
	case n:
	case R * n:
		per = R
	default:
		return nil, fmt.Errorf("nn: forward: input has %d values; want B x %v = %d (shared) or R times that", len(x), m.Input, n)
	}
	m.xin = grow(m.xin, per*n)
	C, hw := m.Input.C, m.Input.H*m.Input.W
	for r := 0; r < per; r++ {
		for b := 0; b < B; b++ {
			for c := 0; c < C; c++ {
				copy(m.xin[r*n+(c*B+b)*hw:][:hw], x[r*n+(b*C+c)*hw:][:hw])
			}
		}
	}
	m.xs = 0
	if per > 1 {
		m.xs = n
	}
	threads := m.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	m.r = run[T]{g: m.g, R: R, B: B, d: m.d, threads: threads}
	m.logits = m.body.forward(&m.r, w, m.xin, m.xs)
	return m.logits, nil
}

// LossGrad runs Forward, then the softmax cross-entropy averaged over the batch (labels shared
// by every replica) and its gradient: loss[r] (float64) and grad (R x d, overwritten).
func (m *Model[T]) LossGrad(w []T, R int, x []T, labels []int32, grad []T, loss []float64) error {
	B := len(labels)
	if _, err := m.Forward(w, R, x, B); err != nil {
		return err
	}
	if len(grad) < R*m.d || len(loss) < R {
		return fmt.Errorf("nn: loss: grad has %d values and loss %d; want %d and %d", len(grad), len(loss), R*m.d, R)
	}
	K := m.Classes
	for _, y := range labels {
		if y < 0 || int(y) >= K {
			return fmt.Errorf("nn: loss: label %d outside 0..%d", y, K-1)
		}
	}
	m.dlogits = grow(m.dlogits, R*K*B)
	XentGrad(m.logits, labels, R, K, m.dlogits, loss)
	m.body.backward(&m.r, w, m.xin, m.xs, m.dlogits, nil, grad)
	return nil
}

// LossGradInput is LossGrad that also writes dx, the gradient of each replica's loss with
// respect to its input: R batches [B][C][H][W] one after another (R x B x C x H x W values),
// whether x was shared by the replicas or given per replica. The attacks that reconstruct
// inputs (gradient inversion) need it; training never does.
func (m *Model[T]) LossGradInput(w []T, R int, x []T, labels []int32, grad, dx []T, loss []float64) error {
	B := len(labels)
	n := B * m.Input.Size()
	if len(dx) < R*n {
		return fmt.Errorf("nn: input gradient: dx has %d values; want R x B x %v = %d", len(dx), m.Input, R*n)
	}
	if _, err := m.Forward(w, R, x, B); err != nil {
		return err
	}
	if len(grad) < R*m.d || len(loss) < R {
		return fmt.Errorf("nn: loss: grad has %d values and loss %d; want %d and %d", len(grad), len(loss), R*m.d, R)
	}
	K := m.Classes
	for _, y := range labels {
		if y < 0 || int(y) >= K {
			return fmt.Errorf("nn: loss: label %d outside 0..%d", y, K-1)
		}
	}
	m.dlogits = grow(m.dlogits, R*K*B)
	XentGrad(m.logits, labels, R, K, m.dlogits, loss)
	m.dxin = grow(m.dxin, R*n)
	m.body.backward(&m.r, w, m.xin, m.xs, m.dlogits, m.dxin, grad)
	// [R][C][B][H][W] back to the caller's [R][B][C][H][W].
	C, hw := m.Input.C, m.Input.H*m.Input.W
	for r := 0; r < R; r++ {
		for b := 0; b < B; b++ {
			for c := 0; c < C; c++ {
				copy(dx[r*n+(b*C+c)*hw:][:hw], m.dxin[r*n+(c*B+b)*hw:][:hw])
			}
		}
	}
	return nil
}

// XentGrad computes, for logits [R][K][B], loss[r] = mean_b -log softmax(z_b)[y_b] and
// dz = (softmax - onehot) / B. Log-sum-exp in float64 (B x K values only).
func XentGrad[T Float](z []T, y []int32, R, K int, dz []T, loss []float64) {
	B := len(y)
	for r := 0; r < R; r++ {
		zr, dr := z[r*K*B:], dz[r*K*B:]
		var tot float64
		for b := 0; b < B; b++ {
			mx := math.Inf(-1)
			for k := 0; k < K; k++ {
				mx = max(mx, float64(zr[k*B+b]))
			}
			var s float64
			for k := 0; k < K; k++ {
				s += math.Exp(float64(zr[k*B+b]) - mx)
			}
			lse := mx + math.Log(s)
			tot += lse - float64(zr[int(y[b])*B+b])
			for k := 0; k < K; k++ {
				p := math.Exp(float64(zr[k*B+b]) - lse)
				if k == int(y[b]) {
					p--
				}
				dr[k*B+b] = T(p / float64(B))
			}
		}
		loss[r] = tot / float64(B)
	}
}
