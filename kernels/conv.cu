// Image operations of compute.Convolver (the convolutional models of package nn): im2col and
// its adjoint col2im, max and average pooling and their gradients, GroupNorm and its
// gradients, and the block transpose. Images are compute.Images: per batch element C channels
// of H x W pixels of N samples, laid out [C][H][W][N] (the samples innermost, so adjacent
// threads handle adjacent samples and memory), passed as a pointer to batch element 0 and a
// batch stride (0 shares one tensor with the whole batch); matrices as in elementwise.cu.
//
// Every output value is computed by one thread, in the order package internal/imgops fixes for
// it, so im2col, col2im, pooling and transpose give the CPU backend's bits. col2im and the
// pooling gradients gather (one thread per input pixel adds the values that reach it, in the
// contract's order) instead of scattering, which would need atomics and lose the order. Their
// pointers are __restrict__ (an operation's outputs never overlap its inputs: compute.Convolver,
// checked by cuda.Ops), so a thread's loads go out ahead of its stores.
// GroupNorm's float64 sums are split into a fixed number of partial sums per group or channel
// (an argument, not the launch) and reduced in a second pass: independent of the launch, but
// not the CPU's sequential order, so GroupNorm agrees with the CPU to rounding, not bit for bit.
// The direct convolution kernels (conv_direct_wt, conv_direct, conv_direct_dx, conv_direct_dw)
// replace im2col and the products by its patches for small convolutions; they sum in the patch
// form's order, and agree with a backend's patch form to the rounding of its products' own order.
#include "common.cuh"

// md_index is rc_index (common.cuh) for D digits: it walks the flat indices of a grid-stride
// loop over a batch of arrays of D - 1 dimensions and keeps the coordinates up to date by
// additions, d[0] the batch element (unbounded) and d[D - 1] the fastest. The flat index and
// the stride are split by divisions once per thread (md_start); since every digit of the stride
// is below its radix, each step carries at most once into the next digit (md_next).
template <int D>
struct md_index {
	i64 i, s;   // the flat index and the stride
	i64 d[D];   // the digits of i, most significant first
	i64 sd[D];  // the digits of s
	i64 r[D];   // the radices (r[0] is not used)
};

template <int D>
__device__ __forceinline__ md_index<D> md_start(i64 i, i64 s, const i64* radix) {
	md_index<D> x;
	x.i = i;
	x.s = s;
	for (int k = D - 1; k > 0; k--) {
		// Empty shapes run no iteration; 1 avoids dividing by zero before the loop test.
		i64 r = radix[k] > 0 ? radix[k] : 1;
		i64 qi = i / r, qs = s / r;
		x.r[k] = r;
		x.d[k] = i - qi * r;
		x.sd[k] = s - qs * r;
		i = qi;
		s = qs;
	}
	x.r[0] = 0;
	x.d[0] = i;
	x.sd[0] = s;
	return x;
}

template <int D>
__device__ __forceinline__ void md_next(md_index<D>* x) {
	x->i += x->s;
	i64 carry = 0;
	for (int k = D - 1; k > 0; k--) {
		i64 v = x->d[k] + x->sd[k] + carry;
		carry = v >= x->r[k] ? 1 : 0;
		x->d[k] = carry ? v - x->r[k] : v;
	}
	x->d[0] += x->sd[0] + carry;
}

// GRID_STRIDE_MD loops it over the flat indices [0, n) of a space with the D radices in the
// array radix (radix[0], the batch, is not read), it.d[k] the coordinates.
#define GRID_STRIDE_MD(it, D, n, radix)                                                    \
	for (md_index<D> it = md_start<D>((i64)blockIdx.x * blockDim.x + threadIdx.x,         \
	                                  (i64)blockDim.x * gridDim.x, (radix));               \
	     it.i < (i64)(n); md_next(&it))

// GROUP_STRIDE_MD loops it over the rows [0, rows) of a space of D digits (radix as in
// GRID_STRIDE_MD, without the samples) in groups of wd consecutive threads: the kernels below
// whose values are [C][H][W][N] rows of N samples give each row to a group, whose thread lane
// (GROUP_LANE) handles samples lane, lane + wd, ... The row's coordinates and addresses are
// then computed once per row instead of once per value (in these kernels the index arithmetic
// is most of the instructions), and adjacent threads still touch adjacent samples. wd must
// divide the block size (the host's rowGroup: a power of two up to 8 and at most N), so that
// every group is whole; each value is still computed by one thread in the same order, so the
// results do not depend on wd or the launch.
#define GROUP_LANE(wd) (((i64)blockIdx.x * blockDim.x + threadIdx.x) % (wd))
#define GROUP_STRIDE_MD(it, D, rows, radix, wd)                                                \
	for (md_index<D> it = md_start<D>(((i64)blockIdx.x * blockDim.x + threadIdx.x) / (wd),     \
	                                  ((i64)blockDim.x * gridDim.x) / (wd), (radix));          \
	     it.i < (i64)(rows); md_next(&it))

// im2col: cols[b, (c K + i) K + j, (oy OW + ox) N + n] = x[b, c, oy S - P + i, ox S - P + j, n],
// 0 where that lies in the padding. A group of wd threads per row (b, c, i, j, oy, ox): each
// thread writes the samples n = lane, lane + wd, ... of the row, adjacent threads adjacent
// entries.
extern "C" __global__ void im2col(float* __restrict__ cols, i64 ldc, i64 cbs, const float* __restrict__ x, i64 xbs, i64 C,
                                  i64 N, i64 H, i64 W, i64 K, i64 S, i64 P, i64 OH, i64 OW,
                                  i64 batch, i64 wd) {
	const i64 rad[6] = {0, C, K, K, OH, OW};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 6, batch * C * K * K * OH * OW, rad, wd) {
		i64 b = it.d[0], c = it.d[1], i = it.d[2], j = it.d[3], oy = it.d[4], ox = it.d[5];
		i64 iy = oy * S - P + i, ix = ox * S - P + j;
		float* dst = cols + b * cbs + ((c * K + i) * K + j) * ldc + (oy * OW + ox) * N;
		if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
			const float* src = x + b * xbs + ((c * H + iy) * W + ix) * N;
			for (i64 n = lane; n < N; n += wd) dst[n] = src[n];
		} else {
			for (i64 n = lane; n < N; n += wd) dst[n] = 0.0f;
		}
	}
}

// SAMPLES is how many samples a thread of the gathering image kernels (col2im, pool, pool_grad,
// pool_grad_tiled) takes at once: lane, lane + wd, ..., lane + (SAMPLES - 1) wd. Their loads
// are independent, so all are in flight together, where one sample at a time waits for each
// load before the next (the sums and comparisons that follow every load are in order). Each
// sample's value is still computed alone, in the same order, so the bits do not change.
#define SAMPLES 4

// chunk_count is how many of the samples n0, n0 + wd, ... (at most SAMPLES) lie below N:
// counted by comparisons, where a division (64-bit: a call into a software routine) was a
// fifth of col2im's instructions per chunk.
__device__ __forceinline__ int chunk_count(i64 n0, i64 wd, i64 N) {
	int c = 0;
	for (int q = 0; q < SAMPLES; q++) c += n0 + q * wd < N ? 1 : 0;
	return c;
}

// copy_run copies dst[e] = src[e] for e = e0, e0 + WD, ... < hi (a thread's share of a run, in
// a group of WD threads), SAMPLES values at once: their loads, then their stores, at offsets
// the compiler knows, from pointers stepped along the run; a run's values lie in one row of
// patches (OW N of them), so 32-bit counts hold them. With the group's width a run-time value
// each load and store took its own 64-bit index, address and bound: 84 instructions for 4
// values of sm_90 machine code.
template <int WD>
__device__ __forceinline__ void copy_run(float* __restrict__ dst, const float* __restrict__ src, int e0, int hi) {
	const float* s = src + e0;
	float* d = dst + e0;
	int e = e0;
	for (; e + (SAMPLES - 1) * WD < hi; e += SAMPLES * WD, s += SAMPLES * WD, d += SAMPLES * WD) {
		float v[SAMPLES];
		UNROLL
		for (int q = 0; q < SAMPLES; q++) v[q] = s[q * WD];
		UNROLL
		for (int q = 0; q < SAMPLES; q++) d[q * WD] = v[q];
	}
	for (; e < hi; e += WD, s += WD, d += WD) *d = *s;
}

// im2col_rows is im2col for stride 1: a patch row's output positions ox = 0 .. OW-1 read the
// input's pixels ox - P + j, one after another, so the row (b, c, i, j, oy) of cols is one run
// of OW N floats copied from a run of the input's row iy = oy - P + i, with zeros where it lies
// in the padding. A group of wd threads per patch row (b, c, i, j, oy) copies its run, adjacent
// threads adjacent values, SAMPLES values a thread at once; the row's coordinates are worked out
// once for OW N values instead of once for N (im2col's loop over its rows of N samples is 332
// instructions of sm_90 machine code). The same values land in the same places, so the bits
// are im2col's.
extern "C" __global__ void im2col_rows(float* __restrict__ cols, i64 ldc, i64 cbs, const float* __restrict__ x, i64 xbs,
                                       i64 C, i64 N, i64 H, i64 W, i64 K, i64 P, i64 OH, i64 OW,
                                       i64 batch, i64 wd) {
	const i64 rad[5] = {0, C, K, K, OH};
	const i64 lane = GROUP_LANE(wd);
	const i64 len = OW * N;
	GROUP_STRIDE_MD(it, 5, batch * C * K * K * OH, rad, wd) {
		i64 b = it.d[0], c = it.d[1], i = it.d[2], j = it.d[3], oy = it.d[4];
		i64 iy = oy - P + i;
		float* dst = cols + b * cbs + ((c * K + i) * K + j) * ldc + oy * OW * N;
		// The run's values [lo, hi) come from the input (ox from P - j to W + P - j - 1).
		i64 lo = 0, hi = 0;
		if (iy >= 0 && iy < H) {
			i64 oxlo = P - j > 0 ? P - j : 0, oxhi = W + P - j < OW ? W + P - j : OW;
			if (oxhi > oxlo) lo = oxlo * N, hi = oxhi * N;
		}
		// src[e] is the input value of the run's value e, for lo <= e < hi: zeros before and
		// after, the copy between.
		const float* src = x + b * xbs + ((c * H + iy) * W - P + j) * N;
		for (i64 e = lane; e < lo; e += wd) dst[e] = 0.0f;
		switch (wd) {  // the group's width known to the compiler: loads at fixed offsets
		case 8: copy_run<8>(dst, src, (int)(lo + lane), (int)hi); break;
		case 4: copy_run<4>(dst, src, (int)(lo + lane), (int)hi); break;
		case 2: copy_run<2>(dst, src, (int)(lo + lane), (int)hi); break;
		case 1: copy_run<1>(dst, src, (int)(lo + lane), (int)hi); break;
		default:
			for (i64 e0 = lo + lane; e0 < hi; e0 += SAMPLES * wd) {
				float v[SAMPLES];
				UNROLL
				for (int q = 0; q < SAMPLES; q++) v[q] = e0 + q * wd < hi ? src[e0 + q * wd] : 0.0f;
				UNROLL
				for (int q = 0; q < SAMPLES; q++)
					if (e0 + q * wd < hi) dst[e0 + q * wd] = v[q];
			}
		}
		for (i64 e = hi + lane; e < len; e += wd) dst[e] = 0.0f;
	}
}

