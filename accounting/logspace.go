package accounting

import "math"

// LogAddExp is log(e^a + e^b) without overflow (-Inf is the log of 0).
func LogAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// logSumExp is log sum e^x_i; -Inf for no terms.
func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// logBinomial is log C(n, k) for real n >= k >= 0.
func logBinomial(n, k float64) float64 {
	a, _ := math.Lgamma(n + 1)
	b, _ := math.Lgamma(k + 1)
	c, _ := math.Lgamma(n - k + 1)
	return a - b - c
}

// logBinomialSigned is log|C(alpha, k)| and the sign of C(alpha, k) for real alpha > 0 and
// integer k >= 0: C(alpha,k) = Gamma(alpha+1)/(Gamma(k+1) Gamma(alpha-k+1)), whose sign is
// that of Gamma(alpha-k+1). At integer alpha and k > alpha it is 0 (log -Inf).
func logBinomialSigned(alpha, k float64) (float64, float64) {
	if alpha == math.Trunc(alpha) && k > alpha {
		return math.Inf(-1), 1
	}
	a, _ := math.Lgamma(alpha + 1)
	b, _ := math.Lgamma(k + 1)
	c, s := math.Lgamma(alpha - k + 1)
	return a - b - c, float64(s)
}

// erfcSeriesCutoff is where logErfc switches from math.Erfc to the asymptotic series:
// erfc(25) is about 2e-274, still a normal float64, and the series summed to 8 terms is
// accurate there to better than 1e-20 relative.
const erfcSeriesCutoff = 25

// logErfc is log erfc(x), finite for every finite x (erfc underflows beyond x = 27).
func logErfc(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return x
	case x < erfcSeriesCutoff:
		return math.Log(math.Erfc(x))
	case math.IsInf(x, 1):
		return math.Inf(-1)
	}
	// erfc(x) = e^{-x^2}/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(2x^2)^2 - 15/(2x^2)^3 + ...).
	inv := 1 / (2 * x * x)
	sum, term := 1.0, 1.0
	for n := 1; n <= 8; n++ {
		term *= -float64(2*n-1) * inv
		sum += term
	}
	return -x*x - math.Log(x*math.Sqrt(math.Pi)) + math.Log(sum)
}
