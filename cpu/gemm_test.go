package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
)

func naiveGemm(transA, transB bool, alpha float32, a, b compute.Mat, beta float32, c compute.Mat, A, B, C []float32) []float64 {
	out := make([]float64, c.Batch*c.Rows*c.Cols)
	k := a.Cols
	if transA {
		k = a.Rows
	}
	for bt := 0; bt < c.Batch; bt++ {
		for i := 0; i < c.Rows; i++ {
			for j := 0; j < c.Cols; j++ {
				var s float64
				for p := 0; p < k; p++ {
					var av, bv float32
					if transA {
						av = A[a.Off+bt*a.BatchStride+p*a.Stride+i]
					} else {
						av = A[a.Off+bt*a.BatchStride+i*a.Stride+p]
					}
					if transB {
						bv = B[b.Off+bt*b.BatchStride+j*b.Stride+p]
					} else {
						bv = B[b.Off+bt*b.BatchStride+p*b.Stride+j]
					}
					s += float64(av) * float64(bv)
				}
				out[(bt*c.Rows+i)*c.Cols+j] = float64(alpha)*s + float64(beta)*float64(C[c.Off+bt*c.BatchStride+i*c.Stride+j])
			}
		}
	}
	return out
}

// Gemm against a float64 triple loop on shapes that exercise partial panels and blocks in every
// dimension, both transposes, shared operands and beta. Tolerance: 1e-5 relative to the sum of
// |terms|, about 100 float32 rounding errors.
func TestGemm(t *testing.T) {
	for _, kern := range []string{"go", "avx2", "avx512"} {
		if kern == "avx2" && !useAVX2 || kern == "avx512" && !useAVX512 {
			continue
		}
		saved, saved512 := useAVX2, useAVX512
		useAVX2, useAVX512 = kern != "go", kern == "avx512"
		for _, sh := range [][3]int{{1, 1, 1}, {7, 17, 5}, {32, 64, 784}, {97, 257, 300}, {6, 16, 256}, {13, 33, 513}, {60, 300, 1100}, {12, 150, 2100}} {
			M, N, K := sh[0], sh[1], sh[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, shareA := range []bool{false, true} {
						testGemmCase(t, M, N, K, ta, tb, shareA)
					}
				}
			}
		}
		useAVX2, useAVX512 = saved, saved512
	}
}

func testGemmCase(t *testing.T, M, N, K int, ta, tb, shareA bool) {
	be := New(2)
	defer be.Close()
	const batch = 3
	rnd := philox.NewRand(uint64(M*1000+N*10+K), 0, 0, 9, 0)
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(2*rnd.Float() - 1)
		}
		return x
	}
	ar, ac := M, K
	if ta {
		ar, ac = K, M
	}
	br, bc := K, N
	if tb {
		br, bc = N, K
	}
	lda, ldb, ldc := ac+3, bc+1, N+2
	A, B, C := fill(batch*ar*lda+5), fill(batch*br*ldb), fill(batch*M*ldc)
	a := compute.Mat{Buf: be.Alias(A), Off: 5, Rows: ar, Cols: ac, Stride: lda, Batch: batch, BatchStride: ar * lda}
	if shareA {
		a.BatchStride = 0
	}
	b := compute.Mat{Buf: be.Alias(B), Rows: br, Cols: bc, Stride: ldb, Batch: batch, BatchStride: br * ldb}
	c := compute.Mat{Buf: be.Alias(C), Rows: M, Cols: N, Stride: ldc, Batch: batch, BatchStride: M * ldc}
	want := naiveGemm(ta, tb, 0.5, a, b, 0.25, c, A, B, C)
	be.Gemm(ta, tb, 0.5, a, b, 0.25, c)
	for bt := 0; bt < batch; bt++ {
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				got := float64(C[bt*M*ldc+i*ldc+j])
				w := want[(bt*M+i)*N+j]
				if math.Abs(got-w) > 1e-5*float64(K+1) {
					t.Fatalf("M%d N%d K%d ta %v tb %v share %v: c[%d][%d][%d] = %g, want %g", M, N, K, ta, tb, shareA, bt, i, j, got, w)
				}
			}
		}
	}
}

