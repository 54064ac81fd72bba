package datasets

import (
	"math"
	"testing"
)

// ulpDiff is the distance between a and b in units in the last place.
func ulpDiff(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Abs(a-b) / (math.Nextafter(math.Abs(b), math.Inf(1)) - math.Abs(b))
}

// TestDetLogExp compares the portable logarithm and exponential with the math package. Both
// are accurate to about 1 ulp; 8 ulps leaves room for the sum of the two errors while still
// catching any wrong coefficient (which costs millions of ulps).
func TestDetLogExp(t *testing.T) {
	r := newRNG(7, "test")
	for range 20000 {
		// Cover [2^-60, 2^60] on a log scale plus the (0, 1] uniforms the generators use.
		x := math.Ldexp(1+r.float64(), r.intn(121)-60)
		if d := ulpDiff(detLog(x), math.Log(x)); d > 8 && math.Abs(math.Log(x)) > 1e-300 {
			t.Fatalf("detLog(%v) = %v, math.Log %v (%v ulp)", x, detLog(x), math.Log(x), d)
		}
		u := r.openFloat64()
		if d := math.Abs(detLog(u) - math.Log(u)); d > 8*math.Abs(math.Log(u))*0x1p-52+1e-300 {
			t.Fatalf("detLog(%v) = %v, math.Log %v", u, detLog(u), math.Log(u))
		}
		y := (r.float64() - 0.5) * 1400
		if d := ulpDiff(detExp(y), math.Exp(y)); d > 8 {
			t.Fatalf("detExp(%v) = %v, math.Exp %v (%v ulp)", y, detExp(y), math.Exp(y), d)
		}
	}
	if detLog(1) != 0 || detExp(0) != 1 || detExp(-800) != 0 || !math.IsInf(detExp(800), 1) {
		t.Error("wrong special values")
	}
}

// TestRNGDeterminism pins the first draws of a seeded generator: they must never change, or
// every stored split and synthetic dataset would. The pinned values were computed by a separate
// implementation of PCG-DXSM (128-bit LCG, Go's multiplier and increment) seeded with
// (42, FNV-1a-64("s")).
func TestRNGDeterminism(t *testing.T) {
	pinned := newRNG(42, "s")
	for i, want := range []uint64{0xfefc88510683e43d, 0xef09e8828fed4c23, 0xf59b1d95084d261d} {
		if got := pinned.uint64(); got != want {
			t.Errorf("draw %d = %#x, want %#x", i, got, want)
		}
	}
	a, b := newRNG(42, "s"), newRNG(42, "s")
	other := newRNG(42, "t")
	same := 0
	for range 100 {
		x := a.uint64()
		if x != b.uint64() {
			t.Fatal("two generators of one seed and stream differ")
		}
		if x == other.uint64() {
			same++
		}
	}
	if same > 0 {
		t.Errorf("streams s and t agree on %d of 100 draws", same)
	}
}

// TestNormalMoments checks the polar method's first four moments on 200000 draws. Standard
// errors are 1/sqrt(n) = 0.0022 for the mean, sqrt(2/n) = 0.0032 for the variance and about
// sqrt(96/n) = 0.022 for the fourth moment; the bounds are 5 standard errors.
func TestNormalMoments(t *testing.T) {
	r := newRNG(1, "normal")
	const n = 200000
	var m1, m2, m4 float64
	for range n {
		x := r.normal()
		m1 += x
		m2 += x * x
		m4 += x * x * x * x
	}
	m1, m2, m4 = m1/n, m2/n, m4/n
	if math.Abs(m1) > 0.011 || math.Abs(m2-1) > 0.016 || math.Abs(m4-3) > 0.11 {
		t.Errorf("moments: mean %v, variance %v, fourth %v; want 0, 1, 3", m1, m2, m4)
	}
}

// TestGammaMoments checks mean and variance (both equal to the shape) of exp(logGamma) for
// shapes below and above 1, on 100000 draws each; bounds are 5 standard errors of the mean
// (sqrt(shape/n)) and a 5% relative bound on the variance (its standard error is below 1.5%
// for these shapes).
func TestGammaMoments(t *testing.T) {
	for _, shape := range []float64{0.1, 0.5, 1, 2.5, 10} {
		r := newRNG(3, "gamma")
		const n = 100000
		var s1, s2 float64
		for range n {
			g := math.Exp(r.logGamma(shape))
			s1 += g
			s2 += g * g
		}
		mean := s1 / n
		variance := s2/n - mean*mean
		if math.Abs(mean-shape) > 5*math.Sqrt(shape/n) {
			t.Errorf("shape %v: mean %v", shape, mean)
		}
		if math.Abs(variance-shape) > 0.05*shape {
			t.Errorf("shape %v: variance %v", shape, variance)
		}
	}
}

func TestDirichletAndIntn(t *testing.T) {
	r := newRNG(5, "dir")
	for _, alpha := range []float64{0.001, 0.1, 1, 100} {
		p := r.dirichlet(10, alpha)
		var sum float64
		for _, v := range p {
			if !(v >= 0) {
				t.Fatalf("alpha %v: proportion %v", alpha, v)
			}
			sum += v
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Errorf("alpha %v: proportions sum to %v", alpha, sum)
		}
	}
	// intn over 7 values: each count is Binomial(70000, 1/7), sd about 93; allow 5 sd.
	counts := make([]int, 7)
	for range 70000 {
		counts[r.intn(7)]++
	}
	for k, c := range counts {
		if math.Abs(float64(c)-10000) > 465 {
			t.Errorf("intn(7) gave %d %d times of 70000", k, c)
		}
	}
}
