package datasets

import (
	"hash/fnv"
	"math"
	"math/bits"
	"math/rand/v2"
)

// rng is the package's only source of randomness. It is built so that a seed gives the same
// bytes on every platform and Go release:
//
//   - the bits come from math/rand/v2's PCG (128-bit LCG with the DXSM output function), whose
//     algorithm is fixed by its documentation; only PCG.Uint64 is used, never the methods of
//     rand.Rand, whose algorithms Go does not promise to keep;
//   - floating-point work uses only +, -, *, / with explicit float64 conversions around products
//     that feed a sum (the Go spec lets a compiler fuse x*y+z otherwise, and arm64 does), plus
//     math.Sqrt (correctly rounded by IEEE 754) and math.Frexp/Ldexp (exact);
//   - logarithms and exponentials come from detLog and detExp below rather than math.Log and
//     math.Exp, which have assembly versions on some architectures that may differ in the last
//     bit from the pure Go ones.
type rng struct {
	pcg *rand.PCG
	// spare holds the second normal deviate of the last polar-method pair.
	spare    float64
	hasSpare bool
}

// newRNG seeds a generator for one purpose. The stream name separates purposes (splits,
// canaries, synthetic data) so that the same user seed does not give correlated draws.
func newRNG(seed uint64, stream string) *rng {
	h := fnv.New64a()
	h.Write([]byte(stream))
	return &rng{pcg: rand.NewPCG(seed, h.Sum64())}
}

func (r *rng) uint64() uint64 { return r.pcg.Uint64() }

// float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *rng) float64() float64 { return float64(r.uint64()>>11) * 0x1p-53 }

// openFloat64 returns a uniform value in (0, 1], safe to take the logarithm of.
func (r *rng) openFloat64() float64 { return 1 - r.float64() }

// intn returns a uniform integer in [0, n) by Lemire's multiply-and-reject method, which has no
// modulo bias. n must be positive.
func (r *rng) intn(n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(r.uint64(), un)
	if lo < un {
		threshold := -un % un
		for lo < threshold {
			hi, lo = bits.Mul64(r.uint64(), un)
		}
	}
	return int(hi)
}

// shuffle permutes idx uniformly (Fisher-Yates).
func (r *rng) shuffle(idx []int) {
	for i := len(idx) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		idx[i], idx[j] = idx[j], idx[i]
	}
}

// perm returns a uniform permutation of 0..n-1.
func (r *rng) perm(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	r.shuffle(idx)
	return idx
}

// normal returns a standard normal deviate by Marsaglia's polar method.
func (r *rng) normal() float64 {
	if r.hasSpare {
		r.hasSpare = false
		return r.spare
	}
	for {
		u := 2*r.float64() - 1
		v := 2*r.float64() - 1
		s := float64(u*u) + float64(v*v)
		if s == 0 || s >= 1 {
			continue
		}
		f := math.Sqrt(-2 * detLog(s) / s)
		r.spare, r.hasSpare = float64(v*f), true
		return float64(u * f)
	}
}

// logGamma returns the logarithm of a Gamma(shape, 1) variate. Working with logarithms keeps
// Dirichlet draws with tiny concentration (alpha = 0.01 and below) from underflowing to zero.
// It uses Marsaglia and Tsang's method, with the boost G(a) = G(a+1) U^(1/a) for a < 1.
func (r *rng) logGamma(shape float64) float64 {
	if shape < 1 {
		return r.logGamma(shape+1) + detLog(r.openFloat64())/shape
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.normal()
		v := 1 + float64(c*x)
		if v <= 0 {
			continue
		}
		v = float64(float64(v*v) * v)
		u := r.openFloat64()
		// Accept when log u < x²/2 + d - d v + d log v.
		bound := float64(0.5*float64(x*x)) + d - float64(d*v) + float64(d*detLog(v))
		if detLog(u) < bound {
			return detLog(d) + detLog(v)
		}
	}
}

// dirichlet returns a draw from the symmetric Dirichlet(alpha) distribution on k categories.
func (r *rng) dirichlet(k int, alpha float64) []float64 {
	logs := make([]float64, k)
	top := math.Inf(-1)
	for i := range logs {
		logs[i] = r.logGamma(alpha)
		top = max(top, logs[i])
	}
	p := make([]float64, k)
	var sum float64
	for i, l := range logs {
		p[i] = detExp(l - top) // the largest is exp(0) = 1, so the sum is at least 1
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// detLog is the natural logarithm of a positive finite x, computed with basic arithmetic only
// (see rng) to a few units in the last place: x = m 2^e with m in [sqrt(1/2), sqrt(2)), and
// ln m = 2 atanh(t) with t = (m-1)/(m+1), |t| < 0.172, summed as an odd series to t^21
// (truncation below 1e-17).
func detLog(x float64) float64 {
	m, e := math.Frexp(x)
	if m < math.Sqrt2/2 {
		m *= 2
		e--
	}
	t := (m - 1) / (m + 1)
	t2 := float64(t * t)
	p := 1.0 / 21
	for k := 19; k >= 1; k -= 2 {
		p = float64(p*t2) + 1/float64(k)
	}
	return float64(2*float64(t*p)) + float64(float64(e)*math.Ln2)
}

// detExp is e^x computed with basic arithmetic only (see rng): x = k ln2 + r with |r| <= ln2/2
// (ln 2 split in two parts so that r is accurate), e^r by its Taylor series to r^17
// (truncation below 1e-20), then scaled by 2^k exactly.
func detExp(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // ln 2 rounded so that k*ln2Hi is exact for |k| < 2^20
		ln2Lo = 1.90821492927058770002e-10 // ln 2 - ln2Hi
	)
	switch {
	case math.IsNaN(x):
		return x
	case x > 709.7:
		return math.Inf(1)
	case x < -745.2:
		return 0
	}
	k := math.Round(x / math.Ln2)
	r := x - float64(k*ln2Hi) - float64(k*ln2Lo)
	p := 1.0
	for i := 17; i >= 1; i-- {
		p = 1 + float64(r*p)/float64(i)
	}
	return math.Ldexp(p, int(k))
}