// With beta = 0, NaN in c must not survive.
func TestGemmBetaZeroIgnoresNaN(t *testing.T) {
	be := New(1)
	defer be.Close()
	A := []float32{1, 2}
	B := []float32{3, 4}
	C := []float32{float32(math.NaN())}
	be.Gemm(false, false, 1, compute.Mat{Buf: be.Alias(A), Rows: 1, Cols: 2, Stride: 2, Batch: 1},
		compute.Mat{Buf: be.Alias(B), Rows: 2, Cols: 1, Stride: 1, Batch: 1}, 0,
		compute.Mat{Buf: be.Alias(C), Rows: 1, Cols: 1, Stride: 1, Batch: 1})
	if C[0] != 11 {
		t.Errorf("c = %g, want 11", C[0])
	}
}

// With beta = 0 every element of c is written (each tile stored by its first kernel, or cleared
// just before it where the kernels add):
// c filled with NaN beforehand, for shapes whose tiles take each kernel (twelve rows, six rows,
// a partial last panel, columns not a multiple of the panels), several depth blocks, and an
// empty depth (c must come out zero).
func TestGemmBetaZeroWritesEveryTile(t *testing.T) {
	for _, threads := range []int{1, 2} {
		be := New(threads)
		for _, sh := range [][4]int{{13, 50, 26, 3}, {16, 3200, 151, 2}, {6, 1000, 26, 4}, {25, 37, 2100, 2}, {5, 7, 0, 2}} {
			M, N, K, R := sh[0], sh[1], sh[2], sh[3]
			A, B := make([]float32, R*M*K), make([]float32, R*K*N)
			for i := range A {
				A[i] = float32(i%13) - 6
			}
			for i := range B {
				B[i] = float32(i%7) - 3
			}
			C := make([]float32, R*M*N)
			for i := range C {
				C[i] = float32(math.NaN())
			}
			a := compute.Mat{Buf: be.Alias(A), Rows: M, Cols: K, Stride: K, Batch: R, BatchStride: M * K}
			b := compute.Mat{Buf: be.Alias(B), Rows: K, Cols: N, Stride: N, Batch: R, BatchStride: K * N}
			c := compute.Mat{Buf: be.Alias(C), Rows: M, Cols: N, Stride: N, Batch: R, BatchStride: M * N}
			be.Gemm(false, false, 1, a, b, 0, c)
			want := naiveGemm(false, false, 1, a, b, 0, c, A, B, make([]float32, len(C)))
			for i, v := range C {
				if float64(v) != want[i] { // small integers: exact in float32
					t.Fatalf("threads %d, %dx%dx%d: c[%d] = %g, want %g", threads, M, N, K, i, v, want[i])
				}
			}
		}
		be.Close()
	}
}

