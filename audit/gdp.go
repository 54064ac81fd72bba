package audit

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/internal/mathx"
	"gonum.org/v1/gonum/mathext"
)

// normalQuantile is Phi^{-1}, with the ends of [0, 1] mapped to -Inf and +Inf and anything
// outside to NaN (gonum's distuv.Normal.Quantile panics there; callers pass user data).
func normalQuantile(p float64) float64 {
	switch {
	case math.IsNaN(p) || p < 0 || p > 1:
		return math.NaN()
	case p == 0:
		return math.Inf(-1)
	case p == 1:
		return math.Inf(1)
	}
	return mathext.NormalQuantile(p)
}

// normalCDF is Phi. Erfc keeps full relative precision in the lower tail, where
// 1 - Phi(-x) would cancel.
func normalCDF(x float64) float64 {
	return 0.5 * math.Erfc(-x/math.Sqrt2)
}

// logTailCutoff is where logNormalCDF switches from Erfc to the asymptotic series: Erfc is
// still a normal float64 there (Phi(-37) is about 6e-300), and the series, summed to the
// 8th term, is accurate to about 1e-19 relative.
const logTailCutoff = -37

// logNormalCDF is log Phi(x), finite for every finite x (Phi underflows below x = -38).
func logNormalCDF(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return math.NaN()
	case x >= 0:
		return math.Log1p(-0.5 * math.Erfc(x/math.Sqrt2))
	case x > logTailCutoff:
		return math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
	case math.IsInf(x, -1):
		return math.Inf(-1)
	}
	return -0.5*x*x - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log(millsSeries(x))
}

// millsSeries is the asymptotic series Phi(x) phi(x)^{-1} (-x) = 1 - 1/x^2 + 3/x^4 - ...
// for x << 0, summed to the 8th term (the terms still shrink by at least 15/37^2 each).
func millsSeries(x float64) float64 {
	inv := 1 / (x * x)
	sum, term := 1.0, 1.0
	for n := 1; n <= 8; n++ {
		term *= -float64(2*n-1) * inv
		sum += term
	}
	return sum
}

// TradeoffGDP is the Gaussian trade-off function T_G(mu)(alpha) = Phi(Phi^{-1}(1-alpha) - mu):
// the smallest type II error of a test with type I error alpha between N(0,1) and N(mu,1).
// It is written as Phi(-Phi^{-1}(alpha) - mu) so that a tiny alpha keeps its precision.
// alpha <= 0 gives 1 and alpha >= 1 gives 0.
func TradeoffGDP(mu, alpha float64) float64 {
	switch {
	case math.IsNaN(mu) || math.IsNaN(alpha):
		return math.NaN()
	case alpha <= 0:
		return 1
	case alpha >= 1:
		return 0
	}
	return normalCDF(-normalQuantile(alpha) - mu)
}

// TradeoffApprox is the trade-off function of (epsilon, delta)-DP, f(alpha) = max(0,
// 1 - delta - e^epsilon alpha, e^-epsilon (1 - delta - alpha)) (Dong, Roth and Su, Gaussian
// differential privacy, 2022): a mechanism is (epsilon, delta)-DP exactly when every test's
// type II error at type I error alpha is at least f(alpha). It is the curve epsFromErrors
// inverts: a test on or above it certifies no epsilon above epsilon at delta.
func TradeoffApprox(epsilon, delta, alpha float64) float64 {
	if math.IsNaN(epsilon) || math.IsNaN(delta) || math.IsNaN(alpha) {
		return math.NaN()
	}
	alpha = math.Min(1, math.Max(0, alpha))
	e := math.Exp(epsilon)
	return math.Max(0, math.Max(1-delta-e*alpha, (1-delta-alpha)/e))
}

// MuFromPoint is the smallest mu whose trade-off curve T_G(mu) passes on or below the point
// (alpha, beta) of type I and type II errors: Phi^{-1}(1-alpha) - Phi^{-1}(beta). A point
// with errors alpha and beta shows that a mechanism is no better than mu-GDP for this mu.
// Points below the diagonal give mu > 0; errors outside [0, 1] give NaN; the corners (0, 1)
// and (1, 0), which every trade-off curve passes through, give 0.
func MuFromPoint(alpha, beta float64) float64 {
	if math.IsNaN(alpha) || math.IsNaN(beta) || alpha < 0 || alpha > 1 || beta < 0 || beta > 1 {
		return math.NaN()
	}
	if (alpha == 0 && beta == 1) || (alpha == 1 && beta == 0) {
		return 0
	}
	return -normalQuantile(alpha) - normalQuantile(beta)
}

// DeltaFromGDP is the delta at which a mu-GDP mechanism is (eps, delta)-DP (Dong et al.,
// Lemma 3 of the paper):
//
//	delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
//
// It is evaluated in log space: e^eps overflows for eps > 709 and the two terms cancel for
// eps >> mu. mu = 0 gives 0; mu = +Inf gives 1; eps = +Inf gives 0; negative or NaN
// arguments give NaN.
func DeltaFromGDP(mu, eps float64) float64 {
	return math.Exp(logDeltaFromGDP(mu, eps))
}

// logDeltaFromGDP is log delta(eps); see DeltaFromGDP.
func logDeltaFromGDP(mu, eps float64) float64 {
	switch {
	case math.IsNaN(mu) || math.IsNaN(eps) || mu < 0 || eps < 0:
		return math.NaN()
	case mu == 0 || math.IsInf(eps, 1):
		return math.Inf(-1)
	case math.IsInf(mu, 1):
		return 0
	}
	return logDeltaAt(mu, -eps/mu+mu/2)
}

