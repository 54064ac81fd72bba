package audit

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Point is the pair of error rates of one test between world C and world C'.
// Alpha is the type I error P(test says C' | C), Beta the type II error P(test says C | C').
type Point struct {
	Alpha float64 `json:"alpha"`
	Beta  float64 `json:"beta"`
}

// Curve is a piecewise-linear trade-off curve: its Points have strictly increasing Alpha and
// non-increasing Beta, and the curve between two points is the straight segment joining them
// (the error rates of the test that flips a biased coin between the two thresholds).
type Curve struct {
	Points []Point `json:"points"`
}

// At returns the curve's type II error at type I error alpha, interpolating linearly between
// points. Outside the curve's range of Alpha it returns the value at the nearest end. An empty
// curve returns NaN.
func (c Curve) At(alpha float64) float64 {
	p := c.Points
	if len(p) == 0 || math.IsNaN(alpha) {
		return math.NaN()
	}
	if alpha <= p[0].Alpha {
		return p[0].Beta
	}
	if alpha >= p[len(p)-1].Alpha {
		return p[len(p)-1].Beta
	}
	i := sort.Search(len(p), func(i int) bool { return p[i].Alpha >= alpha })
	lo, hi := p[i-1], p[i]
	w := (alpha - lo.Alpha) / (hi.Alpha - lo.Alpha)
	return lo.Beta + w*(hi.Beta-lo.Beta)
}

// ROC holds every threshold test on two score samples and the summaries derived from them.
//
// World C (label 0) has N0 scores, world C' (label 1) has N1; a higher score means "C". The test
// with threshold t says C when score >= t. Only thresholds at the distinct pooled score values
// matter (any other threshold makes the same decisions as the next distinct value above it),
// plus one threshold above every score.
//
// For the true/false-positive summaries world C is the positive class:
// TPR = 1 - Alpha = P(says C | C) and FPR = Beta = P(says C | C').
type ROC struct {
	N0 int `json:"n0"`
	N1 int `json:"n1"`
	// Thresholds[i] is the threshold of Points[i], increasing. Thresholds[0] is the smallest
	// score (every score says C: Points[0] = (0, 1)); the last is the float64 just above the
	// largest score (no score says C: the last point is (1, 0)).
	Thresholds []float64 `json:"thresholds"`
	// Points are the empirical (type I, type II) error rates, Alpha non-decreasing and Beta
	// non-increasing along the slice.
	Points []Point `json:"points"`
	// Envelope is the lower convex envelope of Points: the empirical trade-off curve of this
	// score, randomised tests included, for the ordered pair (C, C').
	Envelope Curve `json:"envelope"`
	// SymmetricEnvelope is the lower convex envelope of Points together with their mirror
	// images (Beta, Alpha). Adjacency is symmetric, so a DP guarantee bounds both the test of C
	// against C' and the test of C' against C; this is the empirical curve such a guarantee
	// must lie below, and it is symmetric about the diagonal.
	SymmetricEnvelope Curve `json:"symmetric_envelope"`
	// AUC is the area under the curve of TPR against FPR: the Mann-Whitney probability that a
	// C score exceeds a C' score, ties counted 1/2.
	AUC float64 `json:"auc"`
	// TPRAt1e3 and TPRAt1e2 are the largest TPR among threshold tests with FPR <= 0.1% and
	// <= 1%, without interpolation between thresholds.
	TPRAt1e3 float64 `json:"tpr_at_fpr_1e-3"`
	TPRAt1e2 float64 `json:"tpr_at_fpr_1e-2"`
	// BestBalancedAccuracy is the largest (TPR + TNR)/2 = 1 - (Alpha + Beta)/2 over thresholds.
	BestBalancedAccuracy float64 `json:"best_balanced_accuracy"`
}

// NewROC computes the ROC of the scores of world C against those of world C'. Empty samples,
// NaN or infinite scores and the largest float64 (reserved so that every threshold is finite)
// are errors. The inputs are not modified.
func NewROC(scoresC, scoresCPrime []float64) (*ROC, error) {
	x, y, err := sortedCopies(scoresC, scoresCPrime)
	if err != nil {
		return nil, err
	}
	return rocSorted(x, y), nil
}

