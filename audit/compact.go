package audit

import (
	"cmp"
	"math"
	"slices"
)

// An analysis of many rows keeps each row's Result until every row is judged; a row of n
// scores holds its ROC's n points and thresholds, the DKW band's 2n and n certified tests
// (some 100 bytes a score: 200 MB for 2 million scores), of which what follows the analysis
// reads only the envelope (the figures) and the certified tests' bounds (the eps of a claim at
// another delta). Compact keeps those.

// Compact drops what a Result keeps only for inspection: the ROC's points and thresholds, the
// DKW band, and the certified tests that no delta can make the best. MuLower, EpsLower, the
// points that give them, the envelopes, the ROC summaries and EpsLowerAt at every delta are
// unchanged.
//
// The certified eps of a test, and its certified mu where positive, are quasi-convex functions
// of its error bounds (alpha_up, beta_up): the tests of mu <= m >= 0 are those on or above the
// trade-off curve T_m, which is convex, and the tests of eps <= e at delta those on the right
// side of two lines. A quasi-convex function takes its largest value over a set at a vertex of
// the set's convex hull, so the tests strictly inside the hull of the others are never the
// best and are dropped (a staircase's inner corners: a third of the tests); tests on the hull's
// boundary are kept, vertices or not, so that rounding in the turn test never drops a vertex.
func (r *Result) Compact() {
	r.Band = nil
	if r.ROC != nil {
		roc := *r.ROC
		roc.Points, roc.Thresholds = nil, nil
		r.ROC = &roc
	}
	if len(r.Certified) > 3 {
		r.Certified = hullPoints(r.Certified)
	}
}

// hullPoints returns the points of ps on the boundary of their convex hull in the (AlphaUpper,
// BetaUpper) plane, by Andrew's monotone chain (lower hull, then upper), keeping points where
// the chain turns by less than a relative 1e-12 (collinear, or nearly): only points clearly
// inside are dropped. The order is the hull's, starting at the smallest AlphaUpper.
func hullPoints(ps []CertifiedPoint) []CertifiedPoint {
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b CertifiedPoint) int {
		return cmp.Or(cmp.Compare(a.AlphaUpper, b.AlphaUpper), cmp.Compare(a.BetaUpper, b.BetaUpper))
	})
	// inside reports whether b lies clearly to the right of the directed line o -> a (a clockwise
	// turn o, a, b): a is then inside the hull the chain builds counter-clockwise.
	inside := func(o, a, b CertifiedPoint) bool {
		ax, ay := a.AlphaUpper-o.AlphaUpper, a.BetaUpper-o.BetaUpper
		bx, by := b.AlphaUpper-o.AlphaUpper, b.BetaUpper-o.BetaUpper
		cross := ax*by - ay*bx
		scale := (math.Abs(ax) + math.Abs(ay)) * (math.Abs(bx) + math.Abs(by))
		return cross < -1e-12*scale
	}
	chain := func(pts []CertifiedPoint) []CertifiedPoint {
		var h []CertifiedPoint
		for _, p := range pts {
			for len(h) >= 2 && inside(h[len(h)-2], h[len(h)-1], p) {
				h = h[:len(h)-1]
			}
			h = append(h, p)
		}
		return h
	}
	lower := chain(sorted)
	for i, j := 0, len(sorted)-1; i < j; i, j = i+1, j-1 {
		sorted[i], sorted[j] = sorted[j], sorted[i]
	}
	upper := chain(sorted)
	// Each chain ends where the other starts.
	out := make([]CertifiedPoint, 0, len(lower)+len(upper)-2)
	out = append(out, lower[:len(lower)-1]...)
	out = append(out, upper[:len(upper)-1]...)
	if len(out) >= len(ps) {
		return ps // collinear points are on both chains
	}
	return out
}
