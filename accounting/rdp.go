package accounting

import (
	"fmt"
	"math"
	"slices"
)

// DefaultOrders returns the default grid of Rényi orders: 1.25 to 10 in steps of 0.25,
// every integer from 11 to 64, and 80, 96, 128, 160, 192, 256 (the span of the Opacus and
// TF-Privacy defaults, extended to 256 as the time-adaptive paper does). Fractional orders
// are the costly ones (a series each), so the grid is finer only where the optimum of
// federated runs with few rounds tends to lie.
func DefaultOrders() []float64 {
	var o []float64
	for a := 1.25; a <= 10; a += 0.25 {
		o = append(o, a)
	}
	for a := 11; a <= 64; a++ {
		o = append(o, float64(a))
	}
	return append(o, 80, 96, 128, 160, 192, 256)
}

func checkOrders(orders []float64) error {
	if len(orders) == 0 {
		return fmt.Errorf("no Rényi orders")
	}
	for _, a := range orders {
		if !(a > 1) || math.IsInf(a, 1) {
			return fmt.Errorf("Rényi order %v must be finite and > 1", a)
		}
	}
	return nil
}

// SampledGaussianRDP is the RDP curve of one step of the sampled Gaussian mechanism with
// Poisson sampling rate q and noise multiplier sigma (noise standard deviation over the L2
// sensitivity), at each order: log(A_alpha)/(alpha-1) with A_alpha of Mironov, Talwar and
// Zhang (2019), Sections 3.2 (integer orders) and 3.3 (fractional orders). Fractional
// orders add the truncation-error bound of their series to A_alpha, so the result is an
// upper bound. q = 1 is the Gaussian mechanism, alpha/(2 sigma^2); q = 0 spends nothing.
func SampledGaussianRDP(q, sigma float64, orders []float64) ([]float64, error) {
	if err := checkOrders(orders); err != nil {
		return nil, err
	}
	out := make([]float64, len(orders))
	for i, a := range orders {
		v, err := SampledGaussianRDPAt(q, sigma, a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// SampledGaussianRDPAt is SampledGaussianRDP at one order alpha.
func SampledGaussianRDPAt(q, sigma, alpha float64) (float64, error) {
	switch {
	case !(q >= 0 && q <= 1):
		return 0, fmt.Errorf("sampled Gaussian: sampling rate %v outside [0, 1]", q)
	case !(sigma > 0) || math.IsInf(sigma, 1):
		return 0, fmt.Errorf("sampled Gaussian: noise multiplier %v must be positive and finite", sigma)
	case !(2*sigma*sigma > 0):
		// The terms divide by 2 sigma^2: 0/0 at k = 0 made the curve NaN.
		return 0, fmt.Errorf("sampled Gaussian: noise multiplier %v is too small to account (2 sigma^2 underflows)", sigma)
	case !(alpha > 1) || math.IsInf(alpha, 1):
		return 0, fmt.Errorf("sampled Gaussian: order %v must be finite and > 1", alpha)
	}
	switch {
	case q == 0:
		return 0, nil
	case q == 1:
		return alpha / (2 * sigma * sigma), nil
	}
	var logA float64
	if alpha == math.Trunc(alpha) && alpha <= 1<<20 {
		logA = logAInteger(q, sigma, int(alpha))
	} else {
		logA = logAFractional(q, sigma, alpha)
	}
	// A_alpha >= 1 always (Rényi divergences are non-negative); rounding can dip below.
	return math.Max(0, logA) / (alpha - 1), nil
}

// logAInteger is log A_alpha for integer alpha by the binomial expansion
// A = sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2-k)/(2 sigma^2)), summed in log space
// (all terms are positive).
func logAInteger(q, sigma float64, alpha int) float64 {
	lq, l1q := math.Log(q), math.Log1p(-q)
	s2 := 2 * sigma * sigma
	acc := math.Inf(-1)
	for k := 0; k <= alpha; k++ {
		kf := float64(k)
		term := logBinomial(float64(alpha), kf) + float64(alpha-k)*l1q + kf*lq + (kf*kf-kf)/s2
		acc = LogAddExp(acc, term)
	}
	return acc
}

// fracSeriesTol is where the fractional-order series stop: once their terms alternate,
// shrink in magnitude and fall below fracSeriesTol, the remainder of each series is
// smaller than its next term, which is added to A as the truncation bound. A is at least
// 1, so the bound moves the RDP by at most about 2e-13/(alpha-1) per step.
const fracSeriesTol = 1e-13

// fracSeriesMaxTerms caps the series. The terms decay only polynomially, like
// k^-(alpha+2) (the Gaussian tail of erfc cancels the geometric factors exactly), so small
// orders need many terms when q is large: about 10^(13/3.25) = 1e4 at alpha = 1.25.
const fracSeriesMaxTerms = 2000000

// logAFractional is log A_alpha for fractional alpha, Mironov, Talwar and Zhang (2019)
// Section 3.3: with z0 = sigma^2 log(1/q - 1) + 1/2, A = A1 + A2,
//
//	A1 = sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2-k)/(2 sigma^2)) erfc((k-z0)/(sqrt2 sigma))/2,
//	A2 = sum_k C(alpha,k) (1-q)^k q^(alpha-k) exp(((alpha-k)^2-(alpha-k))/(2 sigma^2)) erfc((z0-(alpha-k))/(sqrt2 sigma))/2.
//
// C(alpha,k) changes sign at every k > alpha, so past alpha both series alternate; they are
// summed until their terms shrink below fracSeriesTol, and the first omitted term of each
// (a bound on its remainder, the alternating-series bound) is added.
func logAFractional(q, sigma, alpha float64) float64 {
	lq, l1q := math.Log(q), math.Log1p(-q)
	s2 := 2 * sigma * sigma
	z0 := sigma*sigma*(l1q-lq) + 0.5
	rs := math.Sqrt2 * sigma
	pos, neg := math.Inf(-1), math.Inf(-1) // log of the sums of positive and negative terms
	var bound float64                      // sum of the truncation bounds
	prev1, prev2 := math.Inf(1), math.Inf(1)
	done1, done2 := false, false
	logTol := math.Log(fracSeriesTol)
	add := func(t, sign float64) {
		if sign > 0 {
			pos = LogAddExp(pos, t)
		} else {
			neg = LogAddExp(neg, t)
		}
	}
	for k := 0; k < fracSeriesMaxTerms && !(done1 && done2); k++ {
		kf := float64(k)
		lb, sign := logBinomialSigned(alpha, kf)
		if !done1 {
			t := lb + (alpha-kf)*l1q + kf*lq + (kf*kf-kf)/s2 + logErfc((kf-z0)/rs) - math.Ln2
			if kf > alpha+1 && t < prev1 && t < logTol {
				bound += math.Exp(t)
				done1 = true
			} else {
				add(t, sign)
			}
			prev1 = t
		}
		if !done2 {
			j := alpha - kf
			t := lb + kf*l1q + j*lq + (j*j-j)/s2 + logErfc((z0-j)/rs) - math.Ln2
			if kf > alpha+1 && t < prev2 && t < logTol {
				bound += math.Exp(t)
				done2 = true
			} else {
				add(t, sign)
			}
			prev2 = t
		}
	}
	if !(done1 && done2) {
		// Not converged: no valid bound; say so by an infinite divergence rather than
		// report a number that might understate the privacy loss.
		return math.Inf(1)
	}
	// A = e^pos - e^neg + bound, with A >= 1 > 0 so pos > neg.
	a := pos + math.Log1p(-math.Exp(neg-pos))
	return LogAddExp(a, math.Log(bound))
}

// LaplaceRDP is the RDP of the Laplace mechanism at order alpha > 1, for noise scale b
// relative to the L1 sensitivity (b = scale/sensitivity), Mironov (2017), Proposition 6:
// (1/(alpha-1)) log( alpha/(2alpha-1) e^{(alpha-1)/b} + (alpha-1)/(2alpha-1) e^{-alpha/b} ),
// computed in log space so that large alpha/b stays finite.
func LaplaceRDP(b, alpha float64) (float64, error) {
	switch {
	case !(b > 0) || math.IsInf(b, 1):
		return 0, fmt.Errorf("laplace RDP: relative scale %v must be positive and finite", b)
	case !(alpha > 1) || math.IsInf(alpha, 1):
		return 0, fmt.Errorf("laplace RDP: order %v must be finite and > 1", alpha)
	}
	t1 := math.Log(alpha/(2*alpha-1)) + (alpha-1)/b
	t2 := math.Log((alpha-1)/(2*alpha-1)) - alpha/b
	return math.Max(0, LogAddExp(t1, t2)) / (alpha - 1), nil
}

// LaplaceRDPCurve is LaplaceRDP at each order.
func LaplaceRDPCurve(b float64, orders []float64) ([]float64, error) {
	if err := checkOrders(orders); err != nil {
		return nil, err
	}
	out := make([]float64, len(orders))
	for i, a := range orders {
		v, err := LaplaceRDP(b, a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// GaussianRDPCurve is the RDP of the (unsampled) Gaussian mechanism, alpha/(2 sigma^2).
func GaussianRDPCurve(sigma float64, orders []float64) ([]float64, error) {
	return SampledGaussianRDP(1, sigma, orders)
}

// Accountant composes RDP curves over rounds on a fixed grid of orders: RDP adds up under
// adaptive composition (Mironov 2017, Proposition 1), so rounds with different mechanisms
// or parameters are simply summed order by order.
type Accountant struct {
	orders []float64
	rdp    []float64
}

// NewAccountant returns an empty accountant on the given orders (DefaultOrders if nil).
func NewAccountant(orders []float64) (*Accountant, error) {
	if orders == nil {
		orders = DefaultOrders()
	}
	if err := checkOrders(orders); err != nil {
		return nil, err
	}
	return &Accountant{orders: slices.Clone(orders), rdp: make([]float64, len(orders))}, nil
}

// Orders is the grid (a copy).
func (a *Accountant) Orders() []float64 { return slices.Clone(a.orders) }

// RDP is the composed curve so far (a copy).
func (a *Accountant) RDP() []float64 { return slices.Clone(a.rdp) }

// Add composes times rounds of a per-round curve given on the accountant's orders.
func (a *Accountant) Add(curve []float64, times int) error {
	if len(curve) != len(a.orders) {
		return fmt.Errorf("add RDP curve: %d values for %d orders", len(curve), len(a.orders))
	}
	if times < 0 {
		return fmt.Errorf("add RDP curve: negative count %d", times)
	}
	for i, v := range curve {
		if !(v >= 0) {
			return fmt.Errorf("add RDP curve: value %v at order %v", v, a.orders[i])
		}
	}
	for i, v := range curve {
		a.rdp[i] += float64(times) * v
	}
	return nil
}

// AddSampledGaussian composes steps rounds of the sampled Gaussian mechanism (q, sigma).
func (a *Accountant) AddSampledGaussian(q, sigma float64, steps int) error {
	c, err := SampledGaussianRDP(q, sigma, a.orders)
	if err != nil {
		return err
	}
	return a.Add(c, steps)
}

// Epsilon is the smallest epsilon over the orders for which the composition so far is
// (epsilon, delta)-DP, and the order that attains it.
func (a *Accountant) Epsilon(delta float64, conv Conversion) (eps, order float64, err error) {
	return EpsilonFromRDP(a.orders, a.rdp, delta, conv)
}

// Delta is the smallest delta over the orders at which the composition so far is
// (eps, delta)-DP, and the order that attains it.
func (a *Accountant) Delta(eps float64, conv Conversion) (delta, order float64, err error) {
	return DeltaFromRDP(a.orders, a.rdp, eps, conv)
}
