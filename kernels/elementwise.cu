// Row-wise operations of compute.Backend: Axpby, AddRow, SumRows, Gather, Activate,
// ActivateGrad. Matrices are passed as a pointer to element (0, 0) of batch element 0, a row
// stride and a batch stride (0 broadcasts one matrix to the batch), as compute.Mat.
#include "common.cuh"


// axpby: y = a_b x + beta y with a_b = alpha coef[b] (coef may be null); with a_b = 0 and
// beta = 0, y is zeroed without reading x, which may then be null. Each item is computed as
// alone, in place too (x = y: an item's values are loaded before it is stored), so the batching
// of the loads changes no bit.
extern "C" __global__ void axpby(float* y, i64 ys, i64 ybs, const float* x, i64 xs, i64 xbs,
                                 const float* coef, float alpha, float beta, i64 rows, i64 cols,
                                 i64 batch) {
	const i64 n = batch * rows * cols;
	rc_index ix = rc_start((i64)blockIdx.x * blockDim.x + threadIdx.x, (i64)blockDim.x * gridDim.x,
	                       rows, cols);
	while (ix.i < n) {
		float* yp[LIGHT_BATCH] = {};
		const float* xp[LIGHT_BATCH] = {};
		float a[LIGHT_BATCH] = {}, xv[LIGHT_BATCH] = {}, yv[LIGHT_BATCH] = {};
		int m = 0;
		UNROLL
		for (int q = 0; q < LIGHT_BATCH; q++) {
			if (ix.i < n) {
				const i64 b = ix.b;
				a[q] = coef ? alpha * coef[b] : alpha;
				yp[q] = y + b * ybs + ix.r * ys + ix.j;
				xp[q] = x ? x + b * xbs + ix.r * xs + ix.j : x;  // x is null only when zeroing
				m = q + 1;
				rc_next(&ix);
			}
		}
		UNROLL
		for (int q = 0; q < LIGHT_BATCH; q++) {
			if (q < m) {
				const bool zero = a[q] == 0.0f && beta == 0.0f;
				xv[q] = zero ? 0.0f : *xp[q];
				yv[q] = zero || beta == 0.0f ? 0.0f : *yp[q];
			}
		}
		UNROLL
		for (int q = 0; q < LIGHT_BATCH; q++) {
			if (q < m) {
				if (a[q] == 0.0f && beta == 0.0f)
					*yp[q] = 0.0f;
				else if (beta == 0.0f)
					*yp[q] = a[q] * xv[q];
				else if (beta == 1.0f)
					*yp[q] = yv[q] + a[q] * xv[q];
				else
					*yp[q] = a[q] * xv[q] + beta * yv[q];
			}
		}
	}
}

// accumulate_in_order: y += a_{q,b} x_q for q = 0, ..., n-1 in turn, x_q = x + q step and
// a_{q,b} = coef[q batch + b] (1 when coef is null). Each addition is axpby's with beta 1
// (`y += a x`, written in the same form, so that a compiler that fused a x into the addition
// would fuse both alike; genptx.sh builds the PTX without), so the result has the bits of n
// axpby launches in order.
extern "C" __global__ void accumulate_in_order(float* y, i64 ys, i64 ybs, const float* x, i64 xs,
                                               i64 xbs, i64 step, i64 n, const float* coef,
                                               i64 rows, i64 cols, i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b;
		float* yp = y + b * ybs + ix.r * ys + ix.j;
		const float* xp = x + b * xbs + ix.r * xs + ix.j;
		float acc = *yp;
		for (i64 q = 0; q < n; q++) {
			float a = coef ? 1.0f * coef[q * batch + b] : 1.0f;
			acc += a * xp[q * step];
		}
		*yp = acc;
	}
}

