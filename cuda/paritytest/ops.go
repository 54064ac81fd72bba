package paritytest

import (
	"fmt"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
)

// shape is a batch of row-major matrices inside a buffer, possibly a strided view.
type shape struct {
	rows, cols, batch int
	stride, bstride   int // 0: contiguous (stride cols, batch stride rows*stride)
	off               int
}

func (s shape) mat() compute.Mat {
	st, bs := s.stride, s.bstride
	if st == 0 {
		st = s.cols
	}
	if bs == 0 {
		bs = s.rows * st
	}
	if s.bstride < 0 { // broadcast
		bs = 0
	}
	return compute.Mat{Off: s.off, Rows: s.rows, Cols: s.cols, Stride: st, Batch: s.batch, BatchStride: bs}
}

// size is the buffer length that holds the view.
func (s shape) size() int {
	m := s.mat()
	if m.Batch == 0 || m.Rows == 0 {
		return m.Off + 1
	}
	return m.Off + (m.Batch-1)*m.BatchStride + (m.Rows-1)*m.Stride + m.Cols + 3
}

func (s shape) String() string {
	return fmt.Sprintf("%dx%dx%d/s%d/b%d/o%d", s.batch, s.rows, s.cols, s.stride, s.bstride, s.off)
}

// shapes cover contiguous batches, one replica, widths above and below the block size and
// not divisible by it, strided views with offsets, and empty batches.
var shapes = []shape{
	{rows: 3, cols: 5, batch: 4},
	{rows: 1, cols: 1, batch: 1},
	{rows: 2, cols: 300, batch: 1},
	{rows: 1, cols: 257, batch: 3},
	{rows: 4, cols: 6, batch: 3, stride: 9, bstride: 40, off: 2},
	{rows: 5, cols: 3, batch: 0},
	{rows: 0, cols: 3, batch: 2},
}

// withShape returns s with the same dimensions and its own layout: contiguous or broadcast.
func broadcast(s shape) shape {
	s.bstride = -1
	s.stride, s.off = 0, 0
	return s
}

// forEach runs f for every launch configuration and shape.
func forEach(t *testing.T, f Factory, body func(t *testing.T, w *twin, s shape)) {
	for _, o := range launchConfigs {
		for _, s := range shapes {
			t.Run(cfgName(o)+"/"+s.String(), func(t *testing.T) { body(t, newTwin(t, f, o), s) })
		}
	}
}

// Elementwise float32 arithmetic is the same on both sides (no fused multiply-adds anywhere),
// so Axpby, AddRow, SumRows and Gather must agree bit for bit.
func testAxpby(t *testing.T, f Factory) {
	cases := []struct {
		alpha, beta float32
		coef        bool
		noX, alias  bool
	}{
		{1.5, 0, false, false, false},
		{0.5, 1, false, false, false},
		{-2, 0.25, true, false, false},
		{0, 0, false, true, false},
		{0, 0, true, true, false}, // coef 0 everywhere, x absent: must zero y
		{-0.75, 1, true, false, true},
		{1, 0, false, false, true},
	}
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		for ci, c := range cases {
			y := w.normal(s.size())
			if c.beta == 0 { // y is write-only: NaNs there must not leak
				y = w.buf(s.size(), func(int) float32 { return float32(math.NaN()) })
			}
			ym := w.mat(y, s.mat())
			var xm [2]compute.Mat
			switch {
			case c.alias:
				xm = ym
			case !c.noX:
				xm = w.mat(w.normal(s.size()), s.mat())
			}
			var coef []float32
			if c.coef {
				coef = make([]float32, s.batch)
				for b := range coef {
					if !c.noX {
						coef[b] = float32(b%3) - 0.5
					}
				}
			}
			w.cpu.Axpby(c.alpha, xm[0], c.beta, ym[0], coef)
			w.ops.Axpby(c.alpha, xm[1], c.beta, ym[1], coef)
			w.sameULP(y, 0, fmt.Sprintf("case %d", ci))
		}
	})
}

func testAddRow(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		for _, shared := range []bool{false, true} {
			y := w.normal(s.size())
			vs := shape{rows: 1, cols: s.cols, batch: s.batch}
			if shared {
				vs = broadcast(vs)
			}
			v := w.normal(vs.size())
			ym, vm := w.mat(y, s.mat()), w.mat(v, vs.mat())
			w.cpu.AddRow(ym[0], vm[0])
			w.ops.AddRow(ym[1], vm[1])
			w.sameULP(y, 0, fmt.Sprintf("shared %v", shared))
		}
	})
}

