// Reductions over long rows (one replica's parameters): inner products for Dots and the
// gradient norm of ClipStep, and the local step itself.
#include "common.cuh"

// partial_dot is the float64 sum over j = p, p + P, ... < cols of x[j] y[j], added in that
// order. The loads run up to 16 strides ahead of the sums, which keep their order (the products
// are exact in float64), so the bits are the plain loop's. A thread per partial sum leaves few
// threads where few replicas have long rows (ResNet-18's 11.2 M parameters, 80 replica-clients:
// 20,480 threads at 256 partials), and with one load in flight each (4, as the compiler
// unrolled the plain loop) they covered a quarter of the memory's bandwidth (dot_partials at 5
// ms a launch on an H100). The kernels that call it declare __launch_bounds__(256, 2): without
// it ptxas keeps them at 32 registers and issues the loads 8 at a time; with it, 64 registers
// and all 32 loads of a pass before the sums (blocks are at most 256 threads, cuda.Ops' cap).
__device__ __forceinline__ double partial_dot(const float* x, const float* y, i64 p, i64 cols, i64 P) {
	double s = 0;
	i64 j = p;
	for (; j + 15 * P < cols; j += 16 * P) {
		float xs[16], ys[16];
		for (int u = 0; u < 16; u++) {
			xs[u] = x[j + u * P];
			ys[u] = y[j + u * P];
		}
		for (int u = 0; u < 16; u++) s += (double)xs[u] * (double)ys[u];
	}
	for (; j < cols; j += P) s += (double)x[j] * (double)y[j];
	return s;
}

// dot_partials splits each batch element's inner product of a[b] and b[b] (a may equal b:
// squared norms) into FEDAUDIT_PARTIALS x fold partial sums, in float64: partial q = p + P g
// (P = FEDAUDIT_PARTIALS, p < P, g < fold) sums i = q, q + P fold, ... < cols (partial_dot),
// and goes to part[(b P + p) fold + g], so that partial p's fold pieces lie together for
// reduce_partials. Adjacent threads read adjacent elements. fold > 1 gives a long row more
// threads: at 256 partials a batch of 8 ResNet-18 rows (11.2 M floats each) had 8 blocks for
// the whole device and read 179 GB/s on an H100 (2 ms a launch, 4% of W3's round). cuda.Ops
// takes fold from cols alone, so the split is fixed and the result never depends on the launch.
extern "C" __global__ void __launch_bounds__(256, 2) dot_partials(double* part, const float* a, i64 abs_, const float* b,
                                        i64 bbs, i64 cols, i64 batch, i64 fold) {
	const i64 PF = FEDAUDIT_PARTIALS * fold;
	GRID_STRIDE(i, batch * PF) {
		i64 e = i / PF, q = i % PF;
		i64 p = q % FEDAUDIT_PARTIALS, g = q / FEDAUDIT_PARTIALS;
		part[(e * FEDAUDIT_PARTIALS + p) * fold + g] = partial_dot(a + e * abs_, b + e * bbs, q, cols, PF);
	}
}

// reduce_partials writes out[e] = the sum of part[e n .. e n + n) in index order, for e <
// count: a batch element's FEDAUDIT_PARTIALS partial sums (n = FEDAUDIT_PARTIALS), or first a
// partial's fold pieces (n = fold, count = batch FEDAUDIT_PARTIALS).
extern "C" __global__ void reduce_partials(double* out, const double* part, i64 count, i64 n) {
	GRID_STRIDE(e, count) {
		const double* p = part + e * n;
		double s = 0;
		for (i64 q = 0; q < n; q++) s += p[q];
		out[e] = s;
	}
}

