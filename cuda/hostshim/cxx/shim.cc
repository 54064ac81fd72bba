// shim.cc compiles the CUDA kernels of fedaudit/kernels for the host (with cuda_shim.h) and
// exports a launcher and a column-major strided-batched SGEMM with cuBLAS's semantics. It is
// built into a shared library by package hostshim at test time, so it is always compiled from
// the current sources.
#include "cuda_shim.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// The barrier of the block kernel running now (one launch at a time), and whether the calling
// host thread runs one of its GPU threads.
pthread_barrier_t block_barrier;
thread_local bool in_block_kernel = false;

}  // namespace

void __syncthreads() {
	if (!in_block_kernel) {
		fprintf(stderr, "hostshim: __syncthreads in a kernel not marked as a block kernel (KB in shim.cc)\n");
		abort();
	}
	pthread_barrier_wait(&block_barrier);
}

#include "conv.cu"
#include "elementwise.cu"
#include "loss.cu"
#include "noise.cu"
#include "reduce.cu"
#include "step.cu"

namespace {

// arg converts one 64-bit argument slot to the kernel parameter's type, as the CUDA driver
// reads a parameter from the start of its slot (little endian: the low bytes).
template <typename T>
T arg(uint64_t v) {
	if constexpr (std::is_pointer_v<T>) {
		return reinterpret_cast<T>(static_cast<uintptr_t>(v));
	} else if constexpr (std::is_same_v<T, float>) {
		uint32_t u = static_cast<uint32_t>(v);
		float f;
		memcpy(&f, &u, sizeof f);
		return f;
	} else if constexpr (std::is_same_v<T, double>) {
		double d;
		memcpy(&d, &v, sizeof d);
		return d;
	} else {
		static_assert(std::is_integral_v<T>, "kernel parameters are pointers, integers or floats");
		return static_cast<T>(v);
	}
}

template <typename... A, size_t... I>
void invoke(void (*f)(A...), const uint64_t* p, std::index_sequence<I...>) {
	f(arg<A>(p[I])...);
}

struct entry {
	const char* name;
	int nargs;
	void (*call)(void* fn, const uint64_t* args);
	void* fn;
	bool block;  // a block kernel: its threads share memory and meet at __syncthreads
};

template <typename... A>
entry make_entry(const char* name, void (*f)(A...), bool block) {
	return entry{name, static_cast<int>(sizeof...(A)),
	             [](void* fn, const uint64_t* p) {
		             invoke(reinterpret_cast<void (*)(A...)>(fn), p, std::index_sequence_for<A...>{});
	             },
	             reinterpret_cast<void*>(f), block};
}

#define K(f) make_entry(#f, f, false)
#define KB(f) make_entry(#f, f, true)
const entry table[] = {
    K(axpby),         K(add_row),         K(sum_rows),           K(gather),
    K(activate),      K(activate_grad),   K(softmax_xent),       K(clip_examples_norm),
    K(clip_examples_scale), K(dot_partials), K(reduce_partials), K(clip_step),
    K(add_gaussian),  K(philox_raw),      K(dot2_partials),      K(clip_coef),
    K(add_row_activate), K(activate_grad_sum_rows),
    K(im2col),        K(col2im),          K(pool),               K(pool_grad),
    K(transpose_blocks), K(gn_stats_partials), K(gn_stats),      K(gn_forward),
    K(gn_grad_sums), K(gn_grad_fold), K(gn_grad_reduce), K(gn_grad_x),
    K(mech_noise),        KB(hidden_step),    K(splitk_reduce),
    K(conv_direct),       K(conv_direct_dx),  K(conv_direct_dw),
    K(pool_grad_tiled),   K(accumulate_in_order), K(im2col_rows), K(add_relu),
    K(wino_filter),       K(wino_filter_grad), K(wino_input),       K(wino_input_grad),
    K(wino_output),       K(wino_output_grad),
    K(wino4_filter),      K(wino4_filter_grad), K(wino4_input),     K(wino4_input_grad),
    K(wino4_output),      K(wino4_output_grad), K(pool_grad_kept),    K(conv_direct_wt),
    K(conv_direct_dw_win2), K(conv_direct_dw_win4), K(add_col),           K(sum_cols),
    K(add_col_activate),  K(activate_grad_sum_cols),
};
#undef K
#undef KB

const int nkernels = sizeof table / sizeof table[0];

}  // namespace

