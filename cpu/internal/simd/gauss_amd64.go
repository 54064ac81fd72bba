//go:build !purego

package simd

import "github.com/fedaudit/fedaudit/internal/philox"

// gaussAVX2 writes the float32 normals of counters j0 .. j0+4 quads-1 of a noise stream into
// z[:16 quads] (gauss_amd64.s): philox.GaussianBlock's values bit for bit, four counters at a time.
//
//go:noescape
func gaussAVX2(quads int, z *float32, k0, k1, j0, round, stream uint32)

// gaussAVX512 is gaussAVX2 eight counters at a time: z[:32 octs].
//
//go:noescape
func gaussAVX512(octs int, z *float32, k0, k1, j0, round, stream uint32)

// GaussianFloats sets z[i] = float32 of coordinate 4 j0 + i of the noise stream (key, round,
// stream).
func GaussianFloats(z []float32, key [2]uint32, j0, round, stream uint32) {
	if o := len(z) / 32; useAVX512 && o > 0 {
		gaussAVX512(o, &z[0], key[0], key[1], j0, round, stream)
		z = z[32*o:]
		j0 += uint32(8 * o)
	}
	if q := len(z) / 16; useAVX2 && q > 0 {
		gaussAVX2(q, &z[0], key[0], key[1], j0, round, stream)
		z = z[16*q:]
		j0 += uint32(4 * q)
	}
	philox.GaussianFloats(z, key, j0, round, stream)
}