// col2im, the adjoint of im2col: dx[b, c, y, x, n] is the float32 sum, from 0, of the entries
// of cols that im2col fills from that pixel, in ascending row order of cols (window row i,
// then column j), the order of imgops.Col2im. Each (i, j) reaches the pixel from at most one
// output position: oy = (y + P - i) / S when that divides, so i runs over (y + P) mod S,
// + S, ... while oy falls by one per step. A group of wd threads per pixel row (b, c, y, x),
// each thread adding up SAMPLES of its samples at once; the divisions are 32-bit, once per
// row (pixel coordinates: H + P and W + P are far below 2^32).
extern "C" __global__ void col2im(float* __restrict__ dx, i64 dxbs, const float* __restrict__ cols, i64 ldc, i64 cbs,
                                  i64 C, i64 N, i64 H, i64 W, i64 K, i64 S, i64 P, i64 OH,
                                  i64 OW, i64 batch, i64 wd) {
	const i64 rad[4] = {0, C, H, W};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * C * H * W, rad, wd) {
		i64 b = it.d[0], c = it.d[1], y = it.d[2], xx = it.d[3];
		u32 ty = (u32)(y + P), tx = (u32)(xx + P), s = (u32)S;
		u32 i0 = ty % s, j0 = tx % s;
		i64 oy0 = (i64)(ty / s), ox0 = (i64)(tx / s);
		const float* col = cols + b * cbs;
		const i64 jstep = S * ldc - N;
		float* dst = dx + b * dxbs + ((c * H + y) * W + xx) * N;
		for (i64 n0 = lane; n0 < N; n0 += SAMPLES * wd) {
			const int cnt = chunk_count(n0, wd, N);
			float acc[SAMPLES];
			for (int q = 0; q < SAMPLES; q++) acc[q] = 0.0f;
			// The entry of (i, j) is a pointer stepped from (i, j0): the next j (j + S, ox - 1) is
			// S rows of cols on and one pixel back, where a 64-bit product and sum per entry were
			// most of the loop's instructions.
			for (int i = (int)i0, oy = (int)oy0; i < (int)K && oy >= 0; i += (int)S, oy--) {
				if (oy >= (int)OH) continue;
				const float* src = col + ((c * K + i) * K + j0) * ldc + ((i64)oy * OW + ox0) * N + n0;
				for (int j = (int)j0, ox = (int)ox0; j < (int)K && ox >= 0; j += (int)S, ox--, src += jstep) {
					if (ox >= (int)OW) continue;
					for (int q = 0; q < SAMPLES; q++)
						if (q < cnt) acc[q] += src[q * (int)wd];
				}
			}
			for (int q = 0; q < SAMPLES; q++)
				if (q < cnt) dst[n0 + q * wd] = acc[q];
		}
	}
}

// window_argmax is imgops' window rule for cnt <= SAMPLES samples at once (sample q at src +
// q wd): bi[q] is the pixel i W + j of sample q's first maximum in the K x K window at (y0,
// x0), in row-major order, padding excluded (a NaN wins only as the window's first pixel, as
// with Go's >), or -1 when the window lies entirely in the padding; best[q] is its value and
// wi[q] its place in the window, (i - y0) K + (j - x0). src is a channel of the first sample:
// pixel (i, j) at (i W + j) N. The offsets are 32-bit, a channel's plane holding fewer than
// 2^31 values (cuda.Ops checks it): a 64-bit product and sum per pixel were most of the loop's
// instructions.
__device__ __forceinline__ void window_argmax(const float* src, int wd, int cnt, int H, int W, int N, int K,
                                              int y0, int x0, int* bi, float* best, int* wi) {
	const int ylo = y0 > 0 ? y0 : 0, yhi = y0 + K < H ? y0 + K : H;
	const int xlo = x0 > 0 ? x0 : 0, xhi = x0 + K < W ? x0 + K : W;
	for (int q = 0; q < SAMPLES; q++) {
		best[q] = 0.0f;
		bi[q] = -1;
		wi[q] = -1;
	}
	for (int i = ylo; i < yhi; i++) {
		const float* p = src + (u32)(i * W + xlo) * (u32)N;  // stepped along the row
		for (int j = xlo; j < xhi; j++, p += N) {
			float v[SAMPLES];
			for (int q = 0; q < SAMPLES; q++) v[q] = q < cnt ? p[q * wd] : 0.0f;
			for (int q = 0; q < SAMPLES; q++) {
				if (q < cnt && (bi[q] < 0 || v[q] > best[q])) {
					best[q] = v[q];
					bi[q] = i * W + j;
					wi[q] = (i - y0) * K + (j - x0);
				}
			}
		}
	}
}

// pool: y[b, c, oy, ox, n] is the window's first maximum (avg = 0; minus infinity for a window
// entirely in the padding, which nn's layer specs rule out) or the float32 sum of its pixels in
// row-major order times 1/(K K) (avg = 1: padding counts as zeros), as imgops.MaxPool and
// AvgPool. With idx (max pooling whose windows tile the image, K K <= 256: cuda.Ops.PoolKeep)
// it also writes the maximum's place in its window, (i - y0) K + (j - x0), as one byte at
// idx[(((b C + c) OH + oy) OW + ox) N + n], for pool_grad_kept. With relu (max pooling only:
// cuda.Ops.PoolKeepReLU), y is then activate's ReLU of the maximum, max(y, 0) as Go's max.
extern "C" __global__ void pool(int avg, float* __restrict__ y, i64 ybs, const float* __restrict__ x, i64 xbs,
                                unsigned char* __restrict__ idx, int relu, i64 C, i64 N, i64 H, i64 W, i64 K, i64 S, i64 P,
                                i64 OH, i64 OW, i64 batch, i64 wd) {
	const i64 rad[4] = {0, C, OH, OW};
	const i64 lane = GROUP_LANE(wd);
	float inv = 1.0f / (float)(K * K);
	GROUP_STRIDE_MD(it, 4, batch * C * OH * OW, rad, wd) {
		i64 b = it.d[0], c = it.d[1], oy = it.d[2], ox = it.d[3];
		i64 y0 = oy * S - P, x0 = ox * S - P;
		i64 ylo = y0 > 0 ? y0 : 0, yhi = y0 + K < H ? y0 + K : H;
		i64 xlo = x0 > 0 ? x0 : 0, xhi = x0 + K < W ? x0 + K : W;
		float* dst = y + b * ybs + ((c * OH + oy) * OW + ox) * N;
		for (i64 n0 = lane; n0 < N; n0 += SAMPLES * wd) {
			const int cnt = chunk_count(n0, wd, N);
			const float* src = x + b * xbs + c * H * W * N + n0;
			float v[SAMPLES];
			if (avg) {
				for (int q = 0; q < SAMPLES; q++) v[q] = 0.0f;
				for (int i = (int)ylo; i < (int)yhi; i++) {
					// as window_argmax: 32-bit offsets, a pointer stepped along the row
					const float* p = src + (u32)(i * (int)W + (int)xlo) * (u32)N;
					for (int j = (int)xlo; j < (int)xhi; j++, p += N) {
						for (int q = 0; q < SAMPLES; q++)
							if (q < cnt) v[q] += p[q * (int)wd];
					}
				}
				for (int q = 0; q < SAMPLES; q++) v[q] = v[q] * inv;
			} else {
				int bi[SAMPLES], wi[SAMPLES];
				float best[SAMPLES];
				window_argmax(src, (int)wd, cnt, (int)H, (int)W, (int)N, (int)K, (int)y0, (int)x0, bi, best, wi);
				for (int q = 0; q < SAMPLES; q++)
					v[q] = q < cnt && bi[q] >= 0 ? best[q] : __int_as_float((int)0xff800000u);
				if (relu)
					for (int q = 0; q < SAMPLES; q++) v[q] = act_value(ACT_RELU, v[q]);
				if (idx) {
					unsigned char* id = idx + (((b * C + c) * OH + oy) * OW + ox) * N + n0;
					for (int q = 0; q < SAMPLES; q++)
						if (q < cnt) id[q * wd] = (unsigned char)wi[q];
				}
			}
			for (int q = 0; q < SAMPLES; q++)
				if (q < cnt) dst[n0 + q * wd] = v[q];
		}
	}
}

// pool_grad: dx[b, c, y, x, n] is the float32 sum, from 0, of what the windows containing the
// pixel send it, windows in row-major order (imgops.MaxPoolGrad, AvgPoolGrad): with max
// pooling dy of each window whose first maximum (recomputed from x) is this pixel, with
// average pooling dy / (K K) of every window. The windows containing y are oy S - P <= y <
// oy S - P + K: oy from ceil((y + P + 1 - K) / S) to floor((y + P) / S) (32-bit divisions,
// once per pixel row). A group of wd threads per pixel row (b, c, y, x), each thread SAMPLES
// of its samples at once.
extern "C" __global__ void pool_grad(int avg, float* __restrict__ dx, i64 dxbs, const float* __restrict__ x, i64 xbs,
                                     const float* __restrict__ dy, i64 dybs, i64 C, i64 N, i64 H, i64 W,
                                     i64 K, i64 S, i64 P, i64 OH, i64 OW, i64 batch, i64 wd) {
	const i64 rad[4] = {0, C, H, W};
	const i64 lane = GROUP_LANE(wd);
	float inv = 1.0f / (float)(K * K);
	u32 s = (u32)S, k = (u32)K;
	GROUP_STRIDE_MD(it, 4, batch * C * H * W, rad, wd) {
		i64 b = it.d[0], c = it.d[1], y = it.d[2], xx = it.d[3];
		u32 ty = (u32)(y + P), tx = (u32)(xx + P);
		i64 oylo = ty + 1 > k ? (i64)((ty + 1 - k + s - 1) / s) : 0;
		i64 oxlo = tx + 1 > k ? (i64)((tx + 1 - k + s - 1) / s) : 0;
		i64 oyhi = (i64)(ty / s), oxhi = (i64)(tx / s);
		if (oyhi > OH - 1) oyhi = OH - 1;
		if (oxhi > OW - 1) oxhi = OW - 1;
		i64 me = y * W + xx;
		float* dst = dx + b * dxbs + (c * H * W + me) * N;
		for (i64 n0 = lane; n0 < N; n0 += SAMPLES * wd) {
			const int cnt = chunk_count(n0, wd, N);
			const float* src = x + b * xbs + c * H * W * N + n0;
			const float* g = dy + b * dybs + c * OH * OW * N + n0;
			float acc[SAMPLES];
			for (int q = 0; q < SAMPLES; q++) acc[q] = 0.0f;
			for (i64 oy = oylo; oy <= oyhi; oy++) {
				// 32-bit offsets in the channel's plane, a pointer stepped along the row
				const float* gw = g + (u32)((int)(oy * OW + oxlo)) * (u32)N;
				for (i64 ox = oxlo; ox <= oxhi; ox++, gw += N) {
					if (avg) {
						for (int q = 0; q < SAMPLES; q++)
							if (q < cnt) acc[q] += gw[q * wd] * inv;
					} else {
						int bi[SAMPLES], wi[SAMPLES];
						float best[SAMPLES];
						window_argmax(src, (int)wd, cnt, (int)H, (int)W, (int)N, (int)K, (int)(oy * S - P),
						              (int)(ox * S - P), bi, best, wi);
						for (int q = 0; q < SAMPLES; q++)
							if (q < cnt && bi[q] == me) acc[q] += gw[q * wd];
					}
				}
			}
			for (int q = 0; q < SAMPLES; q++)
				if (q < cnt) dst[n0 + q * wd] = acc[q];
		}
	}
}

// pool_grad_tiled is pool_grad for max pooling whose windows tile the image exactly (S = K,
// P = 0, H = OH K, W = OW K), LeNet-5's: every pixel lies in one window, so pool_grad's sum
// from 0 over the windows containing it is 0 + dy at the window's first maximum and 0 at its
// other pixels. A group of wd threads per window (b, c, oy, ox), each thread SAMPLES of its
// samples at once: the window's maximum is found once for its K K pixels instead of once
// per pixel, and its dy read once.
extern "C" __global__ void pool_grad_tiled(float* __restrict__ dx, i64 dxbs, const float* __restrict__ x, i64 xbs,
                                           const float* __restrict__ dy, i64 dybs, i64 C, i64 N, i64 H,
                                           i64 W, i64 K, i64 OH, i64 OW, i64 batch, i64 wd) {
	const i64 rad[4] = {0, C, OH, OW};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * C * OH * OW, rad, wd) {
		i64 b = it.d[0], c = it.d[1], oy = it.d[2], ox = it.d[3];
		i64 y0 = oy * K, x0 = ox * K;
		const float* src = x + b * xbs + c * H * W * N;
		float* dst = dx + b * dxbs + c * H * W * N;
		const float* g = dy + b * dybs + ((c * OH + oy) * OW + ox) * N;
		for (i64 n0 = lane; n0 < N; n0 += SAMPLES * wd) {
			const int cnt = chunk_count(n0, wd, N);
			int bi[SAMPLES], wi[SAMPLES];
			float best[SAMPLES];
			window_argmax(src + n0, (int)wd, cnt, (int)H, (int)W, (int)N, (int)K, (int)y0, (int)x0, bi, best, wi);
			float gv[SAMPLES];
			for (int q = 0; q < SAMPLES; q++) gv[q] = q < cnt ? 0.0f + g[n0 + q * wd] : 0.0f;
			for (i64 i = y0; i < y0 + K; i++) {
				for (i64 j = x0; j < x0 + K; j++) {
					float* d = dst + (i * W + j) * N + n0;
					for (int q = 0; q < SAMPLES; q++)
						if (q < cnt) d[q * wd] = i * W + j == bi[q] ? gv[q] : 0.0f;
				}
			}
		}
	}
}

