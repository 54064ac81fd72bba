package model

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/internal/philox"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// refMLPLoss is the float64 reference: mean softmax cross-entropy of the MLP with parameters w
// on rows x (n x in) with labels y.
func refMLPLoss(m *MLP, w, x []float64, y []int) float64 {
	in := m.Sizes[0]
	n := len(y)
	var total float64
	for r := 0; r < n; r++ {
		a := x[r*in : (r+1)*in]
		for l := 0; l+1 < len(m.Sizes); l++ {
			out := make([]float64, m.Sizes[l+1])
			for o := range out {
				s := w[m.boff[l]+o]
				for i, v := range a {
					s += w[m.woff[l]+o*m.Sizes[l]+i] * v
				}
				if l+2 < len(m.Sizes) {
					switch m.Act {
					case compute.Tanh:
						s = math.Tanh(s)
					case compute.Softplus:
						s = math.Log1p(math.Exp(s))
					case compute.ReLU:
						s = math.Max(s, 0)
					}
				}
				out[o] = s
			}
			a = out
		}
		mx := math.Inf(-1)
		for _, v := range a {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range a {
			s += math.Exp(v - mx)
		}
		total += mx + math.Log(s) - a[y[r]]
	}
	return total / float64(n)
}

func refQuadLoss(q *Quadratic, w, x []float64, _ []int) float64 {
	n := len(x) / q.Dim
	var total float64
	for r := 0; r < n; r++ {
		var ww, xw float64
		for j := 0; j < q.Dim; j++ {
			ww += w[j] * w[j]
			xw += x[r*q.Dim+j] * w[j]
		}
		total += float64(q.A)/2*ww - xw
	}
	return total / float64(n)
}

// fdGrad is the central finite difference of loss at w with step h.
func fdGrad(loss func([]float64) float64, w []float64, h float64) []float64 {
	g := make([]float64, len(w))
	for i := range w {
		s := w[i]
		w[i] = s + h
		up := loss(w)
		w[i] = s - h
		down := loss(w)
		w[i] = s
		g[i] = (up - down) / (2 * h)
	}
	return g
}

type gradCase struct {
	name   string
	model  Model
	ref    func(w, x []float64, y []int) float64
	in, nc int
}

func gradCases(t *testing.T) []gradCase {
	mk := func(act compute.Activation, sizes ...int) *MLP {
		m, err := NewMLP(act, sizes...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var cs []gradCase
	add := func(name string, m *MLP) {
		cs = append(cs, gradCase{name, m, func(w, x []float64, y []int) float64 { return refMLPLoss(m, w, x, y) }, m.Sizes[0], m.Sizes[len(m.Sizes)-1]})
	}
	add("softmax", mk(compute.Tanh, 7, 4))
	add("mlp-tanh", mk(compute.Tanh, 7, 5, 4))
	add("mlp-softplus", mk(compute.Softplus, 7, 5, 4))
	add("mlp-relu", mk(compute.ReLU, 7, 5, 4))
	add("mlp-tanh-2hidden", mk(compute.Tanh, 7, 6, 5, 3))
	q := &Quadratic{A: 0.7, Dim: 7}
	cs = append(cs, gradCase{"quadratic", q, func(w, x []float64, y []int) float64 { return refQuadLoss(q, w, x, y) }, 7, 3})
	return cs
}

// backendGrad returns the backend's gradient for each of R replicas.
func backendGrad(t *testing.T, c gradCase, w [][]float32, x []float32, y []int, perEx float32) [][]float32 {
	be := cpu.New(2)
	defer be.Close()
	R, d, n := len(w), c.model.NumParams(), len(y)
	pb := be.Alloc(R * d)
	for r := range w {
		be.Upload(pb, r*d, w[r])
	}
	yf := make([]float32, n)
	for i, v := range y {
		yf[i] = float32(v)
	}
	gb := be.Alloc(R * d)
	ws := c.model.NewWorkspace(be, n, R)
	rows := func(b compute.Buffer) compute.Mat {
		return compute.Mat{Buf: b, Rows: 1, Cols: d, Stride: d, Batch: R, BatchStride: d}
	}
	c.model.Grad(be, ws, rows(pb), compute.Mat{Buf: be.Alias(x), Rows: n, Cols: c.in, Stride: c.in, Batch: 1},
		compute.Mat{Buf: be.Alias(yf), Rows: n, Cols: 1, Stride: 1, Batch: 1}, rows(gb), perEx)
	out := make([][]float32, R)
	for r := range out {
		out[r] = make([]float32, d)
		be.Download(out[r], gb, r*d)
	}
	return out
}

func randData(seed uint64, n, in, nc int) ([]float32, []int) {
	rnd := philox.NewRand(seed, 0, 0, 9, 1)
	x := make([]float32, n*in)
	for i := range x {
		x[i] = float32(2*rnd.Float() - 1)
	}
	y := make([]int, n)
	for i := range y {
		y[i] = rnd.Below(nc)
	}
	return x, y
}

func randParams(m Model, R int, seed uint64) [][]float32 {
	w := make([][]float32, R)
	for r := range w {
		w[r] = make([]float32, m.NumParams())
		rnd := philox.NewRand(seed+uint64(r), 0, 0, 9, 2)
		for i := range w[r] {
			w[r][i] = float32(2*rnd.Float() - 1)
		}
	}
	return w
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// Every model's replica-batched gradient against float64 central differences (h = 1e-5: the
// truncation error h^2 f”' ~ 1e-10 and rounding error eps/h ~ 1e-11 are far below the
// tolerance). Tolerance 2e-5 (1 + |g|): the float32 forward and backward passes through at
// most three layers of width <= 7 carry relative errors of a few 1e-7.
func TestGradientFiniteDifferences(t *testing.T) {
	const R, n = 3, 6
	for _, c := range gradCases(t) {
		t.Run(c.name, func(t *testing.T) {
			x, y := randData(11, n, c.in, c.nc)
			w := randParams(c.model, R, 5)
			got := backendGrad(t, c, w, x, y, 0)
			x64 := to64(x)
			for r := 0; r < R; r++ {
				want := fdGrad(func(w []float64) float64 { return c.ref(w, x64, y) }, to64(w[r]), 1e-5)
				for i := range want {
					if math.Abs(float64(got[r][i])-want[i]) > 2e-5*(1+math.Abs(want[i])) {
						t.Fatalf("replica %d param %d: gradient %g, finite difference %g", r, i, got[r][i], want[i])
					}
				}
			}
		})
	}
}

// DP-SGD's per-example clipping: the backend's sum of clipped per-example gradients against
// the float64 per-example finite-difference gradients, clipped and summed. V is chosen so that
// some examples are clipped and (checked) some are not.
func TestPerExampleClipping(t *testing.T) {
	const R, n = 2, 5
	for _, c := range gradCases(t)[:5] {
		t.Run(c.name, func(t *testing.T) {
			x, y := randData(12, n, c.in, c.nc)
			w := randParams(c.model, R, 6)
			x64 := to64(x)
			for r := 0; r < R; r++ {
				w64 := to64(w[r])
				var norms []float64
				per := make([][]float64, n)
				for e := 0; e < n; e++ {
					xe := x64[e*c.in : (e+1)*c.in]
					per[e] = fdGrad(func(w []float64) float64 { return c.ref(w, xe, y[e:e+1]) }, w64, 1e-5)
					var s float64
					for _, v := range per[e] {
						s += v * v
					}
					norms = append(norms, math.Sqrt(s))
				}
				v := (minF(norms) + maxF(norms)) / 2
				want := make([]float64, len(w64))
				for e := 0; e < n; e++ {
					scale := math.Min(1, v/norms[e])
					for i := range want {
						want[i] += scale * per[e][i]
					}
				}
				got := backendGrad(t, c, w[r:r+1], x, y, float32(v))[0]
				for i := range want {
					if math.Abs(float64(got[i])-want[i]) > 2e-5*(1+math.Abs(want[i])) {
						t.Fatalf("replica %d param %d: clipped sum %g, reference %g (V %g, norms %v)", r, i, got[i], want[i], v, norms)
					}
				}
			}
		})
	}
}

func minF(x []float64) float64 {
	m := math.Inf(1)
	for _, v := range x {
		m = math.Min(m, v)
	}
	return m
}

func maxF(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	return m
}

// The same MLP (and softmax regression) built as a gorgonia graph in float64; its symbolic
// gradient must match the backend's. Tolerance as for finite differences.
func TestGradientGorgonia(t *testing.T) {
	for _, sizes := range [][]int{{6, 4}, {6, 5, 4}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			m, err := NewMLP(compute.Tanh, sizes...)
			if err != nil {
				t.Fatal(err)
			}
			const n = 5
			x, y := randData(13, n, sizes[0], sizes[len(sizes)-1])
			w := randParams(m, 1, 9)[0]
			got := backendGrad(t, gradCase{model: m, in: sizes[0]}, [][]float32{w}, x, y, 0)[0]
			want, err := gorgoniaGrad(m, to64(w), to64(x), y)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Abs(float64(got[i])-want[i]) > 2e-5*(1+math.Abs(want[i])) {
					t.Fatalf("param %d: backend %g, gorgonia %g", i, got[i], want[i])
				}
			}
		})
	}
}

// gorgoniaGrad builds loss = mean_r -log softmax(f(x_r))[y_r] for the MLP with gorgonia and
// returns its gradient in the MLP's parameter layout.
func gorgoniaGrad(m *MLP, w, x []float64, y []int) ([]float64, error) {
	g := G.NewGraph()
	n, L := len(y), len(m.Sizes)-1
	mat := func(name string, r, c int, v []float64) *G.Node {
		return G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(r, c), tensor.WithBacking(append([]float64(nil), v...)))))
	}
	a := mat("x", n, m.Sizes[0], x)
	var params []*G.Node
	for l := 0; l < L; l++ {
		in, out := m.Sizes[l], m.Sizes[l+1]
		wt := make([]float64, in*out) // W^T, in x out
		for o := 0; o < out; o++ {
			for i := 0; i < in; i++ {
				wt[i*out+o] = w[m.woff[l]+o*in+i]
			}
		}
		W := mat(fmt.Sprintf("W%d", l), in, out, wt)
		b := mat(fmt.Sprintf("b%d", l), 1, out, w[m.boff[l]:m.boff[l]+out])
		params = append(params, W, b)
		z, err := G.Mul(a, W)
		if err != nil {
			return nil, err
		}
		if z, err = G.BroadcastAdd(z, b, nil, []byte{0}); err != nil {
			return nil, err
		}
		if l+1 < L {
			if z, err = G.Tanh(z); err != nil {
				return nil, err
			}
		}
		a = z
	}
	onehot := make([]float64, n*m.Sizes[L])
	for r, c := range y {
		onehot[r*m.Sizes[L]+c] = 1
	}
	sm, err := G.SoftMax(a)
	if err != nil {
		return nil, err
	}
	lp, err := G.Log(sm)
	if err != nil {
		return nil, err
	}
	picked, err := G.HadamardProd(lp, mat("onehot", n, m.Sizes[L], onehot))
	if err != nil {
		return nil, err
	}
	s, err := G.Sum(picked)
	if err != nil {
		return nil, err
	}
	loss, err := G.Mul(s, G.NewConstant(-1/float64(n)))
	if err != nil {
		return nil, err
	}
	if _, err := G.Grad(loss, params...); err != nil {
		return nil, fmt.Errorf("gorgonia grad: %w", err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, fmt.Errorf("gorgonia run: %w", err)
	}
	out := make([]float64, m.NumParams())
	for l := 0; l < L; l++ {
		in, o := m.Sizes[l], m.Sizes[l+1]
		gw, err := params[2*l].Grad()
		if err != nil {
			return nil, err
		}
		gwv := gw.Data().([]float64)
		for oo := 0; oo < o; oo++ {
			for i := 0; i < in; i++ {
				out[m.woff[l]+oo*in+i] = gwv[i*o+oo]
			}
		}
		gb, err := params[2*l+1].Grad()
		if err != nil {
			return nil, err
		}
		copy(out[m.boff[l]:], gb.Data().([]float64))
	}
	return out, nil
}

