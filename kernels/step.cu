// The fused local step of a one-hidden-layer MLP (compute.HiddenStepper): one block per replica.
//
// This is the one block kernel: the threads of a block cooperate on one replica's step through
// shared memory and barriers, where every other kernel keeps threads independent. It keeps the
// rules that make results reproducible: every value is computed by one thread in an order the
// kernel fixes (loops over elements split among the block's threads, never partial sums by
// thread), and the float64 norms are split into FEDAUDIT_PARTIALS strided partial sums reduced
// in index order, so the result does not depend on the block size, the grid or the device.
// The host shim runs it with one host thread per GPU thread and real barriers.
#include "common.cuh"

// HIDDEN_SHARED_FLOATS is the static shared memory of a block in floats (36 KiB; with the
// partial sums about 40 KiB of the 48 KiB a block may declare statically). A replica whose
// working set (kernels.HiddenWorkingSet: 2 C H + 2 H + 2 C + 2 B H + B C, plus C + B when H is
// even, for the padded rows below) does not fit uses global scratch instead.
#define HIDDEN_SHARED_FLOATS 9216

// HIDDEN_BLOCK is the most threads per block hidden_step can be launched with: a block of
// 1,024 threads at 64 registers each fills a multiprocessor's 65,536, so the launch bound keeps
// the kernel within 64 registers a thread, as the earlier bound of 256 threads and 4 blocks
// did. cuda.Ops launches 256 threads a block unless Options.HiddenBlock asks for more (at few
// replicas, few blocks: W1 at 64 replicas runs 64 blocks on an H100's 132 multiprocessors).
#define HIDDEN_BLOCK 1024

// HIDDEN_ROWS is how many rows of one column a thread computes together in the products that
// read global memory or long rows (pre's update, delta): one load of the column's operand
// serves them all and their sums run side by side, which hides the loads' latency (a block
// runs a single replica, so there are few warps to hide it otherwise). Each sum still adds its
// terms in the same order as one row at a time would, so the bits do not depend on it.
#define HIDDEN_ROWS 8

// The step's products add each term with a fused multiply-add written out (fmaf, fma): one
// instruction and one rounding a term, where the kernels' -fmad=false would make two of each
// (the step is bound by its instruction count). Written out, it is the same on the GPU and in
// the host shim (C++'s correctly rounded fmaf), and it is the CPU's fused step's own form.

// column_term adds term k of each row j of a (every row with ALL, else the rows j < nr) to
// s[j]: the fused multiply-add a[j as + k] b[k bs], the column's one load serving every row.
template <bool ALL>
__device__ __forceinline__ void column_term(float* s, const float* a, i64 as, const float* b, i64 bs, int k,
                                            int nr) {
	const float x = b[k * bs];
	UNROLL
	for (int j = 0; j < HIDDEN_ROWS; j++)
		if (ALL || j < nr) s[j] = fmaf(a[j * as + k], x, s[j]);
}

// column_terms4 is column_term for terms k to k + 3 in that order, each row's four read in one
// 16-byte load (a + k and as multiples of four floats).
template <bool ALL>
__device__ __forceinline__ void column_terms4(float* s, const float* a, i64 as, const float* b, i64 bs, int k,
                                              int nr) {
	const float x0 = b[k * bs], x1 = b[(k + 1) * bs], x2 = b[(k + 2) * bs], x3 = b[(k + 3) * bs];
	UNROLL
	for (int j = 0; j < HIDDEN_ROWS; j++) {
		if (ALL || j < nr) {
			const float4 v = load4(a + j * as + k);
			s[j] = fmaf(v.w, x3, fmaf(v.z, x2, fmaf(v.y, x1, fmaf(v.x, x0, s[j]))));
		}
	}
}

