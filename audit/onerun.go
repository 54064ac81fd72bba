package audit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// One-run audits (Steinke, Nasr and Jagielski, "Privacy auditing with one (1) training run",
// NeurIPS 2023; Mahloujifar, Melis and Chaudhuri, "Auditing f-differential privacy in one run",
// ICML 2025). One training run carries m canaries, each included independently with
// probability 1/2. After training, an auditor scores every canary and guesses "included" for
// some, "excluded" for others and abstains on the rest; r guesses are made and v of them are
// right. Under the null hypothesis that the mechanism satisfies a privacy guarantee for each
// canary, v cannot be much larger than what randomized response at that guarantee would give,
// so a large v certifies a lower bound on the guarantee.
//
// Every bound here is found by searching a nested family of guarantees (eps-DP at a fixed
// delta, or mu-GDP): a mechanism that satisfies the guarantee at a parameter also satisfies it
// at every larger one. The searches (searchRejected) return a parameter at which the test
// rejects (or 0). For the tests of one count of right guesses that is a valid lower bound: each
// rejects "v or more right guesses", a rejection at some eps' above the true eps is a count at
// or above the smallest count any eps' >= the true eps rejects, and that one's probability is
// at most the level under the truth. A test whose statistic is not one count, and whose
// p-value is not monotone in the parameter, needs the smallest parameter it accepts instead
// (OneRunSequentialEpsilon says how close its search comes).

// OneRunPValue is the p-value of v or more correct guesses out of r, with m canaries, under
// the null hypothesis that the mechanism is (eps, delta)-DP with respect to each canary: the
// bound of Steinke et al. (their main theorem with the delta term, computed as in their
// appendix),
//
//	P[V >= v] <= P[Bin(r, q) >= v] + 2 m delta max_{1<=i<=v} P[v-i <= Bin(r, q) < v] / i,
//
// with q = e^eps / (1 + e^eps), capped at 1. The binomial terms are summed in log space, so
// r in the tens of thousands and tails far below 1e-300 keep their precision.
func OneRunPValue(m, r, v int, eps, delta float64) (float64, error) {
	if err := checkOneRun(m, r, v); err != nil {
		return math.NaN(), err
	}
	if math.IsNaN(eps) || eps < 0 {
		return math.NaN(), fmt.Errorf("audit: one-run p-value: eps must be >= 0, got %v", eps)
	}
	if !(delta >= 0 && delta < 1) {
		return math.NaN(), fmt.Errorf("audit: one-run p-value: delta %v outside [0, 1)", delta)
	}
	return oneRunPValue(m, r, v, eps, delta), nil
}

func checkOneRun(m, r, v int) error {
	if m < 1 || r < 0 || v < 0 || v > r || r > m {
		return fmt.Errorf("audit: one-run audit needs 0 <= v <= r <= m and m >= 1, got m=%d r=%d v=%d", m, r, v)
	}
	return nil
}

func oneRunPValue(m, r, v int, eps, delta float64) float64 {
	return oneRunPValueTable(m, r, v, eps, delta, logFactorials(r))
}

// logFactorials returns log j! for j = 0..n, so that searches over eps compute them once.
// Each is Lgamma(j+1) on its own (a running sum of logs would accumulate rounding).
func logFactorials(n int) []float64 {
	lf := make([]float64, n+1)
	for j := range lf {
		lf[j], _ = math.Lgamma(float64(j + 1))
	}
	return lf
}

