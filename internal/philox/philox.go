package philox

import (
	"math"
	"math/bits"
)

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC11): a counter-based generator, so any draw is a pure function of (key, counter). That is
// what makes a run's randomness independent of the replica count, shard layout, thread count
// and backend: each value is addressed, never taken from a shared stream.

const (
	m0 = 0xD2511F53
	m1 = 0xCD9E8D57
	w0 = 0x9E3779B9
	w1 = 0xBB67AE85
)

// Block returns the 10-round Philox4x32 bijection of counter c under key k.
func Block(c [4]uint32, k [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := c[0], c[1], c[2], c[3]
	k0, k1 := k[0], k[1]
	for i := 0; i < 10; i++ {
		p0 := uint64(m0) * uint64(c0)
		p1 := uint64(m1) * uint64(c2)
		c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
		k0 += w0
		k1 += w1
	}
	return [4]uint32{c0, c1, c2, c3}
}

// Domains separate the uses of one key so that no two purposes ever share a counter.
const (
	DomainNoise         = 1
	DomainBatch         = 2
	DomainPoisson       = 3
	DomainParticipation = 4
	DomainInit          = 5
	// DomainMechanism: the uniforms of the non-Gaussian mechanisms (Uniforms).
	DomainMechanism = 6
	// DomainClientSampling: the Poisson client sampling of the DP-FedAvg family.
	DomainClientSampling = 7
	// DomainCanarySampling: the Poisson sampling of the DP-FedAvg family's canary clients.
	DomainCanarySampling = 8
)

// Key is the Philox key of a 64-bit seed.
func Key(seed uint64) [2]uint32 { return [2]uint32{uint32(seed), uint32(seed >> 32)} }

// SplitMix64 is the finaliser of Steele, Lea and Flood's SplitMix64, used to derive seeds.
func SplitMix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// GaussianBlock returns the 4 standard normal values of coordinates 4j..4j+3 of the stream
// (key, round, stream, domain): two Box-Muller transforms of the Philox words.
func GaussianBlock(key [2]uint32, j, round, stream uint32) [4]float64 {
	r := Block([4]uint32{j, round, stream, DomainNoise << 24}, key)
	var z [4]float64
	z[0], z[1] = BoxMuller(r[0], r[1])
	z[2], z[3] = BoxMuller(r[2], r[3])
	return z
}

// GaussianFloats sets z[i] = float32 of coordinate 4 j0 + i of the noise stream (key, round,
// stream), one block at a time: the reference of the SIMD versions in the CPU backend.
func GaussianFloats(z []float32, key [2]uint32, j0, round, stream uint32) {
	for q := 0; q < len(z); q += 4 {
		g := GaussianBlock(key, j0+uint32(q>>2), round, stream)
		for h := 0; h < 4 && q+h < len(z); h++ {
			z[q+h] = float32(g[h])
		}
	}
}

// Coefficients of the Box-Muller transform's polynomials: exact rationals rounded once to
// float64 (the factorials are exact in float64 up to 18!), so every implementation that writes
// them as 1.0/N gets the same values.
const (
	// ln(1+f) = 2s (1 + s^2/3 + s^4/5 + ...), s = f/(2+f), |s| <= 0.1716: the 11th term is
	// below 2^-55 of the first.
	logC1, logC3, logC5, logC7, logC9, logC11 = 1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11
	logC13, logC15, logC17, logC19, logC21    = 1.0 / 13, 1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21
	// Taylor series of sin and cos on |t| <= pi/4: the first omitted terms are below 2^-60.
	sinC3, sinC5, sinC7, sinC9 = -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880
	sinC11, sinC13, sinC15     = -1.0 / 39916800, 1.0 / 6227020800, -1.0 / 1307674368000
	sinC17                     = 1.0 / 355687428096000
	cosC2, cosC4, cosC6, cosC8 = -1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320
	cosC10, cosC12, cosC14     = -1.0 / 3628800, 1.0 / 479001600, -1.0 / 87178291200
	cosC16, cosC18             = 1.0 / 20922789888000, -1.0 / 6402373705728000
	// 2 pi 2^-32: the angle of one step of the 32-bit word (exact scaling of float64(2 pi)).
	twoPiOver2p32 = 2 * math.Pi / 4294967296
)

// ln 2 split so that k ln2Hi is exact for |k| < 2^11 (fdlibm's constants).
var (
	ln2Hi = math.Float64frombits(0x3fe62e42fee00000)
	ln2Lo = math.Float64frombits(0x3dea39ef35793c76)
)

// BoxMuller returns the two standard normals of the Philox words (a, b): radius
// sqrt(-2 ln u), u = (a + 1) 2^-32 in (0, 1], at angle 2 pi b 2^-32. Its logarithm, sine and
// cosine are the polynomials above with fused multiply-adds in a fixed order, not the math
// package's: what the CUDA kernel (kernels/noise.cu) and the SIMD path compute too, bit for
// bit. Both functions are within a few float64 ulps of the true ones, far below the float32
// the noise is stored in.
func BoxMuller(a, b uint32) (z0, z1 float64) {
	// ln u = (e - 32) ln 2 + ln m, a + 1 = 2^e m with m in [sqrt(2)/2, sqrt(2)).
	v := math.Float64bits(float64(a) + 1)
	e := int64(v>>52) - 1023
	m := math.Float64frombits(v&(1<<52-1) | 1023<<52)
	if m > math.Sqrt2 {
		m *= 0.5
		e++
	}
	f := m - 1 // exact (Sterbenz)
	s := f / (2 + f)
	z := s * s
	p := math.FMA(z, logC21, logC19)
	for _, c := range [...]float64{logC17, logC15, logC13, logC11, logC9, logC7, logC5, logC3, logC1} {
		p = math.FMA(z, p, c)
	}
	k := float64(e - 32)
	lnu := math.FMA(k, ln2Hi, math.FMA(k, ln2Lo, 2*s*p))
	rad := math.Sqrt(-2 * lnu)

	// The angle's quadrant q = round(4 b 2^-32) and remainder r in [-2^29, 2^29) are exact
	// in integers; t = 2 pi r 2^-32 in [-pi/4, pi/4).
	q := (uint64(b) + 1<<29) >> 30
	t := float64(int64(b)-int64(q<<30)) * twoPiOver2p32
	t2 := t * t
	sp := math.FMA(t2, sinC17, sinC15)
	for _, c := range [...]float64{sinC13, sinC11, sinC9, sinC7, sinC5, sinC3} {
		sp = math.FMA(t2, sp, c)
	}
	sin := math.FMA(t*t2, sp, t)
	cp := math.FMA(t2, cosC18, cosC16)
	for _, c := range [...]float64{cosC14, cosC12, cosC10, cosC8, cosC6, cosC4, cosC2} {
		cp = math.FMA(t2, cp, c)
	}
	cos := math.FMA(t2, cp, 1)
	switch q & 3 { // rotate by q quarter turns
	case 1:
		sin, cos = cos, -sin
	case 2:
		sin, cos = -sin, -cos
	case 3:
		sin, cos = -cos, sin
	}
	return rad * cos, rad * sin
}

// AddGaussian adds scale*Z to dst, Z the coordinates [off, off+len(dst)) of the noise
// stream (seed, round, stream). It is the reference the backends must agree with.
func AddGaussian(dst []float32, seed uint64, round, stream uint32, off int, scale float32) {
	key := Key(seed)
	i := 0
	for i < len(dst) {
		c := off + i
		j := c >> 2
		z := GaussianBlock(key, uint32(j), round, stream)
		for q := c & 3; q < 4 && i < len(dst); q++ {
			dst[i] += scale * float32(z[q])
			i++
		}
	}
}

// Rand draws 64-bit values from the key's stream (round, slot, domain, step).
type Rand struct {
	key                 [2]uint32
	round, slot, tag, n uint32
	buf                 [4]uint32
	have                int
}

// NewRand returns the generator of the counters (n, round, slot, domain<<24 | step) for
// n = 0, 1, ... under seed's key.
func NewRand(seed uint64, round, slot uint32, domain, step uint32) Rand {
	return Rand{key: Key(seed), round: round, slot: slot, tag: domain<<24 | step&0xFFFFFF}
}

func (r *Rand) Uint64() uint64 {
	if r.have == 0 {
		r.buf = Block([4]uint32{r.n, r.round, r.slot, r.tag}, r.key)
		r.n++
		r.have = 4
	}
	r.have -= 2
	return uint64(r.buf[r.have])<<32 | uint64(r.buf[r.have+1])
}

// Below returns a value in [0, n) (bias at most n/2^64).
func (r *Rand) Below(n int) int {
	hi, _ := bits.Mul64(r.Uint64(), uint64(n))
	return int(hi)
}

// Float returns a uniform value in [0, 1) with 53 random bits.
func (r *Rand) Float() float64 { return float64(r.Uint64()>>11) * (1.0 / (1 << 53)) }

// SamplePrefix puts a uniformly random ordered k-subset of [0, n) into perm[:k] by a partial
// Fisher-Yates shuffle; perm must have length n.
func SamplePrefix(r *Rand, perm []int32, k int) {
	for i := range perm {
		perm[i] = int32(i)
	}
	for i := 0; i < k && i < len(perm)-1; i++ {
		j := i + r.Below(len(perm)-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
}

// Uniforms is the uniform source of the exact samplers of the non-Gaussian mechanisms: 53-bit
// uniforms on (0, 1), two per Philox block of the counter (n, round, stream, DomainMechanism),
// so a draw is a pure function of (seed, round, stream, position) like the Gaussian stream.
type Uniforms struct {
	key           [2]uint32
	round, stream uint32
	n             uint32
	buf           [4]uint32
	have          int
}

// NewUniforms returns the uniforms of the stream (seed, round, stream).
func NewUniforms(seed uint64, round, stream uint32) *Uniforms {
	return &Uniforms{key: Key(seed), round: round, stream: stream}
}

// Float64 implements accounting.Uniform: (k + 1/2) / 2^53 for a uniform 53-bit k, rounded to
// float64, never 0 or 1. For k >= 2^52 the sum k + 1/2 is not a float64 and rounds to the even
// one of k and k + 1, so k = 2^53 - 1 would give exactly 1: it gives 1 - 2^-53 instead, the value
// accounting's samplers nudge a 1 to, so their draws are the same either way.
func (u *Uniforms) Float64() float64 {
	if u.have == 0 {
		u.buf = Block([4]uint32{u.n, u.round, u.stream, DomainMechanism << 24}, u.key)
		u.n++
		u.have = 4
	}
	u.have -= 2
	k := (uint64(u.buf[u.have])<<32 | uint64(u.buf[u.have+1])) >> 11
	return min((float64(k)+0.5)*(1.0/(1<<53)), 1-0x1p-53)
}