// shim_find returns the index of the named kernel and stores its parameter count, or -1.
extern "C" int shim_find(const char* name, int* nargs) {
	for (int i = 0; i < nkernels; i++) {
		if (strcmp(table[i].name, name) == 0) {
			*nargs = table[i].nargs;
			return i;
		}
	}
	return -1;
}

namespace {

// run_block_kernel runs a block kernel with one host thread per GPU thread of a block; the
// blocks run one after another, each ending at a barrier so that the next block's use of the
// shared statics waits until every thread is done with them.
int run_block_kernel(const entry& e, unsigned grid, unsigned block, const uint64_t* args) {
	if (block > 1024) return 1;  // CUDA's limit of threads per block
	if (pthread_barrier_init(&block_barrier, nullptr, block) != 0) return 1;
	std::vector<std::thread> threads;
	threads.reserve(block);
	for (unsigned t = 0; t < block; t++) {
		threads.emplace_back([&e, grid, block, args, t] {
			in_block_kernel = true;
			threadIdx = dim3{t, 0, 0};
			blockDim = dim3{block, 1, 1};
			gridDim = dim3{grid, 1, 1};
			for (unsigned b = 0; b < grid; b++) {
				blockIdx = dim3{b, 0, 0};
				e.call(e.fn, args);
				pthread_barrier_wait(&block_barrier);
			}
			in_block_kernel = false;
		});
	}
	for (auto& th : threads) th.join();
	pthread_barrier_destroy(&block_barrier);
	return 0;
}

}  // namespace

// shim_launch_ordered runs kernel k over grid x block threads: one thread after another on the
// calling thread, or for a block kernel with a host thread per GPU thread of a block
// (run_block_kernel). order chooses the sequence of the one-after-another threads: 0 blocks
// and threads ascending, 1 both descending, 2 blocks descending and each block's odd threads
// before its even ones. A GPU runs them in no order, so a kernel whose threads read what other
// threads of the same launch write (a race) gives other bits in another order; one whose
// threads are independent, as every kernel here must be, gives the same. It returns nonzero
// when k, the argument count, the block size or the order is wrong.
extern "C" int shim_launch_ordered(int k, unsigned grid, unsigned block, const uint64_t* args, int nargs, int order) {
	if (k < 0 || k >= nkernels || nargs != table[k].nargs || grid == 0 || block == 0) return 1;
	if (block > 1024 || grid > 0x7fffffffu) return 1;  // CUDA's limits of a one-dimensional launch
	if (order < 0 || order > 2) return 1;
	if (table[k].block) return run_block_kernel(table[k], grid, block, args);
	gridDim = dim3{grid, 1, 1};
	blockDim = dim3{block, 1, 1};
	for (unsigned i = 0; i < grid; i++) {
		blockIdx = dim3{order == 0 ? i : grid - 1 - i, 0, 0};
		for (unsigned j = 0; j < block; j++) {
			unsigned t = j;
			if (order == 1) {
				t = block - 1 - j;
			} else if (order == 2) {
				t = j < block / 2 ? 2 * j + 1 : 2 * (j - block / 2);
			}
			threadIdx = dim3{t, 0, 0};
			table[k].call(table[k].fn, args);
		}
	}
	return 0;
}

// tf32 rounds a float32 to TensorFloat-32, the 10-bit mantissa tensor cores multiply: to
// nearest, ties away from zero (PTX cvt.rna.tf32.f32), on the bits of its magnitude; infinities
// and NaNs pass unchanged.
static inline float tf32(float x) {
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
	memcpy(&x, &u, 4);
	return x;
}

// bf16 rounds a float32 to bfloat16 (8-bit mantissa): to nearest, ties to even, on the bits of
// its magnitude; infinities and NaNs pass unchanged.
static inline float bf16(float x) {
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&x, &u, 4);
	return x;
}

