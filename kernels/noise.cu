// Gaussian noise from the counter-based Philox4x32-10 stream of internal/philox.
#include "common.cuh"

// box_muller is philox.BoxMuller (internal/philox): the two normals of the Philox words (a, b), radius
// sqrt(-2 ln u), u = (a + 1) 2^-32, angle 2 pi b 2^-32, with train's own logarithm, sine and
// cosine polynomials evaluated by the same IEEE operations in the same order (explicit fma;
// the kernels are compiled with -fmad=false), so the values equal the CPU's bit for bit.
__device__ __forceinline__ void box_muller(u32 a, u32 b, double* z0, double* z1) {
	// ln u = (e - 32) ln 2 + ln m, a + 1 = 2^e m, m in [sqrt(2)/2, sqrt(2))
	u64 v = (u64)__double_as_longlong((double)a + 1.0);
	long long e = (long long)(v >> 52) - 1023;
	double m = __longlong_as_double((long long)((v & ((1ull << 52) - 1)) | (1023ull << 52)));
	if (m > 1.4142135623730951) {  // math.Sqrt2
		m *= 0.5;
		e++;
	}
	double f = m - 1.0;
	double s = f / (2.0 + f);
	double z = s * s;
	double p = fma(z, 1.0 / 21.0, 1.0 / 19.0);
	p = fma(z, p, 1.0 / 17.0);
	p = fma(z, p, 1.0 / 15.0);
	p = fma(z, p, 1.0 / 13.0);
	p = fma(z, p, 1.0 / 11.0);
	p = fma(z, p, 1.0 / 9.0);
	p = fma(z, p, 1.0 / 7.0);
	p = fma(z, p, 1.0 / 5.0);
	p = fma(z, p, 1.0 / 3.0);
	p = fma(z, p, 1.0);
	double k = (double)(e - 32);
	double ln2hi = __longlong_as_double(0x3fe62e42fee00000ll);
	double ln2lo = __longlong_as_double(0x3dea39ef35793c76ll);
	double lnu = fma(k, ln2hi, fma(k, ln2lo, 2.0 * s * p));
	double rad = sqrt(-2.0 * lnu);
	// quadrant q = round(4 b 2^-32), t = 2 pi (b - q 2^30) 2^-32 in [-pi/4, pi/4)
	u64 q = ((u64)b + (1ull << 29)) >> 30;
	double t = (double)((long long)b - (long long)(q << 30)) * (2.0 * 3.141592653589793 / 4294967296.0);
	double t2 = t * t;
	double sp = fma(t2, 1.0 / 355687428096000.0, -1.0 / 1307674368000.0);
	sp = fma(t2, sp, 1.0 / 6227020800.0);
	sp = fma(t2, sp, -1.0 / 39916800.0);
	sp = fma(t2, sp, 1.0 / 362880.0);
	sp = fma(t2, sp, -1.0 / 5040.0);
	sp = fma(t2, sp, 1.0 / 120.0);
	sp = fma(t2, sp, -1.0 / 6.0);
	double sn = fma(t * t2, sp, t);
	double cp = fma(t2, -1.0 / 6402373705728000.0, 1.0 / 20922789888000.0);
	cp = fma(t2, cp, -1.0 / 87178291200.0);
	cp = fma(t2, cp, 1.0 / 479001600.0);
	cp = fma(t2, cp, -1.0 / 3628800.0);
	cp = fma(t2, cp, 1.0 / 40320.0);
	cp = fma(t2, cp, -1.0 / 720.0);
	cp = fma(t2, cp, 1.0 / 24.0);
	cp = fma(t2, cp, -0.5);
	double cs = fma(t2, cp, 1.0);
	double r;
	switch (q & 3) {  // rotate by q quarter turns
	case 1: r = sn; sn = cs; cs = -r; break;
	case 2: sn = -sn; cs = -cs; break;
	case 3: r = sn; sn = -cs; cs = r; break;
	}
	*z0 = rad * cs;
	*z1 = rad * sn;
}

