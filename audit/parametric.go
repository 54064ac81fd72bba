package audit

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mathext"
)

// Parametric interval for the informed adversary under the Gaussian mechanism.
//
// When the mechanism is exactly the Gaussian mechanism and the score is the informed
// adversary's log-likelihood ratio, each run's score is N(+mu^2/2, mu^2) in one world and
// N(-mu^2/2, mu^2) in the other. With theta = mu^2 the density of one score s is
//
//	theta^{-1/2} exp(-s^2/(2 theta) + s/2 - theta/8) / sqrt(2 pi),
//
// whose only term coupling s and theta is s^2/(2 theta): T = sum s^2 over all scores (both
// worlds alike, the sign of the mean drops out) is sufficient and the family has monotone
// likelihood ratio in T. Since s/mu ~ N(+-mu/2, 1), T/mu^2 follows a noncentral chi-square
// with n degrees of freedom and noncentrality n mu^2/4, so P_mu(T >= t) increases with mu and
// inverting it gives exact (uniformly most accurate) one-sided limits. This is valid ONLY under
// that model: an attack whose scores are not exactly this log-likelihood ratio, or a mechanism
// that is not exactly Gaussian, breaks it, and the nonparametric bounds (Analyze) must stand
// beside it.

// ParametricInterval is an exact confidence interval on mu under the Gaussian-mechanism model
// of the informed adversary's scores.
type ParametricInterval struct {
	// MuHat is the maximum-likelihood estimate sqrt(theta), theta = 2(sqrt(1 + T/n) - 1).
	MuHat float64 `json:"mu_hat"`
	// Lower and Upper bound mu together with probability at least Confidence (each side fails
	// with probability at most (1-Confidence)/2).
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
	// LowerOneSided is a lower bound alone at Confidence, to set beside certified lower bounds.
	LowerOneSided float64 `json:"lower_one_sided"`
	Confidence    float64 `json:"confidence"`
	N             int     `json:"n"`
	// PerWorld says that the worlds were treated as possibly dependent (coupled pairs): each
	// world gives its own limits at half the error level and the tighter ones are kept.
	PerWorld bool `json:"per_world"`
	// Conflict is set when the per-world intervals do not meet (Lower > Upper): the scores
	// contradict the model at this confidence, or a (1-Confidence)-probability miss happened.
	Conflict bool `json:"conflict,omitempty"`
}

// InformedGDPInterval computes the parametric interval from the informed adversary's
// log-likelihood-ratio scores of the two worlds. dependent must be true when the worlds'
// scores may be dependent (coupled pairs sharing noise): the sum over both worlds is then no
// longer a noncentral chi-square, so each world is bounded on its own and the error level is
// split between them. Empty samples, non-finite scores and a confidence outside (0, 1) are
// errors.
func InformedGDPInterval(scoresC, scoresCPrime []float64, confidence float64, dependent bool) (*ParametricInterval, error) {
	if !(confidence > 0 && confidence < 1) {
		return nil, fmt.Errorf("audit: parametric interval: confidence %v outside (0, 1)", confidence)
	}
	if len(scoresC) == 0 || len(scoresCPrime) == 0 {
		return nil, fmt.Errorf("audit: parametric interval needs scores in both worlds, have %d and %d", len(scoresC), len(scoresCPrime))
	}
	sumSq := func(s []float64) (float64, error) {
		t := 0.0
		for i, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("audit: parametric interval: score %d is %v", i, v)
			}
			t += v * v
		}
		return t, nil
	}
	t0, err := sumSq(scoresC)
	if err != nil {
		return nil, err
	}
	t1, err := sumSq(scoresCPrime)
	if err != nil {
		return nil, err
	}
	n0, n1 := len(scoresC), len(scoresCPrime)
	gamma := 1 - confidence
	res := &ParametricInterval{Confidence: confidence, N: n0 + n1, PerWorld: dependent}
	res.MuHat = gdpLLRMLE(t0+t1, n0+n1)
	if !dependent {
		res.Lower = llrMuLower(t0+t1, n0+n1, gamma/2)
		res.Upper = llrMuUpper(t0+t1, n0+n1, gamma/2)
		res.LowerOneSided = llrMuLower(t0+t1, n0+n1, gamma)
		return res, nil
	}
	res.Lower = math.Max(llrMuLower(t0, n0, gamma/4), llrMuLower(t1, n1, gamma/4))
	res.Upper = math.Min(llrMuUpper(t0, n0, gamma/4), llrMuUpper(t1, n1, gamma/4))
	res.LowerOneSided = math.Max(llrMuLower(t0, n0, gamma/2), llrMuLower(t1, n1, gamma/2))
	res.Conflict = res.Lower > res.Upper
	return res, nil
}