// oneRunPValueTable is oneRunPValue with log factorials lf (len >= r+1) supplied.
func oneRunPValueTable(m, r, v int, eps, delta float64, lf []float64) float64 {
	if v == 0 {
		return 1
	}
	// log q and log(1-q) without cancellation: q = 1/(1+e^-eps), 1-q = q e^-eps.
	logQ := -math.Log1p(math.Exp(-eps))
	logP := logQ - eps
	logPMF := func(j int) float64 {
		return lf[r] - lf[j] - lf[r-j] + float64(j)*logQ + float64(r-j)*logP
	}
	// log P[Bin >= v], summed from the top.
	logBeta := math.Inf(-1)
	for j := r; j >= v; j-- {
		logBeta = logAddExp(logBeta, logPMF(j))
	}
	p := math.Exp(logBeta)
	if delta > 0 {
		// alpha = max_i P[v-i <= Bin < v] / i, the partial sums grown downward from v-1.
		logSum, logAlpha := math.Inf(-1), math.Inf(-1)
		for i := 1; i <= v; i++ {
			logSum = logAddExp(logSum, logPMF(v-i))
			logAlpha = math.Max(logAlpha, logSum-math.Log(float64(i)))
		}
		p += 2 * float64(m) * delta * math.Exp(logAlpha)
	}
	return math.Min(p, 1)
}

// logAddExp is log(e^a + e^b) without overflow; -Inf is the identity.
func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// oneRunSearchCap is the largest parameter the searches try; beyond it every p-value that
// the data could give is 1 in float64 for any m the tools handle.
const oneRunSearchCap = 1 << 10

// oneRunSearchTol is the relative width at which the searches stop: far below the bounds'
// statistical error, and the returned end is always a rejected parameter, so stopping early
// only rounds the bound down.
const oneRunSearchTol = 1e-7

// OneRunEpsilon is the eps lower bound that v correct guesses out of r (m canaries) certify at
// the given delta and confidence: the largest eps found whose p-value (OneRunPValue) is at most
// 1 - confidence, or 0 when even eps = 0 is not rejected. With delta = 0 and every guess right
// it is log(q/(1-q)) for q = (1-confidence)^(1/r), the best any r guesses can certify.
func OneRunEpsilon(m, r, v int, delta, confidence float64) (float64, error) {
	if err := checkOneRun(m, r, v); err != nil {
		return math.NaN(), err
	}
	if !(delta >= 0 && delta < 1) {
		return math.NaN(), fmt.Errorf("audit: one-run epsilon: delta %v outside [0, 1)", delta)
	}
	if !(confidence > 0 && confidence < 1) {
		return math.NaN(), fmt.Errorf("audit: one-run epsilon: confidence %v outside (0, 1)", confidence)
	}
	gamma := 1 - confidence
	lf := logFactorials(r)
	rejects := func(eps float64) bool { return oneRunPValueTable(m, r, v, eps, delta, lf) <= gamma }
	return searchRejected(rejects), nil
}

