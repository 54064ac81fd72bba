package accounting

import (
	"context"
	"fmt"
	"math"
)

// Bookkeeping selects how the spend-as-you-go method judges the budget left.
type Bookkeeping int

const (
	// PaperBookkeeping is Alg. 1 as printed: the DP budget left is eps_n minus the
	// epsilon of the RDP spent so far (line 8), and the next noise spends that remainder as
	// if it were a fresh budget. It is safe but pays the log(1/delta) term of the
	// conversion again in every round, so clients end well below their budgets (about 20%
	// below in the paper's setting, T = 25, q = 0.9, delta = 1e-5).
	PaperBookkeeping Bookkeeping = iota
	// ComposedBookkeeping picks sigma_n^t as the smallest noise for which the RDP spent so
	// far plus T-t+1 further rounds at (q, sigma_n^t) compose to eps_n: the same rule
	// ("spend what is left evenly over the remaining rounds at rate q"), judged on the
	// composed curve, so a client that ends in spending mode uses its budget exactly.
	ComposedBookkeeping
)

// SpendClient is one client (or one group of identical clients) of the time-adaptive
// framework: its budget eps_n, its saving-phase sampling rate q_n, its transition round T_n
// (the first spending round, 1-based; T_n = 1 means no saving) and how many clients share
// these settings (Count, at least 1; it weights the averages of Alg. 1 lines 10 and 14).
type SpendClient struct {
	Epsilon    float64
	SavingRate float64
	Transition int
	Count      int
}

// SpendPlan is the output of the spend-as-you-go method (time-adaptive paper, Alg. 1),
// indexed [client][round] with rounds 0-based (round t of the paper is index t-1).
type SpendPlan struct {
	// Q and Sigma are the round's average sampling rate q^t (line 14) and server noise
	// multiplier sigma^t (line 10, harmonic mean over clients).
	Q, Sigma []float64
	// ClientQ, ClientSigma and ClientClip are q_n^t, sigma_n^t and c_n^t = c sigma^t/sigma_n^t.
	ClientQ, ClientSigma, ClientClip [][]float64
	// Remaining is eps_n^t of line 8, the DP budget Alg. 1 believes is left after round t.
	Remaining [][]float64
	// Spent is each client's claim for its whole schedule (q_n^t, sigma_n^t), composed by
	// the accountant: what the plan really spends. It never exceeds the budget (subtracting
	// spent epsilons, as line 8 does, over-counts: converting the sum of RDP curves costs
	// the log(1/delta) term once, converting each part costs it every time).
	Spent []Guarantee
}