// gdpLLRMLE maximises -(n/2) log theta - T/(2 theta) - n theta/8 over theta >= 0: the root of
// theta^2 + 4 theta - 4T/n = 0.
func gdpLLRMLE(t float64, n int) float64 {
	u := t / float64(n)
	// 2(sqrt(1+u) - 1) written without cancellation for small u.
	theta := 2 * u / (math.Sqrt(1+u) + 1)
	return math.Sqrt(theta)
}

// llrTail is P_mu(T >= t) for T the sum of n squared N(+-mu^2/2, mu^2) scores.
func llrTail(mu, t float64, n int) float64 {
	switch {
	case mu <= 0:
		if t > 0 {
			return 0
		}
		return 1
	case math.IsInf(mu, 1):
		return 1
	}
	return noncentralChiSquareSurvival(t/(mu*mu), float64(n), float64(n)*mu*mu/4)
}

// llrMuLower is the exact lower limit at error level g: the mu at which P_mu(T >= t) = g
// (the tail increases with mu); below it the observed T would be too large.
func llrMuLower(t float64, n int, g float64) float64 {
	if t <= 0 {
		return 0
	}
	lo, _ := solveIncreasing(func(mu float64) float64 { return llrTail(mu, t, n) }, g)
	return lo
}

// llrMuUpper is the exact upper limit at error level g: the mu at which P_mu(T <= t) = g,
// i.e. P_mu(T >= t) = 1 - g (T is continuous).
func llrMuUpper(t float64, n int, g float64) float64 {
	if t <= 0 {
		// Every mu > 0 has P(T <= 0) = 0: only mu = 0 is consistent with all-zero scores.
		return 0
	}
	_, hi := solveIncreasing(func(mu float64) float64 { return llrTail(mu, t, n) }, 1-g)
	return hi
}

// solveIncreasing finds mu >= 0 with f(mu) = target for f increasing from f(0) <= target,
// by bracketing and bisection in mu; it returns the final bracket [lo, hi] (f(lo) < target <=
// f(hi)), whose lower end is conservative for a lower limit and upper end for an upper limit.
func solveIncreasing(f func(float64) float64, target float64) (lo, hi float64) {
	lo, hi = 0.0, 1.0
	for f(hi) < target {
		lo, hi = hi, 2*hi
		if hi > 1e6 {
			return lo, math.Inf(1)
		}
	}
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi || hi-lo <= 1e-10*math.Max(1, lo) {
			break
		}
		if f(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, hi
}

// noncentralChiSquareSurvival is P(X >= x) for X noncentral chi-square with k degrees of
// freedom and noncentrality lambda: the Poisson(lambda/2) mixture of central chi-squares with
// k + 2j degrees of freedom. The Poisson weights are summed over their mean +- 12 standard
// deviations (the rest weighs below 1e-30), and the central tails Q(k/2 + j, x/2) follow the
// upward recursion Q(a+1, z) = Q(a, z) + z^a e^-z / Gamma(a+1), which only adds positive
// terms and so is stable. Weights and increments follow their own multiplicative recursions
// from one Lgamma each, which keeps a sum of thousands of terms cheap.
func noncentralChiSquareSurvival(x, k, lambda float64) float64 {
	if x <= 0 {
		return 1
	}
	z := x / 2
	if lambda == 0 {
		return mathext.GammaIncRegComp(k/2, z)
	}
	mean := lambda / 2
	sd := math.Sqrt(mean)
	jLo := int(math.Max(0, math.Floor(mean-12*sd-10)))
	jHi := int(math.Ceil(mean + 12*sd + 10))
	a := k/2 + float64(jLo)
	q := mathext.GammaIncRegComp(a, z)
	lgj, _ := math.Lgamma(float64(jLo) + 1)
	w := math.Exp(float64(jLo)*math.Log(mean) - mean - lgj) // Poisson weight of jLo
	lga, _ := math.Lgamma(a + 1)
	d := math.Exp(a*math.Log(z) - z - lga) // z^a e^-z / Gamma(a+1)
	sum := 0.0
	for j := jLo; j <= jHi; j++ {
		sum += w * q
		q = math.Min(1, q+d)
		a++
		d *= z / a
		w *= mean / float64(j+1)
	}
	return math.Min(1, sum)
}
