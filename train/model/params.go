package model

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/nn"
)

// ParamCount returns d, the length of one replica's parameter vector, for a model on data of
// dimension dim with the given number of classes: what run files, plans and attacks size their
// vectors by.
func ParamCount(mc Config, dim, classes int) (int, error) {
	m, err := New(mc, nil, dim, classes)
	if err != nil {
		return 0, err
	}
	return m.NumParams(), nil
}

// ParamCountShape is ParamCount for samples of the given shape (Dataset.Shape), which the
// convolutional models (lenet5, resnet, sequential) take their input shape from.
func ParamCountShape(mc Config, shape []int, classes int) (int, error) {
	dim := 1
	for _, s := range shape {
		dim *= s
	}
	m, err := New(mc, shape, dim, classes)
	if err != nil {
		return 0, err
	}
	return m.NumParams(), nil
}

// ForwardFLOPs is the floating-point work of one sample's forward pass of the model on samples
// of the given shape: for the dense models the rule of thumb 2 d (a multiply-add per
// parameter), for package nn's models their count per layer (a convolution's weights are
// used at every output position, so 2 d would undercount LeNet-5 about sevenfold). A gradient
// costs about three times as much.
func ForwardFLOPs(mc Config, shape []int, classes int) (float64, error) {
	dim := 1
	for _, s := range shape {
		dim *= s
	}
	if !isConvKind(mc.Kind) {
		d, err := ParamCountShape(mc, shape, classes)
		return 2 * float64(d), err
	}
	spec, err := NNSpec(mc, shape, dim, classes)
	if err != nil {
		return 0, err
	}
	m, err := nn.Build[float32](spec, nn.NaiveGemm[float32]{})
	if err != nil {
		return 0, fmt.Errorf("model: %w", err)
	}
	return float64(m.ForwardFLOPs()), nil
}

// DenseShape returns the parameter count and layer sizes of a dense model (softmax, mlp,
// quadratic) without building it, in
// float64 arithmetic first so that an absurd width cannot overflow.
func DenseShape(mc Config, dim, classes int) (int, []int, error) {
	switch mc.Kind {
	case "quadratic":
		return dim, []int{dim}, nil
	case "softmax", "mlp":
	default:
		return 0, nil, fmt.Errorf("model.kind: %q is not softmax, mlp or quadratic", mc.Kind)
	}
	sizes := []int{dim}
	if mc.Kind == "mlp" {
		sizes = append(sizes, mc.Hidden...)
	}
	sizes = append(sizes, classes)
	var d float64
	for l := 0; l+1 < len(sizes); l++ {
		if sizes[l+1] < 1 {
			return 0, nil, fmt.Errorf("model.hidden: widths must be positive, got %v", mc.Hidden)
		}
		d += float64(sizes[l])*float64(sizes[l+1]) + float64(sizes[l+1])
	}
	if d > math.MaxInt32 {
		// cuBLAS takes 32-bit sizes, and no machine holds two replicas of such a model anyway.
		return 0, nil, fmt.Errorf("model: %.3g parameters (input %d, hidden %v, %d classes): more than %d, the most one replica may have", d, dim, mc.Hidden, classes, math.MaxInt32)
	}
	return int(d), sizes, nil
}

// MLPWorkspaceFloats is the floats per row of the workspace of an MLP of the given layer sizes
// (NewWorkspace): pre-activations and deltas of every layer, post-activations of the hidden
// ones. The memory estimate counts it without building the model.
func MLPWorkspaceFloats(sizes []int) float64 {
	var act float64
	for l := 1; l < len(sizes); l++ {
		k := 2.0
		if l+1 < len(sizes) {
			k = 3
		}
		act += k * float64(sizes[l])
	}
	return act
}
