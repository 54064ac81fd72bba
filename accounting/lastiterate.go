package accounting

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// The last-iterate heuristic of Steinke, Nasr, Ganesh, Balle, Choquette-Choo, Jagielski,
// Hayes, Thakurta, Smith and Terzis, "The last iterate advantage: empirical auditing and
// principled heuristic analysis of differentially private SGD" (ICLR 2025): the privacy of
// the final model alone if every loss were linear. Then the target's update is the same
// vector every round it takes part, and the final model's projection on that direction is
//
//	Q = N(0, s^2)                      without the target (or outside its rounds),
//	P = sum_t Shift_t B_t + N(0, s^2)  with it, B_t ~ Bernoulli(Q_t) independent,
//
// s^2 = sum_t Std_t^2; every other direction is the same noise in both worlds. The heuristic
// is the exact privacy profile of this pair, delta(eps) = max(H_{e^eps}(P||Q), H_{e^eps}(Q||P))
// (both directions of add/remove adjacency). docs/theory-implementation.md derives it and
// bounds the numerical error of what follows.

// LastIterateRound is one round of a client-level DP system as the final model sees it under
// linear losses: the target takes part with probability Q (Poisson sampling, independent
// across rounds); when it does, the model moves by Shift along the target's direction (the
// target's clip norm, times whatever the round scales the noisy sum by); the round's Gaussian
// noise has standard deviation Std along that direction (scaled alike). Only the ratios of
// the Shifts and Stds matter.
type LastIterateRound struct {
	Q, Shift, Std float64
}

// LastIterate is the pair of distributions (P, Q) of the heuristic for a sequence of rounds,
// with P's shifts held as atoms in units of the total noise std s.
type LastIterate struct {
	mu    []float64 // atoms of S/s, increasing
	logW  []float64 // log weight of each atom
	logW0 float64   // log weight of the atom at 0, -Inf when there is none
	// dropped is the total weight of the atoms dropped (each below pruneWeight): the kept
	// atoms are P less that mass. relW bounds the relative rounding error of every kept
	// weight.
	dropped, relW float64
}

const (
	// pruneWeight is the weight below which an atom of P is dropped; the dropped mass is
	// tracked and enters the error bound.
	pruneWeight = 1e-30
	// maxLastIterateAtoms caps the atoms of P (distinct shifts with unequal Shift values
	// multiply).
	maxLastIterateAtoms = 1 << 20
)

// NewLastIterate builds the heuristic's pair for rounds. Rounds with equal Shift are grouped
// (a binomial when their Q are equal too, a Poisson binomial otherwise), and the groups'
// sums convolved; atoms of weight below 1e-30 are dropped and their mass kept for the error
// bound. It fails when no round has noise, a value is out of range, or unequal shifts make
// more than 2^20 distinct sums.
func NewLastIterate(rounds []LastIterateRound) (*LastIterate, error) {
	if len(rounds) == 0 {
		return nil, errors.New("last iterate: no rounds")
	}
	var s2 float64
	for i, r := range rounds {
		switch {
		case !(r.Q >= 0 && r.Q <= 1):
			return nil, fmt.Errorf("last iterate: round %d: sampling rate %v outside [0, 1]", i, r.Q)
		case !(r.Shift >= 0) || math.IsInf(r.Shift, 1):
			return nil, fmt.Errorf("last iterate: round %d: shift %v must be finite and >= 0", i, r.Shift)
		case !(r.Std >= 0) || math.IsInf(r.Std, 1):
			return nil, fmt.Errorf("last iterate: round %d: noise std %v must be finite and >= 0", i, r.Std)
		}
		s2 += r.Std * r.Std
	}
	s := math.Sqrt(s2)
	if !(s > 0) || math.IsInf(s, 1) {
		return nil, fmt.Errorf("last iterate: total noise std %v must be positive and finite", s)
	}
	// Group by shift; rounds that cannot move the model (Q = 0 or Shift = 0) add only noise.
	groups := map[float64][]float64{}
	var shifts []float64
	for _, r := range rounds {
		if r.Q == 0 || r.Shift == 0 {
			continue
		}
		if _, ok := groups[r.Shift]; !ok {
			shifts = append(shifts, r.Shift)
		}
		groups[r.Shift] = append(groups[r.Shift], r.Q)
	}
	sort.Float64s(shifts)
	// The distribution of S/s as a map from atom to weight, built group by group.
	atoms := map[float64]float64{0: 1}
	var dropped, relW float64
	for _, shift := range shifts {
		counts, lost, rel := countDistribution(groups[shift])
		dropped += lost
		// Relative errors add under products; the product w c adds one rounding (and the sum
		// of equal atoms, positive terms, no more).
		relW += rel + 2*0x1p-52
		next := make(map[float64]float64, len(atoms)*len(counts))
		for x, w := range atoms {
			for k, c := range counts {
				if c == 0 {
					continue
				}
				v := w * c
				if v < pruneWeight {
					dropped += v
					continue
				}
				next[x+float64(k)*shift/s] += v
			}
		}
		if len(next) > maxLastIterateAtoms {
			return nil, fmt.Errorf("last iterate: %d distinct shift sums (at most %d): round the shifts to fewer distinct values", len(next), maxLastIterateAtoms)
		}
		atoms = next
	}
	l := &LastIterate{logW0: math.Inf(-1), dropped: dropped, relW: relW}
	for x := range atoms {
		l.mu = append(l.mu, x)
	}
	sort.Float64s(l.mu)
	l.logW = make([]float64, len(l.mu))
	for i, x := range l.mu {
		l.logW[i] = math.Log(atoms[x])
		if x == 0 {
			l.logW0 = l.logW[i]
		}
	}
	return l, nil
}

