package accounting

import (
	"context"
	"fmt"
	"math"
)

// Guarantee is an (Epsilon, Delta)-DP claim and the Rényi order that gave it.
type Guarantee struct {
	Epsilon, Delta, Order float64
}

// Round is one round of client-level DP for one client: Poisson sampling with rate Q and
// Gaussian noise of standard deviation Z times the client's clipping norm (its noise
// multiplier).
type Round struct {
	Q, Z float64
}

// Claim fixes how the per-client claims are computed: the Rényi orders (DefaultOrders if
// nil), the conversion to (epsilon, delta) and delta.
type Claim struct {
	Orders     []float64
	Conversion Conversion
	Delta      float64
}

func (c Claim) orders() []float64 {
	if c.Orders == nil {
		return DefaultOrders()
	}
	return c.Orders
}

func (c Claim) check() error {
	if !(c.Delta > 0 && c.Delta < 1) {
		return fmt.Errorf("claim: delta %v outside (0, 1)", c.Delta)
	}
	if c.Conversion != Standard && c.Conversion != Balle {
		return fmt.Errorf("claim: unknown conversion %d", int(c.Conversion))
	}
	return checkOrders(c.orders())
}

// ScheduleEpsilon is the (epsilon, delta) claim of a client whose rounds follow schedule
// (heterogeneous rounds compose by adding their RDP curves). Repeated (Q, Z) pairs are
// computed once.
func ScheduleEpsilon(schedule []Round, c Claim) (Guarantee, error) {
	if err := c.check(); err != nil {
		return Guarantee{}, err
	}
	acc, err := NewAccountant(c.orders())
	if err != nil {
		return Guarantee{}, err
	}
	counts := map[Round]int{}
	var distinct []Round
	for _, r := range schedule {
		if counts[r] == 0 {
			distinct = append(distinct, r)
		}
		counts[r]++
	}
	for _, r := range distinct {
		if err := acc.AddSampledGaussian(r.Q, r.Z, counts[r]); err != nil {
			return Guarantee{}, fmt.Errorf("schedule round (q=%v, z=%v): %w", r.Q, r.Z, err)
		}
	}
	eps, order, err := acc.Epsilon(c.Delta, c.Conversion)
	return Guarantee{Epsilon: eps, Delta: c.Delta, Order: order}, err
}

// DPFedAvgEpsilon is the per-client claim of DP-FedAvg (time-adaptive paper, Alg. 4):
// rounds rounds of the sampled Gaussian mechanism with client sampling rate q and noise
// multiplier z = sigma/c (server noise N(0, c^2 sigma^2) on the sum of updates clipped to
// c).
func DPFedAvgEpsilon(q, z float64, rounds int, c Claim) (Guarantee, error) {
	if rounds < 0 {
		return Guarantee{}, fmt.Errorf("DP-FedAvg: negative round count %d", rounds)
	}
	if err := c.check(); err != nil {
		return Guarantee{}, err
	}
	acc, err := NewAccountant(c.orders())
	if err != nil {
		return Guarantee{}, err
	}
	if err := acc.AddSampledGaussian(q, z, rounds); err != nil {
		return Guarantee{}, fmt.Errorf("DP-FedAvg: %w", err)
	}
	eps, order, err := acc.Epsilon(c.Delta, c.Conversion)
	return Guarantee{Epsilon: eps, Delta: c.Delta, Order: order}, err
}

// Search ranges and precision of the calibrations.
const (
	minNoise      = 1e-2
	maxNoise      = 1e4
	minRate       = 1e-9
	bisectRelTol  = 1e-6
	bisectMaxIter = 200
)

// NoiseForBudget is the GetNoise of the time-adaptive paper (Alg. 1 line 4, Alg. 5 line 2):
// the smallest noise multiplier z (to relative precision 1e-6, rounded up) for which rounds
// rounds of the sampled Gaussian mechanism with rate q meet (eps, delta). Epsilon
// decreases in z, so bisection on log z finds it. It fails if even z = 1e4 does not meet
// the budget, and returns 1e-2 if that already does.
func NoiseForBudget(ctx context.Context, eps, q float64, rounds int, c Claim) (float64, error) {
	if !(eps > 0) || math.IsInf(eps, 1) {
		return 0, fmt.Errorf("noise for budget: epsilon %v must be positive and finite", eps)
	}
	if rounds < 1 {
		return 0, fmt.Errorf("noise for budget: round count %d < 1", rounds)
	}
	z, err := bisectNoise(ctx, func(z float64) (bool, error) {
		g, err := DPFedAvgEpsilon(q, z, rounds, c)
		return g.Epsilon <= eps, err
	})
	if err != nil {
		return 0, fmt.Errorf("noise for budget eps=%v q=%v T=%d: %w", eps, q, rounds, err)
	}
	return z, nil
}

// bisectNoise is the smallest z in [minNoise, maxNoise] (to relative precision
// bisectRelTol, rounded up) with meets(z), for meets monotone in z.
func bisectNoise(ctx context.Context, meets func(z float64) (bool, error)) (float64, error) {
	ok, err := meets(maxNoise)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errNoSolution
	}
	if ok, _ := meets(minNoise); ok {
		return minNoise, nil
	}
	lo, hi := math.Log(minNoise), math.Log(maxNoise) // lo fails, hi meets
	for i := 0; i < bisectMaxIter && hi-lo > bisectRelTol; i++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		mid := (lo + hi) / 2
		ok, err := meets(math.Exp(mid))
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return math.Exp(hi), nil
}

