package cpu

import (
	"testing"

	"github.com/fedaudit/fedaudit/compute"
)

// The deferred form's products in W1 (64 replicas): a client's forward product P = X W_0^T
// (K B = 160 rows, X shared), and the server's U^T X for one client (depth 160) and for the
// whole round (depth m K B = 1600).
func BenchmarkGemmDeferredForward(b *testing.B)    { benchGemm(b, false, true, 160, 64, 784, 64, true) }
func BenchmarkGemmDeferredUpdate160(b *testing.B)  { benchGemmSharedB(b, 64, 784, 160, 64) }
func BenchmarkGemmDeferredUpdate1600(b *testing.B) { benchGemmSharedB(b, 64, 784, 1600, 64) }

// c (m x n per batch) += a^T (a: k x m per batch) b (k x n shared)
func benchGemmSharedB(b *testing.B, m, n, k, batch int) {
	be := New(0)
	defer be.Close()
	av, _ := randData(1, 1, batch*k*m, 2)
	bv, _ := randData(2, 1, k*n, 2)
	a := compute.Mat{Buf: be.Alias(av), Rows: k, Cols: m, Stride: m, Batch: batch, BatchStride: k * m}
	bm := compute.Mat{Buf: be.Alias(bv), Rows: k, Cols: n, Stride: n, Batch: batch, BatchStride: 0}
	c := compute.Mat{Buf: be.Alloc(batch * 50890), Rows: m, Cols: n, Stride: n, Batch: batch, BatchStride: 50890}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.Gemm(true, false, 1, a, bm, 1, c)
	}
	b.ReportMetric(2*float64(m*n*k*batch)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// The forward product computed transposed: P^T (64 x 160 per replica) = W X^T, X shared.
func BenchmarkGemmDeferredForwardT(b *testing.B) {
	be := New(0)
	defer be.Close()
	const batch, h, kb, in = 64, 64, 160, 784
	wv, _ := randData(1, 1, batch*50890, 2)
	xv, _ := randData(2, 1, kb*in, 2)
	w := compute.Mat{Buf: be.Alias(wv), Rows: h, Cols: in, Stride: in, Batch: batch, BatchStride: 50890}
	x := compute.Mat{Buf: be.Alias(xv), Rows: kb, Cols: in, Stride: in, Batch: batch}
	c := compute.Mat{Buf: be.Alloc(batch * h * kb), Rows: h, Cols: kb, Stride: kb, Batch: batch, BatchStride: h * kb}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.Gemm(false, true, 1, w, x, 0, c)
	}
	b.ReportMetric(2*float64(h*kb*in*batch)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
