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
// 0..cols-1 of the noise stream (seeds[b], round, stream). Batch elements [runs[k],
// runs[k+1]) share one seed, so one thread draws the 4 normals of coordinates 4q..4q+3 once
// for the whole run: box_muller of the Philox words, exactly as philox.GaussianBlock.
extern "C" __global__ void add_gaussian(float* dst, i64 dbs, const u64* seeds, const float* scale,
                                        const int* runs, i64 nruns, u32 round, u32 stream,
                                        i64 cols) {
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
