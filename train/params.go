package train

// ParamCount returns d, the length of one replica's parameter vector, for a model on data of
// dimension dim with the given number of classes: what run files, plans and attacks size their
// vectors by.
func ParamCount(mc ModelConfig, dim, classes int) (int, error) {
	c := Config{Model: mc}
	m, err := c.newModel(dim, classes)
	if err != nil {
		return 0, err
	}
	return m.NumParams(), nil
}
