// Shared helpers of the fedaudit kernels. Every kernel but one follows two rules that keep it
// runnable by the host shim (cuda/hostshim), which executes a launch as plain loops over blocks
// and threads: threads never communicate (no shared memory, no __syncthreads, no atomics), and
// every output element is computed by one thread in a fixed order that does not depend on the
// launch configuration. The exception, hidden_step (step.cu), keeps the second rule and shares
// memory within a block; the shim runs it with a host thread per GPU thread. Reductions over long vectors are therefore split into a fixed number of
// partial sums (kernel dot_partials) and a second pass (reduce_partials), so a result never
// depends on the grid size, the batch size or the device.
#ifndef FEDAUDIT_COMMON_CUH
#define FEDAUDIT_COMMON_CUH

typedef long long i64;
typedef unsigned int u32;
typedef unsigned long long u64;

// FEDAUDIT_PARTIALS is the number of partial sums per batch element of a long reduction.
#define FEDAUDIT_PARTIALS 256

// LIGHT_BATCH is how many of its grid-stride items a thread of axpby (elementwise.cu) and of
// clip_step (reduce.cu) handles at once: their addresses first, then all their loads, then the
// stores. The loads do not depend on each other, so they are in flight together; one item at a
// time, a thread waited for each load before the next (Nsight Compute on an H100: axpby at 27%
// of the memory bandwidth, the SMs 44% busy, in W1 at 4096 replicas; clip_step at about 45% in
// W2 at R 1024). cuda.Ops gives a thread 4 items by default (Options.LightItems).
#define LIGHT_BATCH 4

// UNROLL asks for the next loop, of a trip count known to the compiler, to be unrolled
// completely, so the arrays it indexes stay in registers; g++ (the host shim) takes its own
// pragma.
#ifdef __CUDACC__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

// load4 reads p[0..3] in one 16-byte load; p must be a multiple of 16 bytes (the host shim
// aborts where it is not, as the device would fault).
#ifdef __CUDACC__
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
#else
static inline float4 load4(const float* p) { return shim_load4(p); }
#endif

// GRID_STRIDE loops i over [0, n) with a grid-stride loop, so any grid size covers any n.
#define GRID_STRIDE(i, n)                                                        \
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (i64)(n);       \
	     i += (i64)blockDim.x * gridDim.x)

// rc_index walks the flat indices i = (b rows + r) cols + j of a grid-stride loop and keeps
// (b, r, j) up to date by additions: the 64-bit divisions that split i happen once per thread in
// rc_start, not once per element (a 64-bit division is a long software sequence on the GPU).
// The stride s = blockDim.x gridDim.x is split the same way; since sj < cols and sr < rows,
// each step carries at most once from j into r and from r into b.
struct rc_index {
	i64 i, b, r, j;      // the flat index and its coordinates
	i64 s, sb, sr, sj;   // the stride and its coordinates
	i64 rows, cols;
};

__device__ __forceinline__ rc_index rc_start(i64 i, i64 s, i64 rows, i64 cols) {
	rc_index x;
	// Empty shapes run no iteration; 1 avoids dividing by zero before the loop test.
	x.rows = rows > 0 ? rows : 1;
	x.cols = cols > 0 ? cols : 1;
	i64 per = x.rows * x.cols;
	x.i = i;
	x.b = i / per;
	i64 rem = i - x.b * per;
	x.r = rem / x.cols;
	x.j = rem - x.r * x.cols;
	x.s = s;
	x.sb = s / per;
	rem = s - x.sb * per;
	x.sr = rem / x.cols;
	x.sj = rem - x.sr * x.cols;
	return x;
}

__device__ __forceinline__ void rc_next(rc_index* x) {
	x->i += x->s;
	x->j += x->sj;
	x->r += x->sr;
	x->b += x->sb;
	if (x->j >= x->cols) {
		x->j -= x->cols;
		x->r++;
	}
	if (x->r >= x->rows) {
		x->r -= x->rows;
		x->b++;
	}
}

// GRID_STRIDE_RC loops it over the flat indices [0, n) of a batch of rows x cols arrays (pass
// rows = 1 for a batch of rows), with it.i the flat index and it.b, it.r, it.j its coordinates.
#define GRID_STRIDE_RC(it, n, rows, cols)                                                  \
	for (rc_index it = rc_start((i64)blockIdx.x * blockDim.x + threadIdx.x,                \
	                            (i64)blockDim.x * gridDim.x, (rows), (cols));              \
	     it.i < (i64)(n); rc_next(&it))

// The activations, numbered as compute.Activation.
#define ACT_TANH 0
#define ACT_SOFTPLUS 1
#define ACT_RELU 2

// go_maxf is Go's built-in max for float32: NaN if either is NaN, max(-0, +0) = +0.
__device__ __forceinline__ float go_maxf(float a, float b) {
	if (a != a) return a;
	if (b != b) return b;
	if (a == b) return (__float_as_uint(a) >> 31) ? b : a;
	return a > b ? a : b;
}

// act_value is act(v), computed in float64 and rounded, as the CPU backend does.
__device__ __forceinline__ float act_value(int act, float v) {
	if (act == ACT_TANH) return (float)tanh((double)v);
	if (act == ACT_SOFTPLUS) {
		double x = v;
		// log(1+e^x) = max(x,0) + log1p(e^-|x|), stable for large |x|
		return (float)(fmax(x, 0.0) + log1p(exp(-fabs(x))));
	}
	return go_maxf(v, 0.0f);
}

// act_grad is g act'(pre) given post = act(pre); each activation reads only what it needs.
__device__ __forceinline__ float act_grad(int act, const float* pre, const float* post, float g) {
	if (act == ACT_TANH) {
		float h = *post;
		return g * (1.0f - h * h);
	}
	if (act == ACT_SOFTPLUS) {
		double v = *pre;
		return g * (float)(1.0 / (1.0 + exp(-v)));
	}
	return *pre <= 0.0f ? 0.0f : g;
}

// sumsq4 is train's sumSq: four float64 lanes, lane l summing x[i]^2 for i = l mod 4 over the
// largest multiple of 4, the tail added to lane 0, then (s0 + s1) + (s2 + s3). Squares of
// float32 values are exact in float64, so fused or separate multiply-adds agree bit for bit.
__device__ __forceinline__ double sumsq4(const float* x, i64 n) {
	double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	i64 n4 = n & ~(i64)3;
	for (i64 i = 0; i < n4; i += 4) {
		double a = x[i], b = x[i + 1], c = x[i + 2], d = x[i + 3];
		s0 += a * a;
		s1 += b * b;
		s2 += c * c;
		s3 += d * d;
	}
	for (i64 i = n4; i < n; i++) {
		double a = x[i];
		s0 += a * a;
	}
	return (s0 + s1) + (s2 + s3);
}

// Philox4x32-10 (Salmon et al., SC11), as train/philox.go: c is the counter, (k0, k1) the key.
__device__ __forceinline__ void philox4x32_10(u32 c[4], u32 k0, u32 k1) {
	for (int i = 0; i < 10; i++) {
		u32 hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
		u32 hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
		u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
		c[0] = n0;
		c[1] = lo1;
		c[2] = n2;
		c[3] = lo0;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
}

#endif