// The MLP's fused step (Gram-matrix norm of the first layer, in-place GEMM update) against the
// plain gradient followed by ClipStep, with clipping active for some replicas and not for
// others, and with a FedProx term. Tolerance 1e-6 (1 + |w|): both are float32 computations of
// the same step with different summation orders.
func TestFusedStepMatchesClipStep(t *testing.T) {
	for _, sizes := range [][]int{{9, 7, 4}, {9, 4}} {
		m, err := NewMLP(compute.Tanh, sizes...)
		if err != nil {
			t.Fatal(err)
		}
		testFusedStep(t, m)
	}
}

func testFusedStep(t *testing.T, m *MLP) {
	const R, n = 4, 6
	x, y := randData(14, n, 9, 4)
	w := randParams(m, R, 15)
	anchor := randParams(m, R, 16)
	g := backendGrad(t, gradCase{model: m, in: 9}, w, x, y, 0)
	var norms []float64
	for _, gr := range g {
		norms = append(norms, math.Sqrt(sumSq64(gr)))
	}
	v := float32((minF(norms) + maxF(norms)) / 2)
	for _, alpha := range []float32{0, 0.3} {
		be := cpu.New(2)
		d := m.NumParams()
		bufs := func(ws [][]float32) compute.Buffer {
			b := be.Alloc(R * d)
			for r := range ws {
				be.Upload(b, r*d, ws[r])
			}
			return b
		}
		rows := func(b compute.Buffer) compute.Mat {
			return compute.Mat{Buf: b, Rows: 1, Cols: d, Stride: d, Batch: R, BatchStride: d}
		}
		pa, pb, an, gb := bufs(w), bufs(w), bufs(anchor), be.Alloc(R*d)
		yf := make([]float32, n)
		for i, c := range y {
			yf[i] = float32(c)
		}
		xm := compute.Mat{Buf: be.Alias(x), Rows: n, Cols: 9, Stride: 9, Batch: 1}
		ym := compute.Mat{Buf: be.Alias(yf), Rows: n, Cols: 1, Stride: 1, Batch: 1}
		ws := m.NewWorkspace(be, n, R)
		m.Grad(be, ws, rows(pa), xm, ym, rows(gb), 0)
		be.ClipStep(0.7, v, alpha, rows(pa), rows(gb), rows(an))
		m.Step(be, ws, rows(pb), xm, ym, rows(an), rows(be.Alloc(R*d)), 0.7, v, alpha)
		a, b := cpu.HostData(pa), cpu.HostData(pb)
		for i := range a {
			if math.Abs(float64(a[i]-b[i])) > 1e-6*(1+math.Abs(float64(a[i]))) {
				t.Fatalf("alpha %g: parameter %d (replica %d): fused %g, ClipStep %g", alpha, i%d, i/d, b[i], a[i])
			}
		}
		if slices.Equal(a, cpu.HostData(bufs(w))) {
			t.Fatal("the step changed nothing")
		}
		be.Close()
	}
}

// sumSq64 is the squared norm of x accumulated in float64.
func sumSq64(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return s
}
