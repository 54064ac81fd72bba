package model

import (
	"errors"
	"fmt"
	"slices"

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
func nnSpec(mc Config, shape []int, dim, classes int) (spec nn.Spec, ok bool, err error) {
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
func NNSpec(mc Config, shape []int, dim, classes int) (nn.Spec, error) {
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

// newNNModel builds the nn model of mc for samples of the given shape, dim and classes.
func newNNModel(mc Config, shape []int, dim, classes int) (*NN, error) {
	spec, ok, err := nnSpec(mc, shape, dim, classes)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("model.input: a sequential model needs the input shape: give model.input [channels, height, width]")
	}
	return NewNN(spec, classes)
}

// IsNNKind reports whether a model kind is one of package nn's models (lenet5, resnet,
// sequential).
func IsNNKind(kind string) bool { return isConvKind(kind) }

// checkNN adds the problems of an nn model's fields to p; shape and dim as for nnSpec.
func (mc Config) checkNN(p *problems, shape []int, dim, classes int) {
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
		if len(shape) == 1 && len(mc.Input) == 0 && mc.Kind != "sequential" {
			// The layer's own complaint (a pooling window larger than its 6x1x1 input) does
			// not say that the model wants images and the data has vectors.
			p.add("model", "%s is a convolutional network for images, and the data's samples are vectors of %d features: give image data (a dataset of images, or data.source synthetic-images) or model.input [channels, height, width] (%v)", mc.Kind, shape[0], err)
			return
		}
		p.add("model", "%v", err)
		return
	}
	// Before the data is loaded (no shape) the classes may be a stand-in (experiment checks
	// named datasets with 2): the engine compares them with the data's.
	if shape != nil && m.Classes != classes {
		p.add("model.layers", "the last layer has %d outputs, the data has %d classes", m.Classes, classes)
	}
}

// NNMemoryOf is the parameter count of mc's nn model (lenet5, resnet, sequential) and its
// workspace's bytes per row (nnMemory), for samples of the given shape (nil when the data is
// not loaded yet), dim features (0: not known) and classes: what train's memory estimate
// counts for an nn model.
func NNMemoryOf(mc Config, shape []int, dim, classes int) (d int, perRowBytes float64, err error) {
	spec, err := nnSpecToEstimate(mc, shape, dim, classes)
	if err != nil {
		return 0, 0, err
	}
	return nnMemory(spec)
}

// nnSpecToEstimate is nnSpec for the memory estimates, which may run before the data is
// loaded: a sequential model without model.input is then an error.
func nnSpecToEstimate(mc Config, shape []int, dim, classes int) (nn.Spec, error) {
	spec, ok, err := nnSpec(mc, shape, dim, classes)
	if err != nil {
		return nn.Spec{}, err
	}
	if !ok {
		return nn.Spec{}, errors.New("model.input: a sequential model needs the input shape before the data is loaded: give model.input [channels, height, width]")
	}
	return spec, nil
}

// NNDeviceMemoryOf is the float32 values mc's nn model allocates at its peak on a device
// backend (nn.DeviceMemory: every convolution's patches written and held, scratch freed when
// it grows) for R replicas training on trainRows rows and evaluating evalRows rows, with the
// 3 x 3 convolutions in the given form (nn.DeviceMemoryOf).
func NNDeviceMemoryOf(mc Config, shape []int, dim, classes, R, trainRows, evalRows int, form nn.ConvForm) (int64, error) {
	spec, err := nnSpecToEstimate(mc, shape, dim, classes)
	if err != nil {
		return 0, err
	}
	return nn.DeviceMemoryOf(spec, R, trainRows, evalRows, form)
}

// NNWinogradConvolutions is how many of mc's convolutions a GPU computes by Winograd's
// F(2x2, 3x3) (nn.WinogradConvolutions).
func NNWinogradConvolutions(mc Config, shape []int, dim, classes int) (int, error) {
	spec, err := nnSpecToEstimate(mc, shape, dim, classes)
	if err != nil {
		return 0, err
	}
	return nn.WinogradConvolutions(spec)
}
