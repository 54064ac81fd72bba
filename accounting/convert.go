package accounting

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/internal/mathx"
)

// Conversion selects the bound that turns an RDP curve into (epsilon, delta)-DP.
type Conversion int

const (
	// Standard is Mironov (2017), Proposition 3:
	// eps = rdp(alpha) + log(1/delta)/(alpha-1).
	Standard Conversion = iota
	// Balle is Balle et al. (2020), "Hypothesis testing interpretations and Rényi
	// differential privacy", Theorem 21:
	// eps = rdp(alpha) + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1).
	// It is never looser than Standard (the difference is
	// log(1 - 1/alpha) - log(alpha)/(alpha-1) <= 0). The time-adaptive paper uses it
	// (its Lemma 3, eq. 56), as do current Opacus and TF-Privacy.
	Balle
)

func (c Conversion) String() string {
	switch c {
	case Standard:
		return "standard"
	case Balle:
		return "balle"
	}
	return fmt.Sprintf("Conversion(%d)", int(c))
}

// epsAt is epsilon at one order for log delta ld.
func (c Conversion) epsAt(alpha, rdp, ld float64) float64 {
	if c == Balle {
		return rdp + math.Log1p(-1/alpha) - (ld+math.Log(alpha))/(alpha-1)
	}
	return rdp - ld/(alpha-1)
}

// logDeltaAt is log delta at one order for a given epsilon: the inverse of epsAt.
func (c Conversion) logDeltaAt(alpha, rdp, eps float64) float64 {
	if c == Balle {
		return (alpha-1)*(rdp-eps+math.Log1p(-1/alpha)) - math.Log(alpha)
	}
	return (alpha - 1) * (rdp - eps)
}

func checkCurve(orders, rdp []float64, c Conversion) error {
	if c != Standard && c != Balle {
		return fmt.Errorf("unknown RDP conversion %d", int(c))
	}
	if len(orders) != len(rdp) {
		return fmt.Errorf("RDP curve: %d orders, %d values", len(orders), len(rdp))
	}
	if err := checkOrders(orders); err != nil {
		return err
	}
	for i, v := range rdp {
		if math.IsNaN(v) || v < 0 {
			return fmt.Errorf("RDP curve: value %v at order %v", v, orders[i])
		}
	}
	return nil
}

// EpsilonFromRDP is the smallest epsilon over the orders such that a mechanism with RDP
// curve rdp is (epsilon, delta)-DP, and the order attaining it. Epsilon is clamped at 0
// (a negative value of the bound means the pair (0, delta) already holds).
func EpsilonFromRDP(orders, rdp []float64, delta float64, c Conversion) (eps, order float64, err error) {
	if err := checkCurve(orders, rdp, c); err != nil {
		return 0, 0, err
	}
	if !(delta > 0 && delta < 1) {
		return 0, 0, fmt.Errorf("epsilon from RDP: delta %v outside (0, 1)", delta)
	}
	ld := mathx.Log(delta) // right for a subnormal delta too, where math.Log is not
	eps, order = math.Inf(1), math.NaN()
	for i, a := range orders {
		if e := c.epsAt(a, rdp[i], ld); e < eps {
			eps, order = e, a
		}
	}
	return math.Max(0, eps), order, nil
}

// DeltaFromRDP is the smallest delta over the orders such that a mechanism with RDP curve
// rdp is (eps, delta)-DP, and the order attaining it; at most 1.
func DeltaFromRDP(orders, rdp []float64, eps float64, c Conversion) (delta, order float64, err error) {
	if err := checkCurve(orders, rdp, c); err != nil {
		return 0, 0, err
	}
	if !(eps >= 0) || math.IsInf(eps, 1) {
		return 0, 0, fmt.Errorf("delta from RDP: epsilon %v must be finite and >= 0", eps)
	}
	ld, order := math.Inf(1), math.NaN()
	for i, a := range orders {
		if v := c.logDeltaAt(a, rdp[i], eps); v < ld {
			ld, order = v, a
		}
	}
	return math.Min(1, math.Exp(ld)), order, nil
}