// splitk_reduce finishes a matrix product computed in depth slices (cuda.Ops, Options.SplitK):
// c = alpha (p_0 + p_1 + ... + p_{S-1}) + beta c, the S partial products of batch element b at
// part + (s batch + b) rows cols (row-major, contiguous), added in slice order from p_0 in
// float32; with beta = 0, c is not read (as cuBLAS: it may hold NaN).
extern "C" __global__ void splitk_reduce(float* c, i64 cs, i64 cbs, const float* part, i64 S,
                                         float alpha, float beta, i64 rows, i64 cols,
                                         i64 batch) {
	i64 per = rows * cols, slab = batch * per;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		const float* p = part + ix.b * per + ix.r * cols + ix.j;
		float acc = p[0];
		for (i64 s = 1; s < S; s++) acc += p[s * slab];
		float* cp = c + ix.b * cbs + ix.r * cs + ix.j;
		if (beta == 0.0f)
			*cp = alpha * acc;
		else
			*cp = alpha * acc + beta * *cp;
	}
}

// add_row: y[b, r, j] += v[b, j].
extern "C" __global__ void add_row(float* y, i64 ys, i64 ybs, const float* v, i64 vbs, i64 rows,
                                   i64 cols, i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		y[b * ybs + r * ys + j] += v[b * vbs + j];
	}
}

// sum_rows: y[b, j] = alpha sum_r x[b, r, j] + beta y[b, j], the sum in float32 in row order;
// with beta = 0, y is not read.
extern "C" __global__ void sum_rows(float* y, i64 ybs, const float* x, i64 xs, i64 xbs,
                                    float alpha, float beta, i64 rows, i64 cols, i64 batch) {
	GRID_STRIDE_RC(ix, batch * cols, 1, cols) {
		i64 b = ix.b, j = ix.j;
		const float* xp = x + b * xbs + j;
		float s = 0.0f;
		for (i64 r = 0; r < rows; r++) s += xp[r * xs];
		float* yp = y + b * ybs + j;
		if (beta == 0.0f)
			*yp = alpha * s;
		else
			*yp = alpha * s + beta * *yp;
	}
}

// gather: dst[b, r, :] = src[b, idx[r], :] for r < n.
extern "C" __global__ void gather(float* dst, i64 ds, i64 dbs, const float* src, i64 ss, i64 sbs,
                                  const int* idx, i64 n, i64 cols, i64 batch) {
	i64 per = n * cols;
	GRID_STRIDE_RC(ix, batch * per, n, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		dst[b * dbs + r * ds + j] = src[b * sbs + (i64)idx[r] * ss + j];
	}
}

// activate: post = act(pre).
extern "C" __global__ void activate(int act, const float* pre, i64 ps, i64 pbs, float* post,
                                    i64 qs, i64 qbs, i64 rows, i64 cols, i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		post[b * qbs + r * qs + j] = act_value(act, pre[b * pbs + r * ps + j]);
	}
}

// add_relu: y = max(a + b, 0) (compute.AddReLUer: a residual block's two paths and its ReLU in
// one pass). a + b is axpby's y + 1 x with y = a (1 x is x exactly), the maximum Go's (NaN
// kept, -0 to +0) as activate's ReLU; a is not written.
extern "C" __global__ void add_relu(const float* a, i64 as, i64 abs_, const float* b, i64 bs, i64 bbs,
                                    float* y, i64 ys, i64 ybs, i64 rows, i64 cols, i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 e = ix.b, r = ix.r, j = ix.j;
		y[e * ybs + r * ys + j] = go_maxf(a[e * abs_ + r * as + j] + b[e * bbs + r * bs + j], 0.0f);
	}
}

// activate_grad: grad *= act'(pre), given post = act(pre).
extern "C" __global__ void activate_grad(int act, const float* pre, i64 ps, i64 pbs,
                                         const float* post, i64 qs, i64 qbs, float* grad, i64 gs,
                                         i64 gbs, i64 rows, i64 cols, i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		float* g = grad + b * gbs + r * gs + j;
		*g = act_grad(act, pre + b * pbs + r * ps + j, post + b * qbs + r * qs + j, *g);
	}
}

// add_row_activate is add_row then activate in one pass: pre[b, r, j] += v[b, j], then
// post = act(pre), the same float32 operations in the same order.
extern "C" __global__ void add_row_activate(int act, float* pre, i64 ps, i64 pbs, const float* v,
                                            i64 vbs, float* post, i64 qs, i64 qbs, i64 rows,
                                            i64 cols, i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		float* p = pre + b * pbs + r * ps + j;
		*p += v[b * vbs + j];
		post[b * qbs + r * qs + j] = act_value(act, *p);
	}
}

