package hostmodel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/train/model"
)

// TestGradientFiniteDifferences checks the host model's backward pass against central
// differences (f(w+h e_i) - f(w-h e_i)) / 2h on every parameter. Their error is O(h^2 f”') ~
// 1e-10 for h = 1e-5 on these smooth, O(1)-scaled losses, plus rounding ~ 1e-16/h = 1e-11, so
// 1e-6 (relative to 1 + |g|) leaves a wide margin while still catching any wrong term.
func TestGradientFiniteDifferences(t *testing.T) {
	cases := []struct {
		name    string
		cfg     model.Config
		classes int
	}{
		{"softmax", model.Config{Kind: "softmax"}, 4},
		{"mlp-tanh", model.Config{Kind: "mlp", Hidden: []int{5, 3}, Activation: "tanh"}, 3},
		{"mlp-softplus", model.Config{Kind: "mlp", Hidden: []int{4}, Activation: "softplus"}, 3},
		{"mlp-relu", model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "relu"}, 2},
		{"quadratic", model.Config{Kind: "quadratic", Curvature: -0.7}, 0},
	}
	const dim, h = 6, 1e-5
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := newFlat(tc.cfg, dim, tc.classes)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			w := make([]float64, m.NumParams())
			for i := range w {
				w[i] = rng.NormFloat64() * 0.7
			}
			x := make([]float64, dim)
			for i := range x {
				x[i] = rng.Float64()
			}
			y := 1
			g := m.gradient(w, x, y)
			for i := range w {
				old := w[i]
				w[i] = old + h
				lp, _ := m.LossGrad(w, x, y, 0, nil)
				w[i] = old - h
				lm, _ := m.LossGrad(w, x, y, 0, nil)
				w[i] = old
				fd := (lp - lm) / (2 * h)
				if math.Abs(fd-g[i]) > 1e-6*(1+math.Abs(g[i])) {
					t.Errorf("param %d: gradient %.10g, finite difference %.10g", i, g[i], fd)
				}
			}
		})
	}
}

// TestModelLayout checks the parameter count and layout against train's MLP: the same sizes
// must give the same number of parameters, and the first layer's weight must start at 0.
func TestModelLayout(t *testing.T) {
	m, err := newFlat(model.Config{Kind: "mlp", Hidden: []int{7}, Activation: "tanh"}, 5, 3)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := model.NewMLP(compute.Tanh, 5, 7, 3)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumParams() != ref.NumParams() {
		t.Errorf("host model has %d parameters, train's %d", m.NumParams(), ref.NumParams())
	}
	// 5*7 weights then 7 biases, then 7*3 weights then 3 biases.
	if lo, hi := m.LastBias(); lo != 5*7+7+7*3 || hi != lo+3 {
		t.Errorf("last bias at [%d, %d), want [%d, %d)", lo, hi, 63, 66)
	}
	if wo, bo, rows, in, ok := m.FirstLayer(); !ok || wo != 0 || bo != 35 || rows != 7 || in != 5 {
		t.Errorf("first layer (%d, %d, %d, %d), want (0, 35, 7, 5)", wo, bo, rows, in)
	}
	// The loss of a known point: zero parameters give uniform predictions, loss log(classes)
	// and margin 0.
	loss, margin := m.LossGrad(make([]float64, m.NumParams()), []float64{1, 2, 3, 4, 5}, 2, 0, nil)
	if math.Abs(loss-math.Log(3)) > 1e-15 || margin != 0 {
		t.Errorf("zero model: loss %v margin %v, want log 3 and 0", loss, margin)
	}
}

func TestNewHostModelErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg          model.Config
		dim, classes int
	}{
		{model.Config{Kind: "cnn"}, 4, 3},
		{model.Config{Kind: "softmax"}, 4, 1},
		{model.Config{Kind: "softmax", Hidden: []int{3}}, 4, 3},
		{model.Config{Kind: "mlp", Activation: "gelu"}, 4, 3},
		{model.Config{Kind: "quadratic"}, 4, 0},
		{model.Config{Kind: "softmax"}, 0, 3},
	} {
		if _, err := newFlat(tc.cfg, tc.dim, tc.classes); err == nil {
			t.Errorf("%+v dim %d classes %d: no error", tc.cfg, tc.dim, tc.classes)
		}
	}
}
