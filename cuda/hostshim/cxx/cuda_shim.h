// cuda_shim.h lets the CUDA C kernels of fedaudit/kernels compile as C++ for the host: the
// execution-space qualifiers are defined away, the built-in index variables become globals
// that shim_launch sets while it loops over the grid, and the few device intrinsics the
// kernels use get host definitions. Kernels that need __syncthreads or shared memory cannot
// run here, by design (see common.cuh): neither is defined.
#ifndef FEDAUDIT_CUDA_SHIM_H
#define FEDAUDIT_CUDA_SHIM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct dim3 {
	unsigned x, y, z;
};

// One launch runs at a time, on one host thread.
static dim3 threadIdx, blockIdx, blockDim, gridDim;

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
