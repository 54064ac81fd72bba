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

// ResNet is a residual network for 32x32 inputs (3x32x32 by default; He, Zhang, Ren and Sun
// 2016, "Deep residual learning for image recognition", with GroupNorm instead of BatchNorm):
// a 3x3 convolution to width channels, GroupNorm, ReLU, then stages of `blocks` residual blocks
// of width, 2 width, 4 width, ... channels (the first block of every stage after the first at
// stride 2), global average pooling and a dense layer. Three stages of 3 blocks at width 16
// is ResNet-20 (6n + 2 layers, the CIFAR network of that paper); four stages of 2 blocks at
// width 64 is ResNet-18 with the CIFAR stem (a 3x3 convolution instead of ImageNet's 7x7 at
// stride 2 and max pooling, as is usual for 32x32 inputs). groups is GroupNorm's group count
// (it must divide width). Convolutions here have biases, so parameter counts exceed the
// bias-free originals' by the number of convolution channels.
func ResNet(stages, blocks, width, groups, classes int) Spec {
	ls := []LayerSpec{{Kind: "conv2d", Out: width, Kernel: 3, Padding: 1}, {Kind: "groupnorm", Groups: groups}, {Kind: "relu"}}
	for stage := 0; stage < stages; stage++ {
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