// countDistribution is the distribution of the number of successes of independent
// Bernoulli(q_i) trials: the binomial in log space when every q_i is equal, the Poisson
// binomial by its recurrence otherwise. Weights below pruneWeight are set to 0; lost is
// their total plus a bound on what underflow lost in the recurrence, and rel a bound on the
// relative rounding error of every kept weight (the log-gamma terms of the binomial lose a
// few ulps of their magnitude each, which exp turns into a relative error; every step of the
// recurrence, a convex combination with a rounded 1 - q, at most 3u).
func countDistribution(qs []float64) (w []float64, lost, rel float64) {
	n := len(qs)
	w = make([]float64, n+1)
	if q := qs[0]; !slices.ContainsFunc(qs, func(v float64) bool { return v != q }) {
		if q == 1 {
			w[n] = 1
			return w, 0, 0
		}
		lq, l1q := math.Log(q), math.Log1p(-q)
		ln, _ := math.Lgamma(float64(n) + 1)
		for k := 0; k <= n; k++ {
			kf := float64(k)
			lk, _ := math.Lgamma(kf + 1)
			lnk, _ := math.Lgamma(float64(n-k) + 1)
			arg := ln - lk - lnk + kf*lq + float64(n-k)*l1q
			w[k] = math.Exp(arg)
			// 8 u per term of the argument (each special function within a few ulps, each
			// sum rounded), then exp: relative error at most that absolute error of arg.
			rel = math.Max(rel, 8*0x1p-52*(math.Abs(ln)+math.Abs(lk)+math.Abs(lnk)+math.Abs(kf*lq)+math.Abs(float64(n-k)*l1q)+1))
		}
	} else {
		w[0] = 1
		for i, q := range qs {
			for k := i + 1; k >= 1; k-- {
				w[k] = w[k]*(1-q) + w[k-1]*q
			}
			w[0] *= 1 - q
		}
		// Every product below the smallest normal float64 may have been flushed: at most
		// (n+1) of them per trial.
		lost = float64(n+1) * float64(n) * 0x1p-1022
		rel = 3 * float64(n) * 0x1p-52
	}
	for k, v := range w {
		if v < pruneWeight {
			lost += v
			w[k] = 0
		}
	}
	return w, lost, rel
}

