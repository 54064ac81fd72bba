package nn

import (
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
)

// Float is the element type of a model: float32 for training, float64 for the tests.
type Float interface{ ~float32 | ~float64 }

// Gemm is a strided-batched GEMM: for i < batch,
// c[i*sc:] = alpha op(a[i*sa:]) op(b[i*sb:]) + beta c[i*sc:], op(a) being m x k and op(b) k x n,
// matrices row-major with leading dimensions lda, ldb, ldc (of the stored, untransposed matrix).
// A stride of 0 shares the operand across the batch. With beta = 0, c is not read.
type Gemm[T Float] interface {
	Gemm(transA, transB bool, m, n, k int, alpha T, a []T, lda, sa int, b []T, ldb, sb int, beta T, c []T, ldc, sc, batch int)
}

// CPUGemm runs the float32 products on the CPU backend's packed GEMM (cpu.Backend.Gemm, the
// same micro-kernels as the MLP): its exported API takes exactly a strided-batched call, so no
// GEMM of this package's own is needed in float32. Every output element is accumulated in one
// fixed order whatever the batch size, which the replica-equivalence test relies on.
type CPUGemm struct{ Backend *cpu.Backend }

// Gemm implements Gemm[float32].
func (g CPUGemm) Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, sa int, b []float32, ldb, sb int, beta float32, c []float32, ldc, sc, batch int) {
	if m == 0 || n == 0 || batch == 0 {
		return
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	be := g.Backend
	g.Backend.Gemm(transA, transB, alpha,
		compute.Mat{Buf: be.Alias(a), Rows: ar, Cols: ac, Stride: lda, Batch: batch, BatchStride: sa},
		compute.Mat{Buf: be.Alias(b), Rows: br, Cols: bc, Stride: ldb, Batch: batch, BatchStride: sb},
		beta,
		compute.Mat{Buf: be.Alias(c), Rows: m, Cols: n, Stride: ldc, Batch: batch, BatchStride: sc})
}

// NaiveGemm is the plain triple loop (ascending k, one accumulator per element): the float64
// reference of the tests.
type NaiveGemm[T Float] struct{}

// Gemm implements Gemm[T].
func (NaiveGemm[T]) Gemm(transA, transB bool, m, n, k int, alpha T, a []T, lda, sa int, b []T, ldb, sb int, beta T, c []T, ldc, sc, batch int) {
	for bi := 0; bi < batch; bi++ {
		A, B, C := a[bi*sa:], b[bi*sb:], c[bi*sc:]
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s T
				for p := 0; p < k; p++ {
					var x, y T
					if transA {
						x = A[p*lda+i]
					} else {
						x = A[i*lda+p]
					}
					if transB {
						y = B[j*ldb+p]
					} else {
						y = B[p*ldb+j]
					}
					s += x * y
				}
				if beta == 0 {
					C[i*ldc+j] = alpha * s
				} else {
					C[i*ldc+j] = alpha*s + beta*C[i*ldc+j]
				}
			}
		}
	}
}

// grow returns buf resized to n values (contents unspecified), reusing its memory.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}
