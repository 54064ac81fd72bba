package audit

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

// TestNoncentralChiSquareOneDF checks the Poisson-mixture survival function against the closed
// form for one degree of freedom, X = (Z + a)^2 with lambda = a^2:
// P(X >= x) = Phi(-sqrt(x) - a) + Phi(a - sqrt(x)). Tolerance 1e-10 absolute: the mixture's
// truncation error is below 1e-40 and the rest is float64 rounding over a few thousand terms.
func TestNoncentralChiSquareOneDF(t *testing.T) {
	for _, c := range []struct{ x, a float64 }{
		{0.5, 0}, {3, 0.5}, {10, 2}, {50, 6}, {1, 6}, {400, 20}, {300, 20}, {1e-3, 1},
	} {
		got := noncentralChiSquareSurvival(c.x, 1, c.a*c.a)
		s := math.Sqrt(c.x)
		want := normalCDF(-s-c.a) + normalCDF(c.a-s)
		if math.Abs(got-want) > 1e-10 {
			t.Errorf("x=%v a=%v: %.14g, closed form %.14g", c.x, c.a, got, want)
		}
	}
	// Central case against the chi-square with 2 degrees of freedom, P(X >= x) = e^{-x/2}.
	if got, want := noncentralChiSquareSurvival(3, 2, 0), math.Exp(-1.5); math.Abs(got-want) > 1e-14 {
		t.Errorf("central: %v, want %v", got, want)
	}
}

// llrScores fills x and y with the informed adversary's log-likelihood ratio under the
// Gaussian mechanism: N(mu^2/2, mu^2) in world C and N(-mu^2/2, mu^2) in world C'. coupled
// makes the pair share its noise (y_i = x_i - mu^2), as coupled runs of one mechanism do.
func llrScores(rng *rand.Rand, mu float64, x, y []float64, coupled bool) {
	for i := range x {
		x[i] = mu*mu/2 + mu*rng.NormFloat64()
		if coupled {
			y[i] = x[i] - mu*mu
		} else {
			y[i] = -mu*mu/2 + mu*rng.NormFloat64()
		}
	}
}

// TestInformedGDPIntervalCoverage: the interval is exact under the model, so its miss rate is
// 5% per side pair, not less. Over 400 repetitions per case the misses of the two-sided
// interval and of the one-sided lower bound must pass the self-test's rule (at most the
// largest count with P(Binomial(400, 0.05) >= m) >= 1e-3, i.e. 33), and, to show the interval
// is not loose, the one-sided bound must miss at least 5 times where it is exact (independent
// worlds; the Bonferroni split of the coupled case makes that one conservative).
func TestInformedGDPIntervalCoverage(t *testing.T) {
	const reps = 400
	maxMiss := maxAllowedMisses(reps, 0.05, 1e-3)
	for ci, c := range []struct {
		n       int
		mu      float64
		coupled bool
	}{{50, 0.3, false}, {100, 1, false}, {100, 3, false}, {500, 5, false}, {100, 1, true}, {200, 4, true}} {
		rng := rand.New(rand.NewPCG(uint64(ci), 21))
		x, y := make([]float64, c.n), make([]float64, c.n)
		two, one, conflicts := 0, 0, 0
		width := 0.0
		for range reps {
			llrScores(rng, c.mu, x, y, c.coupled)
			iv, err := InformedGDPInterval(x, y, 0.95, c.coupled)
			if err != nil {
				t.Fatal(err)
			}
			if !(iv.Lower <= c.mu && c.mu <= iv.Upper) {
				two++
			}
			if iv.Conflict != (iv.Lower > iv.Upper) {
				t.Errorf("%+v: Conflict %v for [%v, %v]", c, iv.Conflict, iv.Lower, iv.Upper)
			}
			if iv.Conflict {
				conflicts++
			}
			if iv.LowerOneSided > c.mu {
				one++
			}
			// The pooled MLE need not lie in the per-world intersection of the coupled case.
			if !c.coupled && !(iv.Lower <= iv.MuHat && iv.MuHat <= iv.Upper) {
				t.Errorf("%+v: MLE %v outside [%v, %v]", c, iv.MuHat, iv.Lower, iv.Upper)
			}
			width += (iv.Upper - iv.Lower) / reps
		}
		t.Logf("n=%d mu=%g coupled=%v: two-sided misses %d, one-sided misses %d of %d (max %d), %d conflicts; mean width %.3f",
			c.n, c.mu, c.coupled, two, one, reps, maxMiss, conflicts, width)
		if two > maxMiss || one > maxMiss {
			t.Errorf("%+v: misses %d (two-sided), %d (lower) exceed %d", c, two, one, maxMiss)
		}
		if !c.coupled && one < 5 {
			t.Errorf("%+v: only %d misses of %d for an exact 95%% bound: too loose", c, one, reps)
		}
	}
}

func TestInformedGDPIntervalErrors(t *testing.T) {
	if _, err := InformedGDPInterval(nil, []float64{1}, 0.95, false); err == nil {
		t.Error("empty world accepted")
	}
	if _, err := InformedGDPInterval([]float64{math.Inf(1)}, []float64{1}, 0.95, false); err == nil {
		t.Error("infinite score accepted")
	}
	if _, err := InformedGDPInterval([]float64{1}, []float64{1}, 1.5, false); err == nil {
		t.Error("confidence 1.5 accepted")
	}
	iv, err := InformedGDPInterval([]float64{0, 0}, []float64{0}, 0.95, false)
	if err != nil || iv.Lower != 0 || iv.Upper != 0 || iv.MuHat != 0 {
		t.Errorf("all-zero scores: %+v, %v", iv, err)
	}
}

// maxAllowedMisses is the largest m with P(Binomial(n, p) >= m) >= alarm.
func maxAllowedMisses(n int, p, alarm float64) int {
	m := 0
	for m < n && binomialUpperTail(n, p, m+1) >= alarm {
		m++
	}
	return m
}

// binomialUpperTail is P(Binomial(n, p) >= m) = I_p(m, n-m+1) for 1 <= m <= n.
func binomialUpperTail(n int, p float64, m int) float64 {
	if m <= 0 {
		return 1
	}
	if m > n {
		return 0
	}
	return mathext.RegIncBeta(float64(m), float64(n-m+1), p)
}
