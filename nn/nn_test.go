package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
)

// testCase is a small model around one layer kind: every layer's backward pass is checked inside
// such a model, whose last layers (flatten, dense) are themselves checked by every case.
type testCase struct {
	name string
	spec Spec
}

func small(input []int, ls ...LayerSpec) Spec {
	return Spec{Kind: "sequential", Input: input, Layers: append(ls, LayerSpec{Kind: "flatten"}, LayerSpec{Kind: "dense", Out: 3})}
}

func layerCases() []testCase {
	return []testCase{
		{"conv", small([]int{2, 6, 5}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3})},
		{"conv_stride_pad", small([]int{2, 7, 6}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Stride: 2, Padding: 1})},
		{"conv_conv", small([]int{1, 8, 8}, LayerSpec{Kind: "conv2d", Out: 2, Kernel: 5, Padding: 2}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Stride: 2})},
		{"maxpool", small([]int{2, 6, 6}, LayerSpec{Kind: "conv2d", Out: 2, Kernel: 1}, LayerSpec{Kind: "maxpool", Kernel: 2})},
		{"maxpool_overlap", small([]int{2, 7, 7}, LayerSpec{Kind: "conv2d", Out: 2, Kernel: 1}, LayerSpec{Kind: "maxpool", Kernel: 3, Stride: 2})},
		{"avgpool", small([]int{2, 6, 6}, LayerSpec{Kind: "conv2d", Out: 2, Kernel: 1}, LayerSpec{Kind: "avgpool", Kernel: 2})},
		{"maxpool_pad", small([]int{2, 7, 6}, LayerSpec{Kind: "conv2d", Out: 2, Kernel: 1}, LayerSpec{Kind: "maxpool", Kernel: 3, Stride: 2, Padding: 1})},
		{"avgpool_pad", small([]int{2, 5, 5}, LayerSpec{Kind: "conv2d", Out: 2, Kernel: 1}, LayerSpec{Kind: "avgpool", Kernel: 2, Padding: 1})},
		{"relu", small([]int{2, 4, 4}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, LayerSpec{Kind: "relu"})},
		{"tanh", small([]int{2, 4, 4}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, LayerSpec{Kind: "tanh"})},
		{"groupnorm", small([]int{2, 4, 4}, LayerSpec{Kind: "conv2d", Out: 4, Kernel: 3, Padding: 1}, LayerSpec{Kind: "groupnorm", Groups: 2})},
		{"groupnorm_first", small([]int{4, 3, 3}, LayerSpec{Kind: "groupnorm", Groups: 2})},
		{"residual_identity", small([]int{4, 4, 4}, LayerSpec{Kind: "residual", Out: 4, Groups: 2})},
		{"residual_projection", small([]int{2, 5, 5}, LayerSpec{Kind: "residual", Out: 4, Stride: 2, Groups: 2})},
		{"globalavgpool", small([]int{2, 4, 3}, LayerSpec{Kind: "conv2d", Out: 3, Kernel: 3, Padding: 1}, LayerSpec{Kind: "globalavgpool"})},
		{"dense_relu_dense", Spec{Input: []int{5, 1, 1}, Layers: []LayerSpec{{Kind: "dense", Out: 4}, {Kind: "relu"}, {Kind: "dense", Out: 3}}}},
		{"lenet5_classic_tiny", Spec{Input: []int{1, 12, 12}, Layers: []LayerSpec{
			{Kind: "conv2d", Out: 2, Kernel: 5, Padding: 2}, {Kind: "tanh"}, {Kind: "avgpool", Kernel: 2},
			{Kind: "conv2d", Out: 3, Kernel: 3}, {Kind: "tanh"}, {Kind: "avgpool", Kernel: 2},
			{Kind: "flatten"}, {Kind: "dense", Out: 5}, {Kind: "tanh"}, {Kind: "dense", Out: 3}}}},
		{"resnet_tiny", func() Spec { s := ResNet(3, 1, 4, 2, 3); s.Input = []int{3, 8, 8}; return s }()},
	}
}

