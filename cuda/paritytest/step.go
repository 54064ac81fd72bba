package paritytest

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
)

// hiddenCase is one configuration of compute.HiddenStepper's step.
type hiddenCase struct {
	name          string
	rows, h, cls  int // B, H, C
	kp            int // rows of the earlier factors (k B at local step k)
	replicas      int
	act           compute.Activation
	alpha         float32
	clip          string // "none" (v = 0), "active" (every replica clipped), "inactive"
	pad           int    // floats between parameter rows (a padded pitch) and around views
	inputIn       int    // the input dimension (the first weight matrix, never touched)
	labelsStrided bool
}

// hiddenCases: W1's shape (B 32, H 64, C 10) at local steps 0, 1 and 4, with clipping active
// and not, FedProx, every activation; small odd shapes; one replica; a shape whose
// working set (2CH + 2H + 2C + 2BH + BC = 17,460 floats) exceeds the kernel's shared memory, so it runs from global
// scratch; and more hidden units than the clip norm's partial sums (H 300 > 256: a partial's
// elements step across fewer than one row).
var hiddenCases = []hiddenCase{
	{"w1-step0", 32, 64, 10, 0, 3, compute.Tanh, 0, "active", 22, 20, false},
	{"w1-step1", 32, 64, 10, 32, 3, compute.Tanh, 0, "active", 22, 20, false},
	{"w1-step4-fedprox", 32, 64, 10, 128, 2, compute.Tanh, 0.3, "active", 22, 20, true},
	{"w1-step2-unclipped", 32, 64, 10, 64, 2, compute.Tanh, 0, "inactive", 0, 20, false},
	{"w1-step2-noclip", 32, 64, 10, 64, 2, compute.Tanh, 0, "none", 5, 20, false},
	{"odd-softplus", 3, 5, 4, 6, 2, compute.Softplus, 0, "active", 3, 7, true},
	{"odd-relu-fedprox", 5, 7, 3, 10, 3, compute.ReLU, 0.5, "active", 1, 4, false},
	{"one-replica", 4, 9, 2, 4, 1, compute.Tanh, 0, "active", 0, 3, false},
	{"global-scratch", 64, 112, 10, 64, 2, compute.Softplus, 0.2, "active", 7, 5, false},
	{"wide-hidden", 5, 300, 3, 8, 2, compute.Tanh, 0, "active", 3, 5, false},
}

// hiddenRel is the agreement the step must have with the CPU backend's fused step
// (cpu/fused.go), per output element x with CPU value c: |x - c| <= hiddenRel (|c| + s), s the
// largest |c| of that output (for the parameters: of their change, with two float32 ulps of the
// final value added for its rounding). Both compute the same float32 sums of at most 128
// products (B, H, C or k B terms) in different orders (the CPU with SIMD lanes and fused
// multiply-adds, the kernel sequentially without) and the clip norm's float64 sums in different
// orders: each float32 sum differs by at most about n 2^-24 of the sum of its terms' magnitudes
// (8e-6 for n = 128 in the worst case), and the terms' magnitudes are bounded by the output's
// scale s times the cancellation in the sum (delta = dl W2 sums terms whose dl add to 0 over
// the classes, so the error is measured against s, not |c|). Measured on these cases
// (go test ./cuda/hostshim -run TestParity/HiddenStep -v): at most 1.8e-7 (u), 7.6e-8 (pre),
// 4.0e-8 (the parameters' change), and the same bits under both launch configurations. A
// wrong term or factor is far above 1e-5: the ghost norm scaled by 1.001, gb2 by 1.001 or
// FedProx's pull by 1 + 1e-5 each fail the suite.
const hiddenRel = 1e-5