// clip_step is one local step: g clipped to norm v (sumsq[b] = ||g_b||^2; v <= 0 disables
// clipping and sumsq is not read), then w -= eta (g + alpha (w - anchor)); with alpha = 0 the
// anchor is not read. A NaN norm makes the step NaN, as on the CPU backend. The clip factor is
// worked out again only when a thread's next value belongs to another batch element: a
// float64 square root and division for every value made the kernel compute-bound (W2 at R
// 1024: about 45% of the memory bandwidth in the fourth sitting). A thread takes LIGHT_BATCH
// of its items at once, loading all their values before it stores any (common.cuh); each
// item is computed as alone, in place too (g = w: an item's values are loaded before its
// store), so the batching changes no bit.
extern "C" __global__ void clip_step(float* w, i64 wbs, const float* g, i64 gbs,
                                     const float* anchor, i64 abs_, const double* sumsq,
                                     float eta, float v, float alpha, i64 cols, i64 batch) {
	const i64 n = batch * cols;
	i64 fb = -1;  // the batch element whose factor s holds
	float s = 1.0f;
	rc_index ix = rc_start((i64)blockIdx.x * blockDim.x + threadIdx.x, (i64)blockDim.x * gridDim.x, 1, cols);
	while (ix.i < n) {
		float* wp[LIGHT_BATCH] = {};
		const float* gp[LIGHT_BATCH] = {};
		const float* ap[LIGHT_BATCH] = {};
		float c[LIGHT_BATCH] = {}, wv[LIGHT_BATCH] = {}, gv[LIGHT_BATCH] = {}, av[LIGHT_BATCH] = {};
		int m = 0;
		UNROLL
		for (int q = 0; q < LIGHT_BATCH; q++) {
			if (ix.i < n) {
				const i64 b = ix.b, j = ix.j;
				if (v > 0.0f && b != fb) {
					s = 1.0f;
					double nb = sqrt(sumsq[b]);
					if (nb > (double)v)
						s = (float)((double)v / nb);
					else if (nb != nb)
						s = __int_as_float(0x7fc00000);  // NaN
					fb = b;
				}
				c[q] = eta * s;
				wp[q] = w + b * wbs + j;
				gp[q] = g + b * gbs + j;
				ap[q] = alpha == 0.0f ? anchor : anchor + b * abs_ + j;
				m = q + 1;
				rc_next(&ix);
			}
		}
		UNROLL
		for (int q = 0; q < LIGHT_BATCH; q++) {
			if (q < m) {
				gv[q] = *gp[q];
				wv[q] = *wp[q];
				av[q] = alpha == 0.0f ? 0.0f : *ap[q];
			}
		}
		UNROLL
		for (int q = 0; q < LIGHT_BATCH; q++) {
			if (q < m) {
				if (alpha == 0.0f) {
					*wp[q] = wv[q] - c[q] * gv[q];
				} else {
					float ea = eta * alpha;
					*wp[q] = wv[q] - (c[q] * gv[q] + ea * (wv[q] - av[q]));
				}
			}
		}
	}
}

// dot2_partials is dot_partials for two inner products per batch element in one launch:
// part[b * 2P + p] are the partial sums of <a_b, b_b> (acols long) and part[b * 2P + P + p]
// those of <c_b, d_b> (ccols long), each split as dot_partials splits.
extern "C" __global__ void __launch_bounds__(256, 2) dot2_partials(double* part, const float* a, i64 abs_, const float* b,
                                         i64 bbs, i64 acols, const float* c, i64 cbs,
                                         const float* d, i64 dbs, i64 ccols, i64 batch) {
	GRID_STRIDE(i, batch * 2 * FEDAUDIT_PARTIALS) {
		i64 e = i / (2 * FEDAUDIT_PARTIALS), q = i % (2 * FEDAUDIT_PARTIALS);
		i64 p = q % FEDAUDIT_PARTIALS;
		const float *x, *y;
		i64 cols;
		if (q < FEDAUDIT_PARTIALS) {
			x = a + e * abs_, y = b + e * bbs, cols = acols;
		} else {
			x = c + e * cbs, y = d + e * dbs, cols = ccols;
		}
		part[i] = partial_dot(x, y, p, cols, FEDAUDIT_PARTIALS);
	}
}

// clip_coef turns the partial sums of dot2_partials into clip factors: n_b is the sum of the
// first inner product plus the sum of the second (each reduced in index order, as
// reduce_partials does), and coef[b] = v / sqrt(n_b) when that is below 1, NaN when n_b is
// NaN, else 1; exactly the host arithmetic it replaces, so the factors stay on the device.
extern "C" __global__ void clip_coef(float* coef, const double* part, float v, i64 batch) {
	GRID_STRIDE(e, batch) {
		const double* p = part + e * 2 * FEDAUDIT_PARTIALS;
		double s1 = 0, s2 = 0;
		for (int q = 0; q < FEDAUDIT_PARTIALS; q++) s1 += p[q];
		for (int q = 0; q < FEDAUDIT_PARTIALS; q++) s2 += p[FEDAUDIT_PARTIALS + q];
		double n = sqrt(s1 + s2);
		float c = 1.0f;
		if (n > (double)v)
			c = (float)((double)v / n);
		else if (n != n)
			c = __int_as_float(0x7fc00000);  // NaN
		coef[e] = c;
	}
}