// sortedCopies validates both samples and returns sorted copies.
func sortedCopies(scoresC, scoresCPrime []float64) (x, y []float64, err error) {
	if err := checkScores("world C", scoresC); err != nil {
		return nil, nil, err
	}
	if err := checkScores("world C'", scoresCPrime); err != nil {
		return nil, nil, err
	}
	x = slices.Clone(scoresC)
	y = slices.Clone(scoresCPrime)
	slices.Sort(x)
	slices.Sort(y)
	return x, y, nil
}

func checkScores(world string, s []float64) error {
	if len(s) == 0 {
		return fmt.Errorf("audit: no scores for %s", world)
	}
	for i, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("audit: score %d of %s is %v", i, world, v)
		}
		if v == math.MaxFloat64 {
			// Thresholds just above a score must stay finite (they are written to JSON).
			return fmt.Errorf("audit: score %d of %s is the largest float64, which is reserved", i, world)
		}
	}
	return nil
}

// rocSorted builds the ROC from sorted, validated samples x (world C) and y (world C').
func rocSorted(x, y []float64) *ROC {
	n0, n1 := len(x), len(y)
	r := &ROC{N0: n0, N1: n1}
	r.Thresholds = make([]float64, 0, n0+n1+1)
	r.Points = make([]Point, 0, n0+n1+1)
	// Trapezoids in the (FPR, TPR) plane, summed in counts: between consecutive thresholds dy
	// C' scores change side while the C scores at or above them number between the two
	// thresholds' counts; a tie block is a diagonal segment, which counts each tied pair 1/2.
	// The sum is exact in float64 while 2 n0 n1 < 2^53 and is divided once, so perfect
	// separation gives exactly 1.
	twice := 0.0
	prevAbove, prevYAbove := n0, n1
	forEachThreshold(x, y, func(t float64, xBelow, yAtOrAbove int) {
		r.Thresholds = append(r.Thresholds, t)
		r.Points = append(r.Points, Point{Alpha: float64(xBelow) / float64(n0), Beta: float64(yAtOrAbove) / float64(n1)})
		above := n0 - xBelow
		twice += float64(prevYAbove-yAtOrAbove) * float64(prevAbove+above)
		prevAbove, prevYAbove = above, yAtOrAbove
	})
	r.AUC = math.Min(1, twice/(2*float64(n0)*float64(n1)))

	r.TPRAt1e3 = tprAtFPR(r.Points, 1e-3)
	r.TPRAt1e2 = tprAtFPR(r.Points, 1e-2)
	for _, p := range r.Points {
		r.BestBalancedAccuracy = math.Max(r.BestBalancedAccuracy, 1-(p.Alpha+p.Beta)/2)
	}
	r.Envelope = lowerHull(r.Points)
	both := make([]Point, 0, 2*len(r.Points))
	for _, p := range r.Points {
		both = append(both, p, Point{Alpha: p.Beta, Beta: p.Alpha})
	}
	r.SymmetricEnvelope = lowerHull(both)
	return r
}

// tprAtFPR returns the largest 1 - Alpha over points with Beta <= fpr.
func tprAtFPR(points []Point, fpr float64) float64 {
	best := 0.0
	for _, p := range points {
		if p.Beta <= fpr {
			best = math.Max(best, 1-p.Alpha)
		}
	}
	return best
}

// lowerHull returns the lower convex hull of points (which need not be sorted), keeping for
// every Alpha only the smallest Beta. Collinear interior points are dropped.
func lowerHull(points []Point) Curve {
	ps := slices.Clone(points)
	slices.SortFunc(ps, func(a, b Point) int {
		if a.Alpha != b.Alpha {
			if a.Alpha < b.Alpha {
				return -1
			}
			return 1
		}
		switch {
		case a.Beta < b.Beta:
			return -1
		case a.Beta > b.Beta:
			return 1
		}
		return 0
	})
	hull := make([]Point, 0, 16)
	for k, p := range ps {
		if k > 0 && p.Alpha == ps[k-1].Alpha {
			continue // a larger Beta at the same Alpha is never on the lower hull
		}
		for len(hull) >= 2 {
			o, a := hull[len(hull)-2], hull[len(hull)-1]
			cross := (a.Alpha-o.Alpha)*(p.Beta-o.Beta) - (a.Beta-o.Beta)*(p.Alpha-o.Alpha)
			if cross > 0 {
				break
			}
			hull = hull[:len(hull)-1]
		}
		hull = append(hull, p)
	}
	return Curve{Points: hull}
}
