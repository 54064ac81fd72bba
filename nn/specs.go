package nn

// LeNet5 is the W2 benchmark's LeNet-5 (the PyTorch reference of the W2 workload): conv 1->6 5x5 pad 2, ReLU,
// max-pool 2; conv 6->16 5x5, ReLU, max-pool 2; dense 400->120, ReLU; 120->84, ReLU; 84->classes
// (61,706 parameters for 10 classes on 1x28x28). classic selects LeCun's variant: tanh and
// average pooling in the same places (plain averages: the original subsampling layers'
// trainable scale and bias, and its sparse C3 connection table, are left out, as in common
// re-implementations, so both variants have the same parameters).
func LeNet5(classes int, classic bool) Spec {
	a, p := "relu", "maxpool"
	if classic {
		a, p = "tanh", "avgpool"
	}
	return Spec{Kind: "sequential", Input: []int{1, 28, 28}, Layers: []LayerSpec{
		{Kind: "conv2d", Out: 6, Kernel: 5, Padding: 2}, {Kind: a}, {Kind: p, Kernel: 2},
		{Kind: "conv2d", Out: 16, Kernel: 5}, {Kind: a}, {Kind: p, Kernel: 2},
		{Kind: "flatten"},
		{Kind: "dense", Out: 120}, {Kind: a},
		{Kind: "dense", Out: 84}, {Kind: a},
		{Kind: "dense", Out: classes},
	}}
}

// ResNet is a ResNet-20-style network for 3x32x32 inputs (He et al. 2016, CIFAR variant) with
// GroupNorm: conv 3x3 to width channels, GroupNorm, ReLU, then 3 stages of `blocks` residual
// blocks of width, 2 width and 4 width channels (the first block of stages 2 and 3 at stride
// 2), global average pooling and a dense layer. blocks = 3, width = 16 is ResNet-20 (6n + 2
// layers); groups is GroupNorm's group count (it must divide width).
func ResNet(blocks, width, groups, classes int) Spec {
	ls := []LayerSpec{{Kind: "conv2d", Out: width, Kernel: 3, Padding: 1}, {Kind: "groupnorm", Groups: groups}, {Kind: "relu"}}
	for stage := 0; stage < 3; stage++ {
		for b := 0; b < blocks; b++ {
			s := 1
			if stage > 0 && b == 0 {
				s = 2
			}
			ls = append(ls, LayerSpec{Kind: "residual", Out: width << stage, Stride: s, Groups: groups})
		}
	}
	ls = append(ls, LayerSpec{Kind: "globalavgpool"}, LayerSpec{Kind: "flatten"}, LayerSpec{Kind: "dense", Out: classes})
	return Spec{Kind: "sequential", Input: []int{3, 32, 32}, Layers: ls}
}
