package simd

// ReLU writes max(pre[i], 0) into post[i] with Go's max: NaN stays NaN (its sign bit may
// differ from Go's) and -0 becomes +0.
func ReLU(pre, post []float32) {
	post = post[:len(pre)]
	if k := len(pre) &^ 7; useAVX2 && k > 0 {
		reluAVX2(k, &pre[0], &post[0])
		pre, post = pre[k:], post[k:]
	}
	reluGo(pre, post)
}

func reluGo(pre, post []float32) {
	for i, v := range pre {
		post[i] = max(v, 0)
	}
}

// ReLUGrad sets g[i] to +0 where pre[i] <= 0 (never where pre[i] is NaN) and leaves it
// elsewhere: the gradient of ReLU at its pre-activation, without a branch per value.
func ReLUGrad(pre, g []float32) {
	g = g[:len(pre)]
	if k := len(pre) &^ 7; useAVX2 && k > 0 {
		reluGradAVX2(k, &pre[0], &g[0])
		pre, g = pre[k:], g[k:]
	}
	reluGradGo(pre, g)
}

func reluGradGo(pre, g []float32) {
	for i, v := range pre {
		if v <= 0 {
			g[i] = 0
		}
	}
}