func testSumRows(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		for _, c := range []struct {
			alpha, beta float32
			shared      bool
		}{{1, 0, false}, {-0.5, 1, true}, {2, 0.3, false}} {
			xs := s
			if c.shared {
				xs = broadcast(s)
			}
			x := w.normal(xs.size())
			ys := shape{rows: 1, cols: s.cols, batch: s.batch, bstride: s.cols + 1}
			y := w.normal(ys.size())
			if c.beta == 0 {
				y = w.buf(ys.size(), func(int) float32 { return float32(math.NaN()) })
			}
			xm, ym := w.mat(x, xs.mat()), w.mat(y, ys.mat())
			w.cpu.SumRows(c.alpha, xm[0], c.beta, ym[0])
			w.ops.SumRows(c.alpha, xm[1], c.beta, ym[1])
			// Elements outside the view keep their NaN on both sides: they are compared too.
			w.sameULP(y, 0, fmt.Sprintf("%+v", c))
		}
	})
}

// testColumnBias checks compute.ColumnBiaser, which the CPU backend does without (package nn
// multiplies by ones there): against the definition computed here on the CPU side's copy, bit
// for bit (one float32 addition an element, and a float32 sum in column order a row).
func testColumnBias(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		cb, ok := w.ops.(compute.ColumnBiaser)
		if !ok {
			t.Fatal("the backend has no compute.ColumnBiaser")
		}
		for _, shared := range []bool{false, true} {
			// A column of s.rows values a batch element, 3 floats apart.
			vs := shape{rows: s.rows, cols: 1, batch: s.batch, stride: 3, bstride: 3*s.rows + 1, off: 1}
			xs := s
			if shared {
				vs.bstride, xs = -1, broadcast(s)
			}
			y, v := w.normal(s.size()), w.normal(vs.size())
			ym, vm := w.mat(y, s.mat()), w.mat(v, vs.mat())
			w.addColumnOnCPU(y, ym[0], v, vm[0])
			cb.AddColumn(ym[1], vm[1])
			w.sameULP(y, 0, fmt.Sprintf("AddColumn shared %v", shared))

			x := w.normal(xs.size())
			sum := w.buf(vs.size(), func(int) float32 { return float32(math.NaN()) }) // write-only
			xm, sm := w.mat(x, xs.mat()), w.mat(sum, vs.mat())
			w.onCPUSide(sum, func(h []float32) {
				hx, _ := w.get(x)
				for b := 0; b < s.batch; b++ {
					for r := 0; r < s.rows; r++ {
						var acc float32
						for j := 0; j < s.cols; j++ {
							acc += hx[elem(xm[0], b, r, j)]
						}
						h[elem(sm[0], b, r, 0)] = acc
					}
				}
			})
			cb.SumColumns(xm[1], sm[1])
			// Elements outside the view keep their NaN on both sides: they are compared too.
			w.sameULP(sum, 0, fmt.Sprintf("SumColumns shared %v", shared))
		}
	})
}

// testColumnBiasFused checks compute.ColumnBiaser's fused pairs: AddColumnActivate and
// ActivateGradSumColumns give exactly the bits of the backend's own pair (AddColumn then
// Activate; ActivateGrad then SumColumns), and agree with the CPU backend's Activate and
// ActivateGrad as those do (to 1 ulp for tanh and softplus, testActivate's tolerance).
func testColumnBiasFused(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		cb := w.ops.(compute.ColumnBiaser)
		vs := shape{rows: s.rows, cols: 1, batch: s.batch, stride: 2, bstride: 2*s.rows + 3, off: 2}
		ps := s
		ps.off, ps.stride, ps.bstride = 1, 0, 0
		nan := func(int) float32 { return float32(math.NaN()) }
		for _, act := range []compute.Activation{compute.Tanh, compute.Softplus, compute.ReLU} {
			tol := b2u(act != compute.ReLU)
			// Forward: the fused pair on one copy of pre, the two operations on another.
			v := w.normal(vs.size())
			pre, pre2 := w.twice(s.size(), w.preFill)
			post, post2 := w.twice(ps.size(), nan)
			vm, prem, pre2m, postm, post2m := w.mat(v, vs.mat()), w.mat(pre, s.mat()), w.mat(pre2, s.mat()), w.mat(post, ps.mat()), w.mat(post2, ps.mat())
			cb.AddColumnActivate(act, prem[1], vm[1], postm[1])
			cb.AddColumn(pre2m[1], vm[1])
			w.ops.Activate(act, pre2m[1], post2m[1])
			w.sameOnDevice(pre, pre2, fmt.Sprintf("AddColumnActivate %v: pre", act))
			w.sameOnDevice(post, post2, fmt.Sprintf("AddColumnActivate %v: post", act))
			w.addColumnOnCPU(pre, prem[0], v, vm[0])
			w.cpu.Activate(act, prem[0], postm[0])
			w.sameULP(pre, 0, fmt.Sprintf("AddColumnActivate %v: pre", act))
			w.sameULP(post, tol, fmt.Sprintf("AddColumnActivate %v: post", act))

			// Backward, on the values above.
			g, g2 := w.twice(s.size(), func(int) float32 { return float32(w.rng.NormFloat64()) })
			y, y2 := w.twice(vs.size(), nan)
			gm, g2m, ym, y2m := w.mat(g, s.mat()), w.mat(g2, s.mat()), w.mat(y, vs.mat()), w.mat(y2, vs.mat())
			cb.ActivateGradSumColumns(act, prem[1], postm[1], gm[1], ym[1])
			w.ops.ActivateGrad(act, prem[1], postm[1], g2m[1])
			cb.SumColumns(g2m[1], y2m[1])
			w.sameOnDevice(g, g2, fmt.Sprintf("ActivateGradSumColumns %v: grad", act))
			w.sameOnDevice(y, y2, fmt.Sprintf("ActivateGradSumColumns %v: sums", act))
		}
	})
}