// testHiddenStep runs compute.HiddenStepper on both backends from the same inputs and compares
// every output: the parameter rows (b1, W2, b2 updated, the first weight matrix and the
// padding untouched), pre (updated in place), the earlier factors (FedProx shrinks them) and
// u; values around the views are checked to be untouched.
func testHiddenStep(t *testing.T, f Factory) {
	for _, o := range launchConfigs {
		for _, c := range hiddenCases {
			t.Run(cfgName(o)+"/"+c.name, func(t *testing.T) {
				w := newTwin(t, f, o)
				if _, ok := w.ops.(compute.HiddenStepper); !ok {
					t.Skip("the backend has no fused hidden step")
				}
				runHiddenCase(t, w, c)
			})
		}
	}
}

func runHiddenCase(t *testing.T, w *twin, c hiddenCase) {
	hs := newHiddenSetup(w, c)
	before, _ := w.get(hs.params)
	if c.clip == "active" {
		hs.mustClip(t, w, before)
	}
	args := [2]compute.HiddenStepArgs{hs.args(func(id int) compute.Buffer { return w.bufs[id][0] }), hs.args(func(id int) compute.Buffer { return w.bufs[id][1] })}
	w.cpu.HiddenStep(&args[0])
	w.ops.(compute.HiddenStepper).HiddenStep(&args[1])
	if err := w.ops.Err(); err != nil {
		t.Fatal(err)
	}
	// Every value outside the updated region must keep its bits: the first weight matrix, the
	// padding between rows, strides' gaps.
	R, pitch, ob1, d := c.replicas, hs.pitch, hs.ob1, hs.d
	checkHiddenOutput(t, w, hs.params, "params' change", func(i int) bool {
		j := i % pitch
		return i/pitch < R && j >= ob1 && j < d
	}, before)
	checkHiddenOutput(t, w, hs.pre, "pre", func(i int) bool { return insideMat(hs.preShape, i) }, nil)
	checkHiddenOutput(t, w, hs.prev, "prev", func(i int) bool { return c.alpha != 0 && insideMat(hs.prevShape, i) }, nil)
	checkHiddenOutput(t, w, hs.u, "u", func(i int) bool { return insideMat(hs.uShape, i) }, nil)
	// The step must have changed something: a kernel that did nothing (or the CPU's step
	// skipped) would pass the comparison of untouched values above only by accident.
	_, got := w.get(hs.params)
	if math.Float32bits(got[ob1]) == math.Float32bits(before[ob1]) {
		t.Errorf("b1[0] of replica 0 unchanged by the step: %v", got[ob1])
	}
}

// hiddenSetup is one hidden case's inputs on both backends (buffer ids of the twin) with their
// views, the parameter layout and the clip norm: what every step of the case is made from.
type hiddenSetup struct {
	c                                              hiddenCase
	ob1, ow2, ob2, d, pitch                        int
	params, anchor, pre, gram, prev, labels, gx, u int
	rows, preShape, gramShape, prevShape           compute.Mat
	labelShape, gxShape, uShape                    compute.Mat
	v                                              float32
}

