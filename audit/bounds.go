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
// Both limits err only to the interval's wide side, by a tiny part of their level (see
// tailMargin). Arguments outside 0 <= x <= n, n >= 1, 0 < conf < 1 give NaN. A conf within a
// few ulps of 1 has lost the digits of 1-conf, which the limit inherits; the library's own
// callers pass the error level itself.
func ClopperPearsonLower(x, n int, conf float64) float64 {
	if n < 1 || x < 0 || x > n || !(conf > 0 && conf < 1) {
		return math.NaN()
	}
	if x == 0 {
		return 0
	}
	level := 1 - conf
	guess := math.Exp(math.Log(level) / float64(n)) // exact for x = n
	if x < n {
		guess = mathext.InvRegIncBeta(float64(x), float64(n-x+1), level)
	}
	// P(Bin(n, l) >= x) = I_l(x, n-x+1): the limit is the quantile itself, found directly so
	// that limits near 0 keep their relative precision.
	return betaQuantileBelow(float64(x), float64(n-x+1), level*(1-tailMargin(n)), tailMargin(n), guess)
}

// tailMargin is the part of its level that a limit leaves unused, to cover the error of the
// incomplete beta function the limit is checked with (gonum's mathext.RegIncBeta), which grows
// with the trials: measured against exact binomial sums at the limits, up to 7e-14 of the tail
// at n = 100, 1.3e-12 at 10^3, 1.4e-11 at 10^4 and 2.6e-10 at 10^5 (TestRegIncBetaError; the
// margin is about four times that). The limits move by far less than any printed digit.
func tailMargin(n int) float64 { return 1e-12 + 1e-14*float64(n) }

// cpUpper is the Clopper-Pearson upper limit for x of n that fails with probability gamma.
// It works with the error level directly and through the lower tail of the mirrored Beta
// distribution, P(Bin(n, u) <= x) = I_{1-u}(n-x, x+1), because the gamma that Bonferroni
// corrections produce are small and 1-gamma would lose their digits.
func cpUpper(x, n int, gamma float64) float64 {
	if x >= n {
		return 1
	}
	a, b := float64(n-x), float64(x+1)
	guess := math.Exp(math.Log(gamma) / float64(n)) // exact for x = 0: I_q(n, 1) = q^n
	if x > 0 {
		guess = mathext.InvRegIncBeta(a, b, gamma)
	}
	q := betaQuantileBelow(a, b, gamma*(1-tailMargin(n)), tailMargin(n), guess)
	// 1-q rounds by up to half an ulp either way; the next float up lies past the exact 1-q,
	// where the tail is smaller still.
	return math.Min(1, math.Nextafter(1-q, 2))
}

// betaQuantileBelow returns a q in [0, 1] with I_q(a, b) <= target by the forward incomplete
// beta function, at least target (1-tol) where the float64 grid allows: the quantile from the
// side where the tail stays under its level. guess, the inverse function's answer, starts the
// search: gonum's mathext.InvRegIncBeta misses the quantile by about 1e-13 of the tail at
// moderate levels but by up to 5% below 1e-10, and at levels under about 1e-16 it can return
// 1e-16 whatever the quantile (an upper limit of 1 for 1 error in 300 trials at level 1e-20,
// where the limit is 0.25), or a quantile far off (0.95 for 5 errors in 10^5 trials at level
// 1e-8, where it is 0.9996). Newton's method on log I_q (concave for a, b >= 1, so it closes
// in from below) refines it, bisection on the float64 grid takes over when a step leaves the
// bracket.
func betaQuantileBelow(a, b, target, tol, guess float64) float64 {
	lo, hi := 0.0, 1.0 // I_lo <= target < I_hi
	logBeta := lgamma(a) + lgamma(b) - lgamma(a+b)
	aim := math.Log(target * (1 - tol/2))
	q := guess
	for range 200 {
		if !(q > lo && q < hi) {
			q = math.Float64frombits((math.Float64bits(lo) + math.Float64bits(hi)) / 2)
			if q <= lo || q >= hi {
				break // adjacent floats
			}
		}
		f := mathext.RegIncBeta(a, b, q)
		if f <= target {
			lo = q
			if f >= target*(1-tol) {
				break
			}
		} else {
			hi = q
		}
		// d log I_q / dq = (the Beta density at q) / I_q.
		logDensity := (a-1)*math.Log(q) + (b-1)*math.Log1p(-q) - logBeta
		q += (aim - math.Log(f)) * f / math.Exp(logDensity)
	}
	return lo
}

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
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
