package kernels

// Kernel names one kernel of the .cu sources.
type Kernel int

// The kernels, in no particular order; Name gives the entry point in the PTX.
const (
	Axpby Kernel = iota
	AddRow
	SumRows
	Gather
	Activate
	ActivateGrad
	SoftmaxXent
	ClipExamplesNorm
	ClipExamplesScale
	DotPartials
	ReducePartials
	ClipStep
	AddGaussian
	PhiloxRaw
	numKernels
)

var kernelNames = [numKernels]string{
	Axpby: "axpby", AddRow: "add_row", SumRows: "sum_rows", Gather: "gather",
	Activate: "activate", ActivateGrad: "activate_grad", SoftmaxXent: "softmax_xent",
	ClipExamplesNorm: "clip_examples_norm", ClipExamplesScale: "clip_examples_scale",
	DotPartials: "dot_partials", ReducePartials: "reduce_partials", ClipStep: "clip_step",
	AddGaussian: "add_gaussian", PhiloxRaw: "philox_raw",
}

// Name is the kernel's entry point (its extern "C" name).
func (k Kernel) Name() string { return kernelNames[k] }

func (k Kernel) String() string { return k.Name() }

// All returns every kernel.
func All() []Kernel {
	ks := make([]Kernel, numKernels)
	for i := range ks {
		ks[i] = Kernel(i)
	}
	return ks
}

// Partials is the number of partial sums per batch element of the long reductions
// (FEDAUDIT_PARTIALS in common.cuh).
const Partials = 256

// Device runs the kernels: the GPU (package cuda) or the host shim (package kernels/hostshim).
// Addresses are device addresses as integers. Operations run in the order they are issued; a
// Device need not be safe for concurrent use.
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
	Launch(k Kernel, grid, block int, args []uint64) error
	// Gemm is cublasSgemmStridedBatched (column-major): for every batch element i,
	// C_i = alpha op(A_i) op(B_i) + beta C_i with X_i at X + 4 i strideX; C is not read when
	// beta = 0.
	Gemm(g GemmArgs) error
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
}
