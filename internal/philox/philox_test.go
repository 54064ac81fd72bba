package philox

import (
	"math"
	"slices"
	"testing"
)

// Known answers from Random123's tests/kat_vectors (Salmon et al. 2011), the three
// "philox4x32 10" lines: counter (4 words), key (2 words), expected output (4 words).
func TestPhilox4x32KnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := Block(c.ctr, c.key); got != c.want {
			t.Errorf("Block(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

// The Gaussian stream must be standard normal: mean, variance and a Kolmogorov-Smirnov test
// against Phi on 1e5 draws. Tolerances: mean within 5 standard errors (5/sqrt(n)), variance
// within 5 standard errors (5 sqrt(2/n)), KS statistic below the 0.1% critical value
// 1.95/sqrt(n), so a correct generator fails with probability about 1e-3.
func TestGaussianDistribution(t *testing.T) {
	const n = 100000
	z := make([]float32, n)
	AddGaussian(z, 12345, 7, 3, 0, 1)
	var s, ss float64
	for _, v := range z {
		s += float64(v)
		ss += float64(v) * float64(v)
	}
	mean := s / n
	vr := ss/n - mean*mean
	if math.Abs(mean) > 5/math.Sqrt(n) {
		t.Errorf("mean %g, want 0 within %g", mean, 5/math.Sqrt(n))
	}
	if math.Abs(vr-1) > 5*math.Sqrt(2.0/n) {
		t.Errorf("variance %g, want 1 within %g", vr, 5*math.Sqrt(2.0/n))
	}
	x := make([]float64, n)
	for i, v := range z {
		x[i] = float64(v)
	}
	slices.Sort(x)
	var ks float64
	for i, v := range x {
		f := 0.5 * math.Erfc(-v/math.Sqrt2)
		ks = max(ks, math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n))
	}
	if crit := 1.95 / math.Sqrt(n); ks > crit {
		t.Errorf("KS statistic %g above the 0.1%% critical value %g", ks, crit)
	}
}

// A window of the stream equals the same coordinates of the full stream, so the noise does not
// depend on how coordinates are split into blocks; streams of other rounds differ.
func TestGaussianAddressing(t *testing.T) {
	full := make([]float32, 1000)
	AddGaussian(full, 99, 2, 5, 0, 1)
	part := make([]float32, 301)
	AddGaussian(part, 99, 2, 5, 123, 1)
	if !slices.Equal(part, full[123:424]) {
		t.Error("window of the stream differs from the full stream")
	}
	other := make([]float32, 1000)
	AddGaussian(other, 99, 3, 5, 0, 1)
	if slices.Equal(other, full) {
		t.Error("rounds 2 and 3 gave the same noise")
	}
}

// BoxMuller against the math package's logarithm, sine and cosine, on the extreme words and
// on random ones: within 2e-15 of the radius. Both sides err by a few float64 ulps (the math
// package's angle 2 pi b 2^-32 alone is rounded by up to 4.4e-16 near 2 pi); a wrong
// coefficient or quadrant errs by 1e-10 or far more.
func TestBoxMullerAccuracy(t *testing.T) {
	words := []uint32{0, 1, 2, 3, 1 << 29, 1<<29 - 1, 1<<29 + 1, 1 << 30, 3 << 29, 1 << 31, 5 << 29, 3 << 30, 7 << 29, 7<<29 - 1, 7<<29 + 1, 0xFFFFFFFE, 0xFFFFFFFF}
	rng := NewRand(9, 0, 0, 9, 0)
	for i := 0; i < 20000; i++ {
		words = append(words, uint32(rng.Uint64()))
	}
	worst := 0.0
	for i, a := range words {
		b := words[(i*7+3)%len(words)]
		z0, z1 := BoxMuller(a, b)
		rad := math.Sqrt(-2 * math.Log((float64(a)+1)/4294967296)) // u in (0, 1]
		s, c := math.Sincos(2 * math.Pi * float64(b) / 4294967296)
		for _, p := range [][2]float64{{z0, rad * c}, {z1, rad * s}} {
			d := math.Abs(p[0]-p[1]) / max(rad, 1e-300)
			worst = max(worst, d)
			if d > 2e-15 {
				t.Fatalf("BoxMuller(%d, %d) = %v, %v; math gives %v, %v", a, b, z0, z1, rad*c, rad*s)
			}
		}
	}
	t.Logf("largest difference from the math package: %.2e of the radius", worst)
}

// Uniforms.Float64 stays inside (0, 1) at both ends of the 53-bit range: k = 0 and
// k = 2^53 - 1 (all bits set), whose (k + 1/2) 2^-53 is not a float64 and rounds to 1.
func TestUniformsOpenInterval(t *testing.T) {
	for _, w := range [][2]uint32{{0, 0}, {0, 0x7FF}, {0xFFFFFFFF, 0xFFFFF7FF}, {0xFFFFFFFF, 0xFFFFFFFF}} {
		u := &Uniforms{buf: [4]uint32{w[0], w[1]}, have: 2} // the next uniform takes buf[0], buf[1]
		if v := u.Float64(); !(v > 0 && v < 1) {
			t.Errorf("words %08x: Float64() = %v, want a value in (0, 1)", w, v)
		}
	}
}
