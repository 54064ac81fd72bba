package audit

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

// TestClopperPearsonKnownValues checks closed forms and a tabulated interval.
func TestClopperPearsonKnownValues(t *testing.T) {
	cases := []struct {
		name string
		got  float64
		want float64
		tol  float64
	}{
		// x = 0: P(Bin(n, p) = 0) = (1-p)^n = 1 - conf  =>  p = 1 - (1-conf)^(1/n).
		// For n = 10, conf = 0.95: 1 - 0.05^0.1 = 0.258866 (the "rule of three" regime).
		{"upper x=0 n=10", ClopperPearsonUpper(0, 10, 0.95), 1 - math.Pow(0.05, 0.1), 1e-14},
		{"upper x=0 n=10 4 digits", ClopperPearsonUpper(0, 10, 0.95), 0.2589, 5e-5},
		{"upper x=0 n=1000", ClopperPearsonUpper(0, 1000, 0.99), 1 - math.Pow(0.01, 0.001), 1e-14},
		{"upper x=n", ClopperPearsonUpper(7, 7, 0.95), 1, 0},
		{"lower x=0", ClopperPearsonLower(0, 7, 0.95), 0, 0},
		// x = n: P(Bin(n, p) = n) = p^n = 1 - conf  =>  p = (1-conf)^(1/n).
		{"lower x=n n=10", ClopperPearsonLower(10, 10, 0.95), math.Pow(0.05, 0.1), 1e-14},
		// Two-sided 95% interval for 5 of 20, as tabulated (e.g. Clopper & Pearson 1934 charts,
		// reproduced in standard tables and by R's binom.test): [0.0866, 0.4910].
		{"two-sided lower 5/20", ClopperPearsonLower(5, 20, 0.975), 0.0866, 5e-5},
		{"two-sided upper 5/20", ClopperPearsonUpper(5, 20, 0.975), 0.4910, 5e-5},
		// n = 1, x = 0 and 1, conf = 0.9: upper(0) = 0.9, lower(1) = 0.1.
		{"n=1 upper", ClopperPearsonUpper(0, 1, 0.9), 0.9, 1e-15},
		{"n=1 lower", ClopperPearsonLower(1, 1, 0.9), 0.1, 1e-15},
	}
	for _, tc := range cases {
		if math.Abs(tc.got-tc.want) > tc.tol {
			t.Errorf("%s: got %.10g, want %.10g (tol %g)", tc.name, tc.got, tc.want, tc.tol)
		}
	}
	for _, bad := range [][3]float64{{-1, 10, 0.95}, {11, 10, 0.95}, {0, 0, 0.95}, {1, 10, 0}, {1, 10, 1}, {1, 10, math.NaN()}} {
		if !math.IsNaN(ClopperPearsonUpper(int(bad[0]), int(bad[1]), bad[2])) || !math.IsNaN(ClopperPearsonLower(int(bad[0]), int(bad[1]), bad[2])) {
			t.Errorf("invalid arguments %v should give NaN", bad)
		}
	}
}

// TestClopperPearsonDefinition checks the defining equations directly through the binomial
// distribution function, P(Bin(n, p) <= x) = I_{1-p}(n-x, x+1): the upper limit u solves
// P(Bin(n, u) <= x) = 1-conf and the lower limit l solves P(Bin(n, l) >= x) = 1-conf. The
// closed-form branches for x = 0 are also compared with the general Beta quantile, and the
// small levels that Bonferroni corrections use are included. Tolerance: the inverse
// incomplete beta function is accurate to ~1e-12 relative here; 1e-9 on the tail probability
// relative to its size leaves room. An upper limit within 1e-6 of 1 is stored with a relative
// error in 1-u of up to ~1e-16/(1-u), which the tail inherits, so there 1e-6 is allowed.
func TestClopperPearsonDefinition(t *testing.T) {
	for _, n := range []int{1, 2, 5, 20, 137, 1000, 10000} {
		for _, x := range []int{0, 1, n / 3, n / 2, n - 1, n} {
			if x < 0 || x > n {
				continue
			}
			for _, gamma := range []float64{0.25, 0.05, 0.025, 1e-3, 1e-5} {
				conf := 1 - gamma
				u := ClopperPearsonUpper(x, n, conf)
				l := ClopperPearsonLower(x, n, conf)
				if !(l <= float64(x)/float64(n) && float64(x)/float64(n) <= u) {
					t.Errorf("x=%d n=%d: observed rate outside [%v, %v]", x, n, l, u)
				}
				if x < n {
					tail := mathext.RegIncBeta(float64(n-x), float64(x+1), 1-u) // P(Bin(n,u) <= x)
					tol := 1e-9
					if 1-u < 1e-6 {
						tol = 1e-6
					}
					if math.Abs(tail-gamma) > tol*gamma {
						t.Errorf("x=%d n=%d gamma=%g: P(Bin <= x) at upper limit %v = %v", x, n, gamma, u, tail)
					}
				}
				if x > 0 {
					tail := mathext.RegIncBeta(float64(x), float64(n-x+1), l) // P(Bin(n,l) >= x)
					if math.Abs(tail-gamma) > 1e-9*gamma {
						t.Errorf("x=%d n=%d gamma=%g: P(Bin >= x) at lower limit %v = %v", x, n, gamma, l, tail)
					}
				}
				if x == 0 && n > 1 {
					general := 1 - mathext.InvRegIncBeta(float64(n), 1, gamma)
					if math.Abs(general-u) > 1e-12 {
						t.Errorf("n=%d gamma=%g: closed form %v, Beta quantile %v", n, gamma, u, general)
					}
				}
			}
		}
	}
}

