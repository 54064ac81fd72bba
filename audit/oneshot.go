package audit

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
)

// One-shot empirical privacy estimation (Andrew, Kairouz, Oh, Oprea, McMahan and Suriyakumar,
// "One-shot Empirical Privacy Estimation for Federated Learning", ICLR 2024). Canaries are
// random directions; some are inserted into training, the others held out. A statistic of each
// canary (for the final model, the cosine between w_T - w_0 and the canary; for all iterates,
// the largest cosine over the rounds' model deltas) is close to a Gaussian in both groups, so
// the auditor fits one Gaussian to the held-out canaries' statistics (what the output looks
// like without the canary) and one to the inserted canaries' (with it), and reports the
// epsilon at which that pair of Gaussians is (epsilon, delta)-DP.
//
// The result is an estimate under the Gaussian assumption, never a certified bound: nothing
// here controls the probability that it exceeds the truth.

// GaussianFit is a normal distribution fitted to a sample: its mean and standard deviation.
type GaussianFit struct {
	Mean, Std float64
	N         int
}

// OneShotEstimate is the one-shot epsilon estimate and the Gaussians it was computed from.
type OneShotEstimate struct {
	// Epsilon at Delta of the fitted pair (NaN when the fit is degenerate).
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta"`
	// Mu is the Gaussian-DP parameter of the pair when the two fitted variances are taken as
	// equal (the mean shift over the pooled standard deviation), for comparison with the
	// certified mu of the other methods.
	Mu       float64     `json:"mu"`
	HeldOut  GaussianFit `json:"held_out"`
	Inserted GaussianFit `json:"inserted"`
}

// OneShotEpsilon fits Gaussians to the statistics of held-out and inserted canaries and
// returns the epsilon at delta of the fitted pair. Each sample needs at least two values with
// positive spread.
func OneShotEpsilon(heldOut, inserted []float64, delta float64) (OneShotEstimate, error) {
	est := OneShotEstimate{Delta: delta, Epsilon: math.NaN(), Mu: math.NaN()}
	if !(delta > 0 && delta < 1) {
		return est, fmt.Errorf("audit: one-shot estimate: delta %v outside (0, 1)", delta)
	}
	var err error
	if est.HeldOut, err = fitGaussian("held-out canaries", heldOut); err != nil {
		return est, err
	}
	if est.Inserted, err = fitGaussian("inserted canaries", inserted); err != nil {
		return est, err
	}
	h, in := est.HeldOut, est.Inserted
	pooled := math.Sqrt(((float64(h.N)-1)*h.Std*h.Std + (float64(in.N)-1)*in.Std*in.Std) / float64(h.N+in.N-2))
	est.Mu = math.Abs(in.Mean-h.Mean) / pooled
	est.Epsilon, err = GaussianPairEpsilon(h.Mean, h.Std, in.Mean, in.Std, delta)
	return est, err
}

func fitGaussian(what string, xs []float64) (GaussianFit, error) {
	if len(xs) < 2 {
		return GaussianFit{}, fmt.Errorf("audit: one-shot estimate: %d %s, need at least 2", len(xs), what)
	}
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return GaussianFit{}, fmt.Errorf("audit: one-shot estimate: %s: non-finite statistic %v", what, x)
		}
	}
	mean, std := stat.MeanStdDev(xs, nil)
	if !(std > 0) {
		return GaussianFit{}, fmt.Errorf("audit: one-shot estimate: %s: the statistics do not vary", what)
	}
	return GaussianFit{Mean: mean, Std: std, N: len(xs)}, nil
}

// GaussianPairDelta is the privacy profile of the pair P = N(m0, s0^2), Q = N(m1, s1^2): the
// smallest delta for which the pair is (eps, delta)-indistinguishable in both directions,
// max(H_{e^eps}(P || Q), H_{e^eps}(Q || P)) with H_a(P || Q) = sup_S P(S) - a Q(S).
func GaussianPairDelta(m0, s0, m1, s1, eps float64) float64 {
	return math.Max(hockeyStickGaussian(m0, s0, m1, s1, eps), hockeyStickGaussian(m1, s1, m0, s0, eps))
}