// add_gaussian adds scale[b] Z to row b of dst for every batch element b, Z the coordinates
// 0..cols-1 of the noise stream (seeds[b], *roundp, stream). Batch elements [runs[k],
// runs[k+1]) share one seed, so one thread draws the 4 normals of coordinates 4q..4q+3 once
// for the whole run: box_muller of the Philox words, exactly as philox.GaussianBlock. The
// round is read from memory (staged with the seeds), so that a captured graph of a round
// serves every round.
extern "C" __global__ void add_gaussian(float* dst, i64 dbs, const u64* seeds, const float* scale,
                                        const int* runs, i64 nruns, const u32* roundp, u32 stream,
                                        i64 cols) {
	const u32 round = *roundp;
	i64 quads = (cols + 3) / 4;
	GRID_STRIDE_RC(ix, nruns * quads, 1, quads) {
		i64 k = ix.b, q = ix.j;
		int b0 = runs[k], b1 = runs[k + 1];
		u64 seed = seeds[b0];
		u32 c[4] = {(u32)q, round, stream, 1u << 24};  // domainNoise << 24
		philox4x32_10(c, (u32)seed, (u32)(seed >> 32));
		float z[4];
		for (int h = 0; h < 2; h++) {
			double z0, z1;
			box_muller(c[2 * h], c[2 * h + 1], &z0, &z1);
			z[2 * h] = (float)z0;
			z[2 * h + 1] = (float)z1;
		}
		i64 j0 = 4 * q;
		int nj = cols - j0 < 4 ? (int)(cols - j0) : 4;
		for (int b = b0; b < b1; b++) {
			float* row = dst + (i64)b * dbs + j0;
			float sc = scale[b];
			for (int h = 0; h < nj; h++) row[h] += sc * z[h];
		}
	}
}

// philox_raw writes the Philox4x32-10 words of counters (c0 + q, c1, c2, c3), q < n, under key
// (k0, k1) to out[4q..4q+3]; it exists to test the generator against known answers and train.
extern "C" __global__ void philox_raw(u32* out, i64 n, u32 k0, u32 k1, u32 c0, u32 c1, u32 c2,
                                      u32 c3) {
	GRID_STRIDE(q, n) {
		u32 c[4] = {c0 + (u32)q, c1, c2, c3};
		philox4x32_10(c, k0, k1);
		for (int h = 0; h < 4; h++) out[4 * q + h] = c[h];
	}
}

// go_log is Go's math.Log on amd64 (its assembly archLog, the FreeBSD algorithm): the same IEEE
// double operations in the same order, no fused multiply-adds, so the exact samplers of the
// non-Gaussian mechanisms (accounting's FromUniforms) draw the host's bits. Defined for the
// positive normal arguments the samplers pass (uniforms in [2^-64, 1)).
__device__ __forceinline__ double go_log(double x) {
	const double ln2hi = __longlong_as_double(0x3fe62e42fee00000ll);
	const double ln2lo = __longlong_as_double(0x3dea39ef35793c76ll);
	const double l1 = __longlong_as_double(0x3FE5555555555593ll);
	const double l2 = __longlong_as_double(0x3FD999999997FA04ll);
	const double l3 = __longlong_as_double(0x3FD2492494229359ll);
	const double l4 = __longlong_as_double(0x3FCC71C51D8E78AFll);
	const double l5 = __longlong_as_double(0x3FC7466496CB03DEll);
	const double l6 = __longlong_as_double(0x3FC39A09D078C69Fll);
	const double l7 = __longlong_as_double(0x3FC2F112DF3E5244ll);
	const double hsqrt2 = __longlong_as_double(0x3FE6A09E667F3BCDll);
	u64 b = (u64)__double_as_longlong(x);
	// f1 in [0.5, 1) and k with x = f1 2^k, then f1 in [sqrt(2)/2, sqrt(2)).
	double f1 = __longlong_as_double((long long)((b & 0x000FFFFFFFFFFFFFull) | 0x3FE0000000000000ull));
	double k = (double)((long long)((b >> 52) & 0x7FF) - 0x3FE);
	if (f1 < hsqrt2) {
		k -= 1.0;
		f1 *= 2.0;
	}
	double f = f1 - 1.0;
	double s = f / (2.0 + f);
	double s2 = s * s;
	double s4 = s2 * s2;
	double t1 = s2 * (((l7 * s4 + l5) * s4 + l3) * s4 + l1);
	double t2 = s4 * ((l6 * s4 + l4) * s4 + l2);
	double R = t1 + t2;
	double hfsq = 0.5 * f * f;
	return k * ln2hi - ((hfsq - (s * (hfsq + R) + k * ln2lo)) - f);
}