// TestBonferroniRanks checks the candidate grid: increasing, distinct, from rank 1 up to
// ceil(n/2), consecutive levels within the ratio.
func TestBonferroniRanks(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 1000, 10000} {
		r := bonferroniRanks(n)
		if r[0] != 1 || r[len(r)-1] != int(math.Ceil(0.5*float64(n))) {
			t.Errorf("n=%d: ranks %v should run from 1 to ceil(n/2)", n, r)
		}
		for i := 1; i < len(r); i++ {
			if r[i] <= r[i-1] {
				t.Errorf("n=%d: ranks not increasing: %v", n, r)
			}
			if float64(r[i]) > bonferroniRatio*float64(r[i-1])+1 {
				t.Errorf("n=%d: gap from %d to %d exceeds the ratio", n, r[i-1], r[i])
			}
		}
	}
	if k := len(bonferroniRanks(1000)); k != 16 {
		t.Errorf("n=1000: %d ranks, want 16 (levels 0.5/1.5^j down to 1/1000)", k)
	}
}

// TestMuAndEpsFromErrors checks the point-to-bound formulas against T_G and the DP
// inequalities they invert.
func TestMuAndEpsFromErrors(t *testing.T) {
	for _, mu := range []float64{0.1, 1, 3} {
		for _, a := range []float64{1e-4, 0.01, 0.3, 0.7} {
			b := normCDF(normQuantile(1-a) - mu) // on the curve T_G(mu)
			if got := muFromErrors(a, b); math.Abs(got-mu) > 1e-9 {
				t.Errorf("mu=%v a=%v: muFromErrors = %v", mu, a, got)
			}
			if muFromErrors(a, b) != muFromErrors(b, a) {
				t.Errorf("muFromErrors not symmetric at (%v, %v)", a, b)
			}
		}
	}
	if !math.IsInf(muFromErrors(1, 0.5), -1) {
		t.Error("alpha = 1 should give -Inf")
	}
	for _, tc := range []struct{ a, b, delta float64 }{{0.1, 0.2, 0}, {0.2, 0.1, 1e-5}, {0.01, 0.5, 0.001}} {
		eps := epsFromErrors(tc.a, tc.b, tc.delta)
		// At the returned eps one of the two inequalities is tight and both hold.
		g1 := tc.a + math.Exp(eps)*tc.b - (1 - tc.delta)
		g2 := tc.b + math.Exp(eps)*tc.a - (1 - tc.delta)
		if g1 < -1e-12 || g2 < -1e-12 || math.Min(g1, g2) > 1e-12 {
			t.Errorf("%+v: eps %v leaves slacks %v %v", tc, eps, g1, g2)
		}
	}
	if got := epsFromErrors(0.6, 0.6, 0); got != 0 {
		t.Errorf("alpha + beta >= 1 should give eps 0, got %v", got)
	}
}

func TestDKWEpsilon(t *testing.T) {
	// exp(-2 n e^2) = gamma, n = 1000, gamma = 0.025: e = sqrt(ln 40 / 2000) = 0.042947.
	if got := dkwEpsilon(1000, 0.025); math.Abs(got-0.0429473) > 1e-6 {
		t.Errorf("dkwEpsilon = %v, want 0.0429473", got)
	}
}

func TestParseThresholdMethod(t *testing.T) {
	for in, want := range map[string]ThresholdMethod{"": Bonferroni, "Bonferroni": Bonferroni, " split ": Split, "DKW": DKW} {
		if got, err := ParseThresholdMethod(in); err != nil || got != want {
			t.Errorf("ParseThresholdMethod(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseThresholdMethod("best"); err == nil {
		t.Error("unknown method accepted")
	}
}