// pool_grad_kept is pool_grad_tiled with each window's first maximum read from idx, where pool
// wrote it for the same x (cuda.Ops.PoolGradKept): the same values written, without reading x
// again (LeNet-5's max pooling reads its K K inputs a window to find the maximum a second
// time; a byte a window instead). With y (pool's output with relu: cuda.Ops.PoolGradKeptReLU),
// dy is first passed back through the ReLU as activate_grad does, 0 where its input was <= 0:
// where y is, for y = max(input, 0) (a NaN input gives a NaN y, and both pass dy).
extern "C" __global__ void __launch_bounds__(256, 3) pool_grad_kept(float* __restrict__ dx, i64 dxbs, const unsigned char* __restrict__ idx,
                                          const float* __restrict__ dy, i64 dybs, const float* __restrict__ y,
                                          i64 ybs, i64 C, i64 N, i64 H, i64 W, i64 K, i64 OH, i64 OW, i64 batch, i64 wd) {
	const i64 rad[4] = {0, C, OH, OW};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * C * OH * OW, rad, wd) {
		i64 b = it.d[0], c = it.d[1], oy = it.d[2], ox = it.d[3];
		i64 y0 = oy * K, x0 = ox * K;
		float* dst = dx + b * dxbs + c * H * W * N;
		const float* g = dy + b * dybs + ((c * OH + oy) * OW + ox) * N;
		const unsigned char* id = idx + (((b * C + c) * OH + oy) * OW + ox) * N;
		const float* yr = y ? y + b * ybs + ((c * OH + oy) * OW + ox) * N : y;
		for (i64 n0 = lane; n0 < N; n0 += SAMPLES * wd) {
			const int cnt = chunk_count(n0, wd, N);
			int li[SAMPLES];
			float gv[SAMPLES];
			for (int q = 0; q < SAMPLES; q++) {
				li[q] = q < cnt ? (int)id[n0 + q * wd] : -1;
				gv[q] = q < cnt ? 0.0f + (yr ? act_grad(ACT_RELU, yr + n0 + q * wd, 0, g[n0 + q * wd]) : g[n0 + q * wd]) : 0.0f;
			}
			// 32-bit offsets within the channel's plane (cuda.Ops checks that it holds fewer
			// than 2^31 values), a row's pointer once per window row.
			for (int i = 0; i < (int)K; i++) {
				float* d = dst + (u32)(((int)y0 + i) * (int)W + (int)x0) * (u32)N + n0;
				for (int j = 0; j < (int)K; j++, d += N) {
					for (int q = 0; q < SAMPLES; q++)
						if (q < cnt) d[q * wd] = i * (int)K + j == li[q] ? gv[q] : 0.0f;
				}
			}
		}
	}
}

// transpose_blocks: dst block (j, i) = src block (i, j), blocks of block values; src is rows x
// cols blocks (block (i, j) at i lds + j block), dst cols x rows (block (j, i) at j ldd +
// i block). One thread per value of dst: writes are contiguous, reads of block = 1 are not
// (a tiled transpose would stage tiles in shared memory, which these kernels do not use).
extern "C" __global__ void transpose_blocks(float* __restrict__ dst, i64 ldd, i64 dbs, const float* __restrict__ src,
                                            i64 lds, i64 sbs, i64 rows, i64 cols, i64 block,
                                            i64 batch) {
	const i64 rad[4] = {0, cols, rows, block};
	GRID_STRIDE_MD(it, 4, batch * cols * rows * block, rad) {
		i64 b = it.d[0], j = it.d[1], i = it.d[2], k = it.d[3];
		dst[b * dbs + j * ldd + i * block + k] = src[b * sbs + i * lds + j * block + k];
	}
}

// GroupNorm. A group is cg = C / groups consecutive channels of one sample, cnt = cg hw values
// (hw = H W): value (channel g cg + cl, pixel px, sample n) is at ((g cg + cl) hw + px) N + n,
// so the group's values of sample n are e N + n for e = cl hw + px.
// Statistics are indexed by row r = (b groups + g) N + n, rows = batch N groups of them; stats
// holds mean[r] then rstd[rows + r]. The sample is the fastest coordinate, as in the images, so
// that the threads of a row of samples (gn_forward, gn_grad_x) read adjacent statistics: with r
// = (b N + n) groups + g, imgops.GroupStats' order, a warp's reads of the statistics were 32
// values groups doubles apart, one memory sector each. Each row's sums are the same whatever
// its number, so the numbering changes no bit.
//
// A partial sum p of a group adds the values e = p, p + parts, ... of the group in order, in
// float64; part[r parts + p] holds those of x, part[rows parts + r parts + p] those of x^2.
// Where the channel of e matters (gamma), the step e += parts is kept as (channel, pixel) by
// additions.

// gn_step advances (hi, lo), an index hi span + lo with lo < span, by (dhi, dlo) (dlo < span).
__device__ __forceinline__ void gn_step(i64* hi, i64* lo, i64 dhi, i64 dlo, i64 span) {
	*lo += dlo;
	*hi += dhi;
	if (*lo >= span) {
		*lo -= span;
		(*hi)++;
	}
}

// gn_split writes e = hi span + lo for e = p < parts, without dividing.
__device__ __forceinline__ void gn_split(i64 p, i64 span, i64* hi, i64* lo) {
	*hi = 0;
	*lo = p;
	while (*lo >= span) {
		*lo -= span;
		(*hi)++;
	}
}

// gn_stats_partials writes the partial sums of x and x^2 of every group of every sample. The
// threads walk (b, g, p, n) with the sample fastest, so that adjacent threads read adjacent
// samples of the same values (one 128-byte line per warp and value; with p fastest each
// thread's read was a line of its own), and write their sums at row r's slot p.
extern "C" __global__ void gn_stats_partials(double* part, const float* x, i64 xbs, i64 cg,
                                             i64 N, i64 hw, i64 groups, i64 parts, i64 batch) {
	i64 rows = batch * N * groups, cnt = cg * hw;
	const i64 rad[4] = {0, groups, parts, N};
	GRID_STRIDE_MD(it, 4, rows * parts, rad) {
		i64 b = it.d[0], g = it.d[1], p = it.d[2], n = it.d[3];
		i64 slot = ((b * groups + g) * N + n) * parts + p;
		const float* base = x + b * xbs + g * cg * hw * N + n;
		double s = 0, ss = 0;
		i64 e = p;
		// Four values' loads issued before their sums (the same sums in the same order).
		for (; e + 3 * parts < cnt; e += 4 * parts) {
			float v4[4];
			UNROLL for (int u = 0; u < 4; u++) v4[u] = base[(e + u * parts) * N];
			UNROLL for (int u = 0; u < 4; u++) {
				double v = v4[u];
				s += v;
				ss += v * v;
			}
		}
		for (; e < cnt; e += parts) {
			double v = base[e * N];
			s += v;
			ss += v * v;
		}
		part[slot] = s;
		part[rows * parts + slot] = ss;
	}
}

// gn_stats reduces the partial sums in index order: mean = s / cnt and rstd = 1 / sqrt(max(ss
// / cnt - mean^2, 0) + eps), in float64, as imgops.GroupStats (max as Go's: NaN stays NaN).
extern "C" __global__ void gn_stats(double* stats, const double* part, i64 rows, i64 parts,
                                    i64 cnt, float eps) {
	double c = (double)cnt;
	GRID_STRIDE(r, rows) {
		const double* ps = part + r * parts;
		const double* pss = part + rows * parts + r * parts;
		double s = 0, ss = 0;
		for (i64 q = 0; q < parts; q++) s += ps[q];
		for (i64 q = 0; q < parts; q++) ss += pss[q];
		double mu = s / c;
		double v = ss / c - mu * mu;
		if (v == v && v <= 0.0) v = 0.0;
		stats[r] = mu;
		stats[rows + r] = 1.0 / sqrt(v + (double)eps);
	}
}

// gn_row is a row of N samples of GroupNorm's row kernels (gn_forward, gn_grad_x), walked as
// (b, group, channel in the group, pixel) by their GROUP_STRIDE_MD: its batch element b,
// channel c, first statistics row r0 = (b groups + group) N and offset o of the row in its
// batch element's [C][H W][N] values.
struct gn_row {
	i64 b, c, r0, o;
};

__device__ __forceinline__ gn_row gn_row_at(const md_index<4>& it, i64 cg, i64 N, i64 hw, i64 groups) {
	gn_row w;
	w.b = it.d[0];
	w.c = it.d[1] * cg + it.d[2];
	w.r0 = (w.b * groups + it.d[1]) * N;
	w.o = (w.c * hw + it.d[3]) * N;
	return w;
}

// gn_forward: y = a x + b with a = float32(rstd) gamma[c] and b = beta[c] - float32(mean rstd)
// gamma[c], in float32, as imgops.GroupNorm. gamma and beta are rows of C per batch element. A
// group of wd threads per row (b, c, pixel) of N samples: the row's coordinates, gamma and beta
// once per row, the statistics of adjacent samples adjacent; the pointers are __restrict__ as
// the other image kernels' (cuda.Ops refuses an overlap), so a thread's loads go out before
// its stores. (One thread per value, with its five coordinates and every address recomputed,
// took about 130 instructions a value on sm_90 and ran W3's GroupNorm at about a seventh of
// the memory bandwidth.) With relu, y = max(y, 0) as activate's ReLU (Go's max: NaN kept, -0
// to +0): GroupNorm and the ReLU after it in one pass (compute.GroupNormReLUer).
extern "C" __global__ void gn_forward(float* __restrict__ y, i64 ybs, const float* __restrict__ x, i64 xbs,
                                      const float* __restrict__ gamma, i64 gbs, const float* __restrict__ beta,
                                      i64 bbs, const double* __restrict__ stats, i64 cg, i64 N, i64 hw,
                                      i64 groups, i64 batch, int relu, i64 wd) {
	const i64 rows = batch * N * groups;
	const i64 rad[4] = {0, groups, cg, hw};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * groups * cg * hw, rad, wd) {
		const gn_row w = gn_row_at(it, cg, N, hw, groups);
		const i64 b = w.b, c = w.c, r0 = w.r0, o = w.o;
		const double* mus = stats + r0;
		const double* rss = stats + rows + r0;
		const float gm = gamma[b * gbs + c], bt = beta[b * bbs + c];
		const float* xr = x + b * xbs + o;
		float* yr = y + b * ybs + o;
		for (i64 n = lane; n < N; n += wd) {
			double mu = mus[n], rs = rss[n];
			float a = (float)rs * gm;
			float sh = bt - (float)(mu * rs) * gm;
			float v = a * xr[n] + sh;
			yr[n] = relu ? go_maxf(v, 0.0f) : v;
		}
	}
}

// relu_masked is dy as the ReLU after GroupNorm passes it back, read from the ReLU's output
// post = mask[i] (activate_grad's rule: 0 where the input was <= 0, which is where post <= 0,
// NaN kept), or dy itself without a mask: the gradient kernels of compute.GroupNormReLUer.
__device__ __forceinline__ float relu_masked(float dy, const float* mask, i64 i) {
	return mask && mask[i] <= 0.0f ? 0.0f : dy;
}

// GroupNorm's gradients need, per (batch element b, sample n, group g), the means over the group
// of gy = d gamma[c] and of gy xhat (for dx), and per channel c of b the sums of d xhat
// (dgamma) and of d (dbeta), with d = dy as the ReLU after the GroupNorm passes it
// (relu_masked) and xhat = (x - mean) rstd of the sample's group. All of them follow from two
// sums per (b, c, n) over the channel's pixels: of d and of d xhat. gn_grad_sums takes those
// in one pass over x, dy and the mask (the previous form read them twice, once for the groups'
// sums and once for the channels'), in P runs of pixels (kernels.GroupNormPixelSlices, from hw
// alone), gn_grad_fold adds the runs, and gn_grad_reduce the folds: every sum in float64 and in
// a fixed order that depends on the shape alone, never on the launch.