// LastIterateOfSchedule is the heuristic's pair for a schedule of the accountant's rounds
// (sampling rate Q, noise multiplier Z): every round moves the model by the same shift (the
// target's clip norm) and adds noise of std Z times it. That is DP-FedAvg and any plan whose
// clip norm and divisor do not change across rounds; otherwise use NewLastIterate with the
// rounds' own shifts.
func LastIterateOfSchedule(schedule []Round) (*LastIterate, error) {
	rounds := make([]LastIterateRound, len(schedule))
	for t, r := range schedule {
		if !(r.Z > 0) || math.IsInf(r.Z, 1) {
			return nil, fmt.Errorf("last iterate: round %d: noise multiplier %v must be positive and finite", t, r.Z)
		}
		rounds[t] = LastIterateRound{Q: r.Q, Shift: 1, Std: r.Z}
	}
	return NewLastIterate(rounds)
}

// logPQ is the privacy loss log(p/q)(x) of the pair in units of s:
// log sum_k w_k exp(mu_k x - mu_k^2/2). It is non-decreasing in x (every mu_k >= 0).
func (l *LastIterate) logPQ(x float64) float64 {
	m := math.Inf(-1)
	for i, u := range l.mu {
		m = math.Max(m, l.logW[i]+u*x-u*u/2)
	}
	if math.IsInf(m, 0) {
		return m
	}
	var sum float64
	for i, u := range l.mu {
		sum += math.Exp(l.logW[i] + u*x - u*u/2 - m)
	}
	return m + math.Log(sum)
}

// solveLimit is how far solve looks for its bracket, in units of s: beyond it every tail
// probability the divergences use is below 1e-300 or within 1e-300 of 1 (unless an atom sits
// that far out, which no finite round count reaches).
const solveLimit = 1e150

// solve is the bracket [lo, hi] of adjacent floats with logPQ(lo) < c <= logPQ(hi). When c is
// not above logPQ(-solveLimit) (c at or below logPQ(-Inf) in floating point) both ends are
// -solveLimit; when it is above logPQ(solveLimit), both are solveLimit.
func (l *LastIterate) solve(c float64) (lo, hi float64) {
	lo, hi = -1.0, 1.0
	for l.logPQ(hi) < c {
		if hi >= solveLimit {
			return solveLimit, solveLimit
		}
		lo, hi = hi, math.Min(2*hi, solveLimit)
	}
	for l.logPQ(lo) >= c {
		if lo <= -solveLimit {
			return -solveLimit, -solveLimit
		}
		hi, lo = lo, math.Max(2*lo, -solveLimit)
	}
	for {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			return lo, hi
		}
		if l.logPQ(mid) < c {
			lo = mid
		} else {
			hi = mid
		}
	}
}

// logNormTail is log Phi(-x) = log P(N(0,1) > x), finite for every finite x.
func logNormTail(x float64) float64 { return logErfc(x/math.Sqrt2) - math.Ln2 }

// logNormPDF is log phi(x).
func logNormPDF(x float64) float64 { return -x*x/2 - 0.5*math.Log(2*math.Pi) }

// termErr bounds the rounding error of one term e^arg of the divergences: arg carries the
// absolute errors of its parts (log weight, log Gaussian tail, eps: a few ulps of each
// magnitude; 16 u of |arg| + 16 covers them with room), which exp turns into that relative
// error; the sum of the terms adds u per term.
func termErr(arg float64) float64 { return math.Exp(arg) * (16*math.Abs(arg) + 32) * 0x1p-52 }