// SpendAsYouGo runs Alg. 1 of the time-adaptive paper (SetPrivacyParams) with the full RDP
// accountant: in every round t and for every client, sigma_n^t = GetNoise(eps_n^{t-1}, delta,
// q, T-t+1), the noise that would spend the remaining budget evenly over the remaining
// rounds at the spending rate q (line 4); the client is then sampled at q_n^t = q_n in saving
// rounds (t < T_n) and at q afterwards (line 5), its RDP spend is added (lines 6-7) and the
// remaining DP budget is eps_n minus the epsilon of the RDP spent so far (line 8).
//
// The paper's line 4 passes T - t remaining rounds; this counts the current round too
// (T - t + 1), as its Sec. 4.1 and eq. (1) do, which also keeps the last round finite.
func SpendAsYouGo(ctx context.Context, clients []SpendClient, q, clip float64, rounds int, book Bookkeeping, c Claim) (SpendPlan, error) {
	if err := c.check(); err != nil {
		return SpendPlan{}, err
	}
	switch {
	case len(clients) == 0:
		return SpendPlan{}, fmt.Errorf("spend-as-you-go: no clients")
	case rounds < 1:
		return SpendPlan{}, fmt.Errorf("spend-as-you-go: round count %d < 1", rounds)
	case !(q > 0 && q <= 1):
		return SpendPlan{}, fmt.Errorf("spend-as-you-go: spending rate %v outside (0, 1]", q)
	case book != PaperBookkeeping && book != ComposedBookkeeping:
		return SpendPlan{}, fmt.Errorf("spend-as-you-go: unknown bookkeeping %d", int(book))
	case !(clip > 0) || math.IsInf(clip, 1):
		return SpendPlan{}, fmt.Errorf("spend-as-you-go: clipping norm %v must be positive and finite", clip)
	}
	for n, cl := range clients {
		switch {
		case !(cl.Epsilon > 0) || math.IsInf(cl.Epsilon, 1):
			return SpendPlan{}, fmt.Errorf("spend-as-you-go client %d: budget %v must be positive and finite", n, cl.Epsilon)
		case !(cl.SavingRate > 0 && cl.SavingRate <= q):
			return SpendPlan{}, fmt.Errorf("spend-as-you-go client %d: saving rate %v outside (0, q=%v]", n, cl.SavingRate, q)
		case cl.Transition < 1 || cl.Transition > rounds:
			return SpendPlan{}, fmt.Errorf("spend-as-you-go client %d: transition round %d outside [1, %d]", n, cl.Transition, rounds)
		case cl.Count < 1:
			return SpendPlan{}, fmt.Errorf("spend-as-you-go client %d: count %d < 1", n, cl.Count)
		}
	}
	orders := c.orders()
	plan := SpendPlan{
		Q: make([]float64, rounds), Sigma: make([]float64, rounds),
		ClientQ: make([][]float64, len(clients)), ClientSigma: make([][]float64, len(clients)),
		ClientClip: make([][]float64, len(clients)), Remaining: make([][]float64, len(clients)),
		Spent: make([]Guarantee, len(clients)),
	}
	for n, cl := range clients {
		acc, err := NewAccountant(orders)
		if err != nil {
			return SpendPlan{}, err
		}
		plan.ClientQ[n] = make([]float64, rounds)
		plan.ClientSigma[n] = make([]float64, rounds)
		plan.Remaining[n] = make([]float64, rounds)
		left := cl.Epsilon
		for t := 1; t <= rounds; t++ {
			if left <= 0 {
				return SpendPlan{}, fmt.Errorf("spend-as-you-go client %d: budget exhausted before round %d", n, t)
			}
			var z float64
			if book == PaperBookkeeping {
				z, err = NoiseForBudget(ctx, left, q, rounds-t+1, c)
			} else {
				z, err = composedNoise(ctx, acc, cl.Epsilon, q, rounds-t+1, c)
			}
			if err != nil {
				return SpendPlan{}, fmt.Errorf("spend-as-you-go client %d round %d: %w", n, t, err)
			}
			qt := q
			if t < cl.Transition {
				qt = cl.SavingRate
			}
			if err := acc.AddSampledGaussian(qt, z, 1); err != nil {
				return SpendPlan{}, fmt.Errorf("spend-as-you-go client %d round %d: %w", n, t, err)
			}
			spent, _, err := acc.Epsilon(c.Delta, c.Conversion)
			if err != nil {
				return SpendPlan{}, err
			}
			left = cl.Epsilon - spent
			plan.ClientQ[n][t-1], plan.ClientSigma[n][t-1], plan.Remaining[n][t-1] = qt, z, left
		}
		eps, order, err := acc.Epsilon(c.Delta, c.Conversion)
		if err != nil {
			return SpendPlan{}, err
		}
		plan.Spent[n] = Guarantee{Epsilon: eps, Delta: c.Delta, Order: order}
	}
	for t := 0; t < rounds; t++ {
		var count, inv, sumQ float64
		for n, cl := range clients {
			w := float64(cl.Count)
			count += w
			inv += w / plan.ClientSigma[n][t]
			sumQ += w * plan.ClientQ[n][t]
		}
		plan.Sigma[t] = count / inv
		plan.Q[t] = sumQ / count
	}
	for n := range clients {
		plan.ClientClip[n] = make([]float64, rounds)
		for t := 0; t < rounds; t++ {
			plan.ClientClip[n][t] = clip * plan.Sigma[t] / plan.ClientSigma[n][t]
		}
	}
	return plan, nil
}

// SpendShares is the fixed-order idealisation of Sec. 4.1 of the time-adaptive paper: with
// per-round RDP proportional to q^2 (its Lemma 4, 2 alpha q^2/sigma^2), the fraction of the
// RDP budget eps_rdp,n that client n spends in round t (1-based) follows the recursion of
// eq. (1); SpendShares returns it for t = 1..T, computed by that recursion. Its closed form
// is Lemma 1, eq. (2) (checked by the tests). ratio is q_n/q and transition is T_n.
func SpendShares(rounds, transition int, ratio float64) ([]float64, error) {
	switch {
	case rounds < 1:
		return nil, fmt.Errorf("spend shares: round count %d < 1", rounds)
	case transition < 1 || transition > rounds:
		return nil, fmt.Errorf("spend shares: transition %d outside [1, %d]", transition, rounds)
	case !(ratio >= 0 && ratio <= 1):
		return nil, fmt.Errorf("spend shares: rate ratio %v outside [0, 1]", ratio)
	}
	out := make([]float64, rounds)
	spent := 0.0
	for t := 1; t <= rounds; t++ {
		share := (1 - spent) / float64(rounds-t+1)
		if t < transition {
			share *= ratio * ratio
		}
		out[t-1] = share
		spent += share
	}
	return out, nil
}

// composedNoise is the smallest noise multiplier z such that the RDP in acc plus remaining
// rounds of the sampled Gaussian mechanism (q, z) meet budget.
func composedNoise(ctx context.Context, acc *Accountant, budget, q float64, remaining int, c Claim) (float64, error) {
	base := acc.RDP()
	trial := make([]float64, len(base))
	return bisectNoise(ctx, func(z float64) (bool, error) {
		curve, err := SampledGaussianRDP(q, z, acc.orders)
		if err != nil {
			return false, err
		}
		for i := range trial {
			trial[i] = base[i] + float64(remaining)*curve[i]
		}
		eps, _, err := EpsilonFromRDP(acc.orders, trial, c.Delta, c.Conversion)
		return eps <= budget, err
	})
}
