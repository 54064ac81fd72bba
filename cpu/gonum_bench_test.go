package cpu

import (
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gonum's pure-Go SGEMM on the same shapes as BenchmarkGemm*, for the choice of kernel: the
// W1 forward product of one replica repeated for 64 replicas, and a 512 cube.
func benchGonum(b *testing.B, tA, tB blas.Transpose, m, n, k, batch int) {
	var impl gonum.Implementation
	lda, ldb := k, n
	if tA == blas.Trans {
		lda = m
	}
	if tB == blas.Trans {
		ldb = k
	}
	// random values: gonum's loops skip zero elements, which would flatter it
	a, _ := randData(1, 1, m*k, 2)
	bb, _ := randData(2, 1, batch*k*n, 2)
	c := make([]float32, batch*m*n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < batch; r++ {
			impl.Sgemm(tA, tB, m, n, k, 1, a, lda, bb[r*k*n:], ldb, 0, c[r*m*n:], n)
		}
	}
	b.ReportMetric(2*float64(m*n*k*batch)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkGonumW1Forward(b *testing.B) { benchGonum(b, blas.NoTrans, blas.Trans, 32, 64, 784, 64) }
func BenchmarkGonumSquare512(b *testing.B) {
	benchGonum(b, blas.NoTrans, blas.NoTrans, 512, 512, 512, 1)
}