// c = a b^T with a per batch element and few rows of a takes the transposed path (b's rows
// read in place, a^T packed per task): bit for bit what the packed path gives. Shapes of a
// convolution's weight gradient (6 and 16 rows, 26 and 151 columns, depths beyond a block),
// partial blocks of rows, beta 0 and 1.
func TestGemmTransposedPerElementMatchesPacked(t *testing.T) {
	if !useAVX2 {
		t.Skip("the transposed path needs AVX2")
	}
	be := New(2)
	defer be.Close()
	for _, sh := range [][3]int{{16, 151, 3200}, {6, 26, 2000}, {13, 50, 1100}, {40, 7, 30}} {
		M, N, K := sh[0], sh[1], sh[2]
		for _, beta := range []float32{0, 1} {
			for _, R := range []int{3, 5} { // 5 >= 2 workers x 2: one task per batch element
				A, _ := randData(31, R*M, K, 2)
				B, _ := randData(32, R*N, K, 2)
				C0, _ := randData(33, R*M, N, 2)
				a := compute.Mat{Buf: be.Alias(A), Rows: M, Cols: K, Stride: K, Batch: R, BatchStride: M * K}
				b := compute.Mat{Buf: be.Alias(B), Rows: N, Cols: K, Stride: K, Batch: R, BatchStride: N * K}
				run := func(transposed bool) []float32 {
					C := append([]float32(nil), C0...)
					saved, savedI := transposedRowsMax, inPlaceRowsMax
					if !transposed {
						transposedRowsMax, inPlaceRowsMax = 0, 0 // the packed path itself
					}
					defer func() { transposedRowsMax, inPlaceRowsMax = saved, savedI }()
					be.Gemm(false, true, 0.7, a, b, beta, compute.Mat{Buf: be.Alias(C), Rows: M, Cols: N, Stride: N, Batch: R, BatchStride: M * N})
					if be.gemm.transposed != transposed {
						t.Fatalf("%dx%dx%d: transposed path %v, want %v", M, N, K, be.gemm.transposed, transposed)
					}
					return C
				}
				got, want := run(true), run(false)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%dx%dx%d beta %g R %d: element %d transposed %g, packed %g", M, N, K, beta, R, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// Rows of a read in place by the strided kernels (inPlaceRows: a first convolution's weight
// gradient, 6 rows of output gradient against its shared patches) give the packed path's bits:
// shared and per-element b, partial and whole column panels, depths beyond a block, every beta.
func TestGemmInPlaceRowsMatchPacked(t *testing.T) {
	if !useAVX512 {
		t.Skip("the in-place path needs AVX-512")
	}
	be := New(2)
	defer be.Close()
	// Every shape takes the in-place path (rows a multiple of 6 up to 192, at most 64 columns,
	// a depth block of at least 64); the test fails if one does not.
	for _, sh := range [][3]int{{6, 26, 2000}, {12, 40, 1030}, {48, 16, 70}, {6, 7, 3000}, {18, 64, 64}, {120, 32, 400}, {84, 32, 120}, {192, 50, 70}} {
		M, N, K := sh[0], sh[1], sh[2]
		for _, shared := range []bool{false, true} {
			for _, beta := range []float32{0, 1, 0.5} {
				const R = 5
				A, _ := randData(41, R*M, K, 2)
				B, _ := randData(42, R*N, K, 2)
				C0, _ := randData(43, R*M, N, 2)
				a := compute.Mat{Buf: be.Alias(A), Rows: M, Cols: K, Stride: K, Batch: R, BatchStride: M * K}
				b := compute.Mat{Buf: be.Alias(B), Rows: N, Cols: K, Stride: K, Batch: R, BatchStride: N * K}
				if shared {
					b.BatchStride = 0
				}
				run := func(inPlace bool) []float32 {
					C := append([]float32(nil), C0...)
					savedT, savedI := transposedRowsMax, inPlaceRowsMax
					transposedRowsMax = 0
					if !inPlace {
						inPlaceRowsMax = 0
					}
					defer func() { transposedRowsMax, inPlaceRowsMax = savedT, savedI }()
					be.Gemm(false, true, 0.7, a, b, beta, compute.Mat{Buf: be.Alias(C), Rows: M, Cols: N, Stride: N, Batch: R, BatchStride: M * N})
					if got := be.gemm.readsAInPlace(min(K, gemmKC)); got != inPlace {
						t.Fatalf("%dx%dx%d: reads a in place %v, want %v", M, N, K, got, inPlace)
					}
					return C
				}
				got, want := run(true), run(false)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%dx%dx%d shared b %v beta %g: element %d in place %g, packed %g", M, N, K, shared, beta, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// A shared operand packed whole by parallel tasks (prepack: depth blocks times groups of
// panels, more than one group here) gives each batch element exactly what a call for that
// element alone gives, which packs per task.
func TestPrepackedSharedOperandsMatchSingleCalls(t *testing.T) {
	be := New(2)
	defer be.Close()
	for _, tc := range []struct {
		m, n, k        int
		transA, transB bool
		shareA         bool
	}{
		{7, 3200, 40, false, false, false},
		{7, 3200, 1100, false, true, false},
		{3100, 20, 30, false, false, true},
		{3100, 20, 30, true, false, true},
	} {
		const R = 3
		ar, ac := tc.m, tc.k
		if tc.transA {
			ar, ac = ac, ar
		}
		br, bc := tc.k, tc.n
		if tc.transB {
			br, bc = bc, br
		}
		A, _ := randData(51, R*ar, ac, 2)
		B, _ := randData(52, R*br, bc, 2)
		a := compute.Mat{Buf: be.Alias(A), Rows: ar, Cols: ac, Stride: ac, Batch: R, BatchStride: ar * ac}
		b := compute.Mat{Buf: be.Alias(B), Rows: br, Cols: bc, Stride: bc, Batch: R, BatchStride: br * bc}
		if tc.shareA {
			a.BatchStride = 0
		} else {
			b.BatchStride = 0
		}
		all := make([]float32, R*tc.m*tc.n)
		be.Gemm(tc.transA, tc.transB, 1, a, b, 0, compute.Mat{Buf: be.Alias(all), Rows: tc.m, Cols: tc.n, Stride: tc.n, Batch: R, BatchStride: tc.m * tc.n})
		for r := 0; r < R; r++ {
			one := make([]float32, tc.m*tc.n)
			ar, br := a, b
			ar.Off, ar.Batch = r*a.BatchStride, 1
			br.Off, br.Batch = r*b.BatchStride, 1
			be.Gemm(tc.transA, tc.transB, 1, ar, br, 0, compute.Mat{Buf: be.Alias(one), Rows: tc.m, Cols: tc.n, Stride: tc.n, Batch: 1})
			for i, v := range one {
				if got := all[r*tc.m*tc.n+i]; math.Float32bits(got) != math.Float32bits(v) {
					t.Fatalf("%+v: element %d of batch %d is %g with the batch, %g alone", tc, i, r, got, v)
				}
			}
		}
	}
}

// The engine's deferred MLP step reads the Gram matrix x x^T of a minibatch as a diagonal block
// of its client's Gram matrix over all K minibatches, computed once (train/deferred.go), where
// it used to compute each block alone: the CPU backend must give a block of a larger product
// the bits of that block computed alone, or results (and results/) would change. W1's shape
// (5 minibatches of 32 rows of 784), smaller and odd ones, and a deep one, at 1, 2 and 5
// threads.
func TestGramBlockKeepsBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, threads := range []int{1, 2, 5} {
		be := New(threads)
		for _, sh := range [][3]int{{5, 32, 784}, {4, 32, 784}, {5, 16, 784}, {3, 10, 20}, {2, 7, 33}, {5, 32, 3072}} {
			K, B, d := sh[0], sh[1], sh[2]
			kb := K * B
			h := make([]float32, kb*d)
			for i := range h {
				h[i] = float32(rng.NormFloat64())
			}
			x := be.Alloc(kb * d)
			be.Upload(x, 0, h)
			all := compute.Mat{Buf: x, Rows: kb, Cols: d, Stride: d, Batch: 1}
			big := be.Alloc(kb * kb)
			be.Gemm(false, true, 1, all, all, 0, compute.Mat{Buf: big, Rows: kb, Cols: kb, Stride: kb, Batch: 1})
			whole := make([]float32, kb*kb)
			be.Download(whole, big, 0)
			small := be.Alloc(B * B)
			block := make([]float32, B*B)
			for k := range K {
				xs := compute.Mat{Buf: x, Off: k * B * d, Rows: B, Cols: d, Stride: d, Batch: 1}
				be.Gemm(false, true, 1, xs, xs, 0, compute.Mat{Buf: small, Rows: B, Cols: B, Stride: B, Batch: 1})
				be.Download(block, small, 0)
				for i := range B {
					for j := range B {
						if a, b := block[i*B+j], whole[(k*B+i)*kb+k*B+j]; math.Float32bits(a) != math.Float32bits(b) {
							t.Fatalf("%d threads, K %d B %d d %d: block %d (%d, %d) is %v alone and %v in the whole", threads, K, B, d, k, i, j, a, b)
						}
					}
				}
			}
		}
	}
}
