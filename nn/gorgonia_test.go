package nn

import (
	"fmt"
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Every layer built as a float64 gorgonia graph in NCHW; its symbolic gradient is the oracle for
// our hand-written backward passes. gorgonia v0.9.18 has Conv2d (stride, padding), MaxPool2D,
// Rectify, Tanh, matrix products and softmax; the others are composed from its primitives:
// average pooling as a convolution with a constant per-channel 1/k^2 filter at stride k, global
// average pooling as sums over W and H times 1/(HW), GroupNorm from Reshape, matrix products
// with constant vectors, Square, Sqrt and Inverse, a residual block from those layers and Add.
// Two gorgonia v0.9.18 operations are avoided because they disagreed with finite differences
// and with equivalent compositions: InverseSqrt's gradient, and Mean over two axes.
//
// The losses must agree to 1e-12 relative (same function, different summation order).
// Tolerances: our float64 model against gorgonia's float64 graph differ only in summation
// order, so 1e-9 of the gradient's scale; our float32 model (package cpu's GEMM) differs by
// float32 rounding through the network, 2e-4 of the scale (see TestFloat32MatchesFloat64).
func TestGradientGorgonia(t *testing.T) {
	for _, tc := range []testCase{
		{"conv_pad_relu_maxpool", small([]int{1, 8, 8},
			LayerSpec{Kind: "conv2d", Out: 3, Kernel: 5, Padding: 2}, LayerSpec{Kind: "relu"}, LayerSpec{Kind: "maxpool", Kernel: 2},
			LayerSpec{Kind: "conv2d", Out: 4, Kernel: 3}, LayerSpec{Kind: "relu"}, LayerSpec{Kind: "maxpool", Kernel: 2})},
		{"conv_stride_tanh_gap", small([]int{2, 9, 7},
			LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Stride: 2, Padding: 1}, LayerSpec{Kind: "tanh"},
			LayerSpec{Kind: "conv2d", Out: 4, Kernel: 2}, LayerSpec{Kind: "globalavgpool"})},
		{"lenet5_shape", Spec{Input: []int{1, 28, 28}, Layers: LeNet5(10, false).Layers}},
		{"avgpool_tanh", small([]int{2, 8, 6}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, LayerSpec{Kind: "tanh"},
			LayerSpec{Kind: "avgpool", Kernel: 2}, LayerSpec{Kind: "avgpool", Kernel: 3, Stride: 1})},
		{"padded_pooling", small([]int{2, 7, 6}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, LayerSpec{Kind: "relu"},
			LayerSpec{Kind: "maxpool", Kernel: 3, Stride: 2, Padding: 1}, LayerSpec{Kind: "avgpool", Kernel: 2, Padding: 1})},
		{"groupnorm", small([]int{2, 5, 4}, LayerSpec{Kind: "conv2d", Out: 6, Kernel: 3, Padding: 1}, LayerSpec{Kind: "groupnorm", Groups: 3}, LayerSpec{Kind: "relu"})},
		{"lenet5_classic", Spec{Input: []int{1, 28, 28}, Layers: LeNet5(10, true).Layers}},
		{"resnet_tiny", func() Spec { s := ResNet(3, 1, 4, 2, 3); s.Input = []int{3, 8, 8}; return s }()},
		{"dense_tanh", Spec{Input: []int{6, 1, 1}, Layers: []LayerSpec{{Kind: "dense", Out: 5}, {Kind: "tanh"}, {Kind: "dense", Out: 4}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const R, B = 2, 3
			m64 := build64(t, tc.spec)
			m32, _ := build32(t, tc.spec)
			w, x, y := data(m64, R, B, 5)
			g64, l64 := lossGrad(t, m64, w, R, x, y)
			g32, _ := lossGrad(t, m32, to32(w), R, to32(x), y)
			d := m64.NumParams()
			for r := 0; r < R; r++ {
				want, wl, err := gorgoniaGrad(tc.spec, w[r*d:(r+1)*d], x, y)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(wl-l64[r]) > 1e-12*(1+wl) {
					t.Fatalf("replica %d: loss %.15g, gorgonia %.15g", r, l64[r], wl)
				}
				scale := 0.0
				for _, v := range want {
					scale = max(scale, math.Abs(v))
				}
				for i, v := range want {
					if math.Abs(g64[r*d+i]-v) > 1e-9*scale {
						t.Fatalf("replica %d param %d: float64 backward %.12g, gorgonia %.12g", r, i, g64[r*d+i], v)
					}
					if math.Abs(float64(g32[r*d+i])-v) > 2e-4*scale {
						t.Fatalf("replica %d param %d: float32 backward %g, gorgonia %g (scale %g)", r, i, g32[r*d+i], v, scale)
					}
				}
			}
		})
	}
}

type gParam struct {
	n      *G.Node
	off    int
	transp [2]int // dense: stored transposed (rows, cols of ours), else zero
}

// gBuilder adds layers to a gorgonia graph, reading their parameters from w in our layout.
type gBuilder struct {
	g   *G.ExprGraph
	B   int
	w   []float64
	off int
	ps  []gParam
	n   int // node names
}

func (gb *gBuilder) node(shape []int, v []float64) *G.Node {
	gb.n++
	return G.NewTensor(gb.g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(fmt.Sprint("n", gb.n)),
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), v...)))))
}