// testSoftmaxXentColumns checks compute.ColumnXent: on logits stored classes by samples (with
// padded rows and batch elements), the losses, margins and dlogits have exactly the bits of the
// backend's SoftmaxXent on the same logits stored samples by classes (which testSoftmaxXent
// holds to the CPU backend).
func testSoftmaxXentColumns(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		cx, ok := w.ops.(compute.ColumnXent)
		if !ok {
			t.Fatal("the backend has no compute.ColumnXent")
		}
		B, K, R := s.rows, max(s.cols, 2), s.batch
		rows := shape{rows: B, cols: K, batch: R}
		cols := shape{rows: K, cols: B, batch: R, stride: B + 1, bstride: K*(B+1) + 2, off: 1}
		lr := w.normal(rows.size())
		h, _ := w.get(lr)
		h[0] = float32(math.Inf(1)) // a NaN loss and dlogits: they must match too
		rm, cm := rows.mat(), cols.mat()
		lc := w.buf(cols.size(), func(int) float32 { return float32(math.NaN()) })
		hc, _ := w.get(lc)
		for b := 0; b < R; b++ {
			for i := 0; i < B; i++ {
				for k := 0; k < K; k++ {
					hc[elem(cm, b, k, i)] = h[elem(rm, b, i, k)]
				}
			}
		}
		lr = w.buf(len(h), func(i int) float32 { return h[i] })
		lc = w.buf(len(hc), func(i int) float32 { return hc[i] })
		ls := shape{rows: B, cols: 1, batch: R, stride: 1, bstride: -1}
		labels := w.buf(ls.size(), func(i int) float32 { return float32((i*7 + 3) % K) })
		out := shape{rows: B, cols: 1, batch: R, stride: 2, bstride: 2*B + 1}
		nan := func(int) float32 { return float32(math.NaN()) }
		dr, dc := w.buf(rows.size(), nan), w.buf(cols.size(), nan)
		lossR, lossC, marR, marC := w.buf(out.size(), nan), w.buf(out.size(), nan), w.buf(out.size(), nan), w.buf(out.size(), nan)
		ym := w.mat(labels, ls.mat())
		w.ops.SoftmaxXent(w.mat(lr, rm)[1], ym[1], 0.25, w.mat(dr, rm)[1], w.mat(lossR, out.mat())[1], w.mat(marR, out.mat())[1])
		cx.SoftmaxXentColumns(w.mat(lc, cm)[1], ym[1], 0.25, w.mat(dc, cm)[1], w.mat(lossC, out.mat())[1], w.mat(marC, out.mat())[1])
		w.sameOnDevice(lossC, lossR, "loss")
		w.sameOnDevice(marC, marR, "margin")
		_, gr := w.get(dr)
		_, gc := w.get(dc)
		for b := 0; b < R; b++ {
			for i := 0; i < B; i++ {
				for k := 0; k < K; k++ {
					if x, y := gc[elem(cm, b, k, i)], gr[elem(rm, b, i, k)]; math.Float32bits(x) != math.Float32bits(y) {
						t.Fatalf("dlogits of sample %d class %d of element %d: %v by columns, %v by rows", i, k, b, x, y)
					}
				}
			}
		}
		// Nothing outside the column layout's view is written.
		for i, v := range gc {
			if b, rem := (i-1)/cols.bstride, (i-1)%cols.bstride; i == 0 || b >= R || rem >= K*(B+1) || rem%(B+1) == B {
				if !math.IsNaN(float64(v)) {
					t.Fatalf("dlogits value %d, outside the view, written: %v", i, v)
				}
			}
		}
	})
}

