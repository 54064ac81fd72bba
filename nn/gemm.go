package nn

// Float is the element type of a model: float32 for training, float64 for the tests.
type Float interface{ ~float32 | ~float64 }

// Gemm is a strided-batched GEMM: for i < batch,
// c[i*sc:] = alpha op(a[i*sa:]) op(b[i*sb:]) + beta c[i*sc:], op(a) being m x k and op(b) k x n,
// matrices row-major with leading dimensions lda, ldb, ldc (of the stored, untransposed matrix).
// A stride of 0 shares the operand across the batch. With beta = 0, c is not read.
type Gemm[T Float] interface {
	Gemm(transA, transB bool, m, n, k int, alpha T, a []T, lda, sa int, b []T, ldb, sb int, beta T, c []T, ldc, sc, batch int)
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
