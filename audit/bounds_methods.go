package audit

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// ThresholdMethod names the way a certified bound chooses its threshold without invalidating
// the confidence level. Choosing the best threshold on the same data that the error rates are
// counted on, with no correction, is not valid and is not offered.
type ThresholdMethod string

const (
	// Bonferroni bounds a fixed family of k candidate tests whose thresholds are order
	// statistics of one world's sample at data-independent ranks, each error rate at level
	// (1-confidence)/(2k), and keeps the best candidate.
	Bonferroni ThresholdMethod = "bonferroni"
	// Split chooses thresholds on a random selection part of both samples and bounds their
	// error rates on the disjoint evaluation part.
	Split ThresholdMethod = "split"
	// DKW bounds every threshold at once with Massart's Dvoretzky-Kiefer-Wolfowitz band.
	DKW ThresholdMethod = "dkw"
)

// ThresholdMethods lists the methods in the order reports show them.
var ThresholdMethods = []ThresholdMethod{Bonferroni, Split, DKW}

// ParseThresholdMethod maps a name (case-insensitive; empty means Bonferroni) to a method.
func ParseThresholdMethod(s string) (ThresholdMethod, error) {
	switch m := ThresholdMethod(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return Bonferroni, nil
	case Bonferroni, Split, DKW, RankBand, DKWBand:
		return m, nil
	}
	return "", fmt.Errorf("audit: unknown threshold method %q (want bonferroni, split, dkw, band or dkw+band)", s)
}

// CertifiedPoint is one test whose error rates are bounded from above with confidence.
type CertifiedPoint struct {
	// Threshold: the test says C when score >= Threshold.
	Threshold float64 `json:"threshold"`
	// AlphaHat and BetaHat are the observed error rates on the data the bounds were computed
	// from (the evaluation part for the split method).
	AlphaHat float64 `json:"alpha_hat"`
	BetaHat  float64 `json:"beta_hat"`
	// AlphaUpper and BetaUpper bound the true error rates; in one Result all such bounds hold
	// together with probability at least the confidence level.
	AlphaUpper float64 `json:"alpha_upper"`
	BetaUpper  float64 `json:"beta_upper"`
}

// Mu is the Gaussian-DP lower bound this point certifies (may be negative: no evidence).
func (p CertifiedPoint) Mu() float64 { return muFromErrors(p.AlphaUpper, p.BetaUpper) }

// Epsilon is the eps lower bound at delta this point certifies.
func (p CertifiedPoint) Epsilon(delta float64) float64 {
	return epsFromErrors(p.AlphaUpper, p.BetaUpper, delta)
}

// Band is a simultaneous confidence band for the ROC of a score (DKW method), point by point
// along ROC.Points. With probability at least the confidence level every threshold's true
// error rates are at most Upper (Alpha + EpsC, Beta + EpsCPrime, capped at 1). Upper then
// bounds the mechanism's trade-off curve T from above at the same confidence: the optimal test
// does no worse than the attack's, so T(alpha_upper) <= beta_upper at every threshold.
// Lower (the rates minus the half-widths, floored at 0) uses the two mirror one-sided events,
// so the two-sided band [Lower, Upper] holds with probability at least 1 - 2(1-confidence); it
// describes the attack's ROC, not the mechanism (a better attack may do better).
type Band struct {
	EpsC      float64 `json:"eps_c"`
	EpsCPrime float64 `json:"eps_c_prime"`
	Upper     []Point `json:"upper"`
	Lower     []Point `json:"lower"`
}

// certification is what a method returns: the tests it certifies jointly.
type certification struct {
	points     []CertifiedPoint
	candidates int
	band       *Band
}

