package nn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fedaudit/fedaudit/compute"
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

// build checks spec and infers every layer's shape; every problem found is reported, each
// naming its layer and the shapes.
func build[T Float](spec Spec) (*Model[T], error) {
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
	m := &Model[T]{Input: in, Classes: sh.C}
	for i, l := range ls {
		m.info = append(m.info, LayerInfo{Layer: i + 1, Kind: strings.ToLower(spec.Layers[i].Kind), In: l.in(), Out: l.out(), Params: l.numParams()})
		l.setOffset(m.d)
		m.d += l.numParams()
	}
	m.body = newSeq(fuseDenseAct(fuseGroupNormReLU(fusePoolReLU(poolFirst(ls)))))
	return m, nil
}

// poolFirst returns the layers with every activation that comes right before a max pooling
// moved after it. ReLU and tanh are non-decreasing, so max pooling commutes with them: the
// outputs are the same values, and the gradient reaches the same pixel (the window's first
// maximum, the same before and after a non-decreasing function unless rounding makes two
// window values equal), while the activation and its gradient run on the pooled, K*K times
// smaller tensor. Model.Layers still lists the spec's order.
func poolFirst[T Float](ls []layer[T]) []layer[T] {
	out := append([]layer[T](nil), ls...)
	for i := 0; i+1 < len(out); i++ {
		a, isAct := out[i].(*act[T])
		p, isPool := out[i+1].(*pool[T])
		if !isAct || !isPool || p.kind != compute.MaxPooling {
			continue
		}
		out[i], out[i+1] = p, &act[T]{sh: p.osh, fn: a.fn}
		i++
	}
	return out
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
		// One output channel's weights (at most 2^48 here) bounded first: the layer's count,
		// out times that, would otherwise overflow int and pass checkSize.
		if in.C*s.Kernel*s.Kernel > maxValues {
			return nil, fmt.Errorf("a filter of %d x %d x %d weights is beyond the limit of %d values", in.C, s.Kernel, s.Kernel, maxValues)
		}
		win := compute.Window{Size: s.Kernel, Stride: stride, Pad: s.Padding}
		return &conv[T]{ish: in, osh: Shape{s.Out, win.Out(in.H), win.Out(in.W)}, win: win}, nil
	case "maxpool", "avgpool":
		if s.Kernel < 1 || s.Stride < 0 || s.Padding < 0 {
			return nil, fmt.Errorf("needs kernel >= 1, stride and padding >= 0 (have kernel %d, stride %d, padding %d)", s.Kernel, s.Stride, s.Padding)
		}
		if 2*s.Padding > s.Kernel {
			// As PyTorch: a window must never lie entirely in the padding.
			return nil, fmt.Errorf("padding %d is more than half the window %d", s.Padding, s.Kernel)
		}
		if stride == 0 {
			stride = s.Kernel
		}
		if in.H+2*s.Padding < s.Kernel || in.W+2*s.Padding < s.Kernel {
			return nil, fmt.Errorf("window %d is larger than the input padded by %d", s.Kernel, s.Padding)
		}
		win := compute.Window{Size: s.Kernel, Stride: stride, Pad: s.Padding}
		kind := compute.AvgPooling
		if strings.EqualFold(s.Kind, "maxpool") {
			kind = compute.MaxPooling
		}
		return &pool[T]{ish: in, osh: Shape{in.C, win.Out(in.H), win.Out(in.W)}, win: win, kind: kind}, nil
	case "relu", "tanh":
		fn := compute.ReLU
		if strings.EqualFold(s.Kind, "tanh") {
			fn = compute.Tanh
		}
		return &act[T]{sh: in, fn: fn}, nil
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
	w1 := compute.Window{Size: 3, Stride: stride, Pad: 1}
	c1 := &conv[T]{ish: in, osh: Shape{out, w1.Out(in.H), w1.Out(in.W)}, win: w1}
	if c1.osh.H < 1 || c1.osh.W < 1 {
		return nil, fmt.Errorf("stride %d leaves no output", stride)
	}
	o := c1.osh
	main := []layer[T]{c1, &groupNorm[T]{sh: o, groups: groups}, &act[T]{sh: o, fn: compute.ReLU},
		&conv[T]{ish: o, osh: o, win: compute.Window{Size: 3, Stride: 1, Pad: 1}}, &groupNorm[T]{sh: o, groups: groups}}
	var short []layer[T]
	if o != in {
		ws := compute.Window{Size: 1, Stride: stride}
		sc := &conv[T]{ish: in, osh: Shape{out, ws.Out(in.H), ws.Out(in.W)}, win: ws}
		if sc.osh != o {
			return nil, fmt.Errorf("shortcut shape %v differs from the main path's %v", sc.osh, o)
		}
		short = []layer[T]{sc, &groupNorm[T]{sh: o, groups: groups}}
	}
	return &residual[T]{ish: in, osh: o, main: newSeq(fuseGroupNormReLU(main)), short: newSeq(short)}, nil
}

// LayerInfo is one layer of a built model: its 1-based index in Spec.Layers, kind, input and
// output shapes and parameter count.
type LayerInfo struct {
	Layer   int
	Kind    string
	In, Out Shape
	Params  int
}
