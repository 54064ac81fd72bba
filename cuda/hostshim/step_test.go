//go:build cgo

package hostshim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
)

// hidden_step is the one kernel whose threads cooperate, so its results must not depend on the
// block size or on a grid smaller than the batch (blocks looping over replicas): every launch
// configuration gives the same bits, and the working set in shared memory or in global
// scratch (a configuration too large for shared memory is run beside one that fits) is
// computed alike. One launch per call, no staging, no read.
func TestHiddenStepLaunchIndependent(t *testing.T) {
	for _, sz := range []struct{ B, H, C int }{{32, 64, 10}, {5, 7, 3}, {64, 112, 10}} {
		var ref [][]float32
		for _, opt := range []cuda.Options{{}, {Block: 7, MaxGrid: 2}, {Block: 64, MaxGrid: 1}, {Block: 1}, {HiddenBlock: 1024}, {HiddenBlock: 512, MaxGrid: 1}} {
			d := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
			ops := cuda.NewOps(d, opt)
			var launches, stages, reads int
			calls := 0
			out := hiddenStepOnce(ops, sz.B, sz.H, sz.C, gramView{}, func() {
				sign := 1 // after the step: add the counts; before: subtract them
				if calls == 0 {
					sign = -1
				}
				calls++
				launches, stages, reads = launches+sign*d.launches, stages+sign*d.stages, reads+sign*d.reads
			})
			if err := ops.Err(); err != nil {
				t.Fatal(err)
			}
			if launches != 1 || stages != 0 || reads != 0 {
				t.Errorf("B %d H %d: %d launches, %d stagings, %d reads; want 1, 0, 0", sz.B, sz.H, launches, stages, reads)
			}
			ops.Close()
			if ref == nil {
				ref = out
				continue
			}
			if k, i, differ := firstBitDifference(out, ref); differ {
				t.Fatalf("B %d H %d, options %+v: output %d element %d is %v, %v with the default launch", sz.B, sz.H, opt, k, i, out[k][i], ref[k][i])
			}
		}
	}
}

// The rows of the Gram matrices (the factors' gram and the minibatch's gx) are read four floats
// at a time where they start at multiples of 16 bytes (column_terms4 in kernels/step.cu), one
// at a time elsewhere: both give the same bits. The same step runs with both matrices at a
// stride of a multiple of 4 floats (the 16-byte loads), one float past it (a base the loads may
// not take) and at an odd stride, for B a multiple of 8 and not (the last group of rows short)
// and kp and B multiples of 4 and not. Scaling column_terms4's sums by 1.0001, or adding a
// row's four terms in another order, fails it.
func TestHiddenStepAlignedGramKeepsBits(t *testing.T) {
	for _, sz := range []struct{ B, H, C int }{{32, 64, 10}, {13, 9, 4}, {5, 7, 3}} {
		kp := 2 * sz.B
		aligned, alignedB := (kp+3)&^3, (sz.B+3)&^3
		var ref [][]float32
		for _, g := range []gramView{{stride: aligned, gxStride: alignedB}, {off: 1, stride: aligned, gxOff: 1, gxStride: alignedB},
			{stride: kp + 1, gxStride: sz.B + 1}} {
			ops := cuda.NewOps(device(t), cuda.Options{})
			out := hiddenStepOnce(ops, sz.B, sz.H, sz.C, g, func() {})
			if err := ops.Err(); err != nil {
				t.Fatal(err)
			}
			ops.Close()
			if ref == nil {
				ref = out
				continue
			}
			if k, i, differ := firstBitDifference(out, ref); differ {
				t.Fatalf("B %d H %d, Gram matrices placed as %+v: output %d element %d is %v, %v with the strides %d and %d", sz.B, sz.H, g, k, i, out[k][i], ref[k][i], aligned, alignedB)
			}
		}
	}
}

// firstBitDifference is the first output k and element i at which out and ref differ in their
// bits, with differ true, or differ false where none does.
func firstBitDifference(out, ref [][]float32) (k, i int, differ bool) {
	for k := range out {
		for i := range out[k] {
			if math.Float32bits(out[k][i]) != math.Float32bits(ref[k][i]) {
				return k, i, true
			}
		}
	}
	return 0, 0, false
}