// twice makes two buffers holding the same values from fill (ids a, b): one for a fused
// operation, one for the operations it stands for.
func (w *twin) twice(n int, fill func(int) float32) (a, b int) {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = fill(i)
	}
	return w.buf(n, func(i int) float32 { return vals[i] }), w.buf(n, func(i int) float32 { return vals[i] })
}

// sameOnDevice fails when buffers a (the fused operation's) and b (the pair's) differ in any
// bit on the tested side.
func (w *twin) sameOnDevice(a, b int, what string) {
	w.t.Helper()
	_, x := w.get(a)
	_, y := w.get(b)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			w.t.Errorf("%s: element %d: fused %v (%08x), pair %v (%08x)", what, i, x[i], math.Float32bits(x[i]), y[i], math.Float32bits(y[i]))
			return
		}
	}
}

// addColumnOnCPU is AddColumn's definition on the CPU side's copies: y[b, r, j] += v[b, r, 0]
// for the views ym of buffer y and vm of buffer v.
func (w *twin) addColumnOnCPU(y int, ym compute.Mat, v int, vm compute.Mat) {
	hv, _ := w.get(v)
	w.onCPUSide(y, func(h []float32) {
		for b := 0; b < ym.Batch; b++ {
			for r := 0; r < ym.Rows; r++ {
				for j := 0; j < ym.Cols; j++ {
					h[elem(ym, b, r, j)] += hv[elem(vm, b, r, 0)]
				}
			}
		}
	})
}

// elem is the index of element (b, r, j) of m in its buffer.
func elem(m compute.Mat, b, r, j int) int { return m.Off + b*m.BatchStride + r*m.Stride + j }

func testGather(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		src := shape{rows: 7, cols: s.cols, batch: s.batch, stride: s.cols + 2}
		shared := broadcast(src)
		for _, idx := range [][]int32{nil, {6}, {3, 0, 3, 6, 1}} {
			for _, ss := range []shape{src, shared} {
				dst := shape{rows: len(idx), cols: s.cols, batch: s.batch}
				d := w.normal(dst.size())
				sm, dm := w.mat(w.normal(ss.size()), ss.mat()), w.mat(d, dst.mat())
				w.cpu.Gather(dm[0], sm[0], idx)
				w.ops.Gather(dm[1], sm[1], idx)
				w.sameULP(d, 0, fmt.Sprintf("idx %v src %v", idx, ss))
			}
		}
	})
}

// special holds values where activations and their derivatives are delicate.
var special = []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 20, -20, 89, -89, 1e4,
	-1e4, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.5, -0.5}

func preValues(w *twin, n int) int { return w.buf(n, w.preFill) }

// preFill is value i of an activation's input: the special values first, then normals.
func (w *twin) preFill(i int) float32 {
	if i < len(special) {
		return special[i]
	}
	return float32(3 * w.rng.NormFloat64())
}

// Tanh and softplus are computed in float64 (the kernels with the C or CUDA library's tanh,
// exp and log1p, the CPU backend with Go's or its own float64 tanh approximation), all within
// a few float64 ulps of the exact value, which round to the same float32 except next to a
// rounding boundary: the results may differ by at most 1 float32 ulp. ReLU is exact.
func testActivate(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		for _, act := range []compute.Activation{compute.Tanh, compute.Softplus, compute.ReLU} {
			pre := w.mat(preValues(w, s.size()), s.mat())
			ps := s
			ps.off, ps.stride, ps.bstride = 1, 0, 0
			post := w.buf(ps.size(), func(int) float32 { return float32(math.NaN()) })
			pm := w.mat(post, ps.mat())
			w.cpu.Activate(act, pre[0], pm[0])
			w.ops.Activate(act, pre[1], pm[1])
			w.sameULP(post, b2u(act != compute.ReLU), fmt.Sprint("activation ", act))
		}
	})
}

