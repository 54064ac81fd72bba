package train

import (
	"math"
	"math/bits"
)

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC11): a counter-based generator, so any draw is a pure function of (key, counter). That is
// what makes a run's randomness independent of the replica count, shard layout, thread count
// and backend: each value is addressed, never taken from a shared stream.

const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// philox4x32 returns the 10-round Philox4x32 bijection of counter c under key k.
func philox4x32(c [4]uint32, k [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := c[0], c[1], c[2], c[3]
	k0, k1 := k[0], k[1]
	for i := 0; i < 10; i++ {
		p0 := uint64(philoxM0) * uint64(c0)
		p1 := uint64(philoxM1) * uint64(c2)
		c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
		k0 += philoxW0
		k1 += philoxW1
	}
	return [4]uint32{c0, c1, c2, c3}
}

// Domains separate the uses of one key so that no two purposes ever share a counter.
const (
	domainNoise         = 1
	domainBatch         = 2
	domainPoisson       = 3
	domainParticipation = 4
	domainInit          = 5
)

// streamOthers is the client slot of the noise drawn once for the sum of the non-target
// clients' noise.
const streamOthers = 0xFFFFFFFF

func keyOf(seed uint64) [2]uint32 { return [2]uint32{uint32(seed), uint32(seed >> 32)} }

// splitMix64 is the finaliser of Steele, Lea and Flood's SplitMix64, used to derive seeds.
func splitMix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// RunSeed is the seed of pair p's two runs: SplitMix64(SplitMix64(master) XOR p). Both worlds of
// a pair use it, so they share noise, client participation and Poisson sampling.
func RunSeed(master uint64, pair int) uint64 {
	return splitMix64(splitMix64(master) ^ uint64(pair))
}

// uniform01 maps 32 random bits to (0, 1]: never 0, so log is finite.
func uniform01(x uint32) float64 { return (float64(x) + 1) * (1.0 / 4294967296.0) }

// gaussianBlock returns the 4 standard normal values of coordinates 4j..4j+3 of the stream
// (key, round, stream, domain): two Box-Muller transforms, exact in distribution for
// uniforms on (0,1].
func gaussianBlock(key [2]uint32, j, round, stream uint32) [4]float64 {
	r := philox4x32([4]uint32{j, round, stream, domainNoise << 24}, key)
	var z [4]float64
	for h := 0; h < 2; h++ {
		rad := math.Sqrt(-2 * math.Log(uniform01(r[2*h])))
		s, c := math.Sincos(2 * math.Pi * float64(r[2*h+1]) * (1.0 / 4294967296.0))
		z[2*h] = rad * c
		z[2*h+1] = rad * s
	}
	return z
}

// AddGaussianHost adds scale*Z to dst, Z the coordinates [off, off+len(dst)) of the noise
// stream (seed, round, stream). It is the reference the backends must agree with.
func AddGaussianHost(dst []float32, seed uint64, round, stream uint32, off int, scale float32) {
	key := keyOf(seed)
	i := 0
	for i < len(dst) {
		c := off + i
		j := c >> 2
		z := gaussianBlock(key, uint32(j), round, stream)
		for q := c & 3; q < 4 && i < len(dst); q++ {
			dst[i] += scale * float32(z[q])
			i++
		}
	}
}

// counterRand draws 64-bit values from the key's stream (round, slot, domain, step).
type counterRand struct {
	key                 [2]uint32
	round, slot, tag, n uint32
	buf                 [4]uint32
	have                int
}

func newCounterRand(seed uint64, round, slot uint32, domain, step uint32) counterRand {
	return counterRand{key: keyOf(seed), round: round, slot: slot, tag: domain<<24 | step&0xFFFFFF}
}

func (r *counterRand) uint64() uint64 {
	if r.have == 0 {
		r.buf = philox4x32([4]uint32{r.n, r.round, r.slot, r.tag}, r.key)
		r.n++
		r.have = 4
	}
	r.have -= 2
	return uint64(r.buf[r.have])<<32 | uint64(r.buf[r.have+1])
}

// below returns a value in [0, n) (bias at most n/2^64).
func (r *counterRand) below(n int) int {
	hi, _ := bits.Mul64(r.uint64(), uint64(n))
	return int(hi)
}

// float returns a uniform value in [0, 1) with 53 random bits.
func (r *counterRand) float() float64 { return float64(r.uint64()>>11) * (1.0 / (1 << 53)) }

// samplePrefix puts a uniformly random ordered k-subset of [0, n) into perm[:k] by a partial
// Fisher-Yates shuffle; perm must have length n.
func samplePrefix(r *counterRand, perm []int32, k int) {
	for i := range perm {
		perm[i] = int32(i)
	}
	for i := 0; i < k && i < len(perm)-1; i++ {
		j := i + r.below(len(perm)-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
}