// column_sums sets out[j os] for j < nr (at most HIDDEN_ROWS) to the float32 sum, from 0 in
// k order, of the fused multiply-adds a[j as + k] b[k bs] over k < n: nr rows of a times one
// column b, each of the column's loads serving every row, the rows' sums side by side. With
// WIDE (a and as aligned to four floats: the caller checks) each row is read four terms at a
// time, one 16-byte load instead of four, with the same sums in the same order: pre's update
// reads the Gram matrix's rows so, 3 load instructions for 8 products where one at a time took
// 9 (the column's one load and a quarter of the 8 rows').
template <bool WIDE>
__device__ __forceinline__ void column_sums(float* out, i64 os, const float* a, i64 as, const float* b,
                                            i64 bs, int n, int nr) {
	float s[HIDDEN_ROWS];
	UNROLL
	for (int j = 0; j < HIDDEN_ROWS; j++) s[j] = 0.0f;
	const int n4 = WIDE ? n & ~3 : 0;  // the terms read four at a time
	if (nr == HIDDEN_ROWS) {
		for (int k = 0; k < n4; k += 4) column_terms4<true>(s, a, as, b, bs, k, nr);
		for (int k = n4; k < n; k++) column_term<true>(s, a, as, b, bs, k, nr);
	} else {
		for (int k = 0; k < n4; k += 4) column_terms4<false>(s, a, as, b, bs, k, nr);
		for (int k = n4; k < n; k++) column_term<false>(s, a, as, b, bs, k, nr);
	}
	UNROLL
	for (int j = 0; j < HIDDEN_ROWS; j++)
		if (j < nr) out[j * os] = s[j];
}

// rows_sums is column_sums, WIDE where a's rows start at multiples of 16 bytes (train lays out
// the Gram matrices so where the minibatch is a multiple of 4): the same sums either way.
__device__ __forceinline__ void rows_sums(float* out, i64 os, const float* a, i64 as, const float* b, i64 bs,
                                          int n, int nr) {
	if ((u64)a % 16 == 0 && as % 4 == 0)
		column_sums<true>(out, os, a, as, b, bs, n, nr);
	else
		column_sums<false>(out, os, a, as, b, bs, n, nr);
}