// searchRejected returns a parameter in [0, oneRunSearchCap] at which rejects holds (0 when
// it fails at 0), near the largest such: it doubles an upper end until the test no longer
// rejects and bisects between the last rejected and the first accepted point. By the nesting
// argument above any rejected parameter is a valid lower bound.
func searchRejected(rejects func(float64) bool) float64 {
	if !rejects(0) {
		return 0
	}
	lo, hi := 0.0, 1.0
	for rejects(hi) {
		lo = hi
		hi *= 2
		if hi > oneRunSearchCap {
			return lo
		}
	}
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi || hi-lo <= oneRunSearchTol*math.Max(1, lo) {
			break
		}
		if rejects(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// OneRunGDPRejects reports whether v or more correct guesses out of r, with m canaries, have
// probability at most tau when the mechanism is mu-GDP with respect to each canary, by the
// recursion of Mahloujifar et al. for a hypothesized trade-off curve f = T_G(mu). The
// recursion walks down from v correct guesses, keeping r_i (mass of outcomes with i correct
// guesses seen from the "correct" side) and h_i (from the "incorrect" side); each step applies
// the f-DP constraint h >= f^{-1}-blow-up(r), which for Gaussian DP is
// h >= Phi(Phi^{-1}(r) - mu); the claim is rejected when the masses it forces exceed the
// r/m that r guesses can have.
func OneRunGDPRejects(mu float64, m, r, v int, tau float64) (bool, error) {
	if err := checkOneRun(m, r, v); err != nil {
		return false, err
	}
	if math.IsNaN(mu) || mu < 0 {
		return false, fmt.Errorf("audit: one-run GDP test: mu must be >= 0, got %v", mu)
	}
	if !(tau > 0 && tau < 1) {
		return false, fmt.Errorf("audit: one-run GDP test: tau %v outside (0, 1)", tau)
	}
	return oneRunGDPRejects(mu, m, r, v, tau), nil
}

func oneRunGDPRejects(mu float64, m, k, c int, tau float64) bool {
	return oneRunFRejects(func(x float64) float64 { return gdpInverseBlowUp(mu, x) }, m, k, c, tau)
}

// oneRunFRejects is the recursion of Mahloujifar et al. for any symmetric trade-off curve f,
// given through lower(x) = f(1 - x): the least probability an event can have under one world
// when it has probability x under the other.
func oneRunFRejects(lower func(float64) float64, m, k, c int, tau float64) bool {
	fm := float64(m)
	rr := tau * float64(c) / fm
	h := tau * float64(k-c) / fm
	for i := c - 1; i >= 0; i-- {
		hn := math.Max(h, lower(rr))
		if hn == h {
			break // neither mass can change from here on
		}
		rr = math.Min(rr+float64(i)/float64(k-i)*(hn-h), 1)
		h = hn
	}
	return rr+h > float64(k)/fm
}

// gdpInverseBlowUp is the least probability an event can have under one world of a mu-GDP
// mechanism when it has probability x under the other: Phi(Phi^{-1}(x) - mu).
func gdpInverseBlowUp(mu, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	return normalCDF(normalQuantile(x) - mu)
}

// OneRunMu is the mu lower bound (Gaussian DP) that v correct guesses out of r certify with m
// canaries at the given confidence: the largest mu found that OneRunGDPRejects rejects at
// tau = 1 - confidence, or 0.
func OneRunMu(m, r, v int, confidence float64) (float64, error) {
	if err := checkOneRun(m, r, v); err != nil {
		return math.NaN(), err
	}
	if !(confidence > 0 && confidence < 1) {
		return math.NaN(), fmt.Errorf("audit: one-run mu: confidence %v outside (0, 1)", confidence)
	}
	tau := 1 - confidence
	return searchRejected(func(mu float64) bool { return oneRunGDPRejects(mu, m, r, v, tau) }), nil
}

// MuFromEpsilonBound converts a certified eps lower bound at delta into the mu lower bound it
// implies: the smallest mu whose mu-GDP guarantee gives (eps, delta)-DP only for eps >= the
// bound. A mechanism that is mu'-GDP for a smaller mu' would be (eps, delta)-DP below the
// bound, so the conversion holds at the same confidence. It is what the eps-only analysis
// yields for mu and the baseline the f-DP analysis improves on.
func MuFromEpsilonBound(eps, delta float64) (float64, error) {
	if math.IsNaN(eps) || eps < 0 {
		return math.NaN(), fmt.Errorf("audit: mu from eps bound: eps must be >= 0, got %v", eps)
	}
	if !(delta > 0 && delta < 1) {
		return math.NaN(), fmt.Errorf("audit: mu from eps bound: delta %v outside (0, 1)", delta)
	}
	if eps == 0 {
		return 0, nil
	}
	// EpsilonFromGDP is increasing in mu: bisect for EpsilonFromGDP(mu, delta) = eps from below.
	below := func(mu float64) bool {
		e, err := EpsilonFromGDP(mu, delta)
		return err == nil && e < eps
	}
	lo, hi := 0.0, 1.0
	for below(hi) {
		lo, hi = hi, 2*hi
		if hi > oneRunSearchCap {
			return lo, nil
		}
	}
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if below(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// OneRunGuesses makes the auditor's guesses from canary scores (higher means "more likely
// included"): "included" on the kPlus highest-scored canaries and "excluded" on the kMinus
// lowest, abstaining on the rest, and counts them against the inclusion bits. It returns the
// number of guesses r = kPlus + kMinus and the number v that are right. Ties are broken by
// canary index, which is independent of the inclusion bits, so the guesses remain a function
// of the mechanism's output alone, as the theorems require.
func OneRunGuesses(scores []float64, included []bool, kPlus, kMinus int) (r, v int, err error) {
	m := len(scores)
	switch {
	case m == 0:
		return 0, 0, fmt.Errorf("audit: one-run guesses: no canaries")
	case len(included) != m:
		return 0, 0, fmt.Errorf("audit: one-run guesses: %d scores but %d inclusion bits", m, len(included))
	case kPlus < 0 || kMinus < 0 || kPlus+kMinus > m:
		return 0, 0, fmt.Errorf("audit: one-run guesses: k+ = %d and k- = %d do not fit %d canaries", kPlus, kMinus, m)
	}
	for i, s := range scores {
		if math.IsNaN(s) {
			return 0, 0, fmt.Errorf("audit: one-run guesses: score %d is NaN", i)
		}
	}
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
	for _, i := range order[:kMinus] {
		if !included[i] {
			v++
		}
	}
	for _, i := range order[m-kPlus:] {
		if included[i] {
			v++
		}
	}
	return kPlus + kMinus, v, nil
}

// OneRunChoice is one candidate split of guesses: "included" on the KPlus top-scored canaries
// and "excluded" on the KMinus bottom-scored. Weight is the share of the error level 1 -
// confidence its test receives (weighted Bonferroni: the shares of a grid are normalized to sum
// to 1; all zero means equal shares). The union bound holds for any shares fixed in advance.
type OneRunChoice struct {
	KPlus  int     `json:"k_plus"`
	KMinus int     `json:"k_minus"`
	Weight float64 `json:"weight,omitempty"`
}

// DefaultOneRunGrid is a small data-independent grid of guess counts for m canaries: an equal
// number of top and bottom guesses totalling 20% of m, with 85% of the error level, and 60% of
// m with the other 15% (at least one guess of each kind). The best single fraction grows with
// mu: on the Gaussian mechanism with m = 1000 it was 10% at mu = 1, 20% at mu = 2 and 50% at
// mu = 4 (where all 500 guesses were right), and every point of a grid costs confidence. Over
// 100 runs at m = 1000 (medians of the certified mu over the truth, mu = 0.5 / 1 / 2 / 4) the
// single choice 20% gave 0.49 / 0.62 / 0.63 / 0.38, the equal-weight grid 10%, 20%, 50% gave
// 0.48 / 0.56 / 0.56 / 0.44 and this grid 0.52 / 0.60 / 0.62 / 0.42: the weight keeps most of
// the single choice's power where one run can certify much, the wide point most of the
// equal grid's at large mu, where no number of guesses out of 1000 certifies much anyway. An
// auditor who knows the regime should pass a grid of its own, fixed in advance.
func DefaultOneRunGrid(m int) []OneRunChoice {
	var grid []OneRunChoice
	for _, c := range []struct{ f, w float64 }{{0.2, 0.85}, {0.6, 0.15}} {
		k := max(1, int(math.Round(c.f*float64(m)/2)))
		if 2*k > m {
			k = m / 2
		}
		if k < 1 {
			continue
		}
		if n := len(grid); n > 0 && grid[n-1].KPlus == k {
			grid[n-1].Weight += c.w // too few canaries for two distinct choices
			continue
		}
		grid = append(grid, OneRunChoice{KPlus: k, KMinus: k, Weight: c.w})
	}
	return grid
}

// gridLevels returns each choice's share of the error level: its weight over the grid's total,
// or equal shares when every weight is zero. Negative or non-finite weights are errors.
func gridLevels(grid []OneRunChoice) ([]float64, error) {
	total := 0.0
	for _, c := range grid {
		if !(c.Weight >= 0) || math.IsInf(c.Weight, 0) {
			return nil, fmt.Errorf("audit: one-run grid: weight %v is not a finite share >= 0", c.Weight)
		}
		total += c.Weight
	}
	out := make([]float64, len(grid))
	for i, c := range grid {
		out[i] = 1 / float64(len(grid))
		if total > 0 {
			out[i] = c.Weight / total
		}
	}
	return out, nil
}

// OneRunCandidate is the outcome of one choice of the grid, whose tests ran at Confidence:
// 1 - (1 - the audit's confidence) times the choice's share.
type OneRunCandidate struct {
	OneRunChoice
	Confidence float64 `json:"confidence"`
	Guesses    int     `json:"guesses"`
	Correct    int     `json:"correct"`
	Eps        float64 `json:"eps"`
	Mu         float64 `json:"mu"`
}

// OneRunResult is a one-run audit over a grid of guess counts. EpsLower and MuLower are the
// best over the grid, each certified at Confidence: every candidate's test runs at its share of
// the error level 1 - Confidence (weighted Bonferroni over the grid), so taking the best is
// valid. The two bounds come from different tests; both hold together with probability at
// least 1 - 2(1-Confidence).
type OneRunResult struct {
	Canaries   int               `json:"canaries"`
	Delta      float64           `json:"delta"`
	Confidence float64           `json:"confidence"`
	EpsLower   float64           `json:"eps_lower"`
	MuLower    float64           `json:"mu_lower"`
	EpsChoice  OneRunChoice      `json:"eps_choice"`
	MuChoice   OneRunChoice      `json:"mu_choice"`
	Candidates []OneRunCandidate `json:"candidates"`
}

// OneRunAudit certifies eps at delta (Steinke et al.) and mu (Mahloujifar et al.) from one run:
// scores and inclusion bits of m canaries, and a grid of guess counts fixed before looking at
// the scores (nil means DefaultOneRunGrid). delta = 0 certifies pure DP.
func OneRunAudit(scores []float64, included []bool, grid []OneRunChoice, delta, confidence float64) (*OneRunResult, error) {
	if !(confidence > 0 && confidence < 1) {
		return nil, fmt.Errorf("audit: one-run audit: confidence %v outside (0, 1)", confidence)
	}
	if !(delta >= 0 && delta < 1) {
		return nil, fmt.Errorf("audit: one-run audit: delta %v outside [0, 1)", delta)
	}
	m := len(scores)
	if grid == nil {
		grid = DefaultOneRunGrid(m)
	}
	if len(grid) == 0 {
		return nil, fmt.Errorf("audit: one-run audit: empty grid of guess counts")
	}
	shares, err := gridLevels(grid)
	if err != nil {
		return nil, err
	}
	res := &OneRunResult{Canaries: m, Delta: delta, Confidence: confidence}
	for i, c := range grid {
		if shares[i] == 0 {
			continue // a choice without a share of the level is never tested
		}
		each := 1 - (1-confidence)*shares[i]
		r, v, err := OneRunGuesses(scores, included, c.KPlus, c.KMinus)
		if err != nil {
			return nil, err
		}
		eps, err := OneRunEpsilon(m, r, v, delta, each)
		if err != nil {
			return nil, err
		}
		mu, err := OneRunMu(m, r, v, each)
		if err != nil {
			return nil, err
		}
		res.Candidates = append(res.Candidates, OneRunCandidate{OneRunChoice: c, Confidence: each, Guesses: r, Correct: v, Eps: eps, Mu: mu})
		if eps > res.EpsLower {
			res.EpsLower, res.EpsChoice = eps, c
		}
		if mu > res.MuLower {
			res.MuLower, res.MuChoice = mu, c
		}
	}
	return res, nil
}

// EpsLowerAt is the eps bound the same guesses certify at another delta fixed in advance: each
// candidate's test rerun at its level with that delta, the best kept. It holds at the same
// confidence as EpsLower (the tests, and so the Bonferroni split, do not change).
func (r *OneRunResult) EpsLowerAt(delta float64) float64 {
	if delta == r.Delta {
		return r.EpsLower
	}
	best := 0.0
	for _, c := range r.Candidates {
		eps, err := OneRunEpsilon(r.Canaries, c.Guesses, c.Correct, delta, c.Confidence)
		if err != nil {
			return math.NaN()
		}
		best = math.Max(best, eps)
	}
	return best
}

// FiniteRanks replaces, in place, every infinite score by a finite one that keeps its rank: +Inf
// just above the largest finite score, -Inf just below the smallest (0 when no score is
// finite). NaNs are left as they are. Every certified bound depends on the scores' order alone,
// so the bounds of the replaced scores are those of the infinite ones, and files and ROCs that
// hold finite numbers only can keep such runs instead of dropping them (which would audit a
// distribution conditioned on the attack's outcome).
func FiniteRanks(scores []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	infinite := false
	for _, v := range scores {
		if math.IsInf(v, 0) {
			infinite = true
		} else if !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if !infinite {
		return
	}
	if lo > hi {
		lo, hi = 0, 0
	}
	above, below := hi+1, lo-1
	if above <= hi { // |hi| beyond 2^53: 1 is lost in rounding
		above = math.Nextafter(hi, math.Inf(1))
	}
	if below >= lo {
		below = math.Nextafter(lo, math.Inf(-1))
	}
	for i, v := range scores {
		switch {
		case math.IsInf(v, 1):
			scores[i] = above
		case math.IsInf(v, -1):
			scores[i] = below
		}
	}
}

// OneRunMethod labels the Results of OneRunAnalyze. It is not a threshold method: Analyze and
// ParseThresholdMethod do not take it.
const OneRunMethod ThresholdMethod = "one-run"

// OneRunAnalyze is the one-run audit of m canary scores (higher means "more likely
// included") and their inclusion bits as a Result, so that one-run rows read like the rows of
// coupled pairs: N0 and N1 count the included and excluded canaries, the ROC and AUC (and the
// AUC's MuEstimate, an estimate) tell the two groups apart, MuLower (Mahloujifar et al.) and
// EpsLower at delta (Steinke et al.) are certified, and both hold together at confidence: each
// is found by OneRunAudit at 1 - (1-confidence)/2. Result.OneRun keeps the guesses.
func OneRunAnalyze(scores []float64, included []bool, grid []OneRunChoice, delta, confidence float64) (*Result, error) {
	if !(confidence > 0 && confidence < 1) {
		return nil, fmt.Errorf("audit: one-run analysis: confidence %v outside (0, 1)", confidence)
	}
	// The ROC takes finite scores only: infinite ones (a diverged run's canaries) move just
	// beyond the finite range, which keeps every ranking and so the ROC.
	finite := slices.Clone(scores)
	FiniteRanks(finite)
	var in, out []float64
	for i, s := range finite {
		if i < len(included) && included[i] {
			in = append(in, s)
		} else {
			out = append(out, s)
		}
	}
	or, err := OneRunAudit(scores, included, grid, delta, 1-(1-confidence)/2)
	if err != nil {
		return nil, err
	}
	res := &Result{N0: len(in), N1: len(out), Delta: delta, Confidence: confidence, Method: OneRunMethod,
		MuLower: or.MuLower, EpsLower: or.EpsLower, Candidates: len(or.Candidates), OneRun: or}
	if len(in) > 0 && len(out) > 0 {
		roc, err := NewROC(in, out)
		if err != nil {
			return nil, fmt.Errorf("audit: one-run analysis: %w", err)
		}
		res.ROC, res.AUC, res.TPRAt1e3, res.TPRAt1e2 = roc, roc.AUC, roc.TPRAt1e3, roc.TPRAt1e2
		res.BestBalancedAccuracy = roc.BestBalancedAccuracy
		res.MuEstimate = muFromAUC(roc.AUC, len(in), len(out))
	}
	return res, nil
}
