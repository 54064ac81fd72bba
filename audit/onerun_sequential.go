package audit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// OneRunSequentialMethod labels the rows of the sequential one-run eps bound
// (OneRunSequentialEpsilon) in the self-test. It is not a threshold method.
const OneRunSequentialMethod ThresholdMethod = "one-run-sequential"

// OneRunSequentialResult is the sequential (adaptive) one-run eps bound of
// OneRunSequentialEpsilon: EpsLower holds at Confidence for a mechanism that is eps-DP (delta
// = 0) with respect to each canary. Looks are the guess counts fixed in advance; Correct[j] the
// right guesses among the first Looks[j]; Stop the look whose count was the least likely.
type OneRunSequentialResult struct {
	Canaries   int     `json:"canaries"`
	Confidence float64 `json:"confidence"`
	EpsLower   float64 `json:"eps_lower"`
	Looks      []int   `json:"looks"`
	Correct    []int   `json:"correct"`
	Stop       int     `json:"stop"`
}

// DefaultSequentialLooks is the default set of looks of OneRunSequentialEpsilon for m
// canaries: after 2%, 5%, 10%, 20%, 30%, 45%, 70% and 100% of them have been guessed (at least
// one guess, repeated counts dropped).
func DefaultSequentialLooks(m int) []int {
	var looks []int
	for _, f := range oneRunAdaptiveFractions {
		n := min(m, max(1, int(math.Round(f*float64(m)))))
		if len(looks) == 0 || looks[len(looks)-1] < n {
			looks = append(looks, n)
		}
	}
	return looks
}

// OneRunSequentialEpsilon is adaptive abstention in the manner of Keinan, Shenfeld and Ligett
// (NeurIPS 2025), certified without a union bound, for pure DP, from the scores (higher means
// "more likely included") and inclusion bits of m canaries, each included independently with
// probability 1/2. The auditor guesses in order of confidence, alternating between the top and the bottom of the scores ("included" on the
// highest not yet guessed, then "excluded" on the lowest), and stops where the data say: it
// looks at the right guesses W_n after each count n of looks (fixed in advance; nil means
// DefaultSequentialLooks) and keeps the look whose count is least likely. If the mechanism is
// eps-DP with respect to each canary, the posterior of a canary's bit given the output and any
// other bits lies in [1-q, q], q = e^eps/(1+e^eps), so each guess in that order is right with
// probability at most q given the output and the earlier guesses' outcomes, and the sequence of
// right guesses is dominated by independent Bernoulli(q) draws. The statistic, the smallest over
// the looks of P[Bin(n, q) >= W_n], is decreasing in every guess's outcome, so its p-value is at
// most that of the independent draws, which is computed exactly by dynamic programming over the
// looks (the probability that some look's binomial count reaches the boundary the observed
// minimum sets). Scores may be any real numbers (ties broken by canary index, not by the bits).
//
// The certified eps is an L such that the test rejects at every eps in [0, L), verified over
// whole intervals (sequentialRejectsOn): if the mechanism is eps0-DP and the bound exceeds
// eps0, the test rejected at eps0, which happens with probability at most 1 - confidence. The
// p-value is not monotone in eps (the boundaries jump as eps moves, and between two rejected
// values there can be a short stretch the test accepts: m = 30, default looks, right guesses
// [1 1 2 4 6 11 14 18], confidence 0.9: rejected at 0.130 and 0.145, accepted at 0.135 and
// 0.140), so the largest rejected eps is no bound: returned before, it exceeded the true eps
// with probability 0.2112 at level 0.2 (m = 20, looks [1 2 4 6 9 14 20], eps 0.9, computed
// exactly over every outcome of independent Bernoulli(q) guesses; TestOneRunSequentialExact).
func OneRunSequentialEpsilon(scores []float64, included []bool, looks []int, confidence float64) (*OneRunSequentialResult, error) {
	m := len(scores)
	switch {
	case m == 0:
		return nil, fmt.Errorf("audit: sequential one-run bound: no canaries")
	case len(included) != m:
		return nil, fmt.Errorf("audit: sequential one-run bound: %d scores but %d inclusion bits", m, len(included))
	case !(confidence > 0 && confidence < 1):
		return nil, fmt.Errorf("audit: sequential one-run bound: confidence %v outside (0, 1)", confidence)
	}
	for i, s := range scores {
		if math.IsNaN(s) {
			return nil, fmt.Errorf("audit: sequential one-run bound: score %d is NaN", i)
		}
	}
	if looks == nil {
		looks = DefaultSequentialLooks(m)
	}
	if len(looks) == 0 {
		return nil, fmt.Errorf("audit: sequential one-run bound: no looks")
	}
	for j, n := range looks {
		if n < 1 || n > m || (j > 0 && n <= looks[j-1]) {
			return nil, fmt.Errorf("audit: sequential one-run bound: looks %v must increase within 1..%d", looks, m)
		}
	}
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
	// The guess sequence: top, bottom, next top, next bottom, ...
	right := make([]bool, m)
	lo, hi := 0, m-1
	for j := range m {
		if j%2 == 0 {
			right[j] = included[order[hi]]
			hi--
		} else {
			right[j] = !included[order[lo]]
			lo++
		}
	}
	res := &OneRunSequentialResult{Canaries: m, Confidence: confidence, Looks: slices.Clone(looks)}
	w, j := 0, 0
	for n := 1; n <= looks[len(looks)-1]; n++ {
		if right[n-1] {
			w++
		}
		if n == looks[j] {
			res.Correct = append(res.Correct, w)
			j++
		}
	}
	lf := logFactorials(m)
	res.EpsLower = sequentialRejectedUpTo(looks, res.Correct, 1-confidence, lf)
	_, res.Stop = sequentialPValue(looks, res.Correct, res.EpsLower, lf)
	return res, nil
}