// newHiddenSetup draws the case's inputs from the twin's generator, in the order the suite has
// always drawn them, into views with padded pitches and strides (the values around them are
// checked to be untouched).
func newHiddenSetup(w *twin, c hiddenCase) *hiddenSetup {
	B, H, C, R, kp := c.rows, c.h, c.cls, c.replicas, c.kp
	in := c.inputIn
	hs := &hiddenSetup{c: c}
	// Parameter layout of train's MLP: W1 (H x in), b1, W2 (C x H), b2.
	hs.ob1 = H * in
	hs.ow2, hs.ob2 = hs.ob1+H, hs.ob1+H+C*H
	hs.d = hs.ob2 + C
	hs.pitch = hs.d + c.pad
	small := func(s float64) func(int) float32 {
		return func(int) float32 { return float32(s * w.rng.NormFloat64()) }
	}
	hs.params = w.buf(R*hs.pitch, small(0.3))
	hs.anchor = w.buf(R*hs.pitch, small(0.3))
	hs.rows = compute.Mat{Rows: 1, Cols: hs.d, Stride: hs.d, Batch: R, BatchStride: hs.pitch}
	// pre: B x H per replica with a row stride of H + pad.
	ps := H + c.pad
	hs.preShape = compute.Mat{Off: c.pad, Rows: B, Cols: H, Stride: ps, Batch: R, BatchStride: B*ps + c.pad}
	hs.pre = w.buf(c.pad+R*hs.preShape.BatchStride+c.pad, small(1))
	// gram (B x kp, shared) and prev (kp x H per replica): a correction of moderate size.
	hs.gramShape = compute.Mat{Rows: B, Cols: kp, Stride: kp + 3, Batch: 1}
	hs.gram = w.buf(B*(kp+3)+1, small(1))
	hs.prevShape = compute.Mat{Off: 1, Rows: kp, Cols: H, Stride: H, Batch: R, BatchStride: kp*H + c.pad + 1}
	hs.prev = w.buf(1+R*hs.prevShape.BatchStride+1, small(0.01))
	ls := 1
	if c.labelsStrided {
		ls = 3
	}
	hs.labels = w.buf(B*ls, func(i int) float32 {
		if i%ls != 0 {
			return float32(math.NaN()) // never read
		}
		return float32((i/ls*7 + 3) % C)
	})
	hs.labelShape = compute.Mat{Rows: B, Cols: 1, Stride: ls, Batch: 1}
	gxVals := randomGram(w, B, in+5)
	hs.gx = w.buf(B*B, func(i int) float32 { return gxVals[i] })
	hs.gxShape = compute.Mat{Rows: B, Cols: B, Stride: B, Batch: 1}
	hs.uShape = compute.Mat{Off: 2, Rows: B, Cols: H, Stride: H + 1, Batch: R, BatchStride: B*(H+1) + c.pad}
	hs.u = w.buf(2+R*hs.uShape.BatchStride, func(int) float32 { return float32(math.NaN()) })
	switch c.clip {
	case "active":
		hs.v = 0.02 // below the gradient norms here (about 0.1 to 1): checked by mustClip
	case "inactive":
		hs.v = 1e3
	}
	return hs
}

// randomGram is gx = x x^T of a random B x dim minibatch (positive semidefinite, as a Gram
// matrix is), computed in float64 and rounded.
func randomGram(w *twin, B, dim int) []float32 {
	x := make([]float64, B*dim)
	for i := range x {
		x[i] = w.rng.Float64()
	}
	gxVals := make([]float32, B*B)
	for i := 0; i < B; i++ {
		for j := 0; j < B; j++ {
			var s float64
			for q := 0; q < dim; q++ {
				s += x[i*dim+q] * x[j*dim+q]
			}
			gxVals[i*B+j] = float32(s)
		}
	}
	return gxVals
}

// insideMat says whether element i of a buffer lies in the view shape (and not in its
// padding, its strides' gaps or around it).
func insideMat(shape compute.Mat, i int) bool {
	i -= shape.Off
	if i < 0 {
		return false
	}
	b := i / max(shape.BatchStride, 1)
	if shape.BatchStride == 0 {
		b = 0
	}
	rem := i - b*shape.BatchStride
	r, j := rem/shape.Stride, rem%shape.Stride
	return b < shape.Batch && r < shape.Rows && j < shape.Cols
}

// args is the step's arguments over the buffers bufOf gives for the setup's ids.
func (hs *hiddenSetup) args(bufOf func(id int) compute.Buffer) compute.HiddenStepArgs {
	c := hs.c
	m := func(id int, shape compute.Mat) compute.Mat { shape.Buf = bufOf(id); return shape }
	return compute.HiddenStepArgs{Act: c.act, Pre: m(hs.pre, hs.preShape), Params: m(hs.params, hs.rows), Anchor: m(hs.anchor, hs.rows),
		Gram: m(hs.gram, hs.gramShape), Prev: m(hs.prev, hs.prevShape), Labels: m(hs.labels, hs.labelShape), GX: m(hs.gx, hs.gxShape), U: m(hs.u, hs.uShape),
		B1: hs.ob1, W2: hs.ow2, B2: hs.ob2, H: c.h, Cls: c.cls, Eta: 0.05, V: hs.v, Alpha: c.alpha}
}

