// Gaussian noise from the counter-based Philox4x32-10 stream of train/philox.go.
#include "common.cuh"

// add_gaussian adds scale[b] Z to row b of dst for every batch element b, Z the coordinates
// 0..cols-1 of the noise stream (seeds[b], round, stream). Batch elements [runs[k],
// runs[k+1]) share one seed, so one thread draws the 4 normals of coordinates 4q..4q+3 once
// for the whole run: Box-Muller in float64 on the uniforms (x + 1) 2^-32 of the Philox words,
// exactly as gaussianBlock does.
extern "C" __global__ void add_gaussian(float* dst, i64 dbs, const u64* seeds, const float* scale,
                                        const int* runs, i64 nruns, u32 round, u32 stream,
                                        i64 cols) {
	i64 quads = (cols + 3) / 4;
	GRID_STRIDE(i, nruns * quads) {
		i64 k = i / quads, q = i % quads;
		int b0 = runs[k], b1 = runs[k + 1];
		u64 seed = seeds[b0];
		u32 c[4] = {(u32)q, round, stream, 1u << 24};  // domainNoise << 24
		philox4x32_10(c, (u32)seed, (u32)(seed >> 32));
		float z[4];
		for (int h = 0; h < 2; h++) {
			double rad = sqrt(-2.0 * log(((double)c[2 * h] + 1.0) * (1.0 / 4294967296.0)));
			double sn, cs;
			sincos(2.0 * 3.141592653589793 * (double)c[2 * h + 1] * (1.0 / 4294967296.0), &sn, &cs);
			z[2 * h] = (float)(rad * cs);
			z[2 * h + 1] = (float)(rad * sn);
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
