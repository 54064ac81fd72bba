package audit

import (
	"math"

	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// ClopperPearsonUpper returns the exact one-sided upper confidence limit at level conf for a
// binomial proportion with x successes in n trials: the p with P(Bin(n, p) <= x) = 1 - conf,
// which is the conf quantile of Beta(x+1, n-x). For x = n it is 1; for x = 0 it is
// 1 - (1-conf)^(1/n) in closed form. Arguments outside 0 <= x <= n, n >= 1, 0 < conf < 1
// give NaN.
func ClopperPearsonUpper(x, n int, conf float64) float64 {
	if n < 1 || x < 0 || x > n || !(conf > 0 && conf < 1) {
		return math.NaN()
	}
	return cpUpper(x, n, 1-conf)
}

// ClopperPearsonLower returns the exact one-sided lower confidence limit at level conf for x
// successes in n trials: the 1-conf quantile of Beta(x, n-x+1). For x = 0 it is 0; for x = n it
// is (1-conf)^(1/n). A two-sided interval at level 1-a is [Lower(x, n, 1-a/2), Upper(x, n, 1-a/2)].
// Both limits are rounded outward (see outward), so a computed limit errs only to the
// interval's wide side. Arguments outside 0 <= x <= n, n >= 1, 0 < conf < 1 give NaN. A conf
// within a few ulps of 1 has lost the digits of 1-conf, which the limit inherits; the
// library's own callers pass the error level itself.
func ClopperPearsonLower(x, n int, conf float64) float64 {
	if n < 1 || x < 0 || x > n || !(conf > 0 && conf < 1) {
		return math.NaN()
	}
	switch {
	case x == 0:
		return 0
	case x == n:
		return outward(math.Exp(math.Log1p(-conf)/float64(n)), -1)
	}
	// Directly as the lower quantile: limits near 0 keep their relative precision.
	return outward(mathext.InvRegIncBeta(float64(x), float64(n-x+1), 1-conf), -1)
}

// limitMargin is how far outward every Clopper-Pearson limit p is moved, as a fraction of
// min(p, 1-p). The inverse incomplete beta function misses the exact quantile by up to about
// 1e-13 of that distance, on either side; and a limit near 1 loses up to 1.1e-16 when stored
// or subtracted from 1, more than that when 1-p is 1e-3 or less; the final ulp outward covers
// that rounding. Unadjusted, the binomial tail at an upper limit
// exceeded the level it was computed for by up to 1e-13 of that level at moderate limits, and
// by up to 4e-4 of it (at level 1e-50) where the limit lay so near 1 that storing it rounded
// 1-p by a large part of itself (measured by exact binomial sums in
// TestClopperPearsonLimitsAreOutward, which now finds every limit on its side). The bounds
// this moves change by about 1e-12 of themselves, far below any printed digit.
const limitMargin = 1e-12

// outward moves a limit p in [0, 1], computed with rounding to nearest, by limitMargin of
// min(p, 1-p) and then one ulp in direction dir (+1 up, -1 down), clamped to [0, 1]: the
// result lies past the value that p stood for, to the interval's wide side.
func outward(p float64, dir float64) float64 {
	p += dir * limitMargin * math.Min(p, 1-p)
	return math.Min(1, math.Max(0, math.Nextafter(p, dir*math.Inf(1))))
}

// cpUpper is the Clopper-Pearson upper limit for x of n that fails with probability gamma.
// It works with the error level directly and through the lower tail of the mirrored Beta
// distribution, because the gamma that Bonferroni corrections produce are small and 1-gamma
// would lose their digits.
func cpUpper(x, n int, gamma float64) float64 {
	switch {
	case x >= n:
		return 1
	case x == 0:
		return outward(-math.Expm1(math.Log(gamma)/float64(n)), +1)
	}
	// The 1-gamma quantile of Beta(x+1, n-x) is one minus the gamma quantile of Beta(n-x, x+1).
	return outward(1-mathext.InvRegIncBeta(float64(n-x), float64(x+1), gamma), +1)
}

// betaUpperQuantile is the 1-gamma quantile of Beta(a, b), the law of the r-th smallest of n
// uniforms with a = r, b = n-r+1.
func betaUpperQuantile(a, b int, gamma float64) float64 {
	return cpUpper(a-1, a+b-1, gamma)
}

// wilsonUpper is the Wilson score upper limit for a proportion p observed in a sample of size
// m, predicted for a fresh sample of size n at normal deviate z. It only steers the split
// method's choice of threshold, where any rule that looks at the selection half alone is valid;
// it is cheap enough to evaluate at every threshold.
func wilsonUpper(p float64, n int, z float64) float64 {
	fn := float64(n)
	z2 := z * z
	centre := p + z2/(2*fn)
	half := z * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))
	return math.Min(1, (centre+half)/(1+z2/fn))
}

// dkwEpsilon is the half-width e with exp(-2 n e^2) = gamma: by Massart's one-sided
// Dvoretzky-Kiefer-Wolfowitz inequality, sup_t (F(t) - F_n(t)) > e has probability at most
// gamma (valid for gamma <= 1/2), and likewise for sup_t (F_n(t) - F(t)).
func dkwEpsilon(n int, gamma float64) float64 {
	return math.Sqrt(math.Log(1/gamma) / (2 * float64(n)))
}

// normQuantile is the standard normal quantile Phi^{-1}(p).
func normQuantile(p float64) float64 { return distuv.UnitNormal.Quantile(p) }

// normCDF is the standard normal distribution function Phi.
func normCDF(x float64) float64 { return distuv.UnitNormal.CDF(x) }

// muFromErrors is the Gaussian-DP parameter implied by a test with error rates (a, b):
// Phi^{-1}(1-a) - Phi^{-1}(b). It is symmetric in a and b, so one value serves the test of C
// against C' and the mirrored test of C' against C. Rates at or beyond 1 give -Inf.
func muFromErrors(a, b float64) float64 {
	if a >= 1 || b >= 1 {
		return math.Inf(-1)
	}
	return -normQuantile(a) - normQuantile(b)
}

// epsFromErrors is the smallest eps for which a test with error rates (a, b) is allowed by
// (eps, delta)-DP: alpha + e^eps beta >= 1 - delta and beta + e^eps alpha >= 1 - delta.
// It returns 0 when the rates allow eps = 0 and +Inf when an error rate is 0 while the
// other leaves room (1 - delta - other > 0).
func epsFromErrors(a, b, delta float64) float64 {
	eps := 0.0
	if num := 1 - delta - a; num > 0 {
		eps = math.Max(eps, math.Log(num/b))
	}
	if num := 1 - delta - b; num > 0 {
		eps = math.Max(eps, math.Log(num/a))
	}
	return eps
}
