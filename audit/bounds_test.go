package audit

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

// TestClopperPearsonKnownValues checks closed forms and a tabulated interval. The limits leave
// about 1e-12 of their level unused (tailMargin), so the closed forms are matched to 1e-12, and
// on their side.
func TestClopperPearsonKnownValues(t *testing.T) {
	cases := []struct {
		name string
		got  float64
		want float64
		tol  float64
		side int // +1: an upper limit, never below want; -1: a lower limit, never above
	}{
		// x = 0: P(Bin(n, p) = 0) = (1-p)^n = 1 - conf  =>  p = 1 - (1-conf)^(1/n).
		// For n = 10, conf = 0.95: 1 - 0.05^0.1 = 0.258866 (the "rule of three" regime).
		{"upper x=0 n=10", ClopperPearsonUpper(0, 10, 0.95), 1 - math.Pow(0.05, 0.1), 1e-12, +1},
		{"upper x=0 n=10 4 digits", ClopperPearsonUpper(0, 10, 0.95), 0.2589, 5e-5, 0},
		{"upper x=0 n=1000", ClopperPearsonUpper(0, 1000, 0.99), 1 - math.Pow(0.01, 0.001), 1e-12, +1},
		{"upper x=n", ClopperPearsonUpper(7, 7, 0.95), 1, 0, 0},
		{"lower x=0", ClopperPearsonLower(0, 7, 0.95), 0, 0, 0},
		// x = n: P(Bin(n, p) = n) = p^n = 1 - conf  =>  p = (1-conf)^(1/n).
		{"lower x=n n=10", ClopperPearsonLower(10, 10, 0.95), math.Pow(0.05, 0.1), 1e-12, -1},
		// Two-sided 95% interval for 5 of 20, as tabulated (e.g. Clopper & Pearson 1934 charts,
		// reproduced in standard tables and by R's binom.test): [0.0866, 0.4910].
		{"two-sided lower 5/20", ClopperPearsonLower(5, 20, 0.975), 0.0866, 5e-5, 0},
		{"two-sided upper 5/20", ClopperPearsonUpper(5, 20, 0.975), 0.4910, 5e-5, 0},
		// n = 1, x = 0 and 1, conf = 0.9: upper(0) = 0.9, lower(1) = 0.1.
		{"n=1 upper", ClopperPearsonUpper(0, 1, 0.9), 0.9, 1e-12, +1},
		{"n=1 lower", ClopperPearsonLower(1, 1, 0.9), 0.1, 1e-12, -1},
	}
	for _, tc := range cases {
		if math.Abs(tc.got-tc.want) > tc.tol {
			t.Errorf("%s: got %.10g, want %.10g (tol %g)", tc.name, tc.got, tc.want, tc.tol)
		}
		if (tc.side > 0 && tc.got < tc.want) || (tc.side < 0 && tc.got > tc.want) {
			t.Errorf("%s: got %.17g, inside the closed form %.17g", tc.name, tc.got, tc.want)
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

// TestClopperPearsonLimitsAreOutward checks by exact arithmetic that every limit holds at its
// level and lies close to the exact one: the binomial tail at the computed upper limit u,
// P(Bin(n, u) <= x), and at the lower limit l, P(Bin(n, l) >= x), never exceed the error level,
// and moved inward by 1e-6 of their distance to 0 or 1 (or by one ulp, where that is nothing)
// they do (or by two ulps, where that is farther: inward). Levels run from moderate ones down to the tiny ones that Bonferroni corrections and
// the rank band's grid reach and past them (1e-300); n up to 10^5; limits so near 1 that
// storing them rounds 1-p by a large part of itself. The sums run in 400-bit binary floats from
// the stored float64 limit, so they are exact to far beyond the levels checked.
//
// The cases it caught: before the limits were rounded outward, 172 limits of its first grid
// lay inside by up to 4e-4 of the level; moved by a fixed 1e-12 of their distance to 0 or 1,
// limits from gonum's inverse incomplete beta function still lay inside by up to 5% of the
// level below 1e-10 (the named cases) and were far outside at tiny levels (the upper limit of 1
// error in 300 trials at level 1e-20 was 1, the exact one 0.25).
func TestClopperPearsonLimitsAreOutward(t *testing.T) {
	type limit struct {
		x, n  int
		gamma float64
	}
	var cases []limit
	levels := []float64{0.5, 0.05, 1e-3, 1e-6, 1e-10, 1e-12, 1e-15, 1e-20, 1e-50, 1e-100, 1e-300}
	for _, n := range []int{1, 2, 5, 20, 100, 400, 3000} {
		for x := 0; x <= n; x += 1 + n/9 {
			for _, gamma := range levels {
				cases = append(cases, limit{x, n, gamma})
			}
		}
	}
	for _, n := range []int{10000, 100000} {
		for _, x := range []int{0, 1, 2, 5, 37, n / 100, n / 2, n - 1, n} {
			for _, gamma := range []float64{0.05, 1e-8, 1e-12, 1e-20} {
				cases = append(cases, limit{x, n, gamma})
			}
		}
	}
	cases = append(cases, limit{37, 1000, 9.99e-16}, limit{21, 500, 1e-12}, limit{35, 10000, 1e-12},
		limit{18, 500, 1e-9}, limit{1, 300, 1e-20})
	checked := 0
	for _, c := range cases {
		x, n, gamma := c.x, c.n, c.gamma
		if x < n {
			u := cpUpper(x, n, gamma)
			what := fmt.Sprintf("upper x=%d n=%d gamma=%g u=%v", x, n, gamma, u)
			checkTail(t, what, binomialCDF(x, n, u), gamma, false)
			checkTail(t, what+" moved inward", binomialCDF(x, n, inward(u, -1)), gamma, true)
			checked++
		}
		// The public lower limit takes the confidence; its level is 1-conf, exact in float64
		// for conf in [1/2, 1).
		if conf := 1 - gamma; x > 0 && conf < 1 {
			level := 1 - conf
			l := ClopperPearsonLower(x, n, conf)
			what := fmt.Sprintf("lower x=%d n=%d gamma=%g l=%v", x, n, level, l)
			checkTail(t, what, binomialTail(x, n, l), level, false)
			checkTail(t, what+" moved inward", binomialTail(x, n, inward(l, +1)), level, true)
			checked++
		}
	}
	if checked < 800 {
		t.Fatalf("only %d limits checked", checked)
	}
}

// inward moves a limit p toward the observed rate (dir +1 up, -1 down) by 1e-6 of its distance
// to the nearer of 0 and 1, or by two ulps where that is farther: an upper limit is 1-q rounded
// up from the quantile q of the mirrored distribution, which puts it up to 1.5 ulps past the
// exact limit, and near 1 an ulp can be a large part of 1-p.
func inward(p, dir float64) float64 {
	toward := dir * math.Inf(1)
	grid := math.Nextafter(math.Nextafter(p, toward), toward)
	if q := p + dir*1e-6*math.Min(p, 1-p); math.Abs(q-p) > math.Abs(grid-p) {
		return q
	}
	return grid
}

// checkTail fails when the exact tail exceeds the level, or with above false when it does not.
func checkTail(t *testing.T, what string, tail *big.Float, level float64, above bool) {
	t.Helper()
	ratio, _ := new(big.Float).Quo(tail, new(big.Float).SetFloat64(level)).Float64()
	if over := tail.Cmp(new(big.Float).SetFloat64(level)) > 0; over != above {
		t.Errorf("%s: tail %.10g of the level", what, ratio)
	}
}

// binomialCDF is P(Bin(n, p) <= x) in 400-bit arithmetic from the float64 p: the terms
// C(n, k) p^k (1-p)^(n-k), each from the one before by the ratio (n-k)/(k+1) p/(1-p).
func binomialCDF(x, n int, p float64) *big.Float {
	const prec = 400
	one := new(big.Float).SetPrec(prec).SetInt64(1)
	sum := new(big.Float).SetPrec(prec)
	if x < 0 {
		return sum
	}
	if x >= n {
		return one
	}
	bp := new(big.Float).SetPrec(prec).SetFloat64(p)
	bq := new(big.Float).SetPrec(prec).Sub(one, bp)
	if bq.Sign() == 0 {
		return sum
	}
	term := bigPower(bq, n)
	ratio := new(big.Float).SetPrec(prec).Quo(bp, bq)
	for k := 0; ; k++ {
		sum.Add(sum, term)
		if k == x {
			return sum
		}
		term.Mul(term, ratio)
		term.Mul(term, new(big.Float).SetPrec(prec).SetInt64(int64(n-k)))
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(k+1)))
	}
}

// binomialTail is P(Bin(n, p) >= x) in 400-bit arithmetic, summed from k = n down (as
// binomialCDF of the mirrored count at 1-p, which is exact in 400 bits).
func binomialTail(x, n int, p float64) *big.Float {
	const prec = 400
	one := new(big.Float).SetPrec(prec).SetInt64(1)
	sum := new(big.Float).SetPrec(prec)
	if x <= 0 {
		return one
	}
	bp := new(big.Float).SetPrec(prec).SetFloat64(p)
	if bp.Sign() == 0 {
		return sum
	}
	bq := new(big.Float).SetPrec(prec).Sub(one, bp)
	term := bigPower(bp, n) // k = n
	ratio := new(big.Float).SetPrec(prec).Quo(bq, bp)
	for k := n; ; k-- {
		sum.Add(sum, term)
		if k == x {
			return sum
		}
		// C(n, k-1) / C(n, k) = k / (n-k+1).
		term.Mul(term, ratio)
		term.Mul(term, new(big.Float).SetPrec(prec).SetInt64(int64(k)))
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(n-k+1)))
	}
}