// bestMu returns the index of the point with the largest certified mu.
func bestMu(points []CertifiedPoint) int {
	best, bestV := 0, math.Inf(-1)
	for i, p := range points {
		if v := p.Mu(); v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

// bestEps returns the index of the point with the largest certified eps at delta.
func bestEps(points []CertifiedPoint, delta float64) int {
	best, bestV := 0, math.Inf(-1)
	for i, p := range points {
		if v := p.Epsilon(delta); v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

// Bonferroni grid. Candidate ranks are r = ceil(q n) for the type I (or type II) levels
// q = 0.5, 0.5/ratio, 0.5/ratio^2, ... down to rank 1. The levels depend on n only, never on
// scores. ratio 1.5 keeps neighbouring candidates close enough that a smooth curve loses
// little between them while k grows only like 2 log(n)/log(1.5).
const (
	bonferroniTopLevel = 0.5
	bonferroniRatio    = 1.5
)

// bonferroniRanks returns the increasing, distinct candidate ranks for a sample of size n.
func bonferroniRanks(n int) []int {
	var ranks []int
	for q := bonferroniTopLevel; ; q /= bonferroniRatio {
		r := int(math.Ceil(q * float64(n)))
		if r < 1 {
			r = 1
		}
		if len(ranks) == 0 || r < ranks[len(ranks)-1] {
			ranks = append(ranks, r)
		}
		if r == 1 {
			break
		}
	}
	for i, j := 0, len(ranks)-1; i < j; i, j = i+1, j-1 {
		ranks[i], ranks[j] = ranks[j], ranks[i]
	}
	return ranks
}

// BonferroniPlan is the data-independent part of the Bonferroni method for given sample sizes
// and confidence, reusable across data sets of the same sizes (MuLowerSorted): simulations
// that bound thousands of samples of one size compute it once.
type BonferroniPlan struct {
	n0, n1     int
	confidence float64 // the level the plan's limits hold at jointly
	gamma      float64 // error level of each one-sided bound
	ranksC     []int   // ranks r in world C: threshold x_(r), type I error bounded via Beta(r, n0-r+1)
	ranksP     []int   // ranks s from the top in world C': threshold just above the s-th largest y
	upC        []float64
	upP        []float64
}

// NewBonferroniPlan is the plan of the Bonferroni method for n0 scores of world C and n1 of
// world C' at the given confidence.
func NewBonferroniPlan(n0, n1 int, confidence float64) *BonferroniPlan {
	p := &BonferroniPlan{n0: n0, n1: n1, confidence: confidence, ranksC: bonferroniRanks(n0), ranksP: bonferroniRanks(n1)}
	k := len(p.ranksC) + len(p.ranksP)
	p.gamma = (1 - confidence) / float64(2*k)
	for _, r := range p.ranksC {
		p.upC = append(p.upC, betaUpperQuantile(r, n0-r+1, p.gamma))
	}
	for _, s := range p.ranksP {
		p.upP = append(p.upP, betaUpperQuantile(s, n1-s+1, p.gamma))
	}
	return p
}

// fits reports whether the plan is the one for n0 and n1 scores at confidence.
func (p *BonferroniPlan) fits(n0, n1 int, confidence float64) bool {
	return p != nil && p.n0 == n0 && p.n1 == n1 && p.confidence == confidence
}

// certify applies the plan to sorted samples x (world C) and y (world C').
//
// Candidate from world C at rank r: threshold t = x_(r). Its type I error P(X < t) is at most
// U_(r), the r-th smallest of n0 uniforms, for any distribution (ties only make it smaller), so
// the 1-gamma quantile of Beta(r, n0-r+1) bounds it. Given x, the count of y >= t is
// Binomial(n1, beta(t)) because the worlds are independent: Clopper-Pearson bounds beta(t).
// Candidate from world C' at rank s from the top: the test says C when score > y_(n1-s+1),
// written as threshold nextafter(y_(n1-s+1), +Inf); symmetrically its type II error
// P(Y > y_(n1-s+1)) is at most 1 - U_(n1-s+1) ~ Beta(s, n1-s+1), and the count of
// x <= y_(n1-s+1) is Binomial given y.
func (p *BonferroniPlan) certify(x, y []float64) certification {
	n0, n1 := len(x), len(y)
	points := make([]CertifiedPoint, 0, len(p.ranksC)+len(p.ranksP))
	for i, r := range p.ranksC {
		t := x[r-1]
		below := sort.SearchFloat64s(x, t)       // x < t
		yAbove := n1 - sort.SearchFloat64s(y, t) // y >= t
		points = append(points, CertifiedPoint{
			Threshold:  t,
			AlphaHat:   float64(below) / float64(n0),
			BetaHat:    float64(yAbove) / float64(n1),
			AlphaUpper: p.upC[i],
			BetaUpper:  cpUpper(yAbove, n1, p.gamma),
		})
	}
	for i, s := range p.ranksP {
		v := y[n1-s]
		t := math.Nextafter(v, math.Inf(1))
		xBelow := sort.SearchFloat64s(x, t)     // x <= v
		above := n1 - sort.SearchFloat64s(y, t) // y > v
		points = append(points, CertifiedPoint{
			Threshold:  t,
			AlphaHat:   float64(xBelow) / float64(n0),
			BetaHat:    float64(above) / float64(n1),
			AlphaUpper: cpUpper(xBelow, n0, p.gamma),
			BetaUpper:  p.upP[i],
		})
	}
	return certification{points: points, candidates: len(points)}
}

// muLower returns the best certified mu of certify(x, y) without bounding every candidate:
// a candidate's Clopper-Pearson limit is never below its observed rate, so mu evaluated at
// the observed rate caps what the candidate can reach, and candidates whose cap does not beat
// the best so far are skipped. Simulations call this thousands of times.
func (p *BonferroniPlan) muLower(x, y []float64) float64 {
	n0, n1 := len(x), len(y)
	type cand struct {
		cap      float64
		upC, upP float64 // the rank-based bound, or -1 where a count must be bounded
		count, n int
	}
	cands := make([]cand, 0, len(p.ranksC)+len(p.ranksP))
	for i, r := range p.ranksC {
		yAbove := n1 - sort.SearchFloat64s(y, x[r-1])
		cands = append(cands, cand{cap: muFromErrors(p.upC[i], float64(yAbove)/float64(n1)), upC: p.upC[i], upP: -1, count: yAbove, n: n1})
	}
	for i, s := range p.ranksP {
		xBelow := sort.SearchFloat64s(x, math.Nextafter(y[n1-s], math.Inf(1)))
		cands = append(cands, cand{cap: muFromErrors(float64(xBelow)/float64(n0), p.upP[i]), upC: -1, upP: p.upP[i], count: xBelow, n: n0})
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(b.cap, a.cap) })
	best := math.Inf(-1)
	for _, c := range cands {
		if c.cap <= best {
			break
		}
		up := cpUpper(c.count, c.n, p.gamma)
		var m float64
		if c.upC >= 0 {
			m = muFromErrors(c.upC, up)
		} else {
			m = muFromErrors(up, c.upP)
		}
		best = math.Max(best, m)
	}
	return best
}

// dkwMuLower is the best certified mu of certifyDKW(x, y, confidence), without recording the
// band.
func dkwMuLower(x, y []float64, confidence float64) float64 {
	n0, n1 := len(x), len(y)
	gamma := (1 - confidence) / 2
	e0, e1 := dkwEpsilon(n0, gamma), dkwEpsilon(n1, gamma)
	best := math.Inf(-1)
	forEachThreshold(x, y, func(_ float64, below, yAbove int) {
		a := float64(below)/float64(n0) + e0
		b := float64(yAbove)/float64(n1) + e1
		best = math.Max(best, muFromErrors(a, b))
	})
	return best
}

// certifyDKW bounds every threshold of the ROC with one-sided DKW bands at level
// (1-confidence)/2 per world.
func certifyDKW(x, y []float64, confidence float64) certification {
	n0, n1 := len(x), len(y)
	gamma := (1 - confidence) / 2
	e0, e1 := dkwEpsilon(n0, gamma), dkwEpsilon(n1, gamma)
	band := &Band{EpsC: e0, EpsCPrime: e1}
	var points []CertifiedPoint
	forEachThreshold(x, y, func(t float64, below, yAbove int) {
		a := float64(below) / float64(n0)
		b := float64(yAbove) / float64(n1)
		up := Point{Alpha: math.Min(1, a+e0), Beta: math.Min(1, b+e1)}
		band.Upper = append(band.Upper, up)
		band.Lower = append(band.Lower, Point{Alpha: math.Max(0, a-e0), Beta: math.Max(0, b-e1)})
		points = append(points, CertifiedPoint{Threshold: t, AlphaHat: a, BetaHat: b, AlphaUpper: up.Alpha, BetaUpper: up.Beta})
	})
	return certification{points: points, candidates: len(points), band: band}
}

// forEachThreshold calls f for every distinct threshold of sorted x and y (as in the ROC) with
// the count of x below it and of y at or above it.
func forEachThreshold(x, y []float64, f func(t float64, xBelow, yAtOrAbove int)) {
	n0, n1 := len(x), len(y)
	i, j := 0, 0
	last := math.Inf(-1)
	for i < n0 || j < n1 {
		v := math.Inf(1)
		if i < n0 {
			v = x[i]
		}
		if j < n1 && y[j] < v {
			v = y[j]
		}
		f(v, i, n1-j)
		for i < n0 && x[i] == v {
			i++
		}
		for j < n1 && y[j] == v {
			j++
		}
		last = v
	}
	f(math.Nextafter(last, math.Inf(1)), n0, 0)
}

// splitSamples divides sorted x into a selection part of size round(frac n) chosen uniformly
// at random by rng, and the rest; both parts stay sorted. A uniformly random subset of an
// i.i.d. sample, chosen independently of the values, leaves two independent i.i.d. samples,
// so applying it to the sorted sample is as valid as to the original order, and makes the
// result independent of the order the scores arrived in.
func splitSamples(x []float64, frac float64, rng *rand.Rand) (sel, eval []float64) {
	n := len(x)
	h := int(math.Round(frac * float64(n)))
	h = max(1, min(n-1, h))
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	chosen := make([]bool, n)
	for i := 0; i < h; i++ { // partial Fisher-Yates
		j := i + rng.IntN(n-i)
		idx[i], idx[j] = idx[j], idx[i]
		chosen[idx[i]] = true
	}
	sel = make([]float64, 0, h)
	eval = make([]float64, 0, n-h)
	for i, v := range x {
		if chosen[i] {
			sel = append(sel, v)
		} else {
			eval = append(eval, v)
		}
	}
	return sel, eval
}

// certifySplit divides each sorted world by its own random subset and certifies the parts.
func certifySplit(x, y []float64, confidence, frac, delta float64, seed uint64) (certification, error) {
	if len(x) < 2 || len(y) < 2 {
		return certification{}, fmt.Errorf("audit: split method needs at least 2 scores per world, have %d and %d", len(x), len(y))
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed5eed))
	xs, xe := splitSamples(x, frac, rng)
	ys, ye := splitSamples(y, frac, rng)
	return certifySplitParts(xs, xe, ys, ye, confidence, delta), nil
}

// certifySplitPaired divides pairs: score i of world C and score i of world C' come from the
// same pair of runs and may share randomness, so one random subset of pair indices goes to
// selection in both worlds. Pairs are independent of one another, so the evaluation part is
// still independent of the selection part. The parts are returned sorted.
func certifySplitPaired(scoresC, scoresCPrime []float64, confidence, frac, delta float64, seed uint64) (certification, error) {
	n := len(scoresC)
	if n != len(scoresCPrime) {
		return certification{}, fmt.Errorf("audit: paired scores need equal counts per world, have %d and %d", n, len(scoresCPrime))
	}
	if n < 2 {
		return certification{}, fmt.Errorf("audit: split method needs at least 2 pairs, have %d", n)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed5eed))
	h := max(1, min(n-1, int(math.Round(frac*float64(n)))))
	perm := rng.Perm(n)
	xs, ys := make([]float64, 0, h), make([]float64, 0, h)
	xe, ye := make([]float64, 0, n-h), make([]float64, 0, n-h)
	for k, i := range perm {
		if k < h {
			xs, ys = append(xs, scoresC[i]), append(ys, scoresCPrime[i])
		} else {
			xe, ye = append(xe, scoresC[i]), append(ye, scoresCPrime[i])
		}
	}
	for _, s := range [][]float64{xs, ys, xe, ye} {
		slices.Sort(s)
	}
	return certifySplitParts(xs, xe, ys, ye, confidence, delta), nil
}

// certifySplitParts chooses on the selection parts (xs, ys) the threshold with the best
// predicted mu bound and the one with the best predicted eps bound at delta, then bounds both
// on the evaluation parts (xe, ye), each error rate at level (1-confidence)/(2k), k the number
// of distinct thresholds. The prediction replaces each observed rate by its Wilson upper limit
// at the evaluation sample size, which steers the choice away from rates of zero whose plug-in
// mu is infinite. All parts are sorted.
func certifySplitParts(xs, xe, ys, ye []float64, confidence, delta float64) certification {
	n0, n1 := len(xe), len(ye)
	z := normQuantile(1 - (1-confidence)/4)
	bestMuT, bestEpsT := math.NaN(), math.NaN()
	bestMuV, bestEpsV := math.Inf(-1), math.Inf(-1)
	forEachThreshold(xs, ys, func(t float64, below, yAbove int) {
		// The threshold is the selection score above the gap (a score at or above it says C),
		// not a point inside the gap: a midpoint is a value of the scores' scale, so a
		// strictly increasing transform of the scores (their ranks) moved evaluation scores
		// across it and changed the bound, where only the order should matter.
		a := wilsonUpper(float64(below)/float64(len(xs)), n0, z)
		b := wilsonUpper(float64(yAbove)/float64(len(ys)), n1, z)
		// The NaN tests take the first threshold even when every prediction is -Inf.
		if m := muFromErrors(a, b); m > bestMuV || math.IsNaN(bestMuT) {
			bestMuV, bestMuT = m, t
		}
		if e := epsFromErrors(a, b, delta); e > bestEpsV || math.IsNaN(bestEpsT) {
			bestEpsV, bestEpsT = e, t
		}
	})
	thresholds := []float64{bestMuT}
	if bestEpsT != bestMuT {
		thresholds = append(thresholds, bestEpsT)
	}
	gamma := (1 - confidence) / float64(2*len(thresholds))
	points := make([]CertifiedPoint, 0, len(thresholds))
	for _, t := range thresholds {
		below := sort.SearchFloat64s(xe, t)
		yAbove := n1 - sort.SearchFloat64s(ye, t)
		points = append(points, CertifiedPoint{
			Threshold:  t,
			AlphaHat:   float64(below) / float64(n0),
			BetaHat:    float64(yAbove) / float64(n1),
			AlphaUpper: cpUpper(below, n0, gamma),
			BetaUpper:  cpUpper(yAbove, n1, gamma),
		})
	}
	return certification{points: points, candidates: len(points)}
}