// activate_grad_sum_rows is activate_grad then sum_rows of grad into y, one thread per column
// of a batch element: each grad element is scaled as activate_grad scales it and added to the
// column's float32 sum in row order, as sum_rows adds it.
extern "C" __global__ void activate_grad_sum_rows(int act, const float* pre, i64 ps, i64 pbs,
                                                  const float* post, i64 qs, i64 qbs,
                                                  float* grad, i64 gs, i64 gbs, float* y, i64 ybs,
                                                  float alpha, float beta, i64 rows, i64 cols,
                                                  i64 batch) {
	GRID_STRIDE_RC(ix, batch * cols, 1, cols) {
		i64 b = ix.b, j = ix.j;
		float s = 0.0f;
		for (i64 r = 0; r < rows; r++) {
			float* g = grad + b * gbs + r * gs + j;
			*g = act_grad(act, pre + b * pbs + r * ps + j, post + b * qbs + r * qs + j, *g);
			s += *g;
		}
		float* yp = y + b * ybs + j;
		if (beta == 0.0f)
			*yp = alpha * s;
		else
			*yp = alpha * s + beta * *yp;
	}
}

// add_col: y[b, r, j] += v[b, r vs], a column added to every column of y (the bias of a layer
// whose features are rows: package nn's dense layers).
extern "C" __global__ void add_col(float* y, i64 ys, i64 ybs, const float* v, i64 vs, i64 vbs, i64 rows,
                                   i64 cols, i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		y[b * ybs + r * ys + j] += v[b * vbs + r * vs];
	}
}

// sum_cols: y[b, r ys] = sum_j x[b, r, j], the sum in float32 in column order: the bias
// gradient of a layer whose features are rows, one thread a row (its columns are samples: few).
extern "C" __global__ void sum_cols(float* y, i64 ys, i64 ybs, const float* x, i64 xs, i64 xbs, i64 rows,
                                    i64 cols, i64 batch) {
	GRID_STRIDE_RC(ix, batch * rows, rows, 1) {
		i64 b = ix.b, r = ix.r;
		const float* xp = x + b * xbs + r * xs;
		float s = 0.0f;
		for (i64 j = 0; j < cols; j++) s += xp[j];
		y[b * ybs + r * ys] = s;
	}
}

// add_col_activate is add_col then activate in one pass: pre[b, r, j] += v[b, r vs], then
// post = act(pre), the same float32 operations in the same order (a dense layer of package nn
// and the activation after it).
extern "C" __global__ void add_col_activate(int act, float* pre, i64 ps, i64 pbs, const float* v, i64 vs,
                                            i64 vbs, float* post, i64 qs, i64 qbs, i64 rows, i64 cols,
                                            i64 batch) {
	i64 per = rows * cols;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		float* p = pre + b * pbs + r * ps + j;
		*p += v[b * vbs + r * vs];
		post[b * qbs + r * qs + j] = act_value(act, *p);
	}
}

// activate_grad_sum_cols is activate_grad then sum_cols of grad into y, one thread per row of
// a batch element: each grad element is scaled as activate_grad scales it and added to the
// row's float32 sum in column order, as sum_cols adds it.
extern "C" __global__ void activate_grad_sum_cols(int act, const float* pre, i64 ps, i64 pbs,
                                                  const float* post, i64 qs, i64 qbs, float* grad,
                                                  i64 gs, i64 gbs, float* y, i64 ys, i64 ybs, i64 rows,
                                                  i64 cols, i64 batch) {
	GRID_STRIDE_RC(ix, batch * rows, rows, 1) {
		i64 b = ix.b, r = ix.r;
		float* g = grad + b * gbs + r * gs;
		const float* p = pre + b * pbs + r * ps;
		const float* q = post + b * qbs + r * qs;
		float s = 0.0f;
		for (i64 j = 0; j < cols; j++) {
			g[j] = act_grad(act, p + j, q + j, g[j]);
			s += g[j];
		}
		y[b * ybs + r * ys] = s;
	}
}