// sequentialRejectedUpTo is the largest L found such that the sequential test rejects at every
// eps in [0, L] at level tau: intervals verified by sequentialRejectsOn, grown while they
// verify and halved when they do not, until the step is below the searches' tolerance. L is at
// most the smallest eps the test accepts, so it is a bound whatever the p-value does between
// the points a bisection would try.
func sequentialRejectedUpTo(looks, correct []int, tau float64, lf []float64) float64 {
	if !sequentialRejectsOn(looks, correct, 0, 0, tau, lf) {
		return 0
	}
	lo, step := 0.0, 1.0/64
	for step > oneRunSearchTol*math.Max(1, lo) {
		if lo+step > oneRunSearchCap {
			return lo
		}
		if sequentialRejectsOn(looks, correct, lo, lo+step, tau, lf) {
			lo += step
			step *= 2
		} else {
			step /= 2
		}
	}
	return lo
}

// sequentialRejectsOn reports whether the sequential test rejects at level tau at every eps in
// [a, b], from an upper bound of its p-value over the interval. With q rising in eps, every
// binomial tail P[Bin(n, q) >= v] rises, so the observed minimum tail over the looks is at
// most the one at b, and a count v that reaches the boundary at some eps in [a, b] has its
// tail at a at most that: the boundaries over the interval are at least those of a's tails
// against b's minimum. Fixed boundaries are crossed more often at a larger q, so the
// probability of crossing those lower boundaries at q(b) bounds the p-value over [a, b]; at
// a = b it is the p-value itself.
func sequentialRejectsOn(looks, correct []int, a, b, tau float64, lf []float64) bool {
	logQa := -math.Log1p(math.Exp(-a))
	logQb := -math.Log1p(math.Exp(-b))
	minLog, _ := sequentialMinTail(looks, correct, logQb, logQb-b, lf)
	if minLog == 0 {
		return false // some look's count has tail 1: nothing is less likely, p-value 1
	}
	p := sequentialCrossing(looks, sequentialBoundaries(looks, minLog, logQa, logQa-a, lf), math.Exp(logQb), math.Exp(logQb-b))
	return p <= tau
}