// gn_grad_sums writes, for slot = ((b C + c) P + p) N + n, the sums of d (sums[slot]) and of d
// xhat (sums[total + slot], total = batch C P N) over the p-th run of ceil(hw / P) consecutive
// pixels of channel c, sample n. The sample is the fastest coordinate: a warp reads a line of
// adjacent samples of each pixel.
extern "C" __global__ void gn_grad_sums(double* sums, const float* __restrict__ x, i64 xbs,
                                        const float* __restrict__ dy, i64 dybs,
                                        const float* __restrict__ mask, i64 mbs,
                                        const double* __restrict__ stats, i64 cg, i64 N, i64 hw,
                                        i64 groups, i64 P, i64 batch) {
	const i64 C = cg * groups, rows = batch * N * groups, total = batch * C * P * N;
	const i64 run = (hw + P - 1) / P;
	const i64 rad[4] = {0, C, P, N};
	GRID_STRIDE_MD(it, 4, total, rad) {
		i64 b = it.d[0], c = it.d[1], p = it.d[2], n = it.d[3];
		i64 r = (b * groups + c / cg) * N + n;
		double mu = stats[r], rs = stats[rows + r];
		i64 px0 = p * run;
		i64 len = hw - px0 < run ? hw - px0 : run;
		i64 off = (c * hw + px0) * N + n;
		const float* xr = x + b * xbs + off;
		const float* dr = dy + b * dybs + off;
		const float* mk = mask ? mask + b * mbs + off : mask;
		double sd = 0, sdx = 0;
		i64 k = 0, e = 0;
		// Four pixels' loads issued before their sums, so that a thread waits for memory once
		// per four pixels, not once per pixel; the sums' order is unchanged.
		for (; k + 4 <= len; k += 4, e += 4 * N) {
			float dv[4], xv[4];
			UNROLL for (int u = 0; u < 4; u++) {
				dv[u] = relu_masked(dr[e + u * N], mk, e + u * N);
				xv[u] = xr[e + u * N];
			}
			UNROLL for (int u = 0; u < 4; u++) {
				double d = dv[u];
				sd += d;
				sdx += d * (((double)xv[u] - mu) * rs);
			}
		}
		for (; k < len; k++, e += N) {
			double d = relu_masked(dr[e], mk, e);
			sd += d;
			sdx += d * (((double)xr[e] - mu) * rs);
		}
		sums[it.i] = sd;
		sums[total + it.i] = sdx;
	}
}

// gn_grad_fold adds each (b, c, n)'s P run sums in run order: folded[(b C + c) N + n] the sum of
// d over the channel's pixels of the sample, folded[batch C N + (b C + c) N + n] that of d xhat.
// (With P = 1 the sums are their own folds and this launch is left out.)
extern "C" __global__ void gn_grad_fold(double* folded, const double* __restrict__ sums, i64 C,
                                        i64 N, i64 P, i64 batch) {
	const i64 bcn = batch * C * N, total = bcn * P;
	const i64 rad[2] = {0, N};
	GRID_STRIDE_MD(it, 2, bcn, rad) {
		const double* s = sums + it.d[0] * P * N + it.d[1];
		double sd = 0, sdx = 0;
		for (i64 p = 0; p < P; p++) {
			sd += s[p * N];
			sdx += s[total + p * N];
		}
		folded[it.i] = sd;
		folded[bcn + it.i] = sdx;
	}
}

// gn_grad_reduce: with want_dx, for r = (b groups + g) N + n, gstats[r] = the mean over the
// group of gy = d gamma[c] and gstats[rows + r] that of gy xhat: the group's channels' folds
// times gamma[c], in channel order, over cnt = cg hw (imgops.GroupNormGradX's means); always
// dgamma[b, c] and dbeta[b, c] (rows of C per batch element), the channel's folds of d xhat and
// of d added over the samples in order, rounded to float32 (imgops.GroupNormGradParams).
extern "C" __global__ void gn_grad_reduce(double* gstats, float* dgamma, i64 dgbs, float* dbeta,
                                          i64 dbbs, const double* __restrict__ folded,
                                          const float* __restrict__ gamma, i64 gbs, i64 cg, i64 N,
                                          i64 hw, i64 groups, i64 batch, int want_dx) {
	const i64 rows = batch * N * groups, C = cg * groups, bcn = batch * C * N;
	const double cnt = (double)(cg * hw);
	const i64 start = (i64)blockIdx.x * blockDim.x + threadIdx.x, stride = (i64)blockDim.x * gridDim.x;
	if (want_dx) {
		const i64 rad[3] = {0, groups, N};
		for (md_index<3> it = md_start<3>(start, stride, rad); it.i < rows; md_next(&it)) {
			i64 b = it.d[0], g = it.d[1], n = it.d[2];
			const float* gb = gamma + b * gbs + g * cg;
			const double* f = folded + (b * C + g * cg) * N + n;
			double sg = 0, sgx = 0;
			for (i64 cl = 0; cl < cg; cl++) {
				double gm = (double)gb[cl];
				sg += gm * f[cl * N];
				sgx += gm * f[bcn + cl * N];
			}
			gstats[it.i] = sg / cnt;
			gstats[rows + it.i] = sgx / cnt;
		}
	}
	const i64 rad[2] = {0, C};
	for (md_index<2> it = md_start<2>(start, stride, rad); it.i < batch * C; md_next(&it)) {
		const double* f = folded + it.i * N;
		double dbe = 0, dga = 0;
		for (i64 n = 0; n < N; n++) {
			dbe += f[n];
			dga += f[bcn + n];
		}
		dgamma[it.d[0] * dgbs + it.d[1]] = (float)dga;
		dbeta[it.d[0] * dbbs + it.d[1]] = (float)dbe;
	}
}

// gn_grad_x: dx = float32(rstd (dy gamma[c] - mean(gy) - xhat mean(gy xhat))) with xhat = (x -
// mean) rstd, in float64, as imgops.GroupNormGradX. A group of wd threads per row (b, c,
// pixel) of N samples, as gn_forward. With a mask, dy as relu_masked passes it.
extern "C" __global__ void __launch_bounds__(256, 3) gn_grad_x(float* __restrict__ dx, i64 dxbs, const float* __restrict__ x, i64 xbs,
                                     const float* __restrict__ gamma, i64 gbs, const float* __restrict__ dy,
                                     i64 dybs, const float* __restrict__ mask, i64 mbs,
                                     const double* __restrict__ stats,
                                     const double* __restrict__ gstats, i64 cg, i64 N, i64 hw,
                                     i64 groups, i64 batch, i64 wd) {
	const i64 rows = batch * N * groups;
	const i64 rad[4] = {0, groups, cg, hw};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * groups * cg * hw, rad, wd) {
		const gn_row w = gn_row_at(it, cg, N, hw, groups);
		const i64 b = w.b, c = w.c, r0 = w.r0, o = w.o;
		const double* mus = stats + r0;
		const double* rss = stats + rows + r0;
		const double* mgs = gstats + r0;
		const double* mgxs = gstats + rows + r0;
		const double gm = gamma[b * gbs + c];
		const float* xr = x + b * xbs + o;
		const float* dr = dy + b * dybs + o;
		const float* mk = mask ? mask + b * mbs + o : mask;
		float* dxr = dx + b * dxbs + o;
		for (i64 n = lane; n < N; n += wd) {
			double rs = rss[n];
			double xh = ((double)xr[n] - mus[n]) * rs;
			dxr[n] = (float)(rs * ((double)relu_masked(dr[n], mk, n) * gm - mgs[n] - xh * mgxs[n]));
		}
	}
}

// The direct convolution (cuda.Ops: by default, unless Options.PatchConv or NoDirectConv): a small convolution and its gradients
// computed from the images themselves, without im2col's patches or a matrix product. The sums
// are those of the patch form in the same order, each term added by a fused multiply-add: over
// the patch rows k = (c K + i) K + j for the output, over the output channels and then the
// window offsets (col2im's order) for the input gradient, over the pixels and samples for the
// weight gradient. Offsets inside a batch element are 32-bit (the host takes a convolution only
// where a batch element's images hold fewer than 2^31 values: cuda.Ops.DirectConv); a
// batch element's own offset is 64-bit.
//
// These kernels are bound by the instructions they issue per product, so each thread keeps a
// tile of products whose operands it loads once: conv_direct CONV_PX adjacent output pixels of
// a sample by 8 or 16 output channels, conv_direct_dx CONV_DX_PX adjacent input pixels (at
// stride 1) by CONV_CT input channels, conv_direct_dw CONV_COT output channels by a window
// row's columns. The weights come from conv_direct_wt's copy, laid out so that a thread reads
// four adjacent ones in one 16-byte load, the same four for every thread of a warp. None of
// this changes what is summed or the order, only which thread computes which values.
#define CONV_PX 4
#define CONV_DX_PX 4
#define CONV_CT 8
#define CONV_COT 8
#define CONV_JT 8

// conv_direct_wt copies the weights w (per batch element CO x (C K K), row stride ldw, batch
// stride wbs) for the direct kernels, zeros in the padding:
//   mode 0 (conv_direct):    wt[b, k, co] = w[b, co, k],  k < C K K, co < CP (CO rounded up);
//   mode 1 (conv_direct_dx): wt[b, co, i K + j, c] = w[b, co, (c K + i) K + j], c < CP (C
//                            rounded up to CONV_CT).
// Batch stride of wt: C K K CP (mode 0) or CO K K CP (mode 1). One thread per value of wt.
extern "C" __global__ void conv_direct_wt(float* __restrict__ wt, const float* __restrict__ w, i64 ldw,
                                          i64 wbs, i64 CO, i64 C, i64 K, i64 CP, i64 mode, i64 batch) {
	const i64 KK = K * K;
	const i64 outer = mode == 0 ? C * KK : CO * KK;
	const i64 rad[3] = {0, outer, CP};
	GRID_STRIDE_MD(it, 3, batch * outer * CP, rad) {
		i64 b = it.d[0], a = it.d[1], p = it.d[2];
		float v = 0.0f;
		if (mode == 0) {
			if (p < CO) v = w[b * wbs + p * ldw + a];  // a = k, p = co
		} else {
			i64 co = a / KK, ij = a - co * KK;  // p = c
			if (p < C) v = w[b * wbs + co * ldw + p * KK + ij];
		}
		wt[it.i] = v;
	}
}

// conv_direct_fma adds one patch row k to a tile: acc[t][q] = fmaf(w[co0 + t, k], v[q],
// acc[t][q]), the weights read four at a time from wk, conv_direct_wt's copy at (k, co0).
template <int T>
__device__ __forceinline__ void conv_direct_fma(float (&acc)[T][CONV_PX], const float* wk, const float* v) {
	for (int m = 0; m < T / 4; m++) {
		const float4 w4 = load4(wk + 4 * m);
		const float ws[4] = {w4.x, w4.y, w4.z, w4.w};
		for (int u = 0; u < 4; u++)
			for (int q = 0; q < CONV_PX; q++) acc[4 * m + u][q] = fmaf(ws[u], v[q], acc[4 * m + u][q]);
	}
}

// conv_direct_store writes a tile's nt channels of its np pixels, each sum plus its bias.
template <int T>
__device__ __forceinline__ void conv_direct_store(float* yb, int plane, const float (&acc)[T][CONV_PX], const float* bb,
                                                  i64 ldb, int co0, int nt, int np, int N) {
	for (int t = 0; t < T; t++) {
		if (t >= nt) break;
		const float bv = bb[(co0 + t) * ldb];
		for (int q = 0; q < CONV_PX; q++)
			if (q < np) yb[t * plane + q * N] = acc[t][q] + bv;
	}
}

// conv_direct_tile computes output channels co0 .. co0 + T - 1 (nt of them real) of CONV_PX
// adjacent output pixels (np of them real) of one sample: acc[t][q] is the float32 sum, from 0,
// over k ascending, of fmaf(w[co0 + t, k], x at (k, pixel q)), then the bias is added. xs is the
// sample's image (channel 0, pixel (0, 0)), wk the weights' copy at (k 0, co0), yb the output
// at (co0, the first pixel).
template <int T>
__device__ __forceinline__ void conv_direct_tile(float* yb, int plane, const float* xs, const float* wk, int CP,
                                                 const float* bb, i64 ldb, int co0, int nt, int np, int C, int N,
                                                 int H, int W, int K, int S, int y0, int x0) {
	float acc[T][CONV_PX];
	for (int t = 0; t < T; t++)
		for (int q = 0; q < CONV_PX; q++) acc[t][q] = 0.0f;
	const u32 SN = (u32)(S * N);
	for (int c = 0; c < C; c++) {
		for (int i = 0; i < K; i++) {
			const int iy = y0 + i;
			const bool rowIn = (u32)iy < (u32)H;
			// The row's pointer once, then 32-bit offsets from it: an address is two
			// instructions, not a 64-bit product and sum.
			const float* rp = xs + (rowIn ? (u32)((c * H + iy) * W) * (u32)N : 0u);
			for (int j = 0; j < K; j++, wk += CP) {
				float v[CONV_PX];
				u32 off = (u32)(x0 + j) * (u32)N;
				for (int q = 0; q < CONV_PX; q++, off += SN) {
					const int ix = x0 + q * S + j;
					v[q] = rowIn && (u32)ix < (u32)W ? rp[off] : 0.0f;
				}
				conv_direct_fma<T>(acc, wk, v);
			}
		}
	}
	conv_direct_store<T>(yb, plane, acc, bb, ldb, co0, nt, np, N);
}