// SamplingRateForBudget is the largest client sampling rate q (to absolute precision
// 1e-6 relative to q, rounded down) for which rounds rounds of the sampled Gaussian
// mechanism with noise multiplier z meet (eps, delta); 1 if q = 1 does. It fails if even
// q = 1e-9 does not.
func SamplingRateForBudget(ctx context.Context, eps, z float64, rounds int, c Claim) (float64, error) {
	if !(eps > 0) || math.IsInf(eps, 1) {
		return 0, fmt.Errorf("sampling rate for budget: epsilon %v must be positive and finite", eps)
	}
	if rounds < 1 {
		return 0, fmt.Errorf("sampling rate for budget: round count %d < 1", rounds)
	}
	meets := func(q float64) (bool, error) {
		g, err := DPFedAvgEpsilon(q, z, rounds, c)
		return g.Epsilon <= eps, err
	}
	if ok, err := meets(1); err != nil {
		return 0, fmt.Errorf("sampling rate for budget: %w", err)
	} else if ok {
		return 1, nil
	}
	if ok, _ := meets(minRate); !ok {
		return 0, fmt.Errorf("sampling rate for budget eps=%v z=%v T=%d: %w", eps, z, rounds, errNoSolution)
	}
	lo, hi := math.Log(minRate), 0.0 // lo meets, hi fails
	for i := 0; i < bisectMaxIter && hi-lo > bisectRelTol; i++ {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("sampling rate for budget: %w", err)
		}
		mid := (lo + hi) / 2
		ok, err := meets(math.Exp(mid))
		if err != nil {
			return 0, fmt.Errorf("sampling rate for budget: %w", err)
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Exp(lo), nil
}

// IDPParams are IDP-FedAvg's privacy parameters (time-adaptive paper, Alg. 5,
// SetPrivacyParams): the per-client noise multipliers Sigmas[n] = GetNoise(eps_n, delta, q,
// T) (line 2), the server's noise multiplier Sigma = N / sum_n 1/Sigmas[n] (line 4) and the
// per-client clipping norms Clips[n] = c Sigma / Sigmas[n] (line 6), whose mean is c. The
// server's noise N(0, c^2 Sigma^2) is Sigmas[n] times client n's clipping norm, so client n
// gets the guarantee of noise multiplier Sigmas[n]: Guarantees[n].
type IDPParams struct {
	Sigma      float64
	Sigmas     []float64
	Clips      []float64
	Guarantees []Guarantee
}

// IDPFedAvg computes IDP-FedAvg's parameters for per-client budgets, sampling rate q,
// rounds rounds and average clipping norm clip. Equal budgets are calibrated once.
func IDPFedAvg(ctx context.Context, budgets []float64, q float64, rounds int, clip float64, c Claim) (IDPParams, error) {
	if len(budgets) == 0 {
		return IDPParams{}, fmt.Errorf("IDP-FedAvg: no clients")
	}
	if !(clip > 0) || math.IsInf(clip, 1) {
		return IDPParams{}, fmt.Errorf("IDP-FedAvg: clipping norm %v must be positive and finite", clip)
	}
	p := IDPParams{Sigmas: make([]float64, len(budgets)), Clips: make([]float64, len(budgets)), Guarantees: make([]Guarantee, len(budgets))}
	type cal struct {
		z float64
		g Guarantee
	}
	done := map[float64]cal{}
	var inv float64
	for n, eps := range budgets {
		r, ok := done[eps]
		if !ok {
			z, err := NoiseForBudget(ctx, eps, q, rounds, c)
			if err != nil {
				return IDPParams{}, fmt.Errorf("IDP-FedAvg client %d: %w", n, err)
			}
			g, err := DPFedAvgEpsilon(q, z, rounds, c)
			if err != nil {
				return IDPParams{}, fmt.Errorf("IDP-FedAvg client %d: %w", n, err)
			}
			r = cal{z, g}
			done[eps] = r
		}
		p.Sigmas[n], p.Guarantees[n] = r.z, r.g
		inv += 1 / r.z
	}
	p.Sigma = float64(len(budgets)) / inv
	for n, z := range p.Sigmas {
		p.Clips[n] = clip * p.Sigma / z
	}
	return p, nil
}

// IDPSamplingRates is the other IDP calibration (Boenisch et al.'s "Sample" variant): one
// noise multiplier z for everyone and per-client sampling rates, the largest each budget
// allows.
func IDPSamplingRates(ctx context.Context, budgets []float64, z float64, rounds int, c Claim) ([]float64, error) {
	out := make([]float64, len(budgets))
	done := map[float64]float64{}
	for n, eps := range budgets {
		q, ok := done[eps]
		if !ok {
			var err error
			if q, err = SamplingRateForBudget(ctx, eps, z, rounds, c); err != nil {
				return nil, fmt.Errorf("IDP sampling rates client %d: %w", n, err)
			}
			done[eps] = q
		}
		out[n] = q
	}
	return out, nil
}