// divergences is H(P||Q) and H(Q||P) at eps for the kept atoms, with the bounds that tie them
// to P's exact divergences (in, out exact; in~, out~ computed):
//
//	in~ - errIn <= in <= in~ + errIn + dropped,  out~ - errOut - e^eps dropped <= out <= out~ + errOut.
//
// Dropped atoms (the kept ones are P less mass d) can only raise H(P||Q), by at most d, and
// only lower H(Q||P), by at most e^eps d. errIn and errOut hold the rest: relative weight
// errors r (the kept atoms lie between 1 - r and 1 + r times their exact weights, which moves
// a divergence by at most r times the sum of its two terms), the root's bracket (rootErr) and
// the rounding of the terms (termErr).
func (l *LastIterate) divergences(eps float64) (in, out, errIn, errOut float64) {
	last := len(l.mu) - 1
	if last < 0 || l.mu[last] == 0 {
		// No round can move the model: P = Q less the dropped mass.
		return 0, 0, 0, 0
	}
	// H(P||Q) = P(X > x*) - e^eps Q(X > x*), logPQ(x*) = eps.
	lo, hi := l.solve(eps)
	x := hi
	var a, b float64
	for i, u := range l.mu {
		arg := l.logW[i] + logNormTail(x-u)
		a += math.Exp(arg)
		errIn += termErr(arg)
	}
	arg := eps + logNormTail(x)
	b = math.Exp(arg)
	in = math.Max(0, a-b)
	errIn += termErr(arg) + l.relW*(a+b) + l.rootErr(lo, hi, 0, eps)
	// H(Q||P) = Q(X < x-) - e^eps P(X < x-), logPQ(x-) = -eps.
	if l.logW0 >= -eps {
		// logPQ >= log w_0 >= -eps everywhere: H(Q||P) = 0 for the kept atoms, and for P
		// (whose weight at 0 is at least (1 - r) w_0) at most r.
		return in, 0, errIn, l.relW
	}
	lo, hi = l.solve(-eps)
	x = lo
	arg = logNormTail(-x)
	a = math.Exp(arg)
	errOut = termErr(arg)
	b = 0
	for i, u := range l.mu {
		arg := eps + l.logW[i] + logNormTail(u-x)
		b += math.Exp(arg)
		errOut += termErr(arg)
	}
	out = math.Max(0, a-b)
	errOut += l.relW*(a+b) + l.rootErr(lo, hi, eps, 0)
	return in, out, errIn, errOut
}

// rootErr bounds what evaluating a hockey-stick divergence at an end of the root's bracket
// [lo, hi] instead of at the root costs: |hi - lo| times the largest |e^cp p - e^cq q| on the
// bracket, at most e^cp p + e^cq q with p = e^logPQ q, logPQ at most its value at hi and q at
// most phi at the end nearer 0. Computed in log space: e^cp and e^cq may overflow alone.
func (l *LastIterate) rootErr(lo, hi, cp, cq float64) float64 {
	if hi == lo {
		return 0
	}
	near := math.Min(math.Abs(lo), math.Abs(hi))
	if lo <= 0 && hi >= 0 {
		near = 0
	}
	base := math.Log(hi-lo) + logNormPDF(near)
	return math.Exp(base+cp+l.logPQ(hi)) + math.Exp(base+cq)
}

// Delta is the heuristic's delta at eps >= 0: max(H_{e^eps}(P||Q), H_{e^eps}(Q||P)), P with
// the target, Q without (the second is 0 once eps >= log(1/prod_t(1 - Q_t))). errBound bounds
// |delta - exact| (see divergences): about 1e-14 of the divergences' terms, more with the
// log-gamma terms of many rounds, plus the mass of the atoms dropped (below 1e-30 each), which
// counts e^eps times only where H(Q||P) is the larger.
func (l *LastIterate) Delta(eps float64) (delta, errBound float64, err error) {
	if !(eps >= 0) || math.IsInf(eps, 1) {
		return 0, 0, fmt.Errorf("last iterate: epsilon %v must be finite and >= 0", eps)
	}
	in, out, errIn, errOut := l.divergences(eps)
	// exact <= max(in + errIn + d, out + errOut); exact >= max(in - errIn, out - errOut -
	// e^eps d), and the e^eps d term only matters when out is the larger.
	errBound = math.Max(errIn+l.dropped, errOut)
	if out > in {
		errBound = math.Max(errBound, errOut+math.Exp(eps)*l.dropped)
	}
	return math.Max(in, out), errBound, nil
}

// Directions is the two hockey-stick divergences at eps >= 0 separately: in =
// H_{e^eps}(P||Q) (the target's presence shows; the larger but at small eps) and out =
// H_{e^eps}(Q||P), each without its error bound.
func (l *LastIterate) Directions(eps float64) (in, out float64, err error) {
	if !(eps >= 0) || math.IsInf(eps, 1) {
		return 0, 0, fmt.Errorf("last iterate: epsilon %v must be finite and >= 0", eps)
	}
	in, out, _, _ = l.divergences(eps)
	return in, out, nil
}

// LastIterateGuarantee is the heuristic's epsilon at Delta: Epsilon is the upper end of the
// final bracket, where the computed delta plus its error bound is at most Delta, so the
// exact delta(Epsilon) <= Delta; the exact epsilon at Delta is at least EpsilonLower (the
// bracket's lower end) for a delta at most DeltaError below Delta.
type LastIterateGuarantee struct {
	Epsilon, Delta, EpsilonLower, DeltaError float64
}