// gramView places hiddenStepOnce's Gram matrices in their buffers: gram off floats in, rows
// stride floats apart (0: kp, the rows packed), and gx gxOff floats in, rows gxStride apart
// (0: B), the floats between them NaN (never read).
type gramView struct{ off, stride, gxOff, gxStride int }

// hiddenStepOnce runs one FedProx-clipped step of 5 replicas (B x H hidden, C classes, 2B
// earlier factor rows, the Gram matrix placed by g) and returns the parameters, pre, prev and
// u read back; mark is called just before the step and just after it (before the reads).
func hiddenStepOnce(ops *cuda.Ops, B, H, C int, g gramView, mark func()) [][]float32 {
	const R, in = 5, 3
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(n int, s float64) compute.Buffer {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(s * rng.NormFloat64())
		}
		b := ops.Alloc(n)
		ops.Upload(b, 0, v)
		return b
	}
	ob1 := H * in
	d := ob1 + H + C*H + C
	kp := 2 * B
	gs, xs := cmp.Or(g.stride, kp), cmp.Or(g.gxStride, B)
	// place moves the packed B x cols matrix in b into a buffer of rows stride floats apart,
	// off floats in.
	place := func(b compute.Buffer, cols, off, stride int) compute.Buffer {
		if off == 0 && stride == cols {
			return b
		}
		packed := make([]float32, B*cols)
		ops.Download(packed, b, 0)
		v := make([]float32, off+B*stride)
		for i := range v {
			v[i] = float32(math.NaN())
		}
		for i := 0; i < B; i++ {
			copy(v[off+i*stride:], packed[i*cols:(i+1)*cols])
		}
		p := ops.Alloc(len(v))
		ops.Upload(p, 0, v)
		return p
	}
	params, anchor := fill(R*d, 0.3), fill(R*d, 0.3)
	rows := compute.Mat{Rows: 1, Cols: d, Stride: d, Batch: R, BatchStride: d}
	labels := make([]float32, B)
	for i := range labels {
		labels[i] = float32(i % C)
	}
	lb := ops.Alloc(B)
	ops.Upload(lb, 0, labels)
	gx := make([]float32, B*B)
	for i := 0; i < B; i++ {
		for j := 0; j < B; j++ {
			gx[i*B+j] = float32(1 + 0.1*float64((i*j)%3))
		}
		gx[i*B+i] += 2
	}
	gxb := ops.Alloc(B * B)
	ops.Upload(gxb, 0, gx)
	a := compute.HiddenStepArgs{Act: compute.Tanh,
		Pre:    compute.Mat{Buf: fill(R*B*H, 1), Rows: B, Cols: H, Stride: H, Batch: R, BatchStride: B * H},
		Params: compute.Mat{Buf: params, Rows: 1, Cols: d, Stride: d, Batch: R, BatchStride: d}, Anchor: rows,
		Gram:   compute.Mat{Buf: place(fill(B*kp, 1), kp, g.off, gs), Off: g.off, Rows: B, Cols: kp, Stride: gs, Batch: 1},
		Prev:   compute.Mat{Buf: fill(R*kp*H, 0.01), Rows: kp, Cols: H, Stride: H, Batch: R, BatchStride: kp * H},
		Labels: compute.Mat{Buf: lb, Rows: B, Cols: 1, Stride: 1, Batch: 1},
		GX:     compute.Mat{Buf: place(gxb, B, g.gxOff, xs), Off: g.gxOff, Rows: B, Cols: B, Stride: xs, Batch: 1},
		U:      compute.Mat{Buf: ops.Alloc(R * B * H), Rows: B, Cols: H, Stride: H, Batch: R, BatchStride: B * H},
		B1:     ob1, W2: ob1 + H, B2: ob1 + H + C*H, H: H, Cls: C, Eta: 0.05, V: 0.02, Alpha: 0.3}
	a.Anchor.Buf = anchor
	mark()
	ops.HiddenStep(&a)
	ops.Flush() // issue the queued launch before counting
	mark()
	var out [][]float32
	for _, b := range []compute.Buffer{a.Params.Buf, a.Pre.Buf, a.Prev.Buf, a.U.Buf} {
		h := make([]float32, b.Len())
		ops.Download(h, b, 0)
		out = append(out, h)
	}
	return out
}