// param makes a node of our parameters w[off:off+n] (shape given) and records it.
func (gb *gBuilder) param(shape []int, n int) *G.Node {
	nd := gb.node(shape, gb.w[gb.off:gb.off+n])
	gb.ps = append(gb.ps, gParam{n: nd, off: gb.off})
	gb.off += n
	return nd
}

func (gb *gBuilder) layers(a *G.Node, sh Shape, ls []LayerSpec) (*G.Node, Shape, error) {
	for i, s := range ls {
		var err error
		if a, sh, err = gb.layer(a, sh, s); err != nil {
			return nil, sh, fmt.Errorf("layer %d (%s): %w", i+1, s.Kind, err)
		}
	}
	return a, sh, nil
}

func (gb *gBuilder) layer(a *G.Node, sh Shape, s LayerSpec) (*G.Node, Shape, error) {
	var err error
	switch s.Kind {
	case "conv2d":
		st := max(s.Stride, 1)
		kk := sh.C * s.Kernel * s.Kernel
		f := gb.param([]int{s.Out, sh.C, s.Kernel, s.Kernel}, s.Out*kk)
		b := gb.param([]int{1, s.Out, 1, 1}, s.Out)
		if a, err = G.Conv2d(a, f, tensor.Shape{s.Kernel, s.Kernel}, []int{s.Padding, s.Padding}, []int{st, st}, []int{1, 1}); err != nil {
			return nil, sh, err
		}
		a, err = G.BroadcastAdd(a, b, nil, []byte{0, 2, 3})
		sh = Shape{s.Out, outSize(sh.H, s.Kernel, st, s.Padding), outSize(sh.W, s.Kernel, st, s.Padding)}
	case "relu":
		a, err = G.Rectify(a)
	case "tanh":
		a, err = G.Tanh(a)
	case "maxpool", "avgpool":
		st := s.Stride
		if st == 0 {
			st = s.Kernel
		}
		if s.Kind == "maxpool" {
			// gorgonia pads with zeros, not minus infinity: the cases put a ReLU before a padded
			// max pooling, where the two agree.
			a, err = G.MaxPool2D(a, tensor.Shape{s.Kernel, s.Kernel}, []int{s.Padding, s.Padding}, []int{st, st})
		} else {
			k := s.Kernel
			f := make([]float64, sh.C*sh.C*k*k)
			for c := 0; c < sh.C; c++ {
				for j := 0; j < k*k; j++ {
					f[(c*sh.C+c)*k*k+j] = 1 / float64(k*k)
				}
			}
			a, err = G.Conv2d(a, gb.node([]int{sh.C, sh.C, k, k}, f), tensor.Shape{k, k}, []int{s.Padding, s.Padding}, []int{st, st}, []int{1, 1})
		}
		sh = Shape{sh.C, outSize(sh.H, s.Kernel, st, s.Padding), outSize(sh.W, s.Kernel, st, s.Padding)}
	case "globalavgpool":
		// GlobalAveragePool2D has no gradient in gorgonia v0.9.18 and Mean(a, 2, 3) disagreed
		// with our finite-difference-checked layer: sum W, then H, then scale.
		if a, err = G.Sum(a, 3); err != nil {
			return nil, sh, err
		}
		if a, err = G.Sum(a, 2); err != nil {
			return nil, sh, err
		}
		a, err = G.Mul(a, G.NewConstant(1/float64(sh.H*sh.W)))
		sh = Shape{sh.C, 1, 1}
	case "groupnorm":
		a, err = gb.groupNorm(a, sh, s.Groups)
	case "residual":
		return gb.residual(a, sh, s)
	case "flatten":
		sh = Shape{sh.Size(), 1, 1}
	case "dense":
		return gb.dense(a, sh, s)
	default:
		return nil, sh, fmt.Errorf("no gorgonia oracle for %q", s.Kind)
	}
	return a, sh, err
}

