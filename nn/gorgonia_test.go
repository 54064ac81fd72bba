package nn

import (
	"fmt"
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The layers gorgonia has (Conv2d with stride and padding, MaxPool2D, Rectify, Tanh,
// mean over pixels for global average pooling, matrix products, softmax) built as a float64 graph in NCHW; its symbolic
// gradient is the oracle for our hand-written backward passes. Average pooling, GroupNorm and
// residual blocks have no gorgonia counterpart in v0.9.18 and are checked by finite differences
// (TestGradientFiniteDifferences) and through the float32/float64 comparison.
//
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
		{"dense_tanh", Spec{Input: []int{6, 1, 1}, Layers: []LayerSpec{{Kind: "dense", Out: 5}, {Kind: "tanh"}, {Kind: "dense", Out: 4}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const R, B = 2, 3
			m64 := build64(t, tc.spec)
			m32, _ := build32(t, tc.spec)
			w, x, y := data(m64, R, B, 5)
			g64, _ := lossGrad(t, m64, w, R, x, y)
			g32, _ := lossGrad(t, m32, to32(w), R, to32(x), y)
			d := m64.NumParams()
			for r := 0; r < R; r++ {
				want, err := gorgoniaGrad(tc.spec, w[r*d:(r+1)*d], x, y)
				if err != nil {
					t.Fatal(err)
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

// gorgoniaGrad builds loss = mean_b -log softmax(f(x_b))[y_b] for spec (layers gorgonia has
// only) on one replica's parameters w in our layout and returns the gradient in that layout.
func gorgoniaGrad(spec Spec, w, x []float64, y []int32) ([]float64, error) {
	g := G.NewGraph()
	B := len(y)
	C, H, W := spec.Input[0], spec.Input[1], spec.Input[2]
	node := func(name string, shape []int, v []float64) *G.Node {
		return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), v...)))))
	}
	a := node("x", []int{B, C, H, W}, x) // our input is [B][C][H][W] already
	type param struct {
		n      *G.Node
		off    int
		transp [2]int // dense: stored transposed (rows, cols of ours), else zero
	}
	var ps []param
	off := 0
	sh := Shape{C, H, W}
	var err error
	for i, s := range spec.Layers {
		switch s.Kind {
		case "conv2d":
			st := max(s.Stride, 1)
			kk := sh.C * s.Kernel * s.Kernel
			f := node(fmt.Sprint("f", i), []int{s.Out, sh.C, s.Kernel, s.Kernel}, w[off:off+s.Out*kk])
			b := node(fmt.Sprint("b", i), []int{1, s.Out, 1, 1}, w[off+s.Out*kk:off+s.Out*kk+s.Out])
			ps = append(ps, param{n: f, off: off}, param{n: b, off: off + s.Out*kk})
			off += s.Out*kk + s.Out
			if a, err = G.Conv2d(a, f, tensor.Shape{s.Kernel, s.Kernel}, []int{s.Padding, s.Padding}, []int{st, st}, []int{1, 1}); err != nil {
				return nil, err
			}
			if a, err = G.BroadcastAdd(a, b, nil, []byte{0, 2, 3}); err != nil {
				return nil, err
			}
			sh = Shape{s.Out, convOut(sh.H, s.Kernel, st, s.Padding), convOut(sh.W, s.Kernel, st, s.Padding)}
		case "relu":
			a, err = G.Rectify(a)
		case "tanh":
			a, err = G.Tanh(a)
		case "maxpool":
			st := s.Stride
			if st == 0 {
				st = s.Kernel
			}
			a, err = G.MaxPool2D(a, tensor.Shape{s.Kernel, s.Kernel}, []int{0, 0}, []int{st, st})
			sh = Shape{sh.C, convOut(sh.H, s.Kernel, st, 0), convOut(sh.W, s.Kernel, st, 0)}
		case "globalavgpool":
			// GlobalAveragePool2D has no gradient in gorgonia v0.9.18 and Mean(a, 2, 3) did
			// not give the mean over both axes here: sum W, then H, then scale.
			if a, err = G.Sum(a, 3); err != nil {
				return nil, err
			}
			if a, err = G.Sum(a, 2); err != nil {
				return nil, err
			}
			a, err = G.Mul(a, G.NewConstant(1/float64(sh.H*sh.W)))
			sh = Shape{sh.C, 1, 1}
		case "flatten":
			sh = Shape{sh.Size(), 1, 1}
		case "dense":
			in := sh.C
			if len(a.Shape()) != 2 {
				if a, err = G.Reshape(a, tensor.Shape{B, in}); err != nil {
					return nil, err
				}
			}
			wt := make([]float64, in*s.Out)
			for o := 0; o < s.Out; o++ {
				for j := 0; j < in; j++ {
					wt[j*s.Out+o] = w[off+o*in+j]
				}
			}
			wn := node(fmt.Sprint("w", i), []int{in, s.Out}, wt)
			b := node(fmt.Sprint("b", i), []int{1, s.Out}, w[off+in*s.Out:off+in*s.Out+s.Out])
			ps = append(ps, param{n: wn, off: off, transp: [2]int{s.Out, in}}, param{n: b, off: off + in*s.Out})
			off += in*s.Out + s.Out
			if a, err = G.Mul(a, wn); err != nil {
				return nil, err
			}
			a, err = G.BroadcastAdd(a, b, nil, []byte{0})
			sh = Shape{s.Out, 1, 1}
		default:
			return nil, fmt.Errorf("layer %s has no gorgonia oracle here", s.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i+1, s.Kind, err)
		}
	}
	K := sh.C
	onehot := make([]float64, B*K)
	for b, c := range y {
		onehot[b*K+int(c)] = 1
	}
	sm, err := G.SoftMax(a)
	if err != nil {
		return nil, err
	}
	lp, err := G.Log(sm)
	if err != nil {
		return nil, err
	}
	picked, err := G.HadamardProd(lp, node("onehot", []int{B, K}, onehot))
	if err != nil {
		return nil, err
	}
	s, err := G.Sum(picked)
	if err != nil {
		return nil, err
	}
	loss, err := G.Mul(s, G.NewConstant(-1/float64(B)))
	if err != nil {
		return nil, err
	}
	nodes := make([]*G.Node, len(ps))
	for i, p := range ps {
		nodes[i] = p.n
	}
	if _, err := G.Grad(loss, nodes...); err != nil {
		return nil, fmt.Errorf("gorgonia grad: %w", err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, fmt.Errorf("gorgonia run: %w", err)
	}
	out := make([]float64, off)
	for _, p := range ps {
		gv, err := p.n.Grad()
		if err != nil {
			return nil, err
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
	return out, nil
}