// mustClip fails the test unless the case clips: the CPU's step without clipping, from copies
// of the inputs, must give another u than with it. Without this check a clip norm above the
// gradients would leave the clipping path untested while the case claims to test it.
func (hs *hiddenSetup) mustClip(t *testing.T, w *twin, before []float32) {
	c := hs.c
	copies := map[int]compute.Buffer{}
	bufOf := func(id int) compute.Buffer {
		if b, ok := copies[id]; ok {
			return b
		}
		h, _ := w.get(id)
		b := w.cpu.Alloc(len(h))
		w.cpu.Upload(b, 0, h)
		copies[id] = b
		return b
	}
	a := hs.args(bufOf)
	a.V = 0
	w.cpu.HiddenStep(&a)
	clipped := hs.args(bufOf)
	clipped.U.Buf = w.cpu.Alloc(copies[hs.u].Len())
	clipped.Pre.Buf = w.cpu.Alloc(copies[hs.pre].Len())
	h, _ := w.get(hs.pre)
	w.cpu.Upload(clipped.Pre.Buf, 0, h)
	clipped.Params.Buf = w.cpu.Alloc(len(before))
	w.cpu.Upload(clipped.Params.Buf, 0, before)
	if c.alpha != 0 {
		h, _ := w.get(hs.prev)
		clipped.Prev.Buf = w.cpu.Alloc(len(h))
		w.cpu.Upload(clipped.Prev.Buf, 0, h)
	}
	w.cpu.HiddenStep(&clipped)
	u0, u1 := make([]float32, copies[hs.u].Len()), make([]float32, copies[hs.u].Len())
	w.cpu.Download(u0, a.U.Buf, 0)
	w.cpu.Download(u1, clipped.U.Buf, 0)
	var d, s float64
	for i := range u0 {
		if insideMat(hs.uShape, i) {
			d = max(d, math.Abs(float64(u0[i]-u1[i])))
			s = max(s, math.Abs(float64(u0[i])))
		}
	}
	if !(d > 1e-2*s) {
		t.Fatalf("v = %g does not clip: u changes by %g of %g", hs.v, d, s)
	}
}

// checkHiddenOutput compares output id of both backends, or with base its change from base
// (plus two float32 ulps of the final values, which round the change), to hiddenRel of |cpu|
// plus the output's scale where updated says it may change, and bit for bit elsewhere.
func checkHiddenOutput(t *testing.T, w *twin, id int, what string, updated func(i int) bool, base []float32) {
	t.Helper()
	cpuV, opsV := w.get(id)
	slack := func(int) float64 { return 0 }
	if base != nil {
		after := cpuV
		slack = func(i int) float64 { return 2 * ulp32(after[i]) }
		c, k := make([]float32, len(cpuV)), make([]float32, len(cpuV))
		for i := range cpuV {
			c[i], k[i] = cpuV[i], opsV[i]
			if updated(i) {
				c[i], k[i] = cpuV[i]-base[i], opsV[i]-base[i]
			}
		}
		cpuV, opsV = c, k
	}
	scale := 0.0
	for i, v := range cpuV {
		if updated(i) && !math.IsNaN(float64(v)) {
			scale = max(scale, math.Abs(float64(v)))
		}
	}
	worst := 0.0
	bad := 0
	for i := range cpuV {
		a, b := float64(cpuV[i]), float64(opsV[i])
		if !updated(i) {
			if math.Float32bits(cpuV[i]) != math.Float32bits(opsV[i]) {
				if bad < 3 {
					t.Errorf("%s: element %d outside the output changed: cpu %v, kernels %v", what, i, a, b)
				}
				bad++
			}
			continue
		}
		rel := max(0, math.Abs(a-b)-slack(i)) / (math.Abs(a) + scale)
		if !(rel <= hiddenRel) {
			if bad < 3 {
				t.Errorf("%s: element %d: cpu %v, kernels %v: difference %.3g of |cpu| + scale, above %g", what, i, a, b, rel, hiddenRel)
			}
			bad++
		}
		worst = max(worst, rel)
	}
	t.Logf("%s: largest difference %.3g of |cpu| + scale (scale %.3g)", what, worst, scale)
}

