package canary

import (
	"math"

	"github.com/fedaudit/fedaudit/internal/philox"
)

// directionSeed separates the directions' stream from every other use of the master seed.
const directionSeed = 0x63616e6172796469 // "canarydi"

// GaussianDirections returns the k public directions of an experiment with master seed seed in
// R^d, k x d row-major: canary j is the standard Gaussian vector of the Philox stream of round
// j under a key derived from the seed alone, normalized in float64. Independent Gaussian
// directions are nearly orthogonal in high dimension (|<u_i, u_j>| about 1/sqrt(d)).
func GaussianDirections(seed uint64, k, d int) []float32 {
	dirs := make([]float32, k*d)
	key := philox.Key(philox.SplitMix64(seed ^ directionSeed))
	for j := 0; j < k; j++ {
		u := dirs[j*d : (j+1)*d]
		philox.GaussianFloats(u, key, 0, uint32(j), 0)
		var ss float64
		for _, x := range u {
			ss += float64(x) * float64(x)
		}
		inv := 1 / math.Sqrt(ss)
		for i, x := range u {
			u[i] = float32(float64(x) * inv)
		}
	}
	return dirs
}

// OrthonormalDirections returns k orthonormal directions in R^d (k < d), k x d row-major:
// rows of a randomized orthonormal basis. Row j is the DCT-II basis vector of a frequency f_j,
// sqrt(2/d) cos(pi f_j (t + 1/2) / d) at coordinate t, with the frequencies drawn without
// replacement from 1..d-1, every coordinate multiplied by a random sign and the coordinates
// randomly permuted, all from the master seed. The DCT-II basis is orthonormal and signs and a
// permutation are an orthogonal map, so the rows are orthonormal to float rounding (their
// overlaps are about 1e-7, where independent Gaussian directions overlap by 1/sqrt(d)); every
// entry has magnitude at most sqrt(2/d), so like a random direction each row spreads over all
// parameters, and with the random signs the projection of any fixed vector on it is a sum of
// terms of random sign. Cost: k d cosines, against k^2 d for Gram-Schmidt.
func OrthonormalDirections(seed uint64, k, d int) []float32 {
	rng := philox.NewRand(philox.SplitMix64(seed^directionSeed), 0, 0, philox.DomainCanarySampling, 1)
	freq := make([]int32, d-1)
	philox.SamplePrefix(&rng, freq, k) // freq[:k]: k distinct values of 0..d-2
	perm := make([]int32, d)
	philox.SamplePrefix(&rng, perm, d)
	sign := make([]float64, d)
	for t := range sign {
		sign[t] = 1
		if rng.Uint64()>>63 == 1 {
			sign[t] = -1
		}
	}
	dirs := make([]float32, k*d)
	scale := math.Sqrt(2 / float64(d))
	for j := 0; j < k; j++ {
		f := float64(freq[j] + 1)
		u := dirs[j*d : (j+1)*d]
		for t := 0; t < d; t++ {
			u[perm[t]] = float32(sign[t] * scale * math.Cos(math.Pi*f*(float64(t)+0.5)/float64(d)))
		}
	}
	return dirs
}

// Dot is the inner product of two float32 vectors in float64.
func Dot(a, b []float32) float64 {
	var s float64
	for i, x := range a {
		s += float64(x) * float64(b[i])
	}
	return s
}

// Cosines returns the cosine of params - w0 with each of the k rows of dirs (k x d, unit
// rows): the final-model statistic of direction and gradient canaries; 0 when params = w0.
func Cosines(params, w0, dirs []float32, k int) []float64 {
	d := len(w0)
	delta := make([]float32, d)
	for i := range delta {
		delta[i] = params[i] - w0[i]
	}
	norm := math.Sqrt(Dot(delta, delta))
	cos := make([]float64, k)
	for j := range cos {
		if norm > 0 {
			cos[j] = Dot(delta, dirs[j*d:(j+1)*d]) / norm
		}
	}
	return cos
}

// Sum writes into dst (d values) the sum of the rows of dirs (k x d) whose bit is set: a run's
// included canaries together.
func Sum(dst, dirs []float32, bits []bool) {
	d := len(dst)
	clear(dst)
	for j, in := range bits {
		if in {
			for i, x := range dirs[j*d : (j+1)*d] {
				dst[i] += x
			}
		}
	}
}