// residual builds a residual block s on a of shape sh: conv, GroupNorm, ReLU, conv, GroupNorm,
// plus the input (through a 1x1 conv and GroupNorm where the shape changes), then ReLU. It is
// its own piece because it is a small network of its own, built from the other layers.
func (gb *gBuilder) residual(a *G.Node, sh Shape, s LayerSpec) (*G.Node, Shape, error) {
	out, st := s.Out, max(s.Stride, 1)
	if out == 0 {
		out = sh.C
	}
	m, msh, err := gb.layers(a, sh, []LayerSpec{{Kind: "conv2d", Out: out, Kernel: 3, Stride: st, Padding: 1},
		{Kind: "groupnorm", Groups: s.Groups}, {Kind: "relu"}, {Kind: "conv2d", Out: out, Kernel: 3, Padding: 1}, {Kind: "groupnorm", Groups: s.Groups}})
	if err != nil {
		return nil, sh, err
	}
	short := a
	if msh != sh {
		if short, _, err = gb.layers(a, sh, []LayerSpec{{Kind: "conv2d", Out: out, Kernel: 1, Stride: st}, {Kind: "groupnorm", Groups: s.Groups}}); err != nil {
			return nil, sh, err
		}
	}
	if a, err = G.Add(m, short); err != nil {
		return nil, sh, err
	}
	a, err = G.Rectify(a)
	return a, msh, err
}

// dense builds dense layer s on a of shape sh (reshaped to B x C first if it is an image): a
// times our weights, transposed into gorgonia's (in, out) layout and recorded as such, plus
// the bias. It is its own piece because it is the one layer whose parameters are not taken
// as they lie in w.
func (gb *gBuilder) dense(a *G.Node, sh Shape, s LayerSpec) (*G.Node, Shape, error) {
	var err error
	in := sh.C
	if len(a.Shape()) != 2 {
		if a, err = G.Reshape(a, tensor.Shape{gb.B, in}); err != nil {
			return nil, sh, err
		}
	}
	wt := make([]float64, in*s.Out)
	for o := 0; o < s.Out; o++ {
		for j := 0; j < in; j++ {
			wt[j*s.Out+o] = gb.w[gb.off+o*in+j]
		}
	}
	wn := gb.node([]int{in, s.Out}, wt)
	gb.ps = append(gb.ps, gParam{n: wn, off: gb.off, transp: [2]int{s.Out, in}})
	gb.off += in * s.Out
	b := gb.param([]int{1, s.Out}, s.Out)
	if a, err = G.Mul(a, wn); err != nil {
		return nil, sh, err
	}
	a, err = G.BroadcastAdd(a, b, nil, []byte{0})
	return a, Shape{s.Out, 1, 1}, err
}

