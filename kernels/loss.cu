// Softmax cross-entropy and per-example gradient clipping (DP-SGD).
#include "common.cuh"

// softmax_xent handles one row of one batch element per thread, in the CPU backend's order:
// the largest logit in float32, the sum of exp(v - max) in float64, lse = max + log(sum). It
// writes loss = lse - logit[y] and margin = logit[y] - max other logit when their pointers are
// not null, and dlogits = scale (softmax - onehot) when dl is not null; dl may alias logits
// (each element is read before it is written). When bias is not null, the row first gets
// bias[b, :] added in place (add_row fused in: the logits are left with the bias, as add_row
// leaves them). A row's logits lie lcs apart and its dlogits dcs apart: 1 where a row is a
// sample's (the rows of train's models), the batch of samples where the classes are the rows
// (package nn's layout: the same values, read in the same order, without a transposition).
extern "C" __global__ void softmax_xent(float* logits, i64 ls, i64 lbs, i64 lcs, const float* labels,
                                        i64 ys, i64 ybs, float scale, float* dl, i64 ds, i64 dbs,
                                        i64 dcs, float* loss, i64 loss_s, i64 loss_bs, float* margin,
                                        i64 ms, i64 mbs, const float* bias, i64 bbs, i64 rows,
                                        i64 cols, i64 batch) {
	GRID_STRIDE_RC(ix, batch * rows, 1, rows) {
		i64 b = ix.b, r = ix.j;
		float* row = logits + b * lbs + r * ls;
		if (bias)
			for (i64 j = 0; j < cols; j++) row[j * lcs] += bias[b * bbs + j];
		i64 y = (i64)labels[b * ybs + r * ys];
		float mx = row[0];
		for (i64 j = 0; j < cols; j++) mx = go_maxf(mx, row[j * lcs]);
		double s = 0;
		for (i64 j = 0; j < cols; j++) s += exp((double)(row[j * lcs] - mx));
		double lse = (double)mx + log(s);
		if (loss) loss[b * loss_bs + r * loss_s] = (float)(lse - (double)row[y * lcs]);
		if (margin) {
			float other = -__int_as_float(0x7f800000);  // -Inf
			for (i64 j = 0; j < cols; j++)
				if (j != y) other = go_maxf(other, row[j * lcs]);
			margin[b * mbs + r * ms] = row[y * lcs] - other;
		}
		if (dl) {
			float* out = dl + b * dbs + r * ds;
			for (i64 j = 0; j < cols; j++) {
				float p = (float)exp((double)row[j * lcs] - lse);
				if (j == y) p -= 1.0f;
				out[j * dcs] = scale * p;
			}
		}
	}
}

// clip_examples_norm adds layer l's share ||delta[i]||^2 (||in[i]||^2 + 1) of example i's
// squared gradient norm to n[b * rows + i] (first: sets it), one thread per example; called
// once per layer in layer order, so n is summed in the CPU backend's order.
extern "C" __global__ void clip_examples_norm(double* n, const float* delta, i64 ds, i64 dbs,
                                              const float* in, i64 is, i64 ibs, i64 dcols,
                                              i64 icols, int first, i64 rows, i64 batch) {
	GRID_STRIDE_RC(ix, batch * rows, 1, rows) {
		i64 i = ix.i, b = ix.b, r = ix.j;
		double t = sumsq4(delta + b * dbs + r * ds, dcols) *
		           (sumsq4(in + b * ibs + r * is, icols) + 1.0);
		n[i] = first ? 0.0 + t : n[i] + t;
	}
}

// clip_examples_scale scales every row i of delta by min(1, v / sqrt(n[b * rows + i])). A
// thread works the factor out again only when its next value lies in another row (as
// clip_step): a float64 square root and division for every value made it compute-bound.
extern "C" __global__ void clip_examples_scale(float* delta, i64 ds, i64 dbs, const double* n,
                                               float v, i64 rows, i64 cols, i64 batch) {
	i64 per = rows * cols;
	i64 fr = -1;  // the row (b rows + r) whose factor s holds
	float s = 1.0f;
	GRID_STRIDE_RC(ix, batch * per, rows, cols) {
		i64 b = ix.b, r = ix.r, j = ix.j;
		if (b * rows + r != fr) {
			fr = b * rows + r;
			double nn = sqrt(n[fr]);
			s = 1.0f;
			if (nn > (double)v) s = (float)((double)v / nn);
		}
		delta[b * dbs + r * ds + j] *= s;
	}
}