func b2u(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ActivateGrad: tanh's derivative is float32 arithmetic (exact), softplus's uses exp (1 ulp),
// ReLU's a comparison (exact).
func testActivateGrad(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		for _, act := range []compute.Activation{compute.Tanh, compute.Softplus, compute.ReLU} {
			pre := w.mat(preValues(w, s.size()), s.mat())
			post := w.mat(w.normal(s.size()), s.mat())
			gs := s
			gs.stride, gs.bstride, gs.off = 0, 0, 0
			g := w.normal(gs.size())
			gm := w.mat(g, gs.mat())
			w.cpu.ActivateGrad(act, pre[0], post[0], gm[0])
			w.ops.ActivateGrad(act, pre[1], post[1], gm[1])
			w.sameULP(g, b2u(act == compute.Softplus), fmt.Sprint("activation ", act))
		}
	})
}

// SoftmaxXent: the margin is float32 arithmetic (exact). Loss and dlogits go through exp and
// log of the C library: each differs from Go's by at most 1 float64 ulp, so loss (lse - z_y,
// lse about the logits' size, below 30 here) may differ by a few 1e-15 before float32
// rounding: tolerance 1e-6 (1 + |loss|). dlogits = scale (p - [j = y]) with p in [0, 1]:
// tolerance 2^-23 |scale| (1 + |p|) + 1e-12, one float32 rounding of p and the subtraction.
func testSoftmaxXent(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		if s.cols < 2 {
			s.cols = 2
		}
		for _, c := range []struct {
			scale                     float32
			dl, loss, margin, aliased bool
		}{
			{0.25, true, false, false, false},
			{1, true, true, true, true},
			{0, false, true, true, false},
			{0, false, false, true, false},
		} {
			lg := w.normal(s.size())
			ls := shape{rows: s.rows, cols: 1, batch: s.batch, stride: 1, bstride: -1}
			labels := w.buf(ls.size(), func(i int) float32 { return float32((i*7 + 3) % s.cols) })
			lm, ym := w.mat(lg, s.mat()), w.mat(labels, ls.mat())
			out := shape{rows: s.rows, cols: 1, batch: s.batch, stride: 2, bstride: 2*s.rows + 1}
			nan := func(int) float32 { return float32(math.NaN()) }
			var dl, loss, margin = -1, -1, -1
			var dm, lsm, mm [2]compute.Mat
			if c.dl && c.aliased {
				dl, dm = lg, lm
			} else if c.dl {
				dl = w.buf(s.size(), nan)
				dm = w.mat(dl, s.mat())
			}
			if c.loss {
				loss = w.buf(out.size(), nan)
				lsm = w.mat(loss, out.mat())
			}
			if c.margin {
				margin = w.buf(out.size(), nan)
				mm = w.mat(margin, out.mat())
			}
			w.cpu.SoftmaxXent(lm[0], ym[0], c.scale, dm[0], lsm[0], mm[0])
			w.ops.SoftmaxXent(lm[1], ym[1], c.scale, dm[1], lsm[1], mm[1])
			what := fmt.Sprintf("%+v", c)
			if margin >= 0 {
				w.sameULP(margin, 0, what+" margin")
			}
			if loss >= 0 {
				w.near(loss, what+" loss", func(_ int, ref float32) float64 { return 1e-6 * (1 + math.Abs(float64(ref))) })
			}
			if dl >= 0 {
				w.near(dl, what+" dlogits", func(_ int, ref float32) float64 {
					return math.Ldexp(float64(c.scale), -23)*(2+math.Abs(float64(ref))) + 1e-12
				})
			}
		}
	})
}

// ClipExamples sums the squared norms in the CPU backend's order (four float64 lanes, layers
// in order) and squares of float32 values are exact in float64, so it must agree bit for bit.
func testClipExamples(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		for _, v := range []float32{0.5, 5, 1e9} {
			d0s, d1s := s, shape{rows: s.rows, cols: s.cols + 2, batch: s.batch}
			in0 := broadcast(shape{rows: s.rows, cols: 9, batch: s.batch, stride: 11})
			in1 := shape{rows: s.rows, cols: s.cols, batch: s.batch}
			d0, d1 := w.normal(d0s.size()), w.normal(d1s.size())
			deltas := [2][]compute.Mat{}
			inputs := [2][]compute.Mat{}
			for side := 0; side < 2; side++ {
				deltas[side] = []compute.Mat{w.mat(d0, d0s.mat())[side], w.mat(d1, d1s.mat())[side]}
			}
			i0, i1 := w.mat(w.normal(in0.size()), in0.mat()), w.mat(w.normal(in1.size()), in1.mat())
			inputs[0] = []compute.Mat{i0[0], i1[0]}
			inputs[1] = []compute.Mat{i0[1], i1[1]}
			w.cpu.ClipExamples(v, deltas[0], inputs[0])
			w.ops.ClipExamples(v, deltas[1], inputs[1])
			w.sameULP(d0, 0, fmt.Sprint("v ", v, " layer 0"))
			w.sameULP(d1, 0, fmt.Sprint("v ", v, " layer 1"))
		}
	})
}