// logDeltaAt is log delta as a function of a = -eps/mu + mu/2, the argument of the first Phi.
// With b = a - mu, e^eps phi(b) = phi(a) for the standard normal density phi, so
//
//	delta = Phi(a) - e^eps Phi(b) = Phi(a) (1 - e^r),  r = log R(b) - log R(a) <= 0,
//
// where R(x) = Phi(x)/phi(x) is the Mills ratio (increasing in x). r involves no e^eps and
// no difference of huge logs, so delta stays accurate far into both tails.
func logDeltaAt(mu, a float64) float64 {
	r := logMillsRatio(a-mu) - logMillsRatio(a)
	if r >= 0 {
		return math.Inf(-1) // mu below what float64 resolves next to a
	}
	return logNormalCDF(a) + math.Log(-math.Expm1(r))
}

// logMillsRatio is log(Phi(x)/phi(x)) for the standard normal density phi.
func logMillsRatio(x float64) float64 {
	if x <= logTailCutoff {
		return -math.Log(-x) + math.Log(millsSeries(x))
	}
	// x^2/2 <= 685 here, so adding it to log Phi loses at most about 1e-13 absolute.
	return logNormalCDF(x) + 0.5*x*x + 0.5*math.Log(2*math.Pi)
}

// EpsilonFromGDP is the smallest eps >= 0 such that a mu-GDP mechanism is (eps, delta)-DP:
// the root of DeltaFromGDP(mu, eps) = delta. delta is strictly decreasing in eps, so the root
// is found by bisection, on log delta so that nothing overflows, and in the variable
// a = mu/2 - eps/mu, which stays O(1) where eps ~ mu^2/2 is huge and so keeps its precision
// for very large mu. mu = 0, or a delta at or above delta(0) = 2 Phi(mu/2) - 1, gives 0;
// mu = +Inf gives +Inf. delta must lie in (0, 1].
func EpsilonFromGDP(mu, delta float64) (float64, error) {
	switch {
	case math.IsNaN(mu) || mu < 0:
		return math.NaN(), fmt.Errorf("epsilon from GDP: mu must be >= 0, got %v", mu)
	case math.IsNaN(delta) || delta <= 0 || delta > 1:
		return math.NaN(), fmt.Errorf("epsilon from GDP: delta must be in (0, 1], got %v", delta)
	case mu == 0:
		return 0, nil
	case math.IsInf(mu, 1):
		return math.Inf(1), nil
	}
	logDelta := mathx.Log(delta) // right for a subnormal delta too, where math.Log is not
	hi := mu / 2                 // eps = 0
	if delta >= DeltaFromGDP(mu, 0) || logDeltaAt(mu, hi) <= logDelta {
		return 0, nil
	}
	// delta(a) < Phi(a), so a below Phi^{-1}(delta) has delta(a) < delta; step further down
	// in case the quantile rounded up.
	lo := math.Min(normalQuantile(delta), hi)
	for step := 1e-9 * math.Max(1, math.Abs(lo)); logDeltaAt(mu, lo) >= logDelta; step *= 2 {
		lo -= step
		if math.IsInf(lo, -1) {
			return math.NaN(), fmt.Errorf("epsilon from GDP: no bracket for mu=%v, delta=%v", mu, delta)
		}
	}
	for {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break // adjacent floats: the root is resolved to float64 precision
		}
		if logDeltaAt(mu, mid) > logDelta {
			hi = mid
		} else {
			lo = mid
		}
	}
	// The root lies in [lo, hi]; lo gives delta(eps) <= delta, the guarantee asked for.
	return mu * (mu/2 - lo), nil
}

// RDPFromGDP is the Renyi divergence of order zeta that a mu-GDP mechanism satisfies:
// zeta mu^2 / 2 (Lemma 4; the divergence of two unit Gaussians mu apart). Orders below 1
// and negative mu give NaN.
func RDPFromGDP(mu, order float64) float64 {
	if math.IsNaN(mu) || math.IsNaN(order) || mu < 0 || order < 1 {
		return math.NaN()
	}
	return order * mu * mu / 2
}

// ComposeGDP is the mu of the composition of mu_1-GDP, ..., mu_k-GDP mechanisms,
// sqrt(mu_1^2 + ... + mu_k^2) (Lemma 5), scaled so that no square overflows. No arguments
// give 0; a negative or NaN mu gives NaN.
func ComposeGDP(mus ...float64) float64 {
	largest := 0.0
	for _, mu := range mus {
		if math.IsNaN(mu) || mu < 0 {
			return math.NaN()
		}
		largest = math.Max(largest, mu)
	}
	if largest == 0 || math.IsInf(largest, 1) {
		return largest
	}
	sum := 0.0
	for _, mu := range mus {
		r := mu / largest
		sum += r * r
	}
	return largest * math.Sqrt(sum)
}

// LaplaceGDPEquivalent is the smallest mu for which the Laplace mechanism with shift s (scale
// 1), exactly s-DP, is mu-GDP: its trade-off curve is 1 - e^s a up to a = e^-s/2, then
// e^-s/(4a) up to 1/2, then e^-s (1 - a); the supremum over a of Phi^{-1}(1-a) -
// Phi^{-1}(T(a)) sits at the symmetric point a = T(a) = e^{-s/2}/2, where it is
// -2 Phi^{-1}(e^{-s/2}/2).
func LaplaceGDPEquivalent(s float64) float64 {
	return -2 * normalQuantile(math.Exp(-s/2)/2)
}