// conv_direct_tile_row is conv_direct_tile at stride 1 for a window of KW columns (K == KW):
// the CONV_PX + KW - 1 inputs of a window row that the run's pixels read are loaded once and
// serve all KW columns, where conv_direct_tile loads CONV_PX of them per column. Same sums in
// the same order.
template <int T, int KW>
__device__ __forceinline__ void conv_direct_tile_row(float* yb, int plane, const float* xs, const float* wk, int CP,
                                                     const float* bb, i64 ldb, int co0, int nt, int np, int C,
                                                     int N, int H, int W, int y0, int x0) {
	float acc[T][CONV_PX];
	for (int t = 0; t < T; t++)
		for (int q = 0; q < CONV_PX; q++) acc[t][q] = 0.0f;
	for (int c = 0; c < C; c++) {
		for (int i = 0; i < KW; i++) {
			const int iy = y0 + i;
			const bool rowIn = (u32)iy < (u32)H;
			float xr[CONV_PX + KW - 1];
			const float* p = xs + (i64)((c * H + (rowIn ? iy : 0)) * W + x0) * N;
			for (int e = 0; e < CONV_PX + KW - 1; e++, p += N)
				xr[e] = rowIn && (u32)(x0 + e) < (u32)W ? *p : 0.0f;
			for (int j = 0; j < KW; j++, wk += CP) conv_direct_fma<T>(acc, wk, xr + j);
		}
	}
	conv_direct_store<T>(yb, plane, acc, bb, ldb, co0, nt, np, N);
}

// conv_direct: y[b, co, oy, ox, n] = (the float32 sum, from 0, over k = (c K + i) K + j
// ascending of w[b, co, k] x[b, c, oy S - P + i, ox S - P + j, n] by fused multiply-adds, a
// padding value being 0) + bias[b, co]: Im2col's patches with a row of ones times [w | bias],
// summed in row order. wt is conv_direct_wt's mode-0 copy of w (row stride CP: CO rounded up
// to 8 when CO <= 8, else to 16), bias CO x 1 with row stride ldb. One thread per run of
// CONV_PX output pixels of a row and a sample (b, oy, ox / CONV_PX, n), the samples fastest,
// computing every output channel, 8 at a time when CO <= 8, else 16.
extern "C" __global__ void __launch_bounds__(256, 2) conv_direct(float* __restrict__ y, i64 ybs, const float* __restrict__ x, i64 xbs,
                                       const float* __restrict__ wt, i64 CP, const float* __restrict__ bias,
                                       i64 ldb, i64 bbs, i64 CO, i64 C, i64 N, i64 H, i64 W, i64 K, i64 S,
                                       i64 P, i64 OH, i64 OW, i64 batch) {
	const i64 OWQ = (OW + CONV_PX - 1) / CONV_PX;
	const i64 rad[4] = {0, OH, OWQ, N};
	const int plane = (int)(OH * OW * N);
	GRID_STRIDE_MD(it, 4, batch * OH * OWQ * N, rad) {
		const i64 b = it.d[0];
		const int oy = (int)it.d[1], ox0 = (int)it.d[2] * CONV_PX, n = (int)it.d[3];
		const int np = (int)OW - ox0 < CONV_PX ? (int)OW - ox0 : CONV_PX;
		const float* xs = x + b * xbs + n;
		const float* wb = wt + b * C * K * K * CP;
		const float* bb = bias + b * bbs;
		float* yb = y + b * ybs + (oy * (int)OW + ox0) * (int)N + n;
		const int y0 = oy * (int)S - (int)P, x0 = ox0 * (int)S - (int)P;
		const bool row5 = K == 5 && S == 1;  // LeNet-5's two convolutions
		if (CO <= 8) {
			if (row5)
				conv_direct_tile_row<8, 5>(yb, plane, xs, wb, (int)CP, bb, ldb, 0, (int)CO, np, (int)C, (int)N, (int)H,
				                           (int)W, y0, x0);
			else
				conv_direct_tile<8>(yb, plane, xs, wb, (int)CP, bb, ldb, 0, (int)CO, np, (int)C, (int)N, (int)H,
				                    (int)W, (int)K, (int)S, y0, x0);
			continue;
		}
		for (int co0 = 0; co0 < (int)CO; co0 += 16) {
			const int nt = (int)CO - co0 < 16 ? (int)CO - co0 : 16;
			if (row5)
				conv_direct_tile_row<16, 5>(yb + co0 * plane, plane, xs, wb + co0, (int)CP, bb, ldb, co0, nt, np,
				                            (int)C, (int)N, (int)H, (int)W, y0, x0);
			else
				conv_direct_tile<16>(yb + co0 * plane, plane, xs, wb + co0, (int)CP, bb, ldb, co0, nt, np, (int)C,
				                     (int)N, (int)H, (int)W, (int)K, (int)S, y0, x0);
		}
	}
}

// conv_direct_dx: dx[b, c, y, x, n] is col2im of w^T dy: the float32 sum, from 0, over the
// window offsets (i, j) that reach the pixel, in col2im's order (i, then j), of the float32
// sum, from 0, over co ascending of w[b, co, (c K + i) K + j] dy[b, co, oy, ox, n] by fused
// multiply-adds, the output pixel (oy, ox) that offset reaches it from. wt is conv_direct_wt's
// mode-1 copy of w (row stride CP). One thread per run of PX input pixels of a row (PX is
// CONV_DX_PX at stride 1, where adjacent pixels take the same window offsets and so the same
// weights, else 1), a sample and CONV_CT channels (b, c / CONV_CT, y, x / PX, n), the samples
// fastest. An offset that reaches some of a run's pixels and not others adds 0 to the others'
// sums, which leaves them as they are: a sum from +0 by round-to-nearest is never -0.
template <int PX>
__device__ __forceinline__ void conv_direct_dx_run(float* dst, int chan, const float* g, const float* wb, int CP,
                                                   int CO, int N, int K, int S, int P, int OH, int OW, int yy,
                                                   int xx, int nc, int np) {
	float acc[PX][CONV_CT];
	for (int q = 0; q < PX; q++)
		for (int u = 0; u < CONV_CT; u++) acc[q][u] = 0.0f;
	const int plane = OH * OW * N, KK = K * K;
	const u32 ty = (u32)(yy + P), tx = (u32)(xx + P), s = (u32)S;
	const int i0 = (int)(ty % s), j0 = (int)(tx % s), oy0 = (int)(ty / s), ox0 = (int)(tx / s);
	for (int i = i0, oy = oy0; i < K && oy >= 0; i += S, oy--) {
		if (oy >= OH) continue;
		for (int j = j0, ox = ox0; j < K && ox + PX - 1 >= 0; j += S, ox--) {
			if (ox >= OW) continue;
			bool in[PX];
			for (int q = 0; q < PX; q++) in[q] = (u32)(ox + q) < (u32)OW;
			// A pointer per pixel of the run, each advanced a channel at a time: a load needs
			// no address arithmetic of its own.
			const float* gq[PX];
			for (int q = 0; q < PX; q++) gq[q] = g + (in[q] ? (oy * OW + ox + q) * N : 0);
			const float* wk = wb + (i * K + j) * CP;
			float v[PX][CONV_CT];
			for (int q = 0; q < PX; q++)
				for (int u = 0; u < CONV_CT; u++) v[q][u] = 0.0f;
			for (int co = 0; co < CO; co++, wk += KK * CP) {
				float gv[PX];
				for (int q = 0; q < PX; q++) {
					gv[q] = in[q] ? *gq[q] : 0.0f;
					gq[q] += plane;
				}
				for (int m = 0; m < CONV_CT / 4; m++) {
					const float4 w4 = load4(wk + 4 * m);
					const float ws[4] = {w4.x, w4.y, w4.z, w4.w};
					for (int u = 0; u < 4; u++)
						for (int q = 0; q < PX; q++) v[q][4 * m + u] = fmaf(ws[u], gv[q], v[q][4 * m + u]);
				}
			}
			for (int q = 0; q < PX; q++)
				for (int u = 0; u < CONV_CT; u++) acc[q][u] += in[q] ? v[q][u] : 0.0f;
		}
	}
	for (int u = 0; u < CONV_CT; u++) {
		if (u >= nc) break;
		for (int q = 0; q < PX; q++)
			if (q < np) dst[u * chan + q * N] = acc[q][u];
	}
}

extern "C" __global__ void __launch_bounds__(256, 2) conv_direct_dx(float* __restrict__ dx, i64 dxbs, const float* __restrict__ wt, i64 CP,
                                          const float* __restrict__ dy, i64 dybs, i64 CO, i64 C, i64 N, i64 H,
                                          i64 W, i64 K, i64 S, i64 P, i64 OH, i64 OW, i64 PX, i64 batch) {
	const i64 CQ = (C + CONV_CT - 1) / CONV_CT, XQ = (W + PX - 1) / PX;
	const i64 rad[5] = {0, CQ, H, XQ, N};
	const int chan = (int)(H * W * N);
	GRID_STRIDE_MD(it, 5, batch * CQ * H * XQ * N, rad) {
		const i64 b = it.d[0];
		const int c0 = (int)it.d[1] * CONV_CT, yy = (int)it.d[2], xx = (int)(it.d[3] * PX), n = (int)it.d[4];
		const int nc = (int)C - c0 < CONV_CT ? (int)C - c0 : CONV_CT;
		const int np = (int)W - xx < (int)PX ? (int)W - xx : (int)PX;
		float* dst = dx + b * dxbs + c0 * chan + (yy * (int)W + xx) * (int)N + n;
		const float* g = dy + b * dybs + n;
		const float* wb = wt + b * CO * K * K * CP + c0;
		if (PX == CONV_DX_PX)
			conv_direct_dx_run<CONV_DX_PX>(dst, chan, g, wb, (int)CP, (int)CO, (int)N, (int)K, (int)S, (int)P,
			                               (int)OH, (int)OW, yy, xx, nc, np);
		else
			conv_direct_dx_run<1>(dst, chan, g, wb, (int)CP, (int)CO, (int)N, (int)K, (int)S, (int)P, (int)OH,
			                      (int)OW, yy, xx, nc, np);
	}
}

// conv_direct_dw_bias computes partial p of the bias gradient of nt of T output channels:
// dst[t] is the float32 sum, from 0, over the output pixels in order and the samples n = p, p +
// PP, ..., of dy at channel t (g is dy at the first channel), added in that order.
template <int T>
__device__ __forceinline__ void conv_direct_dw_bias(float* dst, const float* g, int plane, int pixels, int N, int p,
                                                    int PP, int nt) {
	float acc[T];
	for (int t = 0; t < T; t++) acc[t] = 0.0f;
	for (int px = 0; px < pixels; px++)
		for (int n = p; n < N; n += PP)
			for (int t = 0; t < T; t++)
				if (t < nt) acc[t] += g[t * plane + px * N + n];
	for (int t = 0; t < T; t++)
		if (t < nt) dst[t] = acc[t];
}

// conv_direct_dw_row computes the partial sums of one partial p for output channels co0 ..
// co0 + nt - 1 and the JT window columns j0 .. j0 + nj - 1 of window row i of channel c: acc[t][q]
// is the float32 sum, from 0, over the output pixels (oy, ox) in order and the samples n = p, p
// + PP, ... of fmaf(dy[co0 + t, oy, ox, n], x[c, oy S - P + i, ox S - P + j0 + q, n]). With
// SLIDE (stride 1, one sample per partial, a tile as wide as the window) the row's inputs stay
// in registers from one output pixel to the next, one new value loaded per pixel.
template <int JT, bool SLIDE>
__device__ __forceinline__ void conv_direct_dw_row(float* dst, int KKC, const float* g, int plane,
                                                   const float* xc, int nt, int j0, int nj, int N, int H, int W,
                                                   int S, int P, int OH, int OW, int i, int p, int PP) {
	float acc[CONV_COT][JT];
	for (int t = 0; t < CONV_COT; t++)
		for (int q = 0; q < JT; q++) acc[t][q] = 0.0f;
	// A pointer per channel, each advanced a pixel at a time: a load needs no address
	// arithmetic of its own.
	const float* gq[CONV_COT];
	for (int t = 0; t < CONV_COT; t++) gq[t] = g + (t < nt ? t * plane : 0);
	for (int oy = 0; oy < OH; oy++) {
		const int iy = oy * S - P + i;
		const bool rowIn = (u32)iy < (u32)H;
		const float* rp = xc + (rowIn ? (u32)(iy * W) * (u32)N : 0u);
		float xv[JT];
		if (SLIDE) {
			for (int q = 0; q < JT - 1; q++) {
				const int ix = j0 - P + q;  // S is 1
				xv[q + 1] = rowIn && (u32)ix < (u32)W ? rp[(u32)ix * (u32)N + (u32)p] : 0.0f;
			}
		}
		for (int ox = 0; ox < OW; ox++) {
			const int ixb = ox * S - P + j0;
			for (int n = p; n < N; n += PP) {
				float gv[CONV_COT];
				for (int t = 0; t < CONV_COT; t++) gv[t] = gq[t][n];  // channel 0's again for t >= nt: never stored
				if (SLIDE) {
					for (int q = 0; q < JT - 1; q++) xv[q] = xv[q + 1];
					const int ix = ixb + JT - 1;
					xv[JT - 1] = rowIn && (u32)ix < (u32)W ? rp[(u32)ix * (u32)N + (u32)n] : 0.0f;
				} else {
					u32 xo = (u32)ixb * (u32)N + (u32)n;
					for (int q = 0; q < JT; q++, xo += (u32)N) {
						const int ix = ixb + q;
						xv[q] = q < nj && rowIn && (u32)ix < (u32)W ? rp[xo] : 0.0f;
					}
				}
				for (int t = 0; t < CONV_COT; t++)
					for (int q = 0; q < JT; q++) acc[t][q] = fmaf(gv[t], xv[q], acc[t][q]);
			}
			for (int t = 0; t < CONV_COT; t++) gq[t] += N;
		}
	}
	for (int t = 0; t < CONV_COT; t++) {
		if (t >= nt) break;
		for (int q = 0; q < JT; q++)
			if (q < nj) dst[t * KKC + j0 + q] = acc[t][q];
	}
}