// rowShapes are batches of single rows (replicas), as ClipStep, AddGaussian and Dots take.
var rowShapes = []shape{
	{rows: 1, cols: 10, batch: 4},
	{rows: 1, cols: 1, batch: 1},
	{rows: 1, cols: 1031, batch: 3},
	{rows: 1, cols: 257, batch: 2, bstride: 300, off: 5},
	{rows: 1, cols: 6, batch: 0},
	// Long enough for the reductions' loops of 16 strides of 256 (partial_dot in reduce.cu) to
	// run twice with a remainder.
	{rows: 1, cols: 9000, batch: 2},
}

func forEachRow(t *testing.T, f Factory, body func(t *testing.T, w *twin, s shape)) {
	for _, o := range launchConfigs {
		for _, s := range rowShapes {
			t.Run(cfgName(o)+"/"+s.String(), func(t *testing.T) { body(t, newTwin(t, f, o), s) })
		}
	}
}

// ClipStep: the squared norm is summed in a different order (256 strided partial sums, then
// their sum) than the CPU's four lanes; both are float64 sums of exact squares, relative
// error below 1e-13, so the clip factor agrees to 1 float32 ulp and every result to within a
// few ulps: tolerance 4 2^-23 (|w| + eta |g| + eta alpha |w - anchor|) + 1e-30.
func testClipStep(t *testing.T, f Factory) {
	forEachRow(t, f, func(t *testing.T, w *twin, s shape) {
		for _, c := range []struct{ eta, v, alpha float32 }{
			{0.1, 0.5, 0}, {0.1, 1e6, 0}, {0.3, 0, 0}, {0.05, 1, 0.7}, {0.05, -1, 0.2},
		} {
			wb := w.normal(s.size())
			g := w.buf(s.size(), func(i int) float32 { return float32(3 * w.rng.NormFloat64()) })
			an := w.normal(s.size())
			wm, gm, am := w.mat(wb, s.mat()), w.mat(g, s.mat()), w.mat(an, s.mat())
			wc, _ := w.get(wb)
			gc, _ := w.get(g)
			ac, _ := w.get(an)
			w.cpu.ClipStep(c.eta, c.v, c.alpha, wm[0], gm[0], am[0])
			w.ops.ClipStep(c.eta, c.v, c.alpha, wm[1], gm[1], am[1])
			w.near(wb, fmt.Sprintf("%+v", c), func(i int, _ float32) float64 {
				m := math.Abs(float64(wc[i])) + float64(c.eta)*math.Abs(float64(gc[i])) +
					float64(c.eta*c.alpha)*math.Abs(float64(wc[i]-ac[i]))
				return 4*math.Ldexp(m, -23) + 1e-30
			})
		}
	})
}

// A NaN gradient poisons only its own replica, on both backends.
func testClipStepNaN(t *testing.T, f Factory) {
	w := newTwin(t, f, cuda.Options{})
	s := shape{rows: 1, cols: 5, batch: 3}
	wb := w.normal(s.size())
	g := w.buf(s.size(), func(i int) float32 {
		if i == 7 {
			return float32(math.NaN())
		}
		return 1
	})
	wm, gm := w.mat(wb, s.mat()), w.mat(g, s.mat())
	w.cpu.ClipStep(0.1, 1, 0, wm[0], gm[0], compute.Mat{})
	w.ops.ClipStep(0.1, 1, 0, wm[1], gm[1], compute.Mat{})
	w.sameULP(wb, 1, "NaN gradient")
	_, got := w.get(wb)
	for i, v := range got[:15] {
		if nan := v != v; nan != (i >= 5 && i < 10) {
			t.Errorf("element %d = %v: only replica 1 (elements 5..9) should be NaN", i, v)
		}
	}
}