// ulp32 is the spacing of float32 values at x.
func ulp32(x float32) float64 {
	a := float32(math.Abs(float64(x)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// groupedCase is a grouped hidden step (compute.HiddenStepArgs.Groups): groups independent
// steps of replicas replicas each, laid out as the engine lays out several clients' steps of
// a round (train/deferred.go): pre and the parameters group-major, the factors (prev and u,
// one buffer) replica-major with a replica's groups adjacent, the anchor shared by the groups,
// and gram, gx and labels one per group.
type groupedCase struct {
	name                  string
	rows, h, cls, kp, in  int
	replicas, groups, gap int // gap: floats between groups of the group-major arguments
	act                   compute.Activation
	alpha, v              float32
}

var groupedCases = []groupedCase{
	{"w1-shape", 32, 64, 10, 64, 20, 2, 3, 0, compute.Tanh, 0, 0.02},
	{"odd-relu-fedprox", 5, 7, 3, 10, 4, 3, 4, 5, compute.ReLU, 0.5, 0.02},
	{"unclipped-softplus", 4, 9, 2, 0, 3, 1, 5, 1, compute.Softplus, 0, 0},
	{"global-scratch", 64, 112, 10, 64, 5, 2, 2, 3, compute.Softplus, 0.2, 0.02}, // working set above shared memory
}

// testHiddenStepGroups checks that a grouped step gives every group what its step alone gives:
// the reference runs the CPU backend's step once per group (HiddenStepArgs.Group); the CPU
// backend's grouped call must give its bits, the backend under test's grouped call must agree
// with it to hiddenRel, as an ungrouped step must (testHiddenStep).
func testHiddenStepGroups(t *testing.T, f Factory) {
	for _, o := range launchConfigs {
		for _, c := range groupedCases {
			t.Run(cfgName(o)+"/"+c.name, func(t *testing.T) {
				w := newTwin(t, f, o)
				hs, ok := w.ops.(compute.HiddenStepper)
				if !ok {
					t.Skip("the backend has no fused hidden step")
				}
				runGroupedCase(t, w, hs, c)
			})
		}
	}
}

func runGroupedCase(t *testing.T, w *twin, hs compute.HiddenStepper, c groupedCase) {
	B, H, C, kp, n, G := c.rows, c.h, c.cls, c.kp, c.replicas, c.groups
	ob1 := H * c.in
	d := ob1 + H + C*H + C
	kb := kp + B
	small := func(s float64) func(int) float32 {
		return func(int) float32 { return float32(s * w.rng.NormFloat64()) }
	}
	paramsGS := n*d + c.gap
	params := w.buf(G*paramsGS, small(0.3))
	anchor := w.buf(n*d, small(0.3))
	preGS := n*B*H + c.gap
	pre := w.buf(G*preGS, small(1))
	factors := w.buf(n*G*kb*H, small(0.01)) // prev's rows, then u's (overwritten)
	gramVals := make([]float32, G*B*kb)
	for g := 0; g < G; g++ {
		gx := randomGram(w, B, c.in+5)
		for i := 0; i < B; i++ {
			for j := 0; j < kb; j++ {
				v := float32(w.rng.NormFloat64())
				if j >= kp {
					v = gx[i*B+j-kp]
				}
				gramVals[(g*B+i)*kb+j] = v
			}
		}
	}
	gram := w.buf(len(gramVals), func(i int) float32 { return gramVals[i] })
	labels := w.buf(G*B, func(i int) float32 { return float32((i*5 + 1) % C) })
	args := func(k int) compute.HiddenStepArgs {
		m := func(id int, shape compute.Mat) compute.Mat { shape.Buf = w.bufs[id][k]; return shape }
		return compute.HiddenStepArgs{Act: c.act,
			Pre:    m(pre, compute.Mat{Rows: B, Cols: H, Stride: H, Batch: n, BatchStride: B * H}),
			Params: m(params, compute.Mat{Rows: 1, Cols: d, Stride: d, Batch: n, BatchStride: d}),
			Anchor: m(anchor, compute.Mat{Rows: 1, Cols: d, Stride: d, Batch: n, BatchStride: d}),
			Gram:   m(gram, compute.Mat{Rows: B, Cols: kp, Stride: kb, Batch: 1}),
			Prev:   m(factors, compute.Mat{Rows: kp, Cols: H, Stride: H, Batch: n, BatchStride: G * kb * H}),
			Labels: m(labels, compute.Mat{Rows: B, Cols: 1, Stride: 1, Batch: 1}),
			GX:     m(gram, compute.Mat{Off: kp, Rows: B, Cols: B, Stride: kb, Batch: 1}),
			U:      m(factors, compute.Mat{Off: kp * H, Rows: B, Cols: H, Stride: H, Batch: n, BatchStride: G * kb * H}),
			B1:     ob1, W2: ob1 + H, B2: ob1 + H + C*H, H: H, Cls: C, Eta: 0.05, V: c.v, Alpha: c.alpha,
			Groups: G, GroupStrides: compute.HiddenGroupStrides{Pre: preGS, Params: paramsGS, Gram: B * kb,
				Prev: kb * H, Labels: B, GX: B * kb, U: kb * H},
		}
	}
	// The CPU backend's grouped call, on copies of the inputs, for the bit-for-bit check.
	ids := []int{params, pre, factors}
	copies := map[int]compute.Buffer{}
	for _, id := range ids {
		h, _ := w.get(id)
		copies[id] = w.cpu.Alloc(len(h))
		w.cpu.Upload(copies[id], 0, h)
	}
	grouped := args(0)
	grouped.Params.Buf, grouped.Pre.Buf = copies[params], copies[pre]
	grouped.Prev.Buf, grouped.U.Buf = copies[factors], copies[factors]
	w.cpu.HiddenStep(&grouped)

	before, _ := w.get(params)
	ref := args(0)
	for g := 0; g < G; g++ {
		one := ref.Group(g)
		w.cpu.HiddenStep(&one)
	}
	a := args(1)
	hs.HiddenStep(&a)
	if err := w.ops.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		want, _ := w.get(id)
		got := make([]float32, len(want))
		w.cpu.Download(got, copies[id], 0)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("the CPU backend's grouped step differs from its steps one group at a time: buffer %d element %d: %v, want %v", id, i, got[i], want[i])
			}
		}
	}
	inParams := func(i int) bool {
		g, j := i/paramsGS, i%paramsGS
		return g < G && j < n*d && j%d >= ob1
	}
	checkHiddenOutput(t, w, params, "params' change", inParams, before)
	checkHiddenOutput(t, w, pre, "pre", func(i int) bool { return i%preGS < n*B*H }, nil)
	checkHiddenOutput(t, w, factors, "factors", func(i int) bool {
		return i%(kb*H) >= kp*H || c.alpha != 0 // u's rows; FedProx also shrinks prev's
	}, nil)
	_, got := w.get(params)
	for g := 0; g < G; g++ {
		if i := g*paramsGS + (n-1)*d + ob1; math.Float32bits(got[i]) == math.Float32bits(before[i]) {
			t.Errorf("b1[0] of group %d's last replica unchanged by the step: %v", g, got[i])
		}
	}
}
