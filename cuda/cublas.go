//go:build gpu

package cuda

// A minimal cuBLAS binding: gorgonia.org/cu/blas has no batched GEMM, takes device memory as
// Go slices (a uintptr-to-pointer conversion that go vet and checkptr reject) and keeps its
// handle private, so this file wraps the three calls the backend needs.

/*
#cgo LDFLAGS: -lcublas -lcuda
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64 -L/usr/lib/x86_64-linux-gnu
#include <cublas_v2.h>
#include <cuda.h>
#include <stdint.h>

static int blas_create(cublasHandle_t* h) {
	cublasStatus_t s = cublasCreate(h);
	if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
	// FP32 arithmetic on the CUDA cores: no TF32 tensor-core rounding of the inputs, so the
	// products keep float32 accuracy like the CPU backend's.
	s = cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH);
	if (s != CUBLAS_STATUS_SUCCESS) return (int)s;
	return (int)cublasSetStream(*h, (cudaStream_t)0);
}

static int blas_destroy(cublasHandle_t h) { return (int)cublasDestroy(h); }

static int blas_sgemm(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
                      uint64_t a, int lda, long long sa, uint64_t b, int ldb, long long sb,
                      float beta, uint64_t c, int ldc, long long sc, int batch) {
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (batch == 1)
		return (int)cublasSgemm(h, oa, ob, m, n, k, &alpha, (const float*)(uintptr_t)a, lda,
		                        (const float*)(uintptr_t)b, ldb, &beta, (float*)(uintptr_t)c, ldc);
	return (int)cublasSgemmStridedBatched(h, oa, ob, m, n, k, &alpha, (const float*)(uintptr_t)a,
	                                      lda, sa, (const float*)(uintptr_t)b, ldb, sb, &beta,
	                                      (float*)(uintptr_t)c, ldc, sc, batch);
}
*/
import "C"

import (
	"fmt"
)

type blasHandle struct{ h C.cublasHandle_t }

func newBLAS() (*blasHandle, error) {
	var b blasHandle
	if s := C.blas_create(&b.h); s != 0 {
		return nil, fmt.Errorf("cublas: create handle: status %d", int(s))
	}
	return &b, nil
}

func (b *blasHandle) close() error {
	if s := C.blas_destroy(b.h); s != 0 {
		return fmt.Errorf("cublas: destroy handle: status %d", int(s))
	}
	return nil
}

func b2i(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

func (b *blasHandle) gemm(g GemmArgs) error {
	s := C.blas_sgemm(b.h, b2i(g.TransA), b2i(g.TransB), C.int(g.M), C.int(g.N), C.int(g.K),
		C.float(g.Alpha), C.uint64_t(g.A), C.int(g.LDA), C.longlong(g.StrideA),
		C.uint64_t(g.B), C.int(g.LDB), C.longlong(g.StrideB), C.float(g.Beta),
		C.uint64_t(g.C), C.int(g.LDC), C.longlong(g.StrideC), C.int(g.Batch))
	if s != 0 {
		return fmt.Errorf("cublas: sgemm m=%d n=%d k=%d batch=%d: status %d", g.M, g.N, g.K, g.Batch, int(s))
	}
	return nil
}
