package cuda

import "github.com/fedaudit/fedaudit/kernels"

// Device runs the kernels of package kernels: the GPU (the driver device, tag gpu) or the host
// shim (package cuda/hostshim).
// Addresses are device addresses as integers. Operations run in the order they are issued; a
// Device need not be safe for concurrent use.
//
// Errors and closing, the same on every device. A call returns the error it meets; a device
// that runs work asynchronously (the GPU) reports a failure of earlier work (a kernel fault) at
// the next call that waits for it (Read, Free, Sync, or its release at close). Ops keeps the
// first error, Err reports it, and every later operation does nothing. Closing (Ops.Close, and
// Backend.Close, which is Ops.Close followed by the driver device's release) always releases
// everything, even after an error, and returns that first error (whether Err reported it
// already, or the queued work that Close issues raises it now) joined with the first error met
// while releasing and a count of the others. So a caller that checks only Close misses
// nothing, a backend that never failed closes with nil, and a test that provokes an error on
// purpose sees it again at Close on the GPU and on the host shim alike (issue 27: the two
// disagreed). The host shim's own Close (hostshim.Device.Close, which frees the host memory
// behind the device addresses) is its test harness's business, like the driver's context.
type Device interface {
	// Alloc returns n zeroed bytes of device memory.
	Alloc(n int) (uint64, error)
	// Free releases memory from Alloc.
	Free(addr uint64) error
	// Write copies src to dst after all earlier work.
	Write(dst uint64, src []byte) error
	// Read copies len(dst) bytes from src once all earlier work is done.
	Read(dst []byte, src uint64) error
	// Stage copies a small host array (per-call arguments: coefficients, indices, seeds) to
	// device memory and returns its address, valid for every launch issued before the next
	// Stage call.
	Stage(src []byte) (uint64, error)
	// Launch runs kernel k on a one-dimensional grid of grid blocks of block threads. args
	// holds one value per kernel parameter: an address, an integer, or the bits of a float32
	// (low 32 bits) or float64.
	Launch(k kernels.Kernel, grid, block int, args []uint64) error
	// Gemm is cublasSgemmStridedBatched (column-major): for every batch element i,
	// C_i = alpha op(A_i) op(B_i) + beta C_i with X_i at X + 4 i strideX; C is not read when
	// beta = 0.
	Gemm(g GemmArgs) error
}

// InOrderGemmer is implemented by a Device whose Gemm computes every element of a product as
// one sum over the depth in index order, so the element does not depend on the call's shape,
// batch or the other elements (the host shim). cuBLAS gives no such promise: it picks its
// kernels, and with them the order of the sums, by the shape of the call.
type InOrderGemmer interface {
	GemmInOrder() bool
}

// GemmArgs are the arguments of Device.Gemm, in cuBLAS's column-major convention.
type GemmArgs struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float32
	A, B, C                   uint64
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int64 // in elements
	Batch                     int
	// Math is the products' precision: MathFP32 (the zero value), MathTF32 (A's and B's
	// elements rounded to TensorFloat-32, cuBLAS's CUBLAS_TF32_TENSOR_OP_MATH) or MathBF16
	// (down-converted to bfloat16, CUBLAS_COMPUTE_32F_FAST_16BF); the sums stay float32.
	Math Math
}

// Math is the precision of a GEMM's products (compute.Precision on the device).
type Math uint8

// The GEMM precisions.
const (
	MathFP32 Math = iota
	MathTF32
	MathBF16
)