// Epsilon is the smallest epsilon (to relative 1e-10 or adjacent floats) at which the
// heuristic's delta, plus its error bound, is at most delta.
func (l *LastIterate) Epsilon(delta float64) (LastIterateGuarantee, error) {
	if !(delta > 0 && delta < 1) {
		return LastIterateGuarantee{}, fmt.Errorf("last iterate: delta %v outside (0, 1)", delta)
	}
	upper := func(eps float64) (d, e float64) {
		d, e, _ = l.Delta(eps)
		return d + e, e
	}
	g := LastIterateGuarantee{Delta: delta}
	if d, e := upper(0); d <= delta {
		g.DeltaError = e
		return g, nil
	}
	lo, hi := 0.0, 1.0
	for {
		d, _ := upper(hi)
		if d <= delta {
			break
		}
		if hi > 1<<20 {
			return LastIterateGuarantee{}, fmt.Errorf("last iterate: delta %v not reached below epsilon %v", delta, hi)
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1e-10*hi {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if d, _ := upper(mid); d <= delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	_, e := upper(lo)
	_, eHi := upper(hi)
	g.Epsilon, g.EpsilonLower, g.DeltaError = hi, lo, 2*math.Max(e, eHi)
	return g, nil
}

// LastIterateEpsilon is the heuristic for DP-FedAvg: rounds rounds with client sampling rate
// q and noise multiplier z, at delta; the counterpart of DPFedAvgEpsilon for an observer of
// the final model alone. Final pair: Binomial(rounds, q) + N(0, rounds z^2) against
// N(0, rounds z^2), in units of the clip norm.
func LastIterateEpsilon(q, z float64, rounds int, delta float64) (LastIterateGuarantee, error) {
	if rounds < 1 {
		return LastIterateGuarantee{}, fmt.Errorf("last iterate: round count %d < 1", rounds)
	}
	sched := make([]Round, rounds)
	for t := range sched {
		sched[t] = Round{Q: q, Z: z}
	}
	l, err := LastIterateOfSchedule(sched)
	if err != nil {
		return LastIterateGuarantee{}, err
	}
	return l.Epsilon(delta)
}

// LastIterateEpsilons is the heuristic's epsilon at delta after each number of rounds T in
// rounds (in that order), for the first T rounds of schedule, each round moving the model by
// the same shift (LastIterateOfSchedule): the column beside a claim computed by
// ScheduleEpsilon from the same schedule. Every T must be in [1, len(schedule)].
func LastIterateEpsilons(schedule []Round, rounds []int, delta float64) ([]LastIterateGuarantee, error) {
	lr := make([]LastIterateRound, len(schedule))
	for t, r := range schedule {
		if !(r.Z > 0) || math.IsInf(r.Z, 1) {
			return nil, fmt.Errorf("last iterate: round %d: noise multiplier %v must be positive and finite", t, r.Z)
		}
		lr[t] = LastIterateRound{Q: r.Q, Shift: 1, Std: r.Z}
	}
	return LastIterateRoundsEpsilons(lr, rounds, delta)
}

// LastIterateRoundsEpsilons is LastIterateEpsilons for rounds with their own shifts and noise
// (a plan whose clip norm or divisor changes across rounds: Shift = clip_t/divisor_t, Std =
// std_t/divisor_t). Every T must be in [1, len(lastRounds)].
func LastIterateRoundsEpsilons(lastRounds []LastIterateRound, rounds []int, delta float64) ([]LastIterateGuarantee, error) {
	out := make([]LastIterateGuarantee, len(rounds))
	for i, T := range rounds {
		if T < 1 || T > len(lastRounds) {
			return nil, fmt.Errorf("last iterate: T = %d outside the schedule's 1..%d rounds", T, len(lastRounds))
		}
		l, err := NewLastIterate(lastRounds[:T])
		if err != nil {
			return nil, err
		}
		if out[i], err = l.Epsilon(delta); err != nil {
			return nil, fmt.Errorf("last iterate at T = %d: %w", T, err)
		}
	}
	return out, nil
}