// hockeyStickGaussian is sup_S P(S) - e^eps Q(S) for P = N(mp, sp^2), Q = N(mq, sq^2). The
// supremum is attained on S = {x : log p(x) - log q(x) > eps}, where the log ratio is a
// quadratic a x^2 + b x + c: S is a half-line, an interval or the complement of one.
func hockeyStickGaussian(mp, sp, mq, sq, eps float64) float64 {
	a := 1/(2*sq*sq) - 1/(2*sp*sp)
	b := mp/(sp*sp) - mq/(sq*sq)
	c := math.Log(sq/sp) - mp*mp/(2*sp*sp) + mq*mq/(2*sq*sq) - eps
	// mass of P and Q on (lo, hi)
	mass := func(lo, hi float64) (float64, float64) {
		return normalMass((lo-mp)/sp, (hi-mp)/sp), normalMass((lo-mq)/sq, (hi-mq)/sq)
	}
	inf := math.Inf(1)
	var p, q float64
	// Equal variances (up to rounding): the ratio is linear in x, S a half-line.
	if math.Abs(a) <= 1e-12*(1/(sp*sp)+1/(sq*sq)) {
		switch {
		case b > 0:
			p, q = mass(-c/b, inf)
		case b < 0:
			p, q = mass(-inf, -c/b)
		default:
			if c > 0 {
				p, q = 1, 1
			}
		}
		return math.Max(0, p-math.Exp(eps)*q)
	}
	disc := b*b - 4*a*c
	if disc <= 0 {
		if a > 0 { // the quadratic is positive everywhere (or nowhere below zero)
			p, q = 1, 1
		}
		return math.Max(0, p-math.Exp(eps)*q)
	}
	// Roots in a cancellation-free form.
	sq2 := math.Sqrt(disc)
	qq := -0.5 * (b + math.Copysign(sq2, b))
	r1, r2 := qq/a, c/qq
	if r1 > r2 {
		r1, r2 = r2, r1
	}
	if a < 0 { // positive between the roots
		p, q = mass(r1, r2)
	} else { // positive outside the roots
		p1, q1 := mass(-inf, r1)
		p2, q2 := mass(r2, inf)
		p, q = p1+p2, q1+q2
	}
	return math.Max(0, p-math.Exp(eps)*q)
}

// GaussianPairEpsilon is the smallest eps >= 0 at which N(m0, s0^2) and N(m1, s1^2) are
// (eps, delta)-indistinguishable. With unequal variances the privacy loss is unbounded, but
// delta(eps) still falls to 0, so the answer is finite for every delta > 0.
func GaussianPairEpsilon(m0, s0, m1, s1, delta float64) (float64, error) {
	if !(s0 > 0 && s1 > 0) || math.IsNaN(m0+m1) || math.IsInf(m0+m1, 0) {
		return math.NaN(), errors.New("audit: Gaussian pair: means must be finite and standard deviations positive")
	}
	if !(delta > 0 && delta < 1) {
		return math.NaN(), fmt.Errorf("audit: Gaussian pair: delta %v outside (0, 1)", delta)
	}
	f := func(eps float64) float64 { return GaussianPairDelta(m0, s0, m1, s1, eps) }
	if f(0) <= delta {
		return 0, nil
	}
	hi := 1.0
	for f(hi) > delta {
		hi *= 2
		if hi > 1e6 {
			return math.Inf(1), nil
		}
	}
	lo := 0.0
	for i := 0; i < 200 && hi-lo > 1e-12*math.Max(1, hi); i++ {
		mid := (lo + hi) / 2
		if f(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// normalMass is P(lo < Z < hi) for a standard normal Z, from the nearer tail so that far-tail
// masses keep their relative precision.
func normalMass(lo, hi float64) float64 {
	if lo > 0 {
		return normalCDF(-lo) - normalCDF(-hi)
	}
	return normalCDF(hi) - normalCDF(lo)
}