// Dots: float64 sums of exact products in another order than the CPU's sequential sum:
// relative error below 1e-12 of sum |a_i b_i|.
func testDots(t *testing.T, f Factory) {
	forEachRow(t, f, func(t *testing.T, w *twin, s shape) {
		a, b := w.normal(s.size()), w.normal(s.size())
		for _, pair := range [][2]int{{a, b}, {a, a}} {
			am, bm := w.mat(pair[0], s.mat()), w.mat(pair[1], s.mat())
			want, got := make([]float64, s.batch+1), make([]float64, s.batch+1)
			got[s.batch] = 42 // past the batch: untouched
			want[s.batch] = 42
			w.cpu.Dots(am[0], bm[0], want)
			w.ops.Dots(am[1], bm[1], got)
			if err := w.ops.Err(); err != nil {
				t.Fatal(err)
			}
			ah, _ := w.get(pair[0])
			bh, _ := w.get(pair[1])
			for r := range want {
				var mag float64
				if r < s.batch {
					for j := 0; j < s.cols; j++ {
						mag += math.Abs(float64(ah[s.off+r*am[0].BatchStride+j]) * float64(bh[s.off+r*bm[0].BatchStride+j]))
					}
				}
				if math.Abs(got[r]-want[r]) > 1e-12*mag {
					t.Errorf("dot %d: kernels %v, cpu %v, difference above %g", r, got[r], want[r], 1e-12*mag)
				}
				if r < s.batch {
					x := ah[s.off+r*am[0].BatchStride : s.off+r*am[0].BatchStride+s.cols]
					y := bh[s.off+r*bm[0].BatchStride : s.off+r*bm[0].BatchStride+s.cols]
					if exact := partialOrderDot(x, y); got[r] != exact {
						t.Errorf("dot %d: kernels %v, the fixed order of partial sums %v: not bit for bit", r, got[r], exact)
					}
				}
			}
		}
	})
}

// partialOrderDot is the kernels' fixed order of a long inner product (dot_partials, then
// reduce_partials): kernels.Partials strided partial sums, each in index order, then their sum
// in order, all in float64. The products of two float32 values are exact in float64, so the
// order of the additions alone decides the bits.
func partialOrderDot(x, y []float32) float64 {
	var parts [kernels.Partials]float64
	for p := range parts {
		for j := p; j < len(x); j += kernels.Partials {
			parts[p] += float64(x[j]) * float64(y[j])
		}
	}
	var s float64
	for _, v := range parts {
		s += v
	}
	return s
}

// ClipCoefs: the two inner products are float64 sums in another order than the CPU's (as in
// Dots: relative error below 1e-12), so the factor v / sqrt(n) agrees within 1 float32 ulp;
// a factor of exactly 1 (no clipping) and NaN (a NaN gradient) must agree exactly, and only
// the poisoned replica is NaN. The second product is longer than the first and reads a
// broadcast operand (as the engine's Gram matrix of the shared minibatch is).
func testClipCoefs(t *testing.T, f Factory) {
	forEachRow(t, f, func(t *testing.T, w *twin, s shape) {
		s2 := shape{rows: 1, cols: s.cols + 3, batch: s.batch}
		for _, c := range []struct {
			v   float32
			nan bool
		}{{0.5, false}, {1e6, false}, {3, false}, {0.5, true}} {
			// Positive operands: the sum is a squared norm in the engine, never negative.
			pos := func(int) float32 { return float32(math.Abs(w.rng.NormFloat64())) }
			a, b := w.buf(s.size(), pos), w.buf(s.size(), pos)
			cb := w.buf(broadcast(s2).size(), pos)
			d := w.buf(s2.size(), func(i int) float32 {
				if c.nan && s.batch > 1 && i == s2.cols+1 {
					return float32(math.NaN()) // replica 1 only
				}
				return pos(i)
			})
			am, bm := w.mat(a, s.mat()), w.mat(b, s.mat())
			cm, dm := w.mat(cb, broadcast(s2).mat()), w.mat(d, s2.mat())
			coef := w.buf(s.batch+1, func(int) float32 { return 42 })
			for side, be := range []compute.Backend{w.cpu, w.ops} {
				be.(compute.DeviceClipper).ClipCoefs(c.v, am[side], bm[side], cm[side], dm[side], w.bufs[coef][side])
			}
			w.sameULP(coef, 1, fmt.Sprintf("%+v", c))
			want, got := w.get(coef)
			if got[s.batch] != 42 {
				t.Errorf("%+v: the value past the batch was overwritten: %v", c, got[s.batch])
			}
			for r := range want[:s.batch] {
				if (want[r] == 1) != (got[r] == 1) || (want[r] != want[r]) != (got[r] != got[r]) {
					t.Errorf("%+v replica %d: cpu factor %v, kernels %v", c, r, want[r], got[r])
				}
				if nan := got[r] != got[r]; nan != (c.nan && r == 1) {
					t.Errorf("%+v replica %d: factor %v", c, r, got[r])
				}
			}
		}
	})
}

