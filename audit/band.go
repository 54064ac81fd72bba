package audit

import (
	"math"
	"sort"
)

// RankBand bounds every threshold at once with a rank-grid band: exact Beta quantiles of the
// uniform order statistics at a geometric grid of ranks in each world, the confidence split
// over the grid. Like DKW it bounds each world's distribution on its own, so it stays valid for
// coupled pairs, but its width shrinks like 1/n in the tails where DKW's stays near
// sqrt(log(1/gamma)/2n), so the certified mu is not capped by DKW's constant.
const RankBand ThresholdMethod = "band"

// bandRatio is the step of the rank grid: ranks 1, 2, ... up to where ceil(1.1^l) starts to
// skip, then every 10% more. The grid has about 10 + ln(n/10)/ln(1.1) ranks (56 at n = 1000),
// so each rank's bound is at level gamma/56 or so: a few tenths of a standard deviation of
// Bonferroni cost, against a gap of at most 10% in rank between a threshold and the grid
// rank used for it.
const bandRatio = 1.1

// bandRanks returns the increasing, distinct grid ranks for a sample of size n: 1, then
// ceil of growing powers of bandRatio, and n itself.
func bandRanks(n int) []int {
	ranks := []int{1}
	for q := 1.0; ; q *= bandRatio {
		r := int(math.Ceil(q))
		if r > ranks[len(ranks)-1] {
			if r >= n {
				break
			}
			ranks = append(ranks, r)
		}
	}
	if ranks[len(ranks)-1] < n {
		ranks = append(ranks, n)
	}
	return ranks
}

// rankBand is the one-sided band of one world of size n at error level gamma: with
// probability at least 1 - gamma, for every grid rank r, the distribution's mass strictly
// below the r-th smallest score is at most up[i] (the 1 - gamma/K quantile of Beta(r, n-r+1),
// the law of the r-th smallest of n uniforms; ties only make the mass smaller).
type rankBand struct {
	n     int
	ranks []int
	up    []float64
}

func newRankBand(n int, gamma float64) *rankBand {
	b := &rankBand{n: n, ranks: bandRanks(n)}
	g := gamma / float64(len(b.ranks))
	for _, r := range b.ranks {
		b.up = append(b.up, betaUpperQuantile(r, n-r+1, g))
	}
	return b
}

// upper bounds the mass strictly below a threshold t that has j sample points strictly below
// it. Then t <= x_(j+1) <= x_(r) for the smallest grid rank r >= j+1, so the mass below t is
// at most the mass below x_(r), which the band bounds. j = n gives the trivial 1.
func (b *rankBand) upper(j int) float64 {
	if j >= b.n {
		return 1
	}
	i := sort.SearchInts(b.ranks, j+1)
	return b.up[i]
}

// certifyRankBand bounds every threshold of the ROC. The type I error P(X < t) of world C is
// bounded by world C's band from its count below t; the type II error P(Y >= t) of world C' by
// the band of -Y (the mirror image) from its count at or above t: with s points of y at or
// above t, t > y_(n1-s), the (s+1)-th largest, and P(Y >= t) <= P(Y > y_(n1-s)), the mass above
// the (s+1)-th largest, bounded like the mass below the (s+1)-th smallest. Each world's band
// fails with probability at most (1-confidence)/2.
func certifyRankBand(x, y []float64, confidence float64) certification {
	n0, n1 := len(x), len(y)
	gamma := (1 - confidence) / 2
	b0, b1 := newRankBand(n0, gamma), newRankBand(n1, gamma)
	var points []CertifiedPoint
	forEachThreshold(x, y, func(t float64, below, yAbove int) {
		points = append(points, CertifiedPoint{
			Threshold:  t,
			AlphaHat:   float64(below) / float64(n0),
			BetaHat:    float64(yAbove) / float64(n1),
			AlphaUpper: b0.upper(below),
			BetaUpper:  b1.upper(yAbove),
		})
	})
	return certification{points: points, candidates: len(points)}
}

// DKWBand bounds every threshold with both DKW and the rank band, each at half the error level,
// and keeps the smaller upper bound of each error rate at each threshold: the four one-sided
// band events (two methods, two worlds) hold together with probability at least the
// confidence, so the intersection of the two bands is a valid simultaneous band. Neither band
// is uniformly tighter: DKW's constant width wins mid-ROC (true mu up to about 1.5 on the
// Gaussian pair) and the rank band's in the tails (mu from about 2), and the crossover does not
// move with n or the confidence level (docs/statistics.md), so no rule fixed before the data can
// pick the better one row by row. Both at half the level cost a few percent of either alone and
// never lose the larger one's advantage. The default for coupled scores.
const DKWBand ThresholdMethod = "dkw+band"

// certifyDKWBand is DKWBand: DKW's and the rank band's points at half the error level each,
// the smaller upper bound of each error rate kept. Both methods visit the same thresholds in
// the same order (forEachThreshold).
func certifyDKWBand(x, y []float64, confidence float64) certification {
	half := 1 - (1-confidence)/2
	d := certifyDKW(x, y, half)
	b := certifyRankBand(x, y, half)
	for i := range d.points {
		p, q := &d.points[i], b.points[i]
		p.AlphaUpper = math.Min(p.AlphaUpper, q.AlphaUpper)
		p.BetaUpper = math.Min(p.BetaUpper, q.BetaUpper)
	}
	return certification{points: d.points, candidates: len(d.points)}
}

// dkwBandMuLower is the best certified mu of certifyDKWBand, without recording the points.
func dkwBandMuLower(x, y []float64, confidence float64) float64 {
	half := 1 - (1-confidence)/2
	gamma := (1 - half) / 2
	e0, e1 := dkwEpsilon(len(x), gamma), dkwEpsilon(len(y), gamma)
	b0, b1 := newRankBand(len(x), gamma), newRankBand(len(y), gamma)
	n0, n1 := float64(len(x)), float64(len(y))
	best := math.Inf(-1)
	forEachThreshold(x, y, func(_ float64, below, yAbove int) {
		a := math.Min(math.Min(1, float64(below)/n0+e0), b0.upper(below))
		b := math.Min(math.Min(1, float64(yAbove)/n1+e1), b1.upper(yAbove))
		best = math.Max(best, muFromErrors(a, b))
	})
	return best
}

// rankBandMuLower is the best certified mu of certifyRankBand, without recording the points.
func rankBandMuLower(x, y []float64, confidence float64) float64 {
	gamma := (1 - confidence) / 2
	b0, b1 := newRankBand(len(x), gamma), newRankBand(len(y), gamma)
	best := math.Inf(-1)
	forEachThreshold(x, y, func(_ float64, below, yAbove int) {
		best = math.Max(best, muFromErrors(b0.upper(below), b1.upper(yAbove)))
	})
	return best
}
