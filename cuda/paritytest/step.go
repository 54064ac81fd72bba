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
// and not, FedProx, every activation; small odd shapes; one replica; and a shape whose
// working set (2CH + 2H + 2C + 2BH + BC = 17,460 floats) exceeds the kernel's shared memory, so it runs from global
// scratch.
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
	B, H, C, R, kp := c.rows, c.h, c.cls, c.replicas, c.kp
	in := c.inputIn
	// Parameter layout of train's MLP: W1 (H x in), b1, W2 (C x H), b2.
	ob1 := H * in
	ow2, ob2 := ob1+H, ob1+H+C*H
	d := ob2 + C
	pitch := d + c.pad
	small := func(s float64) func(int) float32 {
		return func(int) float32 { return float32(s * w.rng.NormFloat64()) }
	}
	params := w.buf(R*pitch, small(0.3))
	anchor := w.buf(R*pitch, small(0.3))
	rows := compute.Mat{Rows: 1, Cols: d, Stride: d, Batch: R, BatchStride: pitch}
	// pre: B x H per replica with a row stride of H + pad.
	ps := H + c.pad
	preShape := compute.Mat{Off: c.pad, Rows: B, Cols: H, Stride: ps, Batch: R, BatchStride: B*ps + c.pad}
	pre := w.buf(c.pad+R*preShape.BatchStride+c.pad, small(1))
	// gram (B x kp, shared) and prev (kp x H per replica): a correction of moderate size.
	gramShape := compute.Mat{Rows: B, Cols: kp, Stride: kp + 3, Batch: 1}
	gram := w.buf(B*(kp+3)+1, small(1))
	prevShape := compute.Mat{Off: 1, Rows: kp, Cols: H, Stride: H, Batch: R, BatchStride: kp*H + c.pad + 1}
	prev := w.buf(1+R*prevShape.BatchStride+1, small(0.01))
	ls := 1
	if c.labelsStrided {
		ls = 3
	}
	labels := w.buf(B*ls, func(i int) float32 {
		if i%ls != 0 {
			return float32(math.NaN()) // never read
		}
		return float32((i/ls*7 + 3) % C)
	})
	labelShape := compute.Mat{Rows: B, Cols: 1, Stride: ls, Batch: 1}
	// gx = x x^T of a random minibatch of dimension in + 5 (positive semidefinite, as a Gram
	// matrix is), computed in float64 and rounded.
	dim := in + 5
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
	gx := w.buf(B*B, func(i int) float32 { return gxVals[i] })
	gxShape := compute.Mat{Rows: B, Cols: B, Stride: B, Batch: 1}
	uShape := compute.Mat{Off: 2, Rows: B, Cols: H, Stride: H + 1, Batch: R, BatchStride: B*(H+1) + c.pad}
	u := w.buf(2+R*uShape.BatchStride, func(int) float32 { return float32(math.NaN()) })

	inside := func(shape compute.Mat, i int) bool {
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
	var v float32
	switch c.clip {
	case "active":
		v = 0.02 // below the gradient norms here (about 0.1 to 1): checked below
	case "inactive":
		v = 1e3
	}
	mk := func(s int, bufOf func(id int) compute.Buffer) compute.HiddenStepArgs {
		m := func(id int, shape compute.Mat) compute.Mat { shape.Buf = bufOf(id); return shape }
		return compute.HiddenStepArgs{Act: c.act, Pre: m(pre, preShape), Params: m(params, rows), Anchor: m(anchor, rows),
			Gram: m(gram, gramShape), Prev: m(prev, prevShape), Labels: m(labels, labelShape), GX: m(gx, gxShape), U: m(u, uShape),
			B1: ob1, W2: ow2, B2: ob2, H: H, Cls: C, Eta: 0.05, V: v, Alpha: c.alpha}
	}
	before, _ := w.get(params)
	if c.clip == "active" {
		// The case must clip: the CPU's step without clipping, from copies of the inputs, must
		// give another u.
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
		a := mk(0, bufOf)
		a.V = 0
		w.cpu.HiddenStep(&a)
		clipped := mk(0, bufOf)
		clipped.U.Buf = w.cpu.Alloc(copies[u].Len())
		clipped.Pre.Buf = w.cpu.Alloc(copies[pre].Len())
		h, _ := w.get(pre)
		w.cpu.Upload(clipped.Pre.Buf, 0, h)
		clipped.Params.Buf = w.cpu.Alloc(len(before))
		w.cpu.Upload(clipped.Params.Buf, 0, before)
		if c.alpha != 0 {
			h, _ := w.get(prev)
			clipped.Prev.Buf = w.cpu.Alloc(len(h))
			w.cpu.Upload(clipped.Prev.Buf, 0, h)
		}
		w.cpu.HiddenStep(&clipped)
		u0, u1 := make([]float32, copies[u].Len()), make([]float32, copies[u].Len())
		w.cpu.Download(u0, a.U.Buf, 0)
		w.cpu.Download(u1, clipped.U.Buf, 0)
		var d, s float64
		for i := range u0 {
			if inside(uShape, i) {
				d = max(d, math.Abs(float64(u0[i]-u1[i])))
				s = max(s, math.Abs(float64(u0[i])))
			}
		}
		if !(d > 1e-2*s) {
			t.Fatalf("v = %g does not clip: u changes by %g of %g", v, d, s)
		}
	}
	args := [2]compute.HiddenStepArgs{mk(0, func(id int) compute.Buffer { return w.bufs[id][0] }), mk(1, func(id int) compute.Buffer { return w.bufs[id][1] })}
	w.cpu.HiddenStep(&args[0])
	w.ops.(compute.HiddenStepper).HiddenStep(&args[1])
	if err := w.ops.Err(); err != nil {
		t.Fatal(err)
	}
	// Every value outside the updated region must keep its bits: the first weight matrix, the
	// padding between rows, strides' gaps.
	// check compares output id, or with base its change from base (plus two float32 ulps of
	// the final values, which round the change).
	check := func(id int, what string, updated func(i int) bool, base []float32) {
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
	check(params, "params' change", func(i int) bool {
		j := i % pitch
		return i/pitch < R && j >= ob1 && j < d
	}, before)
	check(pre, "pre", func(i int) bool { return inside(preShape, i) }, nil)
	check(prev, "prev", func(i int) bool { return c.alpha != 0 && inside(prevShape, i) }, nil)
	check(u, "u", func(i int) bool { return inside(uShape, i) }, nil)
	// The step must have changed something: a kernel that did nothing (or the CPU's step
	// skipped) would pass the comparison of untouched values above only by accident.
	_, got := w.get(params)
	if math.Float32bits(got[ob1]) == math.Float32bits(before[ob1]) {
		t.Errorf("b1[0] of replica 0 unchanged by the step: %v", got[ob1])
	}
}

// ulp32 is the spacing of float32 values at x.
func ulp32(x float32) float64 {
	a := float32(math.Abs(float64(x)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}