// groupNorm: (x - mean) / sqrt(var + eps) over (B*groups) rows of C/groups*H*W values, then the
// per-channel gamma and beta. Row means and their broadcast back are products with constant
// vectors (plain matrix products and elementwise operations only).
func (gb *gBuilder) groupNorm(a *G.Node, sh Shape, groups int) (*G.Node, error) {
	B := gb.B
	rows, cols := B*groups, sh.C/groups*sh.H*sh.W
	gamma := gb.param([]int{1, sh.C, 1, 1}, sh.C)
	beta := gb.param([]int{1, sh.C, 1, 1}, sh.C)
	avg := make([]float64, cols)
	ones := make([]float64, cols)
	for i := range avg {
		avg[i], ones[i] = 1/float64(cols), 1
	}
	avgCol, onesRow := gb.node([]int{cols, 1}, avg), gb.node([]int{1, cols}, ones)
	x, err := G.Reshape(a, tensor.Shape{rows, cols})
	if err != nil {
		return nil, err
	}
	mean, err := G.Mul(x, avgCol) // rows x 1
	if err != nil {
		return nil, err
	}
	meanFull, err := G.Mul(mean, onesRow)
	if err != nil {
		return nil, err
	}
	xc, err := G.Sub(x, meanFull)
	if err != nil {
		return nil, err
	}
	sq, err := G.Square(xc)
	if err != nil {
		return nil, err
	}
	v, err := G.Mul(sq, avgCol)
	if err != nil {
		return nil, err
	}
	eps := make([]float64, rows)
	for i := range eps {
		eps[i] = gnEps
	}
	if v, err = G.Add(v, gb.node([]int{rows, 1}, eps)); err != nil {
		return nil, err
	}
	// Sqrt then Inverse: InverseSqrt's gradient in gorgonia v0.9.18 disagreed with finite
	// differences (and with this composition) while its value was right.
	rs, err := G.Sqrt(v)
	if err != nil {
		return nil, err
	}
	if rs, err = G.Inverse(rs); err != nil {
		return nil, err
	}
	if rs, err = G.Mul(rs, onesRow); err != nil {
		return nil, err
	}
	xh, err := G.HadamardProd(xc, rs)
	if err != nil {
		return nil, err
	}
	if xh, err = G.Reshape(xh, tensor.Shape{B, sh.C, sh.H, sh.W}); err != nil {
		return nil, err
	}
	if xh, err = G.BroadcastHadamardProd(xh, gamma, nil, []byte{0, 2, 3}); err != nil {
		return nil, err
	}
	return G.BroadcastAdd(xh, beta, nil, []byte{0, 2, 3})
}

// gorgoniaGrad builds loss = mean_b -log softmax(f(x_b))[y_b] for spec on one replica's
// parameters w in our layout and returns the gradient in that layout.
func gorgoniaGrad(spec Spec, w, x []float64, y []int32) ([]float64, float64, error) {
	B := len(y)
	gb := &gBuilder{g: G.NewGraph(), B: B, w: w}
	sh := Shape{spec.Input[0], spec.Input[1], spec.Input[2]}
	a := gb.node([]int{B, sh.C, sh.H, sh.W}, x) // our input is [B][C][H][W] already
	a, sh, err := gb.layers(a, sh, spec.Layers)
	if err != nil {
		return nil, 0, err
	}
	K := sh.C
	onehot := make([]float64, B*K)
	for b, c := range y {
		onehot[b*K+int(c)] = 1
	}
	sm, err := G.SoftMax(a)
	if err != nil {
		return nil, 0, err
	}
	lp, err := G.Log(sm)
	if err != nil {
		return nil, 0, err
	}
	picked, err := G.HadamardProd(lp, gb.node([]int{B, K}, onehot))
	if err != nil {
		return nil, 0, err
	}
	s, err := G.Sum(picked)
	if err != nil {
		return nil, 0, err
	}
	loss, err := G.Mul(s, G.NewConstant(-1/float64(B)))
	if err != nil {
		return nil, 0, err
	}
	nodes := make([]*G.Node, len(gb.ps))
	for i, p := range gb.ps {
		nodes[i] = p.n
	}
	if _, err := G.Grad(loss, nodes...); err != nil {
		return nil, 0, fmt.Errorf("gorgonia grad: %w", err)
	}
	vm := G.NewTapeMachine(gb.g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, 0, fmt.Errorf("gorgonia run: %w", err)
	}
	out := make([]float64, gb.off)
	for _, p := range gb.ps {
		gv, err := p.n.Grad()
		if err != nil {
			return nil, 0, err
		}
		v := gv.Data().([]float64)
		if rows, cols := p.transp[0], p.transp[1]; rows > 0 {
			for o := 0; o < rows; o++ {
				for j := 0; j < cols; j++ {
					out[p.off+o*cols+j] = v[j*rows+o]
				}
			}
			continue
		}
		copy(out[p.off:], v)
	}
	return out, loss.Value().Data().(float64), nil
}

func outSize(n, k, s, p int) int { return (n+2*p-k)/s + 1 }
