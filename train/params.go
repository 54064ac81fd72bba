package train

import (
	"fmt"

	"github.com/fedaudit/fedaudit/nn"
)

// ParamCount returns d, the length of one replica's parameter vector, for a model on data of
// dimension dim with the given number of classes: what run files, plans and attacks size their
// vectors by.
func ParamCount(mc ModelConfig, dim, classes int) (int, error) {
	c := Config{Model: mc}
	m, err := c.newModel(nil, dim, classes)
	if err != nil {
		return 0, err
	}
	return m.NumParams(), nil
}

// ParamCountShape is ParamCount for samples of the given shape (Dataset.Shape), which the
// convolutional models (lenet5, resnet, sequential) take their input shape from.
func ParamCountShape(mc ModelConfig, shape []int, classes int) (int, error) {
	dim := 1
	for _, s := range shape {
		dim *= s
	}
	c := Config{Model: mc}
	m, err := c.newModel(shape, dim, classes)
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
func ForwardFLOPs(mc ModelConfig, shape []int, classes int) (float64, error) {
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