// binomialLogTail is log P[Bin(n, q) >= v] from the top, with log factorials lf.
func binomialLogTail(n, v int, logQ, logP float64, lf []float64) float64 {
	if v <= 0 {
		return 0
	}
	out := math.Inf(-1)
	for k := n; k >= v; k-- {
		out = logAddExp(out, lf[n]-lf[k]-lf[n-k]+float64(k)*logQ+float64(n-k)*logP)
	}
	return out
}

// sequentialPValue is the p-value of OneRunSequentialEpsilon at eps, and the index of the look
// with the least likely count: with pmin the smallest over the looks of P[Bin(n_j, q) >= W_j],
// the probability under independent Bernoulli(q) guesses that some look's count reaches b_j,
// the least count whose binomial tail is at most pmin (tails are compared with a relative
// slack of 1e-12, on the side that enlarges the rejection region of the independent draws).
func sequentialPValue(looks, correct []int, eps float64, lf []float64) (float64, int) {
	logQ := -math.Log1p(math.Exp(-eps))
	logP := logQ - eps
	minLog, stop := sequentialMinTail(looks, correct, logQ, logP, lf)
	if minLog == 0 {
		return 1, stop
	}
	bound := sequentialBoundaries(looks, minLog, logQ, logP, lf)
	return sequentialCrossing(looks, bound, math.Exp(logQ), math.Exp(logP)), stop
}

// sequentialMinTail is the smallest over the looks of log P[Bin(n_j, q) >= W_j], and its look.
func sequentialMinTail(looks, correct []int, logQ, logP float64, lf []float64) (float64, int) {
	minLog, stop := 0.0, 0
	for j, n := range looks {
		if t := binomialLogTail(n, correct[j], logQ, logP, lf); t < minLog {
			minLog, stop = t, j
		}
	}
	return minLog, stop
}

// sequentialBoundaries are the b_j: the least b with log P[Bin(n_j, q) >= b] <= minLog (with
// the slack that enlarges the rejection region).
func sequentialBoundaries(looks []int, minLog, logQ, logP float64, lf []float64) []int {
	bound := make([]int, len(looks))
	for j, n := range looks {
		b := n + 1
		acc := math.Inf(-1)
		for k := n; k >= 0; k-- {
			acc = logAddExp(acc, lf[n]-lf[k]-lf[n-k]+float64(k)*logQ+float64(n-k)*logP)
			if acc > minLog+1e-12*math.Abs(minLog) {
				break
			}
			b = k
		}
		bound[j] = b
	}
	return bound
}

// sequentialCrossing is the probability that independent Bernoulli(q) guesses (p = 1 - q)
// reach some look's boundary.
func sequentialCrossing(looks, bound []int, q, p float64) float64 {
	// Dynamic programming over the guesses: dist[k] is the probability of k right so far and no
	// look crossed; the p-value is what crossed.
	// Counts at or above a look's boundary are emptied at that look, and boundaries grow by at
	// most the guesses between looks, so only counts below the next boundary carry mass.
	dist := make([]float64, looks[len(looks)-1]+1)
	dist[0] = 1
	top := 0 // highest count that may carry mass
	crossed := 0.0
	prev := 0
	for j, n := range looks {
		for step := prev; step < n; step++ {
			top++
			for k := top; k > 0; k-- {
				dist[k] = dist[k]*p + dist[k-1]*q
			}
			dist[0] *= p
		}
		prev = n
		for k := bound[j]; k <= top; k++ {
			crossed += dist[k]
			dist[k] = 0
		}
		top = min(top, max(bound[j]-1, 0))
	}
	return math.Min(crossed, 1)
}