// bigPower is b^n by squaring, in b's precision.
func bigPower(b *big.Float, n int) *big.Float {
	r := new(big.Float).SetPrec(b.Prec()).SetInt64(1)
	base := new(big.Float).Set(b)
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			r.Mul(r, base)
		}
		base.Mul(base, base)
	}
	return r
}

// TestRegIncBetaError measures what tailMargin must cover: the relative error of the forward
// incomplete beta function at Clopper-Pearson limits, against exact binomial sums, and checks
// that it stays below half the margin (a factor of two of room on top of the margin's own).
func TestRegIncBetaError(t *testing.T) {
	for _, n := range []int{10, 100, 1000, 10000, 100000} {
		worst := 0.0
		for _, gamma := range []float64{0.5, 1e-2, 1e-6, 1e-12, 1e-50} {
			for _, x := range []int{0, 1, 5, n / 100, n / 3, n / 2, n - n/10, n - 1} {
				if x < 0 || x >= n {
					continue
				}
				u := cpUpper(x, n, gamma)
				q := 1 - u // both sides below take this float q
				if q <= 0 {
					continue
				}
				got := mathext.RegIncBeta(float64(n-x), float64(x+1), q)
				exact, _ := binomialTail(n-x, n, q).Float64() // I_q(n-x, x+1) = P(Bin(n, q) >= n-x)
				worst = math.Max(worst, math.Abs(got-exact)/exact)
			}
		}
		if worst > tailMargin(n)/2 {
			t.Errorf("n=%d: RegIncBeta off by %.3g of the tail, the margin %.3g", n, worst, tailMargin(n))
		}
		t.Logf("n=%d: RegIncBeta off by up to %.3g of the tail (margin %.3g)", n, worst, tailMargin(n))
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
