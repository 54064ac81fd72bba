package check

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The limiting Anderson-Darling distribution against the critical values of the case with
// known parameters (Stephens 1974, "EDF statistics for goodness of fit and some comparisons":
// 1.933, 2.492, 3.857 at the 10%, 5% and 1% levels), to the three decimals the table gives.
func TestADInfMatchesStephens(t *testing.T) {
	for _, tc := range []struct{ z, cdf float64 }{{1.933, 0.90}, {2.492, 0.95}, {3.857, 0.99}} {
		if got := adInf(tc.z); math.Abs(got-tc.cdf) > 1e-3 {
			t.Errorf("adInf(%v) = %v, want %v", tc.z, got, tc.cdf)
		}
	}
}

// Under the hypothesis every test's p-value is uniform: over 4,000 repetitions each test rejects
// at the 5% and 1% levels at those rates, within 4.5 binomial standard deviations (a chance of
// about 1e-5 per comparison that a correct test fails here). The same tests reject data of the
// wrong scale, a shifted mean, a heavy tail and a reused draw almost always.
func TestResidualTestsCoverage(t *testing.T) {
	const reps, n, rounds = 4000, 60, 5
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"noise-mean", "noise-scale", "noise-shape", "noise-independence"}
	draw := func(sigma, shift float64, heavy bool) []float32 {
		x := make([]float32, n)
		for i := range x {
			v := rng.NormFloat64()
			if heavy {
				a, b, c := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
				v = rng.NormFloat64() / math.Sqrt((a*a+b*b+c*c)/3) // Student's t with 3 degrees of freedom
			}
			x[i] = float32(sigma*v + shift)
		}
		return x
	}
	type variant struct {
		name         string
		sigma, shift float64
		heavy, reuse bool
		expect       string // the test that must reject; "" under the hypothesis
	}
	for _, v := range []variant{
		{name: "gaussian", sigma: 0.3},
		{name: "half scale", sigma: 0.15, expect: "noise-scale"},
		{name: "shifted", sigma: 0.3, shift: 0.1, expect: "noise-mean"},
		{name: "heavy tail", sigma: 0.3, heavy: true, expect: "noise-shape"},
		{name: "reused", sigma: 0.3, reuse: true, expect: "noise-independence"},
	} {
		rejects := map[string][2]int{}
		for range reps {
			tl := newNoiseTally("global", "w", 0.3, n*rounds)
			var prev, first []float32
			for r := range rounds {
				x := draw(v.sigma, v.shift, v.heavy)
				if v.reuse && r > 0 {
					x = first
				}
				if r == 0 {
					first = x
				}
				tl.add(x, prev)
				prev = x
			}
			for _, res := range tl.results() {
				c := rejects[res.Name]
				if res.PValue < 0.05 {
					c[0]++
				}
				if res.PValue < 0.01 {
					c[1]++
				}
				rejects[res.Name] = c
			}
		}
		for _, k := range kinds {
			got := rejects[k]
			switch {
			case v.expect == "":
				for i, level := range []float64{0.05, 0.01} {
					sd := math.Sqrt(level * (1 - level) / reps)
					if rate := float64(got[i]) / reps; math.Abs(rate-level) > 4.5*sd {
						t.Errorf("%s: %s rejects %.4f at level %v (sd %.4f)", v.name, k, rate, level, sd)
					}
				}
			case k == v.expect:
				if rate := float64(got[1]) / reps; rate < 0.9 {
					t.Errorf("%s: %s rejects only %.3f at 1%%", v.name, k, rate)
				}
			}
		}
	}
}

// A tensor without noise has zero residuals: the scale test's p-value is 0, not NaN.
func TestZeroResidualsFailScale(t *testing.T) {
	tl := newNoiseTally("upload", "bias", 1, 10)
	tl.add(make([]float32, 10), nil)
	for _, r := range tl.results() {
		if r.Name == "noise-scale" && r.PValue != 0 {
			t.Errorf("scale p-value %v for zero residuals", r.PValue)
		}
		if math.IsNaN(r.PValue) {
			t.Errorf("%s: p-value NaN", r.Name)
		}
	}
}

func TestChiSquareTwoSided(t *testing.T) {
	for _, tc := range []struct {
		q    float64
		k    int
		want float64
	}{
		{10, 10, 0.88},    // the median of chi2_10 is 9.34
		{3.94, 10, 0.10},  // the 5% quantile
		{18.31, 10, 0.10}, // the 95% quantile
	} {
		if got := chiSquareTwoSided(tc.q, tc.k); math.Abs(got-tc.want) > 0.01 {
			t.Errorf("chiSquareTwoSided(%v, %d) = %v, want %v", tc.q, tc.k, got, tc.want)
		}
	}
}