// mech_uniform is uniform q of the stream (key, round, stream) of philox.Uniforms: 53 bits of
// Philox block q/2 (of the counter (q/2, round, stream, DomainMechanism << 24)), words 2 and 3
// for even q, 0 and 1 for odd q, as (k + 1/2) 2^-53; then accounting's open, which keeps it in
// [2^-64, 1 - 2^-53].
__device__ __forceinline__ double mech_uniform(u32 k0, u32 k1, u32 round, u32 stream, u64 q) {
	u32 c[4] = {(u32)(q >> 1), round, stream, 6u << 24};  // DomainMechanism << 24
	philox4x32_10(c, k0, k1);
	int w = (q & 1) ? 0 : 2;
	u64 bits = ((u64)c[w] << 32 | (u64)c[w + 1]) >> 11;
	double u = ((double)bits + 0.5) * (1.0 / 9007199254740992.0);  // 2^-53
	const double lo = 5.421010862427522e-20;                         // 2^-64
	const double hi = 1.0 - 1.1102230246251565e-16;                  // 1 - 2^-53
	if (!(u > lo)) return lo;
	if (u > hi) return hi;
	return u;
}

// The mechanisms of mech_noise, numbered as compute.NoiseKind.
#define MECH_LAPLACE 1
#define MECH_STAIRCASE 2

// mech_draw is draw j of the stream: accounting.Laplace's FromUniforms of uniform j (scale p0),
// or accounting.Staircase's of uniforms 4j..4j+3 (epsilon p0, Delta p1, gamma p2, P(inner) p3),
// the same double operations in the same order.
__device__ __forceinline__ double mech_draw(int kind, double p0, double p1, double p2, double p3,
                                            u32 k0, u32 k1, u32 round, u32 stream, u64 j) {
	if (kind == MECH_LAPLACE) {
		double v = mech_uniform(k0, k1, round, stream, j);
		if (v < 0.5) return p0 * go_log(2.0 * v);
		return -p0 * go_log(2.0 * (1.0 - v));
	}
	double u0 = mech_uniform(k0, k1, round, stream, 4 * j);
	double u1 = mech_uniform(k0, k1, round, stream, 4 * j + 1);
	double u2 = mech_uniform(k0, k1, round, stream, 4 * j + 2);
	double u3 = mech_uniform(k0, k1, round, stream, 4 * j + 3);
	double k = floor(-go_log(u1) / p0);
	double x;
	if (u2 < p3)
		x = (k + p2 * u3) * p1;
	else
		x = (k + p2 + (1.0 - p2) * u3) * p1;
	return u0 < 0.5 ? -x : x;
}

// mech_noise draws the noise of a non-Gaussian mechanism (kind, parameters p0..p3) for the
// batch elements [runs[r], runs[r+1]) of each run r, which share the seed of their first
// element; one thread per run and coordinate j < cols, each draw computed once per run. The
// round is read from memory, as add_gaussian reads it.
// With sum = 0 it adds, from the stream (seed, round, streams[0]), dst[b, j] += scale[b]
// (0 + float32(X_j)), which is train's host path (a unit draw added into a cleared row,
// scaled, uploaded, added by axpby). With sum = 1 it writes dst[b, j] = (the float32 sum, from
// 0 in stream order, of float32(X_j) over the streams k < nstreams with use[r nstreams + k]
// set, or all of them when use is null) times total, train's sum over the participants.
extern "C" __global__ void mech_noise(float* dst, i64 dbs, const u64* seeds, const int* runs,
                                      i64 nruns, const u32* streams, i64 nstreams,
                                      const unsigned char* use, const float* scale, float total,
                                      int sum, int kind, double p0, double p1, double p2,
                                      double p3, const u32* roundp, i64 cols) {
	const u32 round = *roundp;
	GRID_STRIDE_RC(ix, nruns * cols, 1, cols) {
		i64 r = ix.b, j = ix.j;
		int b0 = runs[r], b1 = runs[r + 1];
		u64 seed = seeds[b0];
		u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
		if (!sum) {
			float x = 0.0f + (float)mech_draw(kind, p0, p1, p2, p3, k0, k1, round, streams[0], (u64)j);
			for (int b = b0; b < b1; b++) {
				float* y = dst + (i64)b * dbs + j;
				*y = *y + scale[b] * x;
			}
			continue;
		}
		float s = 0.0f;
		for (i64 k = 0; k < nstreams; k++) {
			if (use && !use[r * nstreams + k]) continue;
			s += (float)mech_draw(kind, p0, p1, p2, p3, k0, k1, round, streams[k], (u64)j);
		}
		s *= total;
		for (int b = b0; b < b1; b++) dst[(i64)b * dbs + j] = s;
	}
}
