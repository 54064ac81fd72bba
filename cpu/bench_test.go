package cpu

import (
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
)

func benchGemm(b *testing.B, transA, transB bool, m, n, k, batch int, shareA bool) {
	benchGemmShared(b, transA, transB, m, n, k, batch, shareA, false)
}

func benchGemmShared(b *testing.B, transA, transB bool, m, n, k, batch int, shareA, shareB bool) {
	be := New(0)
	defer be.Close()
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	av, _ := randData(1, 1, batch*ar*ac, 2)
	bv, _ := randData(2, 1, batch*br*bc, 2)
	a := compute.Mat{Buf: be.Alias(av), Rows: ar, Cols: ac, Stride: ac, Batch: batch, BatchStride: ar * ac}
	if shareA {
		a.BatchStride = 0
	}
	bm := compute.Mat{Buf: be.Alias(bv), Rows: br, Cols: bc, Stride: bc, Batch: batch, BatchStride: br * bc}
	if shareB {
		bm.BatchStride = 0
	}
	c := compute.Mat{Buf: be.Alloc(batch * m * n), Rows: m, Cols: n, Stride: n, Batch: batch, BatchStride: m * n}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.Gemm(transA, transB, 1, a, bm, 0, c)
	}
	b.ReportMetric(2*float64(m*n*k*batch)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// The GEMM shapes of W1 with 64 replicas: forward X (32 x 784, shared) times W^T per replica,
// and the weight gradient delta^T (64 x 32) times X.
func BenchmarkGemmW1Forward(b *testing.B)    { benchGemm(b, false, true, 32, 64, 784, 64, true) }
func BenchmarkGemmW1WeightGrad(b *testing.B) { benchGemm(b, true, false, 64, 784, 32, 64, false) }
func BenchmarkGemmSquare512(b *testing.B)    { benchGemm(b, false, false, 512, 512, 512, 1, false) }

// The products of one W2 step (LeNet-5, a client's 32 images, 32 replicas), each convolution
// as weights [W | b] times patches with their row of ones: the first convolution's forward
// (6 x 26 by the client's shared 26 x 25088 patches) and weight gradient (6 x 25088 output
// gradient by the shared patches transposed), the second's forward (16 x 151 by 151 x 3200
// per replica), weight gradient and input gradient (W^T dy, 151 x 16 by 16 x 3200).
func BenchmarkGemmW2(b *testing.B) {
	const R = 32
	b.Run("conv1-forward", func(b *testing.B) { benchGemmShared(b, false, false, 6, 25088, 26, R, false, true) })
	b.Run("conv1-weight-grad", func(b *testing.B) { benchGemmShared(b, false, true, 6, 26, 25088, R, false, true) })
	b.Run("conv2-forward", func(b *testing.B) { benchGemm(b, false, false, 16, 3200, 151, R, false) })
	b.Run("conv2-weight-grad", func(b *testing.B) { benchGemm(b, false, true, 16, 151, 3200, R, false) })
	b.Run("conv2-input-grad", func(b *testing.B) { benchGemm(b, true, false, 151, 3200, 16, R, false) })
}

func BenchmarkNoise(b *testing.B) {
	be := New(0)
	defer be.Close()
	const R, d = 64, 50890
	buf := be.Alloc(R * d)
	seeds := make([]uint64, R)
	scale := make([]float32, R)
	for r := range seeds {
		seeds[r] = uint64(r/2) + 1
		scale[r] = 0.01
	}
	dst := compute.Mat{Buf: buf, Rows: 1, Cols: d, Stride: d, Batch: R, BatchStride: d}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		be.AddGaussian(dst, seeds, scale, uint32(i), 0)
	}
	b.ReportMetric(float64(R/2*d)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mnormals/s")
}

// BenchmarkKernel is the micro-kernel alone on one core, data in L1: the practical peak that
// the GEMM rates are compared with.
func BenchmarkKernel(b *testing.B) {
	a := make([]float32, 256*gemmMR)
	bb := make([]float32, 256*gemmNR)
	var acc [gemmMR * gemmNR]float32
	for i := 0; i < b.N; i++ {
		kernel(256, a, bb, &acc)
	}
	b.ReportMetric(2*256*gemmMR*gemmNR*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkKernelWide is the double-width kernels (two panels of b, twelve accumulators) on
// one core with data in L1, where the hardware has them: strided is the forward product's
// (a's rows read in place at W1's row stride of 784), toC the in-place update's (depth 32).
func BenchmarkKernelWide(b *testing.B) {
	const lda, kc = 784, 256
	a := make([]float32, (gemmMR-1)*lda+kc)
	bb := make([]float32, kc*2*gemmNR)
	var acc [gemmMR * 2 * gemmNR]float32
	if !kernelStrided2(kc, a, lda, bb, &acc) {
		b.Skip("no double-width kernel on this machine")
	}
	b.Run("strided", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			kernelStrided2(kc, a, lda, bb, &acc)
		}
		b.ReportMetric(2*kc*gemmMR*2*gemmNR*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("toC", func(b *testing.B) {
		c := make([]float32, gemmMR*2*gemmNR)
		for i := 0; i < b.N; i++ {
			kernelToC2(32, a, bb, c, 2*gemmNR, 1e-3, false)
		}
		b.ReportMetric(2*32*gemmMR*2*gemmNR*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// randData returns n*in uniform values on [-1, 1) and n labels below nc, from the seed.
func randData(seed uint64, n, in, nc int) ([]float32, []int) {
	rnd := philox.NewRand(seed, 0, 0, 9, 1)
	x := make([]float32, n*in)
	for i := range x {
		x[i] = float32(2*rnd.Float() - 1)
	}
	y := make([]int, n)
	for i := range y {
		y[i] = rnd.Below(nc)
	}
	return x, y
}