// conv_direct_dw: the partial sums of the weight and bias gradients, dw = dy cols^T with cols
// Im2col's patches and a row of ones (row k = C K K: the bias). Partial p of (b, co, k) is the
// float32 sum, from 0, over the columns (oy OW + ox) N + n ascending with n = p mod PP of
// dy[b, co, oy, ox, n] cols[b, k, (oy OW + ox) N + n] (a padding value being 0), each term added
// by a fused multiply-add (the bias's by an addition); splitk_reduce then adds the PP partials
// in order. Weight partials go to part[((p batch + b) CO + co) C K K + k], bias partials to
// part[PP batch CO C K K + (p batch + b) CO + co]. PP depends only on N (the host's
// directParts), never on the launch. One thread per CONV_COT output channels, window row r = c
// K + i (or the bias, r = C K) and partial (b, co / CONV_COT, r, p), p fastest so that adjacent
// threads read adjacent samples, computing the row's K weights in tiles of the window's width
// (3 and 5) or CONV_JT.
extern "C" __global__ void __launch_bounds__(256, 2) conv_direct_dw(float* __restrict__ part, const float* __restrict__ x, i64 xbs,
                                          const float* __restrict__ dy, i64 dybs, i64 CO, i64 C, i64 N, i64 H,
                                          i64 W, i64 K, i64 S, i64 P, i64 OH, i64 OW, i64 PP, i64 batch) {
	const i64 KK = C * K * K, COQ = (CO + CONV_COT - 1) / CONV_COT;
	const i64 rad[4] = {0, COQ, C * K + 1, PP};
	float* bpart = part + PP * batch * CO * KK;
	const int plane = (int)(OH * OW * N);
	GRID_STRIDE_MD(it, 4, batch * COQ * (C * K + 1) * PP, rad) {
		const i64 b = it.d[0];
		const int co0 = (int)it.d[1] * CONV_COT, r = (int)it.d[2], p = (int)it.d[3];
		const int nt = (int)CO - co0 < CONV_COT ? (int)CO - co0 : CONV_COT;
		const float* g = dy + b * dybs + co0 * plane;
		if (r == (int)(C * K)) {
			conv_direct_dw_bias<CONV_COT>(bpart + (p * batch + b) * CO + co0, g, plane, (int)(OH * OW), (int)N, p, (int)PP, nt);
			continue;
		}
		const int c = r / (int)K, i = r - c * (int)K;
		const float* xc = x + b * xbs + c * (int)(H * W * N);
		float* dst = part + ((p * batch + b) * CO + co0) * KK + r * K;
		const bool one = S == 1 && N <= PP;
		const int Ni = (int)N, Hi = (int)H, Wi = (int)W, Si = (int)S, Pi = (int)P, OHi = (int)OH, OWi = (int)OW;
		if (K == 5 && one)
			conv_direct_dw_row<5, true>(dst, (int)KK, g, plane, xc, nt, 0, 5, Ni, Hi, Wi, Si, Pi, OHi, OWi, i, p, (int)PP);
		else if (K == 5)
			conv_direct_dw_row<5, false>(dst, (int)KK, g, plane, xc, nt, 0, 5, Ni, Hi, Wi, Si, Pi, OHi, OWi, i, p, (int)PP);
		else if (K == 3 && one)
			conv_direct_dw_row<3, true>(dst, (int)KK, g, plane, xc, nt, 0, 3, Ni, Hi, Wi, Si, Pi, OHi, OWi, i, p, (int)PP);
		else if (K == 3)
			conv_direct_dw_row<3, false>(dst, (int)KK, g, plane, xc, nt, 0, 3, Ni, Hi, Wi, Si, Pi, OHi, OWi, i, p, (int)PP);
		else
			for (int j0 = 0; j0 < (int)K; j0 += CONV_JT) {
				const int nj = (int)K - j0 < CONV_JT ? (int)K - j0 : CONV_JT;
				conv_direct_dw_row<CONV_JT, false>(dst, (int)KK, g, plane, xc, nt, j0, nj, Ni, Hi, Wi, Si, Pi, OHi,
				                                   OWi, i, p, (int)PP);
			}
	}
}

// conv_direct_dw_win2 and conv_direct_dw_win4 compute conv_direct_dw's partial sums where each
// partial takes one sample (N <= PP) at stride 1 for a window of 3 or 5 (LeNet-5's second
// convolution): one thread per T output channels (2 or 4), input channel c (or the bias, c =
// C) and partial (b, co / T, c, p), p fastest, covering every row of the channel's window, so
// that each value of dy a thread loads serves K x K products where conv_direct_dw's thread,
// one window row, serves K; each row's inputs slide along the output row in registers, one new
// value a row and pixel. The same sums in the same order as conv_direct_dw's: each partial the
// float32 sum, from 0, over the output pixels in order, of fused multiply-adds (the bias's by
// additions). Options.DirectDWRows chooses them (cuda.Ops.ConvDirectGrad), to be timed
// against conv_direct_dw.
template <int T, int KW>
__device__ __forceinline__ void conv_direct_dw_win_run(float* dst, int KKC, const float* g, int plane, const float* xc,
                                                       int nt, int N, int H, int W, int P, int OH, int OW, int p) {
	float acc[T][KW][KW];
	for (int t = 0; t < T; t++)
		for (int i = 0; i < KW; i++)
			for (int j = 0; j < KW; j++) acc[t][i][j] = 0.0f;
	// A pointer per channel, each advanced a pixel at a time.
	const float* gq[T];
	for (int t = 0; t < T; t++) gq[t] = g + (t < nt ? t * plane : 0) + p;  // channel 0's for t >= nt: never stored
	const u32 Nu = (u32)N;
	for (int oy = 0; oy < OH; oy++) {
		const float* rp[KW];
		bool rowIn[KW];
		float xv[KW][KW];
		for (int i = 0; i < KW; i++) {
			const int iy = oy - P + i;
			rowIn[i] = (u32)iy < (u32)H;
			rp[i] = xc + (rowIn[i] ? (u32)(iy * W) * Nu : 0u) + p;
			for (int q = 0; q < KW - 1; q++) {
				const int ix = q - P;
				xv[i][q + 1] = rowIn[i] && (u32)ix < (u32)W ? rp[i][(u32)ix * Nu] : 0.0f;
			}
		}
		for (int ox = 0; ox < OW; ox++) {
			float gv[T];
			for (int t = 0; t < T; t++) {
				gv[t] = *gq[t];
				gq[t] += N;
			}
			const int ix = ox - P + KW - 1;
			const bool colIn = (u32)ix < (u32)W;
			for (int i = 0; i < KW; i++) {
				for (int q = 0; q < KW - 1; q++) xv[i][q] = xv[i][q + 1];
				xv[i][KW - 1] = rowIn[i] && colIn ? rp[i][(u32)ix * Nu] : 0.0f;
			}
			for (int t = 0; t < T; t++)
				for (int i = 0; i < KW; i++)
					for (int j = 0; j < KW; j++) acc[t][i][j] = fmaf(gv[t], xv[i][j], acc[t][i][j]);
		}
	}
	for (int t = 0; t < T; t++) {
		if (t >= nt) break;
		for (int i = 0; i < KW; i++)
			for (int j = 0; j < KW; j++) dst[t * KKC + i * KW + j] = acc[t][i][j];
	}
}

template <int T>
__device__ __forceinline__ void conv_direct_dw_win(float* __restrict__ part, const float* __restrict__ x, i64 xbs,
                                                   const float* __restrict__ dy, i64 dybs, i64 CO, i64 C, i64 N,
                                                   i64 H, i64 W, i64 K, i64 P, i64 OH, i64 OW, i64 PP, i64 batch) {
	const i64 KK = C * K * K, COQ = (CO + T - 1) / T;
	const i64 rad[4] = {0, COQ, C + 1, PP};
	float* bpart = part + PP * batch * CO * KK;
	const int plane = (int)(OH * OW * N);
	GRID_STRIDE_MD(it, 4, batch * COQ * (C + 1) * PP, rad) {
		const i64 b = it.d[0];
		const int co0 = (int)it.d[1] * T, c = (int)it.d[2], p = (int)it.d[3];
		const int nt = (int)CO - co0 < T ? (int)CO - co0 : T;
		const float* g = dy + b * dybs + co0 * plane;
		if (c == (int)C) {
			conv_direct_dw_bias<T>(bpart + (p * batch + b) * CO + co0, g, plane, (int)(OH * OW), (int)N, p, (int)PP, nt);
			continue;
		}
		const float* xc = x + b * xbs + c * (int)(H * W * N);
		float* dst = part + ((p * batch + b) * CO + co0) * KK + c * K * K;
		if (K == 5)
			conv_direct_dw_win_run<T, 5>(dst, (int)KK, g, plane, xc, nt, (int)N, (int)H, (int)W, (int)P, (int)OH,
			                             (int)OW, p);
		else
			conv_direct_dw_win_run<T, 3>(dst, (int)KK, g, plane, xc, nt, (int)N, (int)H, (int)W, (int)P, (int)OH,
			                             (int)OW, p);
	}
}

extern "C" __global__ void __launch_bounds__(256, 2) conv_direct_dw_win2(float* __restrict__ part, const float* __restrict__ x,
                                                                         i64 xbs, const float* __restrict__ dy, i64 dybs,
                                                                         i64 CO, i64 C, i64 N, i64 H, i64 W, i64 K, i64 S,
                                                                         i64 P, i64 OH, i64 OW, i64 PP, i64 batch) {
	conv_direct_dw_win<2>(part, x, xbs, dy, dybs, CO, C, N, H, W, K, P, OH, OW, PP, batch);
}

extern "C" __global__ void __launch_bounds__(256, 1) conv_direct_dw_win4(float* __restrict__ part, const float* __restrict__ x,
                                                                         i64 xbs, const float* __restrict__ dy, i64 dybs,
                                                                         i64 CO, i64 C, i64 N, i64 H, i64 W, i64 K, i64 S,
                                                                         i64 P, i64 OH, i64 OW, i64 PP, i64 batch) {
	conv_direct_dw_win<4>(part, x, xbs, dy, dybs, CO, C, N, H, W, K, P, OH, OW, PP, batch);
}

// Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast algorithms for convolutional
// neural networks", 2016) for 3 x 3 convolutions at stride 1 with padding 1
// (compute.Winograder). The output is cut into tiles of 2 x 2 pixels, TH = (H + 1) / 2 by
// TW = (W + 1) / 2 of them; tile (ty, tx) reads the 4 x 4 input pixels from (2 ty - 1, 2 tx - 1),
// zeros outside the image. With the transforms
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1],
// a tile's output is A^T [sum over c of (G g G^T) (.) (B^T d B)] A: 16 products of the
// transformed filters by the transformed inputs (position e = 4 r + s of the 4 x 4 tile, each a
// matrix product over the channels, cuBLAS's work) between the kernels below. The gradients are
// those of the same bilinear form: dM = A dY A^T, the filters' G^T (sum over tiles and samples
// of dM (.) V) G and the inputs' B (sum over k of U (.) dM) B^T, the tiles' overlapping
// contributions gathered per pixel in ascending tile order. A transformed matrix of batch
// element b and position e is at (b 16 + e) times its position stride; inputs are [C][H][W][N]
// as above, their transforms [C][TH TW][N] rows of ldv floats. The factors .5 are exact, so on
// small integers every step is exact and the result is the convolution's own.
//