// hidden_step is compute.HiddenStepArgs' step for every replica r < batch, block-stride over the
// replicas (grid may be smaller than batch). A grouped step (several clients' steps at once)
// numbers replica q of group g as r = g per + q, and every argument of group g lies its group
// stride (pgs, wgs, ...) times g further on. Per replica, pre (B x H) holds x W_0^T on entry and
// the parameter row holds b1 (H), W2 (C x H), b2 (C) contiguously from offset ob1 (train's MLP
// layout; the host checks it). In the CPU backend's order of operations (cpu/fused.go):
//
//	pre += gram prev + b1 (gram B x kp shared, prev kp x H per replica), post = act(pre);
//	FedProx (alpha != 0): prev *= 1 - eta alpha, after every thread has read prev;
//	z = post W2^T + b2, dl = (softmax(z) - onehot(y)) / B (the softmax as softmax_xent's);
//	gb2 = column sums of dl, gW2 = dl^T post, delta = (dl W2) act'(pre), gb1 = sums of delta;
//	with v > 0, n = ||gx-weighted delta||^2 + ||(gb1, gW2, gb2)||^2 in float64 (the first
//	layer's weight gradient norm from the Gram matrix gx = x x^T: <delta, gx delta>), and the
//	clip factor c = v / sqrt(n) when sqrt(n) > v, NaN for a NaN n, else 1;
//	(b1, W2, b2) = FedProx's pull towards the anchor, then minus eta c (gb1, gW2, gb2);
//	u = -eta c delta.
//
// The activations, the small layer, dl, delta and the gradient live in shared memory (scratch
// null) or in scratch + r sbs (floats) when they do not fit; pre is updated in place in global
// memory, as the CPU backend updates it. The rows of post and W2 there lie an odd number of
// floats apart (H, or H + 1 when H is even), so the threads of a warp that read one column of
// several rows (the logits) hit different banks of shared memory.
extern "C" __global__ void __launch_bounds__(HIDDEN_BLOCK, 1) hidden_step(int act, float* pre, i64 ps, i64 pbs, float* params, i64 wbs,
                                       const float* anchor, i64 abs_, const float* gram, i64 gs,
                                       float* prev, i64 vs, i64 vbs, i64 kp, const float* labels,
                                       i64 ls, const float* gx, i64 xs, float* u, i64 us, i64 ubs,
                                       float* scratch, i64 sbs, i64 ob1, i64 rows, i64 hidden,
                                       i64 classes, float eta, float v, float alpha, i64 batch,
                                       i64 per, i64 pgs, i64 wgs, i64 ags, i64 ggs, i64 vgs, i64 lgs,
                                       i64 xgs, i64 ugs) {
	__shared__ float sm[HIDDEN_SHARED_FLOATS];
	__shared__ double part[2 * FEDAUDIT_PARTIALS];
	__shared__ float coef_s;
	const int t = threadIdx.x, nt = blockDim.x;
	const int B = (int)rows, H = (int)hidden, C = (int)classes, K = (int)kp;
	const int Hp = H | 1;  // the padded row stride of post and W2
	const int BH = B * H, CH = C * H, ng = H + CH + C;
	const int RG = (B + HIDDEN_ROWS - 1) / HIDDEN_ROWS;  // groups of rows
	// step is replica r's step with its working set at S. The loop below calls it with either
	// the block's shared memory or the replica's global scratch, never with a pointer that may
	// be either: the compiler then knows which memory each instantiation's working set is in,
	// and the shared one reads it with shared loads and 32-bit addresses, where a pointer that
	// could be either made every access a generic load with 64-bit address arithmetic (the
	// step is bound by its instruction count: docs/gpu.md, "The fused hidden step").
	auto step = [&](i64 r, float* S) {
		float* w2s = S;          // C x H, rows Hp apart
		float* b1s = w2s + C * Hp;  // H
		float* b2s = b1s + H;    // C
		float* post = b2s + C;   // B x H, rows Hp apart
		float* dl = post + B * Hp;  // B x C: the logits, then dl
		float* delta = dl + B * C;  // B x H
		float* grad = delta + BH;   // gb1 (H), gW2 (C x H), gb2 (C): the order of the parameters
		float* gb1 = grad;
		float* gw2 = grad + H;
		float* gb2 = grad + H + CH;
		// Element r is replica q of group g (one group unless the host groups several clients'
		// steps: compute.HiddenStepArgs' Groups); each argument moves by its group stride.
		const i64 g = r / per, q = r - g * per;
		float* prow = params + q * wbs + g * wgs + ob1;
		float* P = pre + q * pbs + g * pgs;
		float* V = prev ? prev + q * vbs + g * vgs : prev;
		const float* gram_g = gram ? gram + g * ggs : gram;
		const float* labels_g = labels + g * lgs;
		const float* gx_g = gx ? gx + g * xgs : gx;

		for (int i = t; i < H; i += nt) b1s[i] = prow[i];
		for (int i = t; i < CH; i += nt) {
			int c = i / H, k = i - c * H;
			w2s[c * Hp + k] = prow[H + i];
		}
		for (int i = t; i < C; i += nt) b2s[i] = prow[H + CH + i];
		__syncthreads();

		// pre += gram prev (a float32 sum in k order), then the bias; post = act(pre). A thread
		// takes column c of up to HIDDEN_ROWS rows.
		for (int it = t; it < RG * H; it += nt) {
			const int ig = it / H, c = it - ig * H, i0 = ig * HIDDEN_ROWS;
			const int nr = B - i0 < HIDDEN_ROWS ? B - i0 : HIDDEN_ROWS;
			// The sums wait in post, so the activation's code is not unrolled.
			if (K > 0)
				rows_sums(post + i0 * Hp + c, Hp, gram_g + i0 * gs, gs, V + c, vs, K, nr);
			for (int i = i0; i < i0 + nr; i++) {
				float* pp = P + i * ps + c;
				float p = *pp;
				if (K > 0) p = p + post[i * Hp + c];
				p = p + b1s[c];
				*pp = p;
				post[i * Hp + c] = act_value(act, p);
			}
		}
		__syncthreads();

		// FedProx shrinks the earlier factors; nothing reads prev again in this step.
		if (alpha != 0.0f && K > 0) {
			float shrink = 1.0f - eta * alpha;
			for (int e = t; e < K * H; e += nt) {
				int k = e / H, c = e - k * H;
				V[k * vs + c] *= shrink;
			}
		}
		// The logits z = post W2^T + b2, each a float32 sum in hidden-unit order; a thread takes
		// two classes of a row, which share the row's loads.
		const int CP = (C + 1) / 2;  // pairs of classes
		for (int e = t; e < B * CP; e += nt) {
			const int i = e / CP, c = 2 * (e - i * CP);
			const float* x = post + i * Hp;
			const float* w = w2s + c * Hp;
			if (c + 1 < C) {
				float s0 = 0.0f, s1 = 0.0f;
				for (int k = 0; k < H; k++) {
					const float xk = x[k];
					s0 = fmaf(xk, w[k], s0);
					s1 = fmaf(xk, w[Hp + k], s1);
				}
				dl[i * C + c] = s0 + b2s[c];
				dl[i * C + c + 1] = s1 + b2s[c + 1];
			} else {
				float s = 0.0f;
				for (int k = 0; k < H; k++) s = fmaf(x[k], w[k], s);
				dl[i * C + c] = s + b2s[c];
			}
		}
		__syncthreads();

		// dl = (softmax - onehot) / B, as softmax_xent computes it. Where the row's exponentials
		// and log-sum-exps fit in part (B C + B doubles; the norms' partial sums use it only
		// later), a thread per value computes them, in three passes between barriers: each row's
		// maximum and one exponential, then a thread per row adds its row's exponentials in class
		// order and takes the log, then each value's probability. One thread per row computed the
		// row's 2 C exponentials one after another (W1: 20 float64 exponentials on the critical
		// path of every step, for 32 of the block's 256 threads). Every value is the same
		// expression in the same order, so the bits do not change.
		const float scale = 1.0f / (float)B;
		if (B * C + B <= 2 * FEDAUDIT_PARTIALS) {
			double* ex = part;
			double* lse = part + B * C;
			for (int e = t; e < B * C; e += nt) {
				const int i = e / C;
				const float* z = dl + i * C;
				float mx = z[0];
				for (int c = 0; c < C; c++) mx = go_maxf(mx, z[c]);
				ex[e] = exp((double)(z[e - i * C] - mx));
			}
			__syncthreads();
			for (int i = t; i < B; i += nt) {
				const float* z = dl + i * C;
				float mx = z[0];
				for (int c = 0; c < C; c++) mx = go_maxf(mx, z[c]);
				double s = 0;
				for (int c = 0; c < C; c++) s += ex[i * C + c];
				lse[i] = (double)mx + log(s);
			}
			__syncthreads();
			for (int e = t; e < B * C; e += nt) {
				const int i = e / C, c = e - i * C;
				float p = (float)exp((double)dl[e] - lse[i]);
				if (c == (int)labels_g[i * ls]) p -= 1.0f;
				dl[e] = scale * p;
			}
		} else {
			for (int i = t; i < B; i += nt) {
				float* z = dl + i * C;
				int y = (int)labels_g[i * ls];
				float mx = z[0];
				for (int c = 0; c < C; c++) mx = go_maxf(mx, z[c]);
				double s = 0;
				for (int c = 0; c < C; c++) s += exp((double)(z[c] - mx));
				double lse = (double)mx + log(s);
				for (int c = 0; c < C; c++) {
					float p = (float)exp((double)z[c] - lse);
					if (c == y) p -= 1.0f;
					z[c] = scale * p;
				}
			}
		}
		__syncthreads();

		// The small layer's gradient and delta = (dl W2) act'(pre), sums in row and class order;
		// a thread takes column k of up to HIDDEN_ROWS rows of delta.
		for (int c = t; c < C; c += nt) {
			float s = 0.0f;
			for (int i = 0; i < B; i++) s += dl[i * C + c];
			gb2[c] = s;
		}
		for (int e = t; e < CH; e += nt) {
			int c = e / H, k = e - c * H;
			float s = 0.0f;
			for (int i = 0; i < B; i++) s = fmaf(dl[i * C + c], post[i * Hp + k], s);
			gw2[e] = s;
		}
		for (int it = t; it < RG * H; it += nt) {
			const int ig = it / H, k = it - ig * H, i0 = ig * HIDDEN_ROWS;
			const int nr = B - i0 < HIDDEN_ROWS ? B - i0 : HIDDEN_ROWS;
			column_sums<false>(delta + i0 * H + k, H, dl + i0 * C, C, w2s + k, Hp, C, nr);
			for (int i = i0; i < i0 + nr; i++)
				delta[i * H + k] = act_grad(act, P + i * ps + k, post + i * Hp + k, delta[i * H + k]);
		}
		__syncthreads();

		// gb1, and gxd = gx delta (B x H, a float32 sum in row order per element), the first
		// layer's part of the clip norm before its partial sums: a thread takes column k of up
		// to HIDDEN_ROWS rows, as delta's product does, reading gx's rows four floats at a time
		// where they are aligned. gxd takes post's place, which nothing reads again in the step.
		for (int k = t; k < H; k += nt) {
			float s = 0.0f;
			for (int i = 0; i < B; i++) s += delta[i * H + k];
			gb1[k] = s;
		}
		float* gxd = post;  // rows Hp apart
		if (v > 0.0f) {
			for (int it = t; it < RG * H; it += nt) {
				const int ig = it / H, k = it - ig * H, i0 = ig * HIDDEN_ROWS;
				const int nr = B - i0 < HIDDEN_ROWS ? B - i0 : HIDDEN_ROWS;
				rows_sums(gxd + i0 * Hp + k, Hp, gx_g + i0 * xs, xs, delta + k, H, B, nr);
			}
		}
		__syncthreads();

		// The partial sums of <delta, gxd> (partial p sums e = p, p + P, ... in float64) and of
		// the squared norm of (gb1, gW2, gb2), then one thread reduces both in index order and
		// sets the clip factor.
		if (v > 0.0f) {
			for (int p = t; p < FEDAUDIT_PARTIALS; p += nt) {
				double s = 0;
				// e's row i and column k, carried from element to element (no division each)
				const int pi = FEDAUDIT_PARTIALS / H, pk = FEDAUDIT_PARTIALS - pi * H;
				int i = p / H, k = p - i * H;
				for (int e = p; e < BH; e += FEDAUDIT_PARTIALS) {
					s = fma((double)delta[e], (double)gxd[i * Hp + k], s);
					i += pi, k += pk;
					if (k >= H) i++, k -= H;
				}
				part[p] = s;
			}
			for (int p = t; p < FEDAUDIT_PARTIALS; p += nt) {
				double s = 0;
				for (int e = p; e < ng; e += FEDAUDIT_PARTIALS) {
					double gv = grad[e];
					s = fma(gv, gv, s);
				}
				part[FEDAUDIT_PARTIALS + p] = s;
			}
		}
		__syncthreads();
		if (t == 0) {
			float c = 1.0f;
			if (v > 0.0f) {
				double s1 = 0, s2 = 0;
				for (int j = 0; j < FEDAUDIT_PARTIALS; j++) {  // two independent sums, each in order
					s1 += part[j];
					s2 += part[FEDAUDIT_PARTIALS + j];
				}
				double n = sqrt(s1 + s2);
				if (n > (double)v)
					c = (float)((double)v / n);
				else if (n != n)
					c = __int_as_float(0x7fc00000);  // NaN
			}
			coef_s = c;
		}
		__syncthreads();

		// The update of (b1, W2, b2) and the step's factor u = -eta c delta.
		const float c = coef_s;
		const float ec = eta * c, mec = -eta * c;
		const float ea = eta * alpha;
		const float* an = anchor ? anchor + q * abs_ + g * ags + ob1 : 0;
		for (int e = t; e < ng; e += nt) {
			float w = prow[e];
			if (alpha != 0.0f) w = ea * an[e] + (1.0f - ea) * w;
			prow[e] = w - ec * grad[e];
		}
		float* U = u + q * ubs + g * ugs;
		for (int e = t; e < BH; e += nt) {
			int i = e / H, k = e - i * H;
			U[i * us + k] = mec * delta[e];
		}
		__syncthreads();  // the next replica reuses the shared memory
	};
	for (i64 r = blockIdx.x; r < batch; r += gridDim.x) {
		if (scratch)
			step(r, scratch + r * sbs);
		else
			step(r, sm);
	}
}