// data draws R parameter vectors (the model's init plus a perturbation, so replicas differ and
// GroupNorm's gamma is not exactly 1), one shared batch and its labels.
func data[T Float](m *Model[T], R, B int, seed uint64) (w, x []T, y []int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	d := m.NumParams()
	w = make([]T, R*d)
	for r := 0; r < R; r++ {
		m.Init(w[r*d:(r+1)*d], seed)
		for i := r * d; i < (r+1)*d; i++ {
			w[i] += T(0.3 * rng.NormFloat64())
		}
	}
	x = make([]T, B*m.Input.Size())
	for i := range x {
		x[i] = T(rng.Float64())
	}
	y = make([]int32, B)
	for i := range y {
		y[i] = int32(rng.IntN(m.Classes))
	}
	return w, x, y
}

func build64(t testing.TB, s Spec) *Model[float64] {
	t.Helper()
	m, err := Build[float64](s, NaiveGemm[float64]{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func build32(t testing.TB, s Spec) (*Model[float32], *cpu.Backend) {
	t.Helper()
	be := cpu.New(2)
	t.Cleanup(be.Close)
	m, err := BuildOn(s, be)
	if err != nil {
		t.Fatal(err)
	}
	return m, be
}

func lossGrad[T Float](t testing.TB, m *Model[T], w []T, R int, x []T, y []int32) ([]T, []float64) {
	t.Helper()
	g := make([]T, len(w))
	l := make([]float64, R)
	if err := m.LossGrad(w, R, x, y, g, l); err != nil {
		t.Fatal(err)
	}
	return g, l
}

// Every layer's backward pass against central finite differences of the float64 loss, for two
// replicas at once (each replica's gradient is that of its own loss). With h = 1e-6 the
// truncation error is O(h^2) ~ 1e-12 and the rounding error ~ 1e-16/h ~ 1e-10, so 1e-6
// relative (plus 1e-8 absolute) leaves a wide margin while a wrong term (errors of order the
// gradient itself) cannot pass. Inputs are random reals, so ReLU kinks and max-pool ties are
// hit with negligible probability.
func TestGradientFiniteDifferences(t *testing.T) {
	const R, B, h = 2, 3, 1e-6
	for _, tc := range layerCases() {
		t.Run(tc.name, func(t *testing.T) {
			m := build64(t, tc.spec)
			w, x, y := data(m, R, B, 7)
			g, _ := lossGrad(t, m, w, R, x, y)
			l := make([]float64, R)
			scratch := make([]float64, len(w))
			lossAt := func(r, i int, v float64) float64 {
				old := w[i]
				w[i] = v
				defer func() { w[i] = old }()
				if err := m.LossGrad(w, R, x, y, scratch, l); err != nil {
					t.Fatal(err)
				}
				return l[r]
			}
			d := m.NumParams()
			// At most about 400 coordinates, evenly spread over both replicas and every layer
			// (the tiny ResNet has ~3,000 parameters and each one costs two passes).
			step := max(1, len(w)/400)
			for i := 0; i < len(w); i += step {
				r := i / d
				fd := (lossAt(r, i, w[i]+h) - lossAt(r, i, w[i]-h)) / (2 * h)
				if math.Abs(fd-g[i]) > 1e-6*math.Abs(fd)+1e-8 {
					t.Fatalf("replica %d param %d: backward %.10g, finite differences %.10g", r, i%d, g[i], fd)
				}
			}
		})
	}
}

// The float32 model (package cpu's GEMM, float32 arithmetic) against the float64 model on the
// same parameters: float32 rounding (unit 6e-8) through a few layers of sums of up to a few
// hundred terms gives relative errors around 1e-5; 2e-4 of the gradient's largest entry bounds
// it with margin while any structural error is of order 1.
func TestFloat32MatchesFloat64(t *testing.T) {
	const R, B = 3, 4
	for _, tc := range layerCases() {
		t.Run(tc.name, func(t *testing.T) {
			m64 := build64(t, tc.spec)
			m32, _ := build32(t, tc.spec)
			w, x, y := data(m64, R, B, 11)
			g64, l64 := lossGrad(t, m64, w, R, x, y)
			g32, l32 := lossGrad(t, m32, to32(w), R, to32(x), y)
			scale := 0.0
			for _, v := range g64 {
				scale = max(scale, math.Abs(v))
			}
			for i := range g64 {
				if math.Abs(float64(g32[i])-g64[i]) > 2e-4*scale {
					t.Fatalf("param %d: float32 %g, float64 %g (scale %g)", i, g32[i], g64[i], scale)
				}
			}
			for r := range l64 {
				if math.Abs(l32[r]-l64[r]) > 1e-5*(1+l64[r]) {
					t.Fatalf("replica %d loss: float32 %g, float64 %g", r, l32[r], l64[r])
				}
			}
		})
	}
}

func to32(v []float64) []float32 {
	o := make([]float32, len(v))
	for i, x := range v {
		o[i] = float32(x)
	}
	return o
}

// A replica batch (patches of the shared client batch computed once, one GEMM over replicas)
// gives, bit for bit, what each replica gives alone, and what R private copies of the batch
// give, whatever the number of goroutines: sharing and splitting are optimisations, never a
// change of the arithmetic.
func TestReplicaBatchBitForBit(t *testing.T) {
	const R, B = 4, 8
	for _, spec := range []Spec{LeNet5(10, false), LeNet5(10, true)} {
		m, _ := build32(t, spec)
		w64, x64, y := data(build64(t, spec), R, B, 3)
		w, x := to32(w64), to32(x64)
		g, l := lossGrad(t, m, w, R, x, y)
		d := m.NumParams()
		for r := 0; r < R; r++ {
			g1, l1 := lossGrad(t, m, w[r*d:(r+1)*d], 1, x, y)
			if l1[0] != l[r] {
				t.Fatalf("replica %d: loss alone %v, in the batch %v", r, l1[0], l[r])
			}
			for i := range g1 {
				if g1[i] != g[r*d+i] {
					t.Fatalf("replica %d param %d: alone %v, in the batch %v", r, i, g1[i], g[r*d+i])
				}
			}
		}
		// The work split three ways, and on one goroutine, instead of two.
		be3, be1 := cpu.New(3), cpu.New(1)
		defer be3.Close()
		defer be1.Close()
		m3, err := BuildOn(spec, be3)
		if err != nil {
			t.Fatal(err)
		}
		m1, err := BuildOn(spec, be1)
		if err != nil {
			t.Fatal(err)
		}
		g3, _ := lossGrad(t, m3, w, R, x, y)
		g4, _ := lossGrad(t, m1, w, R, x, y)
		for i := range g {
			if g3[i] != g[i] || g4[i] != g[i] {
				t.Fatalf("param %d: threads 3 %v, 1 %v, default %v", i, g3[i], g4[i], g[i])
			}
		}
		xr := make([]float32, 0, R*len(x))
		for r := 0; r < R; r++ {
			xr = append(xr, x...)
		}
		g2, l2 := lossGrad(t, m, w, R, xr, y)
		for i := range g {
			if g2[i] != g[i] {
				t.Fatalf("param %d: private copies %v, shared batch %v", i, g2[i], g[i])
			}
		}
		for r := range l {
			if l2[r] != l[r] {
				t.Fatalf("replica %d loss: private copies %v, shared %v", r, l2[r], l[r])
			}
		}
	}
}

func TestSpecs(t *testing.T) {
	m := build64(t, LeNet5(10, false))
	if m.NumParams() != 61706 || m.Classes != 10 {
		t.Fatalf("LeNet-5: d = %d, classes %d; want 61706 (w2.py's D) and 10", m.NumParams(), m.Classes)
	}
	want := []LayerInfo{
		{1, "conv2d", Shape{1, 28, 28}, Shape{6, 28, 28}, 156}, {2, "relu", Shape{6, 28, 28}, Shape{6, 28, 28}, 0},
		{3, "maxpool", Shape{6, 28, 28}, Shape{6, 14, 14}, 0}, {4, "conv2d", Shape{6, 14, 14}, Shape{16, 10, 10}, 2416},
		{5, "relu", Shape{16, 10, 10}, Shape{16, 10, 10}, 0}, {6, "maxpool", Shape{16, 10, 10}, Shape{16, 5, 5}, 0},
		{7, "flatten", Shape{16, 5, 5}, Shape{400, 1, 1}, 0}, {8, "dense", Shape{400, 1, 1}, Shape{120, 1, 1}, 48120},
		{9, "relu", Shape{120, 1, 1}, Shape{120, 1, 1}, 0}, {10, "dense", Shape{120, 1, 1}, Shape{84, 1, 1}, 10164},
		{11, "relu", Shape{84, 1, 1}, Shape{84, 1, 1}, 0}, {12, "dense", Shape{84, 1, 1}, Shape{10, 1, 1}, 850},
	}
	got := m.Layers()
	if len(got) != len(want) {
		t.Fatalf("%d layers", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("layer %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
	if m := build64(t, LeNet5(10, true)); m.NumParams() != 61706 {
		t.Fatalf("classic LeNet-5: d = %d", m.NumParams())
	}
	r, err := Build[float32](ResNet(3, 3, 16, 4, 10), NaiveGemm[float32]{})
	if err != nil {
		t.Fatal(err)
	}
	// The counts of the same architectures built from PyTorch's Conv2d (bias=True), GroupNorm
	// and Linear (counted with Debian's torch): ResNet-20 273,258; ResNet-18 with the CIFAR
	// stem 11,178,762 (the bias-free torchvision-style 11,173,962 plus 4,800 conv biases).
	if r.NumParams() != 273258 {
		t.Fatalf("ResNet-20: d = %d, want 273258", r.NumParams())
	}
	if r18 := build64(t, ResNet(4, 2, 64, 8, 10)); r18.NumParams() != 11178762 {
		t.Fatalf("ResNet-18: d = %d, want 11178762", r18.NumParams())
	} else if ls := r18.Layers(); len(ls) != 3+8+3 || ls[len(ls)-3].In != (Shape{512, 4, 4}) {
		t.Fatalf("ResNet-18 layers: %d, global pooling input %v; want 14 and 512x4x4", len(ls), ls[len(ls)-3].In)
	}
	w := make([]float32, 2*r.NumParams())
	r.Init(w[:r.NumParams()], 1)
	r.Init(w[r.NumParams():], 1)
	x := make([]float32, 2*3*32*32)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	g := make([]float32, len(w))
	l := make([]float64, 2)
	if err := r.LossGrad(w, 2, x, []int32{1, 9}, g, l); err != nil {
		t.Fatal(err)
	}
	if math.IsNaN(l[0]) || l[0] != l[1] {
		t.Fatalf("ResNet-20 losses %v", l)
	}
}

func TestYAMLSpec(t *testing.T) {
	const src = `
model:
  kind: sequential
  input: [1, 28, 28]
  layers:
    - {kind: conv2d, out: 6, kernel: 5, padding: 2}
    - {kind: relu}
    - {kind: maxpool, kernel: 2}
    - {kind: conv2d, out: 16, kernel: 5}
    - {kind: relu}
    - {kind: maxpool, kernel: 2}
    - {kind: flatten}
    - {kind: dense, out: 120}
    - {kind: relu}
    - {kind: dense, out: 84}
    - {kind: relu}
    - {kind: dense, out: 10}
`
	var doc struct {
		Model Spec `yaml:"model"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	want := LeNet5(10, false)
	if len(doc.Model.Layers) != len(want.Layers) {
		t.Fatalf("decoded %d layers", len(doc.Model.Layers))
	}
	for i := range want.Layers {
		if doc.Model.Layers[i] != want.Layers[i] {
			t.Fatalf("layer %d: decoded %+v, want %+v", i+1, doc.Model.Layers[i], want.Layers[i])
		}
	}
	if m := build64(t, doc.Model); m.NumParams() != 61706 {
		t.Fatalf("d = %d", m.NumParams())
	}
}

func TestShapeErrors(t *testing.T) {
	in := []int{1, 28, 28}
	for _, tc := range []struct {
		name string
		spec Spec
		want []string
	}{
		{"kernel too large", Spec{Input: []int{1, 4, 4}, Layers: []LayerSpec{{Kind: "conv2d", Out: 2, Kernel: 5}}},
			[]string{"layer 1 (conv2d)", "input 1x4x4", "kernel 5"}},
		{"dense before flatten", Spec{Input: in, Layers: []LayerSpec{{Kind: "conv2d", Out: 6, Kernel: 5}, {Kind: "dense", Out: 10}}},
			[]string{"layer 2 (dense)", "input 6x24x24", "flatten"}},
		{"groups", Spec{Input: in, Layers: []LayerSpec{{Kind: "conv2d", Out: 6, Kernel: 5}, {Kind: "groupnorm", Groups: 4}}},
			[]string{"layer 2 (groupnorm)", "6 channels"}},
		{"pool too large", Spec{Input: in, Layers: []LayerSpec{{Kind: "conv2d", Out: 6, Kernel: 27}, {Kind: "maxpool", Kernel: 3}}},
			[]string{"layer 2 (maxpool)", "input 6x2x2", "window 3"}},
		{"not class scores", Spec{Input: in, Layers: []LayerSpec{{Kind: "conv2d", Out: 6, Kernel: 5}}},
			[]string{"layer 1 (conv2d)", "6x24x24", "classes x 1 x 1"}},
		{"unknown kind", Spec{Input: in, Layers: []LayerSpec{{Kind: "conv3d"}}},
			[]string{"layer 1 (conv3d)", "unknown layer kind"}},
		{"residual groups", Spec{Input: []int{3, 8, 8}, Layers: []LayerSpec{{Kind: "residual", Out: 6, Groups: 4}}},
			[]string{"layer 1 (residual)", "6 output channels"}},
		// 2^16 x (2^16 x 2^16 x 2^16) weights: the parameter count wraps to 2^16 in int.
		{"conv parameters overflow", Spec{Input: []int{1 << 16, 1, 1}, Layers: []LayerSpec{
			{Kind: "conv2d", Out: 1 << 16, Kernel: 1 << 16, Padding: 1 << 15}, {Kind: "globalavgpool"}, {Kind: "flatten"}, {Kind: "dense", Out: 2}}},
			[]string{"layer 1 (conv2d)", "beyond the limit"}},
		{"bad input", Spec{Input: []int{28, 28}, Layers: []LayerSpec{{Kind: "flatten"}}}, []string{"input [28 28]"}},
		{"kind", Spec{Kind: "resnet", Input: in}, []string{`"resnet"`}},
		{"no layers", Spec{Input: in}, []string{"no layers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build[float32](tc.spec, NaiveGemm[float32]{})
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestBadInputs(t *testing.T) {
	m := build64(t, LeNet5(10, false))
	w := make([]float64, m.NumParams())
	g := make([]float64, m.NumParams())
	l := make([]float64, 1)
	if err := m.LossGrad(w, 1, make([]float64, 5), []int32{0}, g, l); err == nil || !strings.Contains(err.Error(), "input has 5 values") {
		t.Fatalf("short input: %v", err)
	}
	if err := m.LossGrad(w, 1, make([]float64, 784), []int32{10}, g, l); err == nil || !strings.Contains(err.Error(), "label 10") {
		t.Fatalf("bad label: %v", err)
	}
	if err := m.LossGrad(w, 2, make([]float64, 784), []int32{1}, g, l); err == nil {
		t.Fatal("too few parameters accepted")
	}
}

// The input gradient of LossGradInput against central finite differences of the float64 loss
// in the input (tolerance as for the parameters: h = 1e-6, 1e-6 relative), for an input shared
// by the replicas and for one input per replica; the parameter gradient it writes must be
// LossGrad's, bit for bit.
func TestInputGradientFiniteDifferences(t *testing.T) {
	const R, B, h = 2, 2, 1e-6
	for _, tc := range layerCases() {
		for _, perReplica := range []bool{false, true} {
			name := tc.name + "/shared"
			if perReplica {
				name = tc.name + "/per_replica"
			}
			t.Run(name, func(t *testing.T) {
				m := build64(t, tc.spec)
				w, x, y := data(m, R, B, 11)
				n := len(x)
				if perReplica {
					x2 := make([]float64, R*n)
					for r := 0; r < R; r++ {
						for i := range x {
							x2[r*n+i] = x[i] + 0.1*float64(r)
						}
					}
					x = x2
				}
				g := make([]float64, len(w))
				dx := make([]float64, R*n)
				l := make([]float64, R)
				if err := m.LossGradInput(w, R, x, y, g, dx, l); err != nil {
					t.Fatal(err)
				}
				g0, _ := lossGrad(t, m, w, R, x, y)
				for i := range g {
					if g[i] != g0[i] {
						t.Fatalf("parameter gradient %d: %g with the input gradient, %g without", i, g[i], g0[i])
					}
				}
				scratch := make([]float64, len(w))
				lossAt := func(r, i int, v float64) float64 {
					old := x[i]
					x[i] = v
					defer func() { x[i] = old }()
					if err := m.LossGrad(w, R, x, y, scratch, l); err != nil {
						t.Fatal(err)
					}
					return l[r]
				}
				step := max(1, len(x)/200)
				for i := 0; i < len(x); i += step {
					for r := 0; r < R; r++ {
						j := i
						if perReplica {
							if i/n != r {
								continue
							}
							j = i % n
						}
						fd := (lossAt(r, i, x[i]+h) - lossAt(r, i, x[i]-h)) / (2 * h)
						got := dx[r*n+j]
						if math.Abs(fd-got) > 1e-6*math.Abs(fd)+1e-8 {
							t.Fatalf("replica %d input %d: backward %.10g, finite differences %.10g", r, j, got, fd)
						}
					}
				}
			})
		}
	}
	m := build64(t, layerCases()[0].spec)
	w, x, y := data(m, R, B, 1)
	if err := m.LossGradInput(w, R, x, y, make([]float64, len(w)), make([]float64, len(x)), make([]float64, R)); err == nil {
		t.Fatal("a dx shorter than R batches was accepted")
	}
}

// ForwardFLOPs of LeNet-5 against the W2 reference's count (2 per multiply-add of the two
// convolutions and three dense layers) plus what that count leaves out: the biases (one add
// per output), ReLU (one per value) and max pooling (K*K per output).
func TestForwardFLOPs(t *testing.T) {
	m := build64(t, LeNet5(10, false))
	ref := int64(2 * (28*28*6*25 + 10*10*16*150 + 400*120 + 120*84 + 84*10))
	biases := int64(6*28*28 + 16*10*10 + 120 + 84 + 10)
	relu := int64(6*14*14 + 16*5*5 + 120 + 84) // after pooling (the model pools first)
	pool := int64(4 * (6*14*14 + 16*5*5))
	if got, want := m.ForwardFLOPs(), ref+biases+relu+pool; got != want {
		t.Fatalf("LeNet-5 forward FLOPs %d, want %d", got, want)
	}
}

// smallCache is the CPU backend asking for tiny working sets: every convolution makes its
// patches one replica at a time.
type smallCache struct{ *cpu.Backend }

func (smallCache) CacheBytes() int { return 1 }

// Patches made a chunk of replicas at a time by the backward pass (compute.CacheSized: here
// one replica at a time) give the bits of patches made for all replicas at once, in the loss,
// the weight gradients and the input gradients, for a shared input batch and for one batch per
// replica.
func TestPatchChunksBitForBit(t *testing.T) {
	const R, B = 3, 4
	for _, spec := range []Spec{LeNet5(10, false), func() Spec { s := ResNet(2, 1, 4, 2, 3); s.Input = []int{3, 8, 8}; return s }()} {
		whole, _ := build32(t, spec)
		be := cpu.New(2)
		defer be.Close()
		chunked, err := BuildOn(spec, smallCache{be})
		if err != nil {
			t.Fatal(err)
		}
		w64, x64, y := data(build64(t, spec), R, B, 4)
		w, x := to32(w64), to32(x64)
		xr := perReplica(x, R)
		for k, in := range [][]float32{x, xr} {
			sameLossGradInput(t, fmt.Sprintf("input %d, whole and chunked", k), whole, chunked, w, R, in, y)
		}
	}
}

// withoutPatchGemm is the CPU backend without compute.PatchGemmer: its convolutions write
// their patches and multiply by them.
type withoutPatchGemm struct {
	compute.Backend
	compute.Convolver
	compute.CacheSized
}

// Products by patches packed from the image (compute.PatchGemmer) give the bits of patches
// written by Im2col, in the loss, the parameter gradients and the input gradients: LeNet-5
// (5x5 windows, padding 2) and a ResNet (3x3 windows at strides 1 and 2), with per-replica
// inputs of 4 samples (a panel spans four pixels), 16 (one pixel per panel) and 20 (panels
// straddling pixels).
func TestPatchGemmBitForBit(t *testing.T) {
	const R = 3
	for _, spec := range []Spec{LeNet5(10, false), func() Spec { s := ResNet(2, 1, 4, 2, 3); s.Input = []int{3, 8, 8}; return s }()} {
		for _, B := range []int{4, 16, 20} {
			implicit, be := build32(t, spec)
			written, err := BuildOn(spec, withoutPatchGemm{be, be, be})
			if err != nil {
				t.Fatal(err)
			}
			w64, x64, y := data(build64(t, spec), R, B, 4)
			w, x := to32(w64), to32(x64)
			xr := perReplica(x, R)
			sameLossGradInput(t, fmt.Sprintf("B %d, from the image and from written patches", B), implicit, written, w, R, xr, y)
		}
	}
}

// sameLossGradInput runs LossGradInput of models a and b on the same inputs and fails unless
// the losses, parameter gradients and input gradients are the same bits.
func sameLossGradInput(t *testing.T, what string, a, b *Model[float32], w []float32, R int, x []float32, y []int32) {
	t.Helper()
	n := len(y) * a.Input.Size()
	g1, g2 := make([]float32, len(w)), make([]float32, len(w))
	d1, d2 := make([]float32, R*n), make([]float32, R*n)
	l1, l2 := make([]float64, R), make([]float64, R)
	if err := a.LossGradInput(w, R, x, y, g1, d1, l1); err != nil {
		t.Fatal(err)
	}
	if err := b.LossGradInput(w, R, x, y, g2, d2, l2); err != nil {
		t.Fatal(err)
	}
	for r := range l1 {
		if l1[r] != l2[r] {
			t.Fatalf("%s: replica %d loss %v and %v", what, r, l1[r], l2[r])
		}
	}
	for i := range g1 {
		if math.Float32bits(g1[i]) != math.Float32bits(g2[i]) {
			t.Fatalf("%s: param %d: %v and %v", what, i, g1[i], g2[i])
		}
	}
	for i := range d1 {
		if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
			t.Fatalf("%s: input gradient %d: %v and %v", what, i, d1[i], d2[i])
		}
	}
}

// perReplica returns R copies of x, copy r shifted by 0.01 r: a batch of inputs per replica.
func perReplica(x []float32, R int) []float32 {
	xr := make([]float32, 0, R*len(x))
	for r := 0; r < R; r++ {
		for _, v := range x {
			xr = append(xr, v+0.01*float32(r))
		}
	}
	return xr
}
