//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
)

// A product split in depth slices (Options.SplitK) runs the slices of a batch element in one
// cuBLAS call, the elements one after another, so it is split only where the slices outnumber
// the batch elements and divide the depth. Each element of a split product is splitk_reduce's
// alpha (p_0 + p_1 + ...) + beta c over the slices' own products: here every slice is
// computed alone, unsplit, and the result built from them in float32 must have the same bits.
// An unsplit product must have the bits of the product with SplitK off. At depth 8 and 64 a
// product of tiny output takes 8 slices.
func TestSplitProductsRunTheSlicesTogether(t *testing.T) {
	const m, n, depth, slices = 3, 4, 8, 8
	d := device(t)
	for _, tc := range []struct {
		name           string
		batch, k       int
		transA, transB bool
		bShared        bool
		split          bool
		calls          int
	}{
		{"one element", 1, 64, false, false, false, true, 1},
		{"one element, both transposed", 1, 64, true, true, false, true, 1},
		{"a call per element", 5, 64, false, true, false, true, 5},
		{"a call per element, A transposed, B shared", 5, 64, true, false, true, true, 5},
		{"as many elements as slices: unsplit", slices, 64, false, false, false, false, 1},
		{"depth not divided by the slices: unsplit", 5, 67, false, false, false, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			R, k := tc.batch, tc.k
			rng := rand.New(rand.NewPCG(5, uint64(R*k)))
			ar, ac, br, bc := gemmShapes(tc.transA, tc.transB, m, k, n)
			bbs := br * bc
			if tc.bShared {
				bbs = 0
			}
			av, bv, cv := normals(rng, R*ar*ac), normals(rng, max(R*bbs, br*bc)), normals(rng, R*m*n)
			run := func(opt cuda.Options, body func(ops *cuda.Ops, a, b, c compute.Mat)) []float32 {
				ops := cuda.NewOps(d, opt)
				defer ops.Close()
				a, b, c := ops.Alloc(len(av)), ops.Alloc(len(bv)), ops.Alloc(len(cv))
				ops.Upload(a, 0, av)
				ops.Upload(b, 0, bv)
				ops.Upload(c, 0, cv)
				body(ops,
					compute.Mat{Buf: a, Rows: ar, Cols: ac, Stride: ac, Batch: R, BatchStride: ar * ac},
					compute.Mat{Buf: b, Rows: br, Cols: bc, Stride: bc, Batch: R, BatchStride: bbs},
					compute.Mat{Buf: c, Rows: m, Cols: n, Stride: n, Batch: R, BatchStride: m * n})
				out := make([]float32, len(cv))
				ops.Download(out, c, 0)
				if err := ops.Err(); err != nil {
					t.Fatal(err)
				}
				return out
			}
			const alpha, beta = 1.5, 0.5
			var calls int
			got := run(cuda.Options{SplitK: true, SplitKDepth: depth}, func(ops *cuda.Ops, a, b, c compute.Mat) {
				before := d.GemmCalls()
				ops.Gemm(tc.transA, tc.transB, alpha, a, b, beta, c)
				ops.Err() // runs the queued calls
				calls = d.GemmCalls() - before
			})
			if calls != tc.calls {
				t.Errorf("%d cuBLAS calls, want %d", calls, tc.calls)
			}
			if !tc.split {
				want := run(cuda.Options{}, func(ops *cuda.Ops, a, b, c compute.Mat) {
					ops.Gemm(tc.transA, tc.transB, alpha, a, b, beta, c)
				})
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("c[%d] = %v, want %v (the product with SplitK off)", i, got[i], want[i])
					}
				}
				return
			}
			// The slices, each its own unsplit product into C (alpha 1, beta 0).
			parts := make([][]float32, slices)
			for s := range slices {
				k0, k1 := s*k/slices, (s+1)*k/slices
				parts[s] = run(cuda.Options{}, func(ops *cuda.Ops, a, b, c compute.Mat) {
					if tc.transA {
						a.Off, a.Rows = k0*a.Stride, k1-k0
					} else {
						a.Off, a.Cols = k0, k1-k0
					}
					if tc.transB {
						b.Off, b.Cols = k0, k1-k0
					} else {
						b.Off, b.Rows = k0*b.Stride, k1-k0
					}
					ops.Gemm(tc.transA, tc.transB, 1, a, b, 0, c)
				})
			}
			for i := range got {
				acc := parts[0][i]
				for s := 1; s < slices; s++ {
					acc += parts[s][i]
				}
				want := float32(alpha*acc) + float32(beta*cv[i])
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("c[%d] = %v, want %v (the slices' own products, added in order)", i, got[i], want)
				}
			}
		})
	}
}
