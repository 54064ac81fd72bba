//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
)

// A batched product whose right operand every batch element shares (LeNet-5's first
// convolution on the shared images: forward and weight gradient), with the elements of A and C
// row after row, is one cuBLAS call over the stacked rows (cuda's stackRows); any other layout
// keeps the batched call. Either way every element has the bits of the element's product
// computed alone (the shim sums in order). MaxGemmBatch 2 splits an unstacked batch of 5 into
// 3 calls, so the count tells which path ran.
func TestGemmStacksRowsOverASharedOperand(t *testing.T) {
	const R, m, k, n = 5, 3, 7, 4
	d := device(t)
	for _, tc := range []struct {
		name           string
		transA, transB bool
		aPad, cPad     int // floats between batch elements
		bShared        bool
		calls          int
	}{
		{"stacked", false, false, 0, 0, true, 1},
		{"stacked-transB", false, true, 0, 0, true, 1},
		{"A-padded", false, false, 2, 0, true, 3},
		{"C-padded", false, false, 0, 1, true, 3},
		{"transA", true, false, 0, 0, true, 3},
		{"B-batched", false, false, 0, 0, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := cuda.NewOps(d, cuda.Options{MaxGemmBatch: 2})
			defer ops.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			ar, ac, br, bc := gemmShapes(tc.transA, tc.transB, m, k, n)
			abs, cbs := ar*ac+tc.aPad, m*n+tc.cPad
			bbs := 0
			if !tc.bShared {
				bbs = br * bc
			}
			av, bv := normals(rng, R*abs), normals(rng, max(R*bbs, br*bc))
			cv := normals(rng, R*cbs)
			a, b, c := ops.Alloc(len(av)), ops.Alloc(len(bv)), ops.Alloc(len(cv))
			ops.Upload(a, 0, av)
			ops.Upload(b, 0, bv)
			am := compute.Mat{Buf: a, Rows: ar, Cols: ac, Stride: ac, Batch: R, BatchStride: abs}
			bm := compute.Mat{Buf: b, Rows: br, Cols: bc, Stride: bc, Batch: R, BatchStride: bbs}
			cm := compute.Mat{Buf: c, Rows: m, Cols: n, Stride: n, Batch: R, BatchStride: cbs}
			// Each element alone (batch 1: never stacked), beta 0.5 so that C's old values count.
			ops.Upload(c, 0, cv)
			for r := 0; r < R; r++ {
				one := func(x compute.Mat, bs int) compute.Mat {
					x.Off, x.Batch, x.BatchStride = r*bs, 1, 0
					return x
				}
				ops.Gemm(tc.transA, tc.transB, 1.5, one(am, abs), one(bm, bbs), 0.5, one(cm, cbs))
			}
			want := make([]float32, len(cv))
			ops.Download(want, c, 0)
			ops.Upload(c, 0, cv)
			calls := d.GemmCalls()
			ops.Gemm(tc.transA, tc.transB, 1.5, am, bm, 0.5, cm)
			got := make([]float32, len(cv))
			ops.Download(got, c, 0)
			if err := ops.Err(); err != nil {
				t.Fatal(err)
			}
			if n := d.GemmCalls() - calls; n != tc.calls {
				t.Errorf("%d cuBLAS calls, want %d", n, tc.calls)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("c[%d] = %v, want %v (each element's product alone)", i, got[i], want[i])
				}
			}
		})
	}
}
