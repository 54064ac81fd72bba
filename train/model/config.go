package model

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/nn"
)

// Config selects a model.
type Config struct {
	// Kind is "softmax" (softmax regression), "mlp" or "quadratic", or one of package nn's
	// convolutional models: "lenet5", "resnet" or "sequential" (on backends with image
	// operations, direct local steps), or "external": an architecture fedaudit does not
	// model, whose runs were trained elsewhere and imported as flat parameter vectors (never
	// trained here).
	Kind string `json:"kind" yaml:"kind"`
	// Hidden holds the MLP's hidden-layer widths.
	Hidden []int `json:"hidden,omitempty" yaml:"hidden,omitempty"`
	// Activation is the MLP's "tanh", "softplus" or "relu".
	Activation string `json:"activation,omitempty" yaml:"activation,omitempty"`
	// Curvature is the quadratic model's a.
	Curvature float64 `json:"curvature,omitempty" yaml:"curvature,omitempty"`
	// Classic selects LeNet-5's tanh and average-pooling variant (lenet5).
	Classic bool `json:"classic,omitempty" yaml:"classic,omitempty"`
	// Stages (default 3), Blocks (residual blocks per stage), Width (channels of the first
	// stage) and Groups (GroupNorm's groups, dividing Width) shape the resnet: stages 3,
	// blocks 3, width 16 is ResNet-20; stages 4, blocks 2, width 64 is ResNet-18.
	Stages int `json:"stages,omitempty" yaml:"stages,omitempty"`
	Blocks int `json:"blocks,omitempty" yaml:"blocks,omitempty"`
	Width  int `json:"width,omitempty" yaml:"width,omitempty"`
	Groups int `json:"groups,omitempty" yaml:"groups,omitempty"`
	// Input is the [channels, height, width] of one sample for lenet5, resnet and sequential;
	// empty takes the data's shape. A sequential model needs it for its shapes to be checked
	// before the data is loaded.
	Input []int `json:"input,omitempty" yaml:"input,omitempty"`
	// Layers are the sequential model's layers (nn.LayerSpec: kind, out, kernel, stride,
	// padding, groups).
	Layers []nn.LayerSpec `json:"layers,omitempty" yaml:"layers,omitempty"`
}

// problems collects a model configuration's errors, each naming its field.
type problems []error

func (p *problems) add(field, format string, a ...any) {
	*p = append(*p, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, a...)))
}

// Check returns the problems of the model's fields for data of the given shape (nil when not
// known yet), dim features (0 when not known yet) and number of classes; every error names its
// field.
func (mc Config) Check(shape []int, dim, classes int) []error {
	var errs problems
	p := &errs
	switch mc.Kind {
	case "lenet5", "resnet", "sequential":
		mc.checkNN(p, shape, dim, classes)
	case "softmax", "mlp":
		if classes < 2 {
			p.add("model.kind", "%s needs at least 2 classes, the data has %d", mc.Kind, classes)
		}
		if _, err := parseActivation(mc.Activation); mc.Kind == "mlp" && err != nil {
			p.add("model.activation", "%v", err)
		}
		for _, h := range mc.Hidden {
			if h < 1 {
				p.add("model.hidden", "widths must be positive, got %v", mc.Hidden)
				break
			}
		}
		if mc.Kind == "softmax" && len(mc.Hidden) > 0 {
			p.add("model.hidden", "softmax regression has no hidden layers")
		}
	case External:
		m := mc
		if len(m.Hidden) > 0 || m.Activation != "" || m.Curvature != 0 || m.Classic || m.Stages != 0 || m.Blocks != 0 ||
			m.Width != 0 || m.Groups != 0 || len(m.Input) > 0 || len(m.Layers) > 0 {
			p.add("model", "external takes no other field: its architecture is unknown to fedaudit")
		}
	case "quadratic":
		if mc.Curvature == 0 || math.IsNaN(mc.Curvature) || math.IsInf(mc.Curvature, 0) {
			p.add("model.curvature", "need a finite nonzero a, got %g", mc.Curvature)
		}
	default:
		p.add("model.kind", "%q is not softmax, mlp, quadratic, lenet5, resnet, sequential or external", mc.Kind)
	}
	return errs
}

func parseActivation(s string) (compute.Activation, error) {
	switch s {
	case "tanh":
		return compute.Tanh, nil
	case "softplus":
		return compute.Softplus, nil
	case "relu":
		return compute.ReLU, nil
	}
	return 0, fmt.Errorf("%q is not tanh, softplus or relu", s)
}

// New builds the model of mc for samples of the given shape (nil: unknown), dim and classes.
func New(mc Config, shape []int, dim, classes int) (Model, error) {
	switch mc.Kind {
	case "lenet5", "resnet", "sequential":
		return newNNModel(mc, shape, dim, classes)
	case "softmax":
		return NewMLP(compute.Tanh, dim, classes)
	case "mlp":
		act, err := parseActivation(mc.Activation)
		if err != nil {
			return nil, err
		}
		sizes := append(append([]int{dim}, mc.Hidden...), classes)
		return NewMLP(act, sizes...)
	case "quadratic":
		return &Quadratic{A: float32(mc.Curvature), Dim: dim}, nil
	case External:
		return nil, ErrExternal
	}
	return nil, fmt.Errorf("config: model.kind: %q unknown", mc.Kind)
}
