package train

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
