// cuda_shim.h lets the CUDA C kernels of fedaudit/kernels compile as C++ for the host: the
// execution-space qualifiers are defined away, the built-in index variables become globals
// that shim_launch_ordered sets while it loops over the grid, and the few device intrinsics the
// kernels use get host definitions. Most kernels never let threads communicate (common.cuh)
// and run one thread after another on the calling thread. Block kernels (one block per
// replica, cooperating through shared memory and barriers: step.cu) run with one host thread
// per GPU thread of a block, blocks one after another: __shared__ variables become statics
// (shared by the block's threads, reused by the next block), and __syncthreads is a barrier
// of the block's threads.
#ifndef FEDAUDIT_CUDA_SHIM_H
#define FEDAUDIT_CUDA_SHIM_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
	unsigned x, y, z;
};

// One launch runs at a time; each host thread running a GPU thread of a block kernel has its
// own indices.
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

// Statics inside a kernel are shared by every thread of the block, as __shared__ memory is.
#define __shared__ static

// __syncthreads waits until every thread of the block has reached it (shim.cc). Called from a
// kernel that is not marked as a block kernel, it aborts.
void __syncthreads();

// float4 is CUDA's vector of four floats, 16-byte aligned.
struct alignas(16) float4 {
	float x, y, z, w;
};

// shim_load4 is load4 (common.cuh) on the host: it aborts on an address the device's 16-byte
// load would fault on, so the shim checks the kernels' alignment guards.
static inline float4 shim_load4(const float* p) {
	if ((uintptr_t)p % 16 != 0) {
		fprintf(stderr, "hostshim: a 16-byte load from %p, which is not a multiple of 16\n", (const void*)p);
		abort();
	}
	float4 v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline unsigned __umulhi(unsigned a, unsigned b) {
	return (unsigned)(((uint64_t)a * b) >> 32);
}

static inline unsigned __float_as_uint(float f) {
	unsigned u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float __int_as_float(int i) {
	float f;
	memcpy(&f, &i, sizeof f);
	return f;
}

static inline long long __double_as_longlong(double d) {
	long long i;
	memcpy(&i, &d, sizeof i);
	return i;
}

static inline double __longlong_as_double(long long i) {
	double d;
	memcpy(&d, &i, sizeof d);
	return d;
}

#endif