// AxpbyCoefs is Axpby with the coefficients in the backend's memory: bit for bit as Axpby.
func testAxpbyCoefs(t *testing.T, f Factory) {
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		for _, beta := range []float32{0, 1, 0.25} {
			y, x := w.normal(s.size()), w.normal(s.size())
			coef := w.buf(max(s.batch, 1), func(b int) float32 { return float32(b%3) - 0.5 })
			ym, xm := w.mat(y, s.mat()), w.mat(x, s.mat())
			for side, be := range []compute.Backend{w.cpu, w.ops} {
				be.(compute.DeviceClipper).AxpbyCoefs(-1.5, xm[side], beta, ym[side], w.bufs[coef][side])
			}
			w.sameULP(y, 0, fmt.Sprintf("beta %v", beta))
		}
	})
}

// The fused operations of compute.Fuser must give the bits of the pair they stand for on the
// same backend (the CPU side of the pair is checked by the tests of each operation): each case
// runs the fused form on one copy of the inputs and the pair on another, both on the tested
// backend, and compares every output bit for bit, NaN padding outside the views included.
func testFused(t *testing.T, f Factory) {
	acts := []compute.Activation{compute.Tanh, compute.Softplus, compute.ReLU}
	forEach(t, f, func(t *testing.T, w *twin, s shape) {
		fu, ok := w.ops.(compute.Fuser)
		if !ok {
			t.Skip("the backend has no fused operations")
		}
		twice, same := w.twice, w.sameOnDevice
		normal := func(int) float32 { return float32(w.rng.NormFloat64()) }
		nan := func(int) float32 { return float32(math.NaN()) }
		row := shape{rows: 1, cols: s.cols, batch: s.batch, bstride: s.cols + 1}
		for _, act := range acts {
			pa, pb := twice(s.size(), normal)
			qa, qb := twice(s.size(), nan)
			bias := w.mat(w.normal(broadcast(row).size()), broadcast(row).mat())
			fu.AddRowActivate(act, w.mat(pa, s.mat())[1], bias[1], w.mat(qa, s.mat())[1])
			w.ops.AddRow(w.mat(pb, s.mat())[1], bias[1])
			w.ops.Activate(act, w.mat(pb, s.mat())[1], w.mat(qb, s.mat())[1])
			same(pa, pb, fmt.Sprint("AddRowActivate pre, ", act))
			same(qa, qb, fmt.Sprint("AddRowActivate post, ", act))

			pre := w.mat(preValues(w, s.size()), s.mat())
			post := w.mat(w.normal(s.size()), s.mat())
			ga, gb := twice(s.size(), normal)
			for _, beta := range []float32{0, 0.5} {
				fill := normal
				if beta == 0 {
					fill = nan // y is write-only
				}
				ya, yb := twice(row.size(), fill)
				fu.ActivateGradSumRows(act, pre[1], post[1], w.mat(ga, s.mat())[1], 1.5, beta, w.mat(ya, row.mat())[1])
				w.ops.ActivateGrad(act, pre[1], post[1], w.mat(gb, s.mat())[1])
				w.ops.SumRows(1.5, w.mat(gb, s.mat())[1], beta, w.mat(yb, row.mat())[1])
				same(ga, gb, fmt.Sprint("ActivateGradSumRows grad, ", act))
				same(ya, yb, fmt.Sprint("ActivateGradSumRows sums, ", act))
			}
		}
		if s.cols < 2 {
			return
		}
		la, lb := twice(s.size(), normal)
		ls := shape{rows: s.rows, cols: 1, batch: s.batch, stride: 1, bstride: -1}
		labels := w.mat(w.buf(ls.size(), func(i int) float32 { return float32((i*7 + 3) % s.cols) }), ls.mat())
		bias := w.mat(w.normal(row.size()), row.mat())
		out := shape{rows: s.rows, cols: 1, batch: s.batch, stride: 2, bstride: 2*s.rows + 1}
		da, db := twice(s.size(), nan)
		lossA, lossB := twice(out.size(), nan)
		mA, mB := twice(out.size(), nan)
		fu.AddRowSoftmaxXent(w.mat(la, s.mat())[1], bias[1], labels[1], 0.25, w.mat(da, s.mat())[1], w.mat(lossA, out.mat())[1], w.mat(mA, out.mat())[1])
		w.ops.AddRow(w.mat(lb, s.mat())[1], bias[1])
		w.ops.SoftmaxXent(w.mat(lb, s.mat())[1], labels[1], 0.25, w.mat(db, s.mat())[1], w.mat(lossB, out.mat())[1], w.mat(mB, out.mat())[1])
		same(la, lb, "AddRowSoftmaxXent logits")
		same(da, db, "AddRowSoftmaxXent dlogits")
		same(lossA, lossB, "AddRowSoftmaxXent loss")
		same(mA, mB, "AddRowSoftmaxXent margin")
	})
}