// Winograd's F(4x4, 3x3) (the same paper): tiles of 4 x 4 output pixels, TH = (H + 3) / 4 by
// TW = (W + 3) / 4 of them, tile (ty, tx) reading the 6 x 6 input pixels from (4 ty - 1,
// 4 tx - 1), zeros outside the image, with the transforms (interpolation points 0, 1, -1, 2,
// -2 and infinity)
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
//   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
// 36 products (position e = 6 r + s) make 16 output pixels where F(2x2, 3x3)'s 16 make 4:
// 2.25 multiplications a pixel and channel pair instead of 4 (and 9 by patches), and the
// transformed inputs and products are 2.25 values a pixel instead of 4, so the transforms,
// which move data, move less of it. The price is rounding: G's sixths are not exact in
// float32 and B^T's and A^T's entries reach 5 and 8, so the results are those of the
// convolution to a few more roundings (cuda/paritytest bounds them), never exact. Layouts are
// those of F(2x2, 3x3) with 36 positions for 16; the gradients are those of the same bilinear
// form.
//
// Both forms run the same six kernel bodies (wino_*_t below), given the form's transforms on
// one column or row of a tile (wino_f2, wino_f4): the wino_* kernels are F(2x2, 3x3), the
// wino4_* kernels F(4x4, 3x3). M is a tile's output pixels a side, A = M + 2 its input pixels.

// wino_f2 is F(2x2, 3x3) on one column (row) of a tile.
struct wino_f2 {
	enum { M = 2, A = 4 };
	// g writes o = G (g0, g1, g2).
	static __device__ __forceinline__ void g(float g0, float g1, float g2, float o[4]) {
		o[0] = g0;
		o[1] = 0.5f * ((g0 + g1) + g2);
		o[2] = 0.5f * ((g0 - g1) + g2);
		o[3] = g2;
	}
	// gt writes o = G^T m.
	static __device__ __forceinline__ void gt(const float m[4], float o[3]) {
		const float h = 0.5f * (m[1] + m[2]);
		o[0] = m[0] + h;
		o[1] = 0.5f * (m[1] - m[2]);
		o[2] = h + m[3];
	}
	// bt writes o = B^T d.
	static __device__ __forceinline__ void bt(const float d[4], float o[4]) {
		o[0] = d[0] - d[2];
		o[1] = d[1] + d[2];
		o[2] = d[2] - d[1];
		o[3] = d[1] - d[3];
	}
	// b is entry i of B x: B's rows are [1 0 0 0], [0 1 -1 1], [-1 1 1 0] and [0 0 0 -1].
	static __device__ __forceinline__ float b(int i, const float x[4]) {
		switch (i) {
		case 0: return x[0];
		case 1: return (x[1] - x[2]) + x[3];
		case 2: return (x[1] + x[2]) - x[0];
		default: return -x[3];
		}
	}
	// at writes o = A^T m.
	static __device__ __forceinline__ void at(const float m[4], float o[2]) {
		o[0] = (m[0] + m[1]) + m[2];
		o[1] = (m[1] - m[2]) - m[3];
	}
	// a writes o = A g.
	static __device__ __forceinline__ void a(const float g[2], float o[4]) {
		o[0] = g[0];
		o[1] = g[0] + g[1];
		o[2] = g[0] - g[1];
		o[3] = -g[1];
	}
};

// wino_f4 is F(4x4, 3x3) on one column (row) of a tile.
struct wino_f4 {
	enum { M = 4, A = 6 };
	static __device__ __forceinline__ void g(float g0, float g1, float g2, float o[6]) {
		const float e = g0 + g2, e4 = g0 + 4.0f * g2;
		o[0] = 0.25f * g0;
		o[1] = -(e + g1) * (1.0f / 6.0f);
		o[2] = -(e - g1) * (1.0f / 6.0f);
		o[3] = (e4 + 2.0f * g1) * (1.0f / 24.0f);
		o[4] = (e4 - 2.0f * g1) * (1.0f / 24.0f);
		o[5] = g2;
	}
	static __device__ __forceinline__ void gt(const float m[6], float o[3]) {
		const float sp = m[1] + m[2], sm = m[1] - m[2], tp = m[3] + m[4], tm = m[3] - m[4];
		o[0] = (0.25f * m[0] - sp * (1.0f / 6.0f)) + tp * (1.0f / 24.0f);
		o[1] = tm * (1.0f / 12.0f) - sm * (1.0f / 6.0f);
		o[2] = (tp - sp) * (1.0f / 6.0f) + m[5];
	}
	static __device__ __forceinline__ void bt(const float d[6], float o[6]) {
		o[0] = (4.0f * d[0] - 5.0f * d[2]) + d[4];
		o[1] = (d[3] + d[4]) - 4.0f * (d[1] + d[2]);
		o[2] = (d[4] - d[3]) + 4.0f * (d[1] - d[2]);
		o[3] = (d[4] - d[2]) + 2.0f * (d[3] - d[1]);
		o[4] = (d[4] - d[2]) - 2.0f * (d[3] - d[1]);
		o[5] = (4.0f * d[1] - 5.0f * d[3]) + d[5];
	}
	// b is entry i of B x (column i of B^T against x).
	static __device__ __forceinline__ float b(int i, const float x[6]) {
		switch (i) {
		case 0: return 4.0f * x[0];
		case 1: return (4.0f * (x[2] - x[1]) + 2.0f * (x[4] - x[3])) + 4.0f * x[5];
		case 2: return -((5.0f * x[0] + 4.0f * (x[1] + x[2])) + (x[3] + x[4]));
		case 3: return ((x[1] - x[2]) + 2.0f * (x[3] - x[4])) - 5.0f * x[5];
		case 4: return (((x[0] + x[1]) + x[2]) + x[3]) + x[4];
		default: return x[5];
		}
	}
	static __device__ __forceinline__ void at(const float m[6], float o[4]) {
		const float sp = m[1] + m[2], sm = m[1] - m[2], tp = m[3] + m[4], tm = m[3] - m[4];
		o[0] = (m[0] + sp) + tp;
		o[1] = sm + 2.0f * tm;
		o[2] = sp + 4.0f * tp;
		o[3] = (sm + 8.0f * tm) + m[5];
	}
	static __device__ __forceinline__ void a(const float g[4], float o[6]) {
		const float e = g[0] + g[2], od = g[1] + g[3], e4 = g[0] + 4.0f * g[2], o4 = 2.0f * g[1] + 8.0f * g[3];
		o[0] = g[0];
		o[1] = e + od;
		o[2] = e - od;
		o[3] = e4 + o4;
		o[4] = e4 - o4;
		o[5] = g[3];
	}
};

// wino_filter_t: u[b, e, k, c] = (G g G^T)[e] for g = w[b, k, c 9 .. c 9 + 8] (rows of 3), one
// thread per (b, k, c).
template <class F>
__device__ __forceinline__ void wino_filter_t(float* __restrict__ u, i64 ldu, i64 ues, const float* __restrict__ w,
                                              i64 ldw, i64 wbs, i64 CO, i64 C, i64 batch) {
	const int A = F::A;
	const i64 rad[3] = {0, CO, C};
	GRID_STRIDE_MD(it, 3, batch * CO * C, rad) {
		i64 b = it.d[0], k = it.d[1], c = it.d[2];
		const float* g = w + b * wbs + k * ldw + c * 9;
		float t[A][3];
		UNROLL
		for (int j = 0; j < 3; j++) {
			float o[A];
			F::g(g[j], g[3 + j], g[6 + j], o);
			UNROLL
			for (int r = 0; r < A; r++) t[r][j] = o[r];
		}
		float* dst = u + b * (A * A) * ues + k * ldu + c;
		UNROLL
		for (int r = 0; r < A; r++) {
			float o[A];
			F::g(t[r][0], t[r][1], t[r][2], o);
			UNROLL
			for (int s = 0; s < A; s++) dst[(A * r + s) * ues] = o[s];
		}
	}
}

// wino_filter_grad_t: dw[b, k, c 9 + 3 i + j] = (G^T du G)[i][j] for the A x A du[b, ., k, c],
// one thread per (b, k, c).
template <class F>
__device__ __forceinline__ void wino_filter_grad_t(float* __restrict__ dw, i64 ldw, i64 wbs, const float* __restrict__ du,
                                                   i64 ldu, i64 ues, i64 CO, i64 C, i64 batch) {
	const int A = F::A;
	const i64 rad[3] = {0, CO, C};
	GRID_STRIDE_MD(it, 3, batch * CO * C, rad) {
		i64 b = it.d[0], k = it.d[1], c = it.d[2];
		const float* src = du + b * (A * A) * ues + k * ldu + c;
		float t[3][A];
		UNROLL
		for (int s = 0; s < A; s++) {
			float m[A], o[3];
			UNROLL
			for (int r = 0; r < A; r++) m[r] = src[(A * r + s) * ues];
			F::gt(m, o);
			UNROLL
			for (int i = 0; i < 3; i++) t[i][s] = o[i];
		}
		float* dst = dw + b * wbs + k * ldw + c * 9;
		UNROLL
		for (int i = 0; i < 3; i++) {
			float o[3];
			F::gt(t[i], o);
			UNROLL
			for (int j = 0; j < 3; j++) dst[3 * i + j] = o[j];
		}
	}
}

// wino_input_t: v[b, e, c, p N + n] = (B^T d B)[e] for the A x A input tile d of tile p = ty TW +
// tx, from (M ty - 1, M tx - 1), a group of wd threads per (b, c, ty, tx), each thread the
// samples lane, lane + wd, .... The tile is read a column at a time, so that only B^T d is
// held. These kernels move data and do little arithmetic: what limits them is how many loads
// are in flight (see the launch bounds of the kernels below).
template <class F>
__device__ __forceinline__ void wino_input_t(float* __restrict__ v, i64 ldv, i64 ves, const float* __restrict__ x, i64 xbs,
                                             i64 C, i64 N, i64 H, i64 W, i64 TH, i64 TW, i64 batch, i64 wd) {
	const int M = F::M, A = F::A;
	const i64 rad[4] = {0, C, TH, TW};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * C * TH * TW, rad, wd) {
		i64 b = it.d[0], c = it.d[1], ty = it.d[2], tx = it.d[3];
		i64 y0 = M * ty - 1, x0 = M * tx - 1;
		bool rin[A], cin[A];
		UNROLL
		for (int i = 0; i < A; i++) {
			rin[i] = y0 + i >= 0 && y0 + i < H;
			cin[i] = x0 + i >= 0 && x0 + i < W;
		}
		const float* src = x + b * xbs + ((c * H + y0) * W + x0) * N;
		float* dst = v + b * (A * A) * ves + c * ldv + (ty * TW + tx) * N;
		// 32-bit offsets within the channel (x) and within the replica's transformed tiles (v),
		// advanced a sample at a time with the pointers: a 64-bit product per load and store was
		// most of the loop's instructions (cuda.Ops checks that both fit 2^31 values:
		// winoLaunch).
		const u32 rowN = (u32)(W * N), colN = (u32)N, eStep = (u32)ves;
		src += lane;
		dst += lane;
		for (i64 n = lane; n < N; n += wd, src += wd, dst += wd) {
			float t[A][A];
			UNROLL
			for (int j = 0; j < A; j++) {
				float d[A], o[A];
				UNROLL
				for (int i = 0; i < A; i++) d[i] = rin[i] && cin[j] ? src[(u32)i * rowN + (u32)j * colN] : 0.0f;
				F::bt(d, o);
				UNROLL
				for (int r = 0; r < A; r++) t[r][j] = o[r];
			}
			UNROLL
			for (int r = 0; r < A; r++) {
				float o[A];
				F::bt(t[r], o);
				UNROLL
				for (int s = 0; s < A; s++) dst[(u32)(A * r + s) * eStep] = o[s];
			}
		}
	}
}

// wino_output_t: y[b, k, M ty + i, M tx + j, n] = (A^T m A)[i][j] + bias[b, k] for the A x A
// m[b, ., k, p N + n] of tile p = ty TW + tx (the pixels inside the image), a group of wd
// threads per (b, k, ty, tx).
template <class F>
__device__ __forceinline__ void wino_output_t(float* __restrict__ y, i64 ybs, const float* __restrict__ m, i64 ldm, i64 mes,
                                              const float* __restrict__ bias, i64 ldb, i64 bbs, i64 CO, i64 N,
                                              i64 H, i64 W, i64 TH, i64 TW, i64 batch, i64 wd) {
	const int M = F::M, A = F::A;
	const i64 rad[4] = {0, CO, TH, TW};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * CO * TH * TW, rad, wd) {
		i64 b = it.d[0], k = it.d[1], ty = it.d[2], tx = it.d[3];
		const float bk = bias[b * bbs + k * ldb];
		const i64 nr = H - M * ty, nc = W - M * tx; // the tile's rows and columns inside, if below M
		const float* src = m + b * (A * A) * mes + k * ldm + (ty * TW + tx) * N;
		float* dst = y + b * ybs + ((k * H + M * ty) * W + M * tx) * N;
		const u32 eStep = (u32)mes, rowN = (u32)(W * N), colN = (u32)N;  // as wino_input_t
		src += lane;
		dst += lane;
		for (i64 n = lane; n < N; n += wd, src += wd, dst += wd) {
			float s[M][A];
			UNROLL
			for (int col = 0; col < A; col++) {
				float a[A], o[M];
				UNROLL
				for (int r = 0; r < A; r++) a[r] = src[(u32)(A * r + col) * eStep];
				F::at(a, o);
				UNROLL
				for (int i = 0; i < M; i++) s[i][col] = o[i];
			}
			UNROLL
			for (int i = 0; i < M; i++) {
				if (i >= nr) break;
				float o[M];
				F::at(s[i], o);
				UNROLL
				for (int j = 0; j < M; j++)
					if (j < nc) dst[(u32)i * rowN + (u32)j * colN] = o[j] + bk;
			}
		}
	}
}