// shim_gemm is cublasSgemmStridedBatched on host memory, with cuBLAS's argument checks
// (nonzero return: CUBLAS_STATUS_INVALID_VALUE). Sums run in float32 in k order. math is
// cuda.Math: with 1 the elements of A and B are rounded to TF32 first, with 2 to bfloat16
// (models of CUBLAS_TF32_TENSOR_OP_MATH and CUBLAS_COMPUTE_32F_FAST_16BF: the hardware's own
// summation order is not reproduced).
extern "C" int shim_gemm(int ta, int tb, int m, int n, int k, float alpha, uint64_t a, int lda,
                         long long sa, uint64_t b, int ldb, long long sb, float beta, uint64_t c,
                         int ldc, long long sc, int batch, int math) {
	if (m < 0 || n < 0 || k < 0 || batch < 0) return 1;
	int arows = ta ? k : m, brows = tb ? n : k;
	if (lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
		return 1;
	for (int e = 0; e < batch; e++) {
		const float* A = reinterpret_cast<const float*>(static_cast<uintptr_t>(a)) + e * sa;
		const float* B = reinterpret_cast<const float*>(static_cast<uintptr_t>(b)) + e * sb;
		float* C = reinterpret_cast<float*>(static_cast<uintptr_t>(c)) + e * sc;
		for (int j = 0; j < n; j++) {
			for (int i = 0; i < m; i++) {
				float s = 0;
				for (int p = 0; p < k; p++) {
					float x = ta ? A[p + (long long)i * lda] : A[i + (long long)p * lda];
					float y = tb ? B[j + (long long)p * ldb] : B[p + (long long)j * ldb];
					if (math == 1) x = tf32(x), y = tf32(y);
					if (math == 2) x = bf16(x), y = bf16(y);
					s += x * y;
				}
				float* cp = C + i + (long long)j * ldc;
				*cp = beta == 0.0f ? alpha * s : alpha * s + beta * *cp;
			}
		}
	}
	return 0;
}

// shim_rc_check walks rc_index (common.cuh) from flat index i0 with stride s over a batch of
// rows x cols arrays for the given number of steps and compares every step with the
// coordinates computed by division. It returns the number of the first step that differs, or
// -1: a test of the kernels' index arithmetic at indices beyond 2^32 without the memory.
extern "C" long long shim_rc_check(long long i0, long long s, long long rows, long long cols,
                                   long long steps) {
	rc_index x = rc_start(i0, s, rows, cols);
	for (long long k = 0; k < steps; k++, rc_next(&x)) {
		long long i = i0 + k * s, per = rows * cols;
		if (x.i != i || x.b != i / per || x.r != (i % per) / cols || x.j != i % cols) return k;
	}
	return -1;
}

namespace {

template <int D>
long long md_check(long long i0, long long s, const long long* radix, long long steps) {
	md_index<D> x = md_start<D>(i0, s, radix);
	for (long long k = 0; k < steps; k++, md_next(&x)) {
		long long i = i0 + k * s;
		if (x.i != i) return k;
		long long rem = i;
		for (int d = D - 1; d > 0; d--) {
			if (x.d[d] != rem % radix[d]) return k;
			rem /= radix[d];
		}
		if (x.d[0] != rem) return k;
	}
	return -1;
}

}  // namespace

// shim_md_check is shim_rc_check for md_index (conv.cu) with D radices (radix[0], the batch, is
// not read; 2 <= D <= 7): the first step whose digits differ from those computed by division,
// -1 if none, -2 for an unsupported D.
extern "C" long long shim_md_check(long long i0, long long s, const long long* radix, int D,
                                   long long steps) {
	switch (D) {
	case 2: return md_check<2>(i0, s, radix, steps);
	case 3: return md_check<3>(i0, s, radix, steps);
	case 4: return md_check<4>(i0, s, radix, steps);
	case 5: return md_check<5>(i0, s, radix, steps);
	case 6: return md_check<6>(i0, s, radix, steps);
	case 7: return md_check<7>(i0, s, radix, steps);
	}
	return -2;
}

// shim_go_log writes go_log (noise.cu) of x[i] into out[i] for i < n: a test of the port of
// Go's logarithm the exact samplers use, against math.Log itself.
extern "C" void shim_go_log(const double* x, double* out, long long n) {
	for (long long i = 0; i < n; i++) out[i] = go_log(x[i]);
}