// wino_output_grad_t: dm[b, e, k, p N + n] = (A g A^T)[e] for the M x M gradient g of tile p's
// output pixels (0 for those outside the image), a group of wd threads per (b, k, ty, tx).
template <class F>
__device__ __forceinline__ void wino_output_grad_t(float* __restrict__ dm, i64 ldm, i64 mes, const float* __restrict__ dy,
                                                   i64 dybs, i64 CO, i64 N, i64 H, i64 W, i64 TH, i64 TW, i64 batch,
                                                   i64 wd) {
	const int M = F::M, A = F::A;
	const i64 rad[4] = {0, CO, TH, TW};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * CO * TH * TW, rad, wd) {
		i64 b = it.d[0], k = it.d[1], ty = it.d[2], tx = it.d[3];
		const i64 nr = H - M * ty, nc = W - M * tx;
		const float* src = dy + b * dybs + ((k * H + M * ty) * W + M * tx) * N;
		float* dst = dm + b * (A * A) * mes + k * ldm + (ty * TW + tx) * N;
		const u32 eStep = (u32)mes, rowN = (u32)(W * N), colN = (u32)N;  // as wino_input_t
		src += lane;
		dst += lane;
		for (i64 n = lane; n < N; n += wd, src += wd, dst += wd) {
			float t[A][M];
			UNROLL
			for (int j = 0; j < M; j++) {
				float g[M], o[A];
				UNROLL
				for (int i = 0; i < M; i++) g[i] = i < nr && j < nc ? src[(u32)i * rowN + (u32)j * colN] : 0.0f;
				F::a(g, o);
				UNROLL
				for (int r = 0; r < A; r++) t[r][j] = o[r];
			}
			UNROLL
			for (int r = 0; r < A; r++) {
				float o[A];
				F::a(t[r], o);
				UNROLL
				for (int s = 0; s < A; s++) dst[(u32)(A * r + s) * eStep] = o[s];
			}
		}
	}
}

// wino_input_grad_t: dx[b, c, y, x, n] is the float32 sum, from 0, over the tiles (ty, tx) whose
// A x A input reaches pixel (y, x), in ascending (ty, tx) order, of (B dv B^T)[y + 1 - M ty][x
// + 1 - M tx], dv[b, ., c, p N + n] of tile p = ty TW + tx. In padded coordinates the pixels M a
// to M a + M - 1 lie in tile a (rows 0 to M - 1 of its A), and the first two of them in tile
// a - 1 too (its rows M and M + 1), so a group of wd threads per block (b, c, a, a') of M x M
// padded pixels reads those four tiles' dv once for the block's pixels (those inside the
// image). Each tile is read a column at a time, so that only the rows of B dv it gives the
// block are held.
template <class F>
__device__ __forceinline__ void wino_input_grad_t(float* __restrict__ dx, i64 dxbs, const float* __restrict__ dv, i64 ldv,
                                                  i64 ves, i64 C, i64 N, i64 H, i64 W, i64 TH, i64 TW, i64 batch,
                                                  i64 wd) {
	const int M = F::M, A = F::A;
	const i64 AH = H / M + 1, AW = W / M + 1;
	const i64 rad[4] = {0, C, AH, AW};
	const i64 lane = GROUP_LANE(wd);
	GROUP_STRIDE_MD(it, 4, batch * C * AH * AW, rad, wd) {
		i64 b = it.d[0], c = it.d[1], a = it.d[2], a2 = it.d[3];
		// The block's rows and columns inside the image: padded M a + q is pixel M a + q - 1.
		bool rin[M], cin[M];
		UNROLL
		for (int q = 0; q < M; q++) {
			i64 yy = M * a + q - 1, xx = M * a2 + q - 1;
			rin[q] = yy >= 0 && yy < H;
			cin[q] = xx >= 0 && xx < W;
		}
		const float* src = dv + b * (A * A) * ves + c * ldv;
		float* dst = dx + b * dxbs + ((c * H + M * a - 1) * W + M * a2 - 1) * N;
		const u32 eStep = (u32)ves, rowN = (u32)(W * N), colN = (u32)N;  // as wino_input_t
		src += lane;
		dst += lane;
		for (i64 n = lane; n < N; n += wd, src += wd, dst += wd) {
			float acc[M][M];
			UNROLL
			for (int qi = 0; qi < M; qi++)
				UNROLL
				for (int qj = 0; qj < M; qj++) acc[qi][qj] = 0.0f;
			UNROLL
			for (int ti = 0; ti < 2; ti++) {
				i64 ty = a - 1 + ti;
				if (ty < 0 || ty >= TH) continue;
				// Tile a - 1 gives the block's rows 0 and 1 from its rows M and M + 1; tile a its
				// rows 0 to M - 1.
				const int i0 = ti == 0 ? M : 0, ni = ti == 0 ? A - M : M;
				UNROLL
				for (int tj = 0; tj < 2; tj++) {
					i64 tx = a2 - 1 + tj;
					if (tx < 0 || tx >= TW) continue;
					const int j0 = tj == 0 ? M : 0, nj = tj == 0 ? A - M : M;
					const float* t = src + (u32)(ty * TW + tx) * colN;
					float q[M][A];
					UNROLL
					for (int s = 0; s < A; s++) {
						float d[A];
						UNROLL
						for (int r = 0; r < A; r++) d[r] = t[(u32)(A * r + s) * eStep];
						UNROLL
						for (int qi = 0; qi < M; qi++)
							if (qi < ni) q[qi][s] = F::b(i0 + qi, d);
					}
					UNROLL
					for (int qi = 0; qi < M; qi++)
						if (qi < ni)
							UNROLL
							for (int qj = 0; qj < M; qj++)
								if (qj < nj) acc[qi][qj] += F::b(j0 + qj, q[qi]);
				}
			}
			UNROLL
			for (int qi = 0; qi < M; qi++)
				UNROLL
				for (int qj = 0; qj < M; qj++)
					if (rin[qi] && cin[qj]) dst[(u32)qi * rowN + (u32)qj * colN] = acc[qi][qj];
		}
	}
}

// The kernels, each a body above in one form. Left to itself ptxas gave F(2x2, 3x3)'s
// wino_input 150 registers on sm_90 (one block of 256 threads a multiprocessor) and its
// wino_input_grad about 95 (two); __launch_bounds__(256, 3) holds them to 85 (80 and 72 on
// sm_90, no spills on sm_70, sm_80 or sm_90), so three blocks fit. F(4x4, 3x3)'s hold a whole
// column of a 6 x 6 tile: at three blocks wino4_input and wino4_input_grad spilled on sm_70
// and sm_90, and wino4_output and wino4_output_grad took 150 to 170 registers unbounded (one
// block), so all four are held to two (at most 128 registers). The bounds change registers,
// not the arithmetic or the bits. With the 32-bit offsets and stepped pointers of the bodies
// (a 64-bit product per load and store had been most of the loops over a thread's samples:
// wino_input 344 instructions a sample instead of 637 on sm_90), the bounded input kernels
// spill 20 to 172 bytes on sm_70 to sm_90, all of it outside those loops.
#define WINO_FILTER_ARGS float* __restrict__ u, i64 ldu, i64 ues, const float* __restrict__ w, i64 ldw, i64 wbs, i64 CO, i64 C, i64 batch
#define WINO_FILTER_GRAD_ARGS float* __restrict__ dw, i64 ldw, i64 wbs, const float* __restrict__ du, i64 ldu, i64 ues, i64 CO, i64 C, i64 batch
#define WINO_INPUT_ARGS float* __restrict__ v, i64 ldv, i64 ves, const float* __restrict__ x, i64 xbs, i64 C, i64 N, i64 H, i64 W, i64 TH, i64 TW, i64 batch, i64 wd
#define WINO_OUTPUT_ARGS float* __restrict__ y, i64 ybs, const float* __restrict__ m, i64 ldm, i64 mes, const float* __restrict__ bias, i64 ldb, i64 bbs, i64 CO, i64 N, i64 H, i64 W, i64 TH, i64 TW, i64 batch, i64 wd
#define WINO_OUTPUT_GRAD_ARGS float* __restrict__ dm, i64 ldm, i64 mes, const float* __restrict__ dy, i64 dybs, i64 CO, i64 N, i64 H, i64 W, i64 TH, i64 TW, i64 batch, i64 wd
#define WINO_INPUT_GRAD_ARGS float* __restrict__ dx, i64 dxbs, const float* __restrict__ dv, i64 ldv, i64 ves, i64 C, i64 N, i64 H, i64 W, i64 TH, i64 TW, i64 batch, i64 wd

extern "C" __global__ void wino_filter(WINO_FILTER_ARGS) { wino_filter_t<wino_f2>(u, ldu, ues, w, ldw, wbs, CO, C, batch); }
extern "C" __global__ void wino4_filter(WINO_FILTER_ARGS) { wino_filter_t<wino_f4>(u, ldu, ues, w, ldw, wbs, CO, C, batch); }
extern "C" __global__ void wino_filter_grad(WINO_FILTER_GRAD_ARGS) {
	wino_filter_grad_t<wino_f2>(dw, ldw, wbs, du, ldu, ues, CO, C, batch);
}
extern "C" __global__ void wino4_filter_grad(WINO_FILTER_GRAD_ARGS) {
	wino_filter_grad_t<wino_f4>(dw, ldw, wbs, du, ldu, ues, CO, C, batch);
}
extern "C" __global__ void __launch_bounds__(256, 3) wino_input(WINO_INPUT_ARGS) {
	wino_input_t<wino_f2>(v, ldv, ves, x, xbs, C, N, H, W, TH, TW, batch, wd);
}
extern "C" __global__ void __launch_bounds__(256, 2) wino4_input(WINO_INPUT_ARGS) {
	wino_input_t<wino_f4>(v, ldv, ves, x, xbs, C, N, H, W, TH, TW, batch, wd);
}
extern "C" __global__ void wino_output(WINO_OUTPUT_ARGS) {
	wino_output_t<wino_f2>(y, ybs, m, ldm, mes, bias, ldb, bbs, CO, N, H, W, TH, TW, batch, wd);
}
extern "C" __global__ void __launch_bounds__(256, 2) wino4_output(WINO_OUTPUT_ARGS) {
	wino_output_t<wino_f4>(y, ybs, m, ldm, mes, bias, ldb, bbs, CO, N, H, W, TH, TW, batch, wd);
}
extern "C" __global__ void wino_output_grad(WINO_OUTPUT_GRAD_ARGS) {
	wino_output_grad_t<wino_f2>(dm, ldm, mes, dy, dybs, CO, N, H, W, TH, TW, batch, wd);
}
extern "C" __global__ void __launch_bounds__(256, 2) wino4_output_grad(WINO_OUTPUT_GRAD_ARGS) {
	wino_output_grad_t<wino_f4>(dm, ldm, mes, dy, dybs, CO, N, H, W, TH, TW, batch, wd);
}
extern "C" __global__ void __launch_bounds__(256, 3) wino_input_grad(WINO_INPUT_GRAD_ARGS) {
	wino_input_grad_t<wino_f2>(dx, dxbs, dv, ldv, ves, C, N, H, W, TH, TW, batch, wd);
}
extern "C" __global__ void __launch_bounds__(256, 2) wino4_input_grad(WINO_INPUT_GRAD_ARGS) {
	wino_input_grad_t<wino_f4>(dx, dxbs, dv, ldv, ves, C, N, H, W, TH, TW, batch, wd);
}
#undef WINO_FILTER_ARGS
#undef WINO_FILTER_GRAD_ARGS
#undef WINO_INPUT_ARGS
#undef WINO_OUTPUT_ARGS
#undef WINO_OUTPUT_GRAD_ARGS
#undef WINO_INPUT_GRAD_ARGS
