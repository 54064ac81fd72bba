package audit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rocTol is the tolerance for quantities that are ratios of small integers computed in a few
// float64 operations: they agree with the exact rationals to a few ulps.
const rocTol = 1e-12

func closePoints(got, want []Point) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i].Alpha-want[i].Alpha) > rocTol || math.Abs(got[i].Beta-want[i].Beta) > rocTol {
			return false
		}
	}
	return true
}

// TestROCHandExample checks a small example worked out by hand.
//
// World C: 0.9 0.8 0.5 0.5 0.2 (n0 = 5); world C': 0.5 0.3 0.2 0.1 (n1 = 4). The pooled distinct
// values are 0.1 0.2 0.3 0.5 0.8 0.9, and a test with threshold t says C when score >= t, so
// alpha(t) = #{C < t}/5 and beta(t) = #{C' >= t}/4:
//
//	t = 0.1: alpha 0/5, beta 4/4        t = 0.5: alpha 1/5, beta 1/4 (the tied 0.5s say C)
//	t = 0.2: alpha 0/5, beta 3/4        t = 0.8: alpha 3/5, beta 0/4
//	t = 0.3: alpha 1/5, beta 2/4        t = 0.9: alpha 4/5, beta 0/4
//	above 0.9: alpha 5/5, beta 0/4
//
// AUC by Mann-Whitney over the 20 pairs: 0.9 and 0.8 beat all four C' scores (4 + 4); each 0.5
// beats 0.3, 0.2, 0.1 and ties 0.5 (3.5 + 3.5); 0.2 beats 0.1 and ties 0.2 (1.5):
// 16.5/20 = 0.825.
// Lower convex envelope: at alpha 0 the lowest beta is 0.75, at 0.2 it is 0.25; slopes
// (0,.75)->(.2,.25) = -2.5, (.2,.25)->(.6,0) = -0.625, (.6,0)->(1,0) = 0 increase, and (.8,0)
// is collinear, so the envelope is (0,.75) (.2,.25) (.6,0) (1,0).
// With mirrored points added the lowest beta at alpha 0 is 0.6 (mirror of (.6,0)) and the
// envelope is (0,.6) (.2,.25) (.25,.2) (.6,0) (1,0): slopes -1.75, -1, -0.571, 0 increase, and
// (.5,.2) lies above the segment (.25,.2)-(.6,0).
// TPR = 1 - alpha at FPR = beta <= 0.001 (and <= 0.01): the points with beta = 0 give at best
// 1 - 0.6 = 0.4. Best balanced accuracy: 1 - (0.2 + 0.25)/2 = 0.775.
func TestROCHandExample(t *testing.T) {
	c := []float64{0.9, 0.8, 0.5, 0.5, 0.2}
	cp := []float64{0.5, 0.3, 0.2, 0.1}
	r, err := NewROC(c, cp)
	if err != nil {
		t.Fatal(err)
	}
	wantPoints := []Point{{0, 1}, {0, 0.75}, {0.2, 0.5}, {0.2, 0.25}, {0.6, 0}, {0.8, 0}, {1, 0}}
	if !closePoints(r.Points, wantPoints) {
		t.Errorf("points = %v, want %v", r.Points, wantPoints)
	}
	wantThresholds := []float64{0.1, 0.2, 0.3, 0.5, 0.8, 0.9}
	for i, w := range wantThresholds {
		if r.Thresholds[i] != w {
			t.Errorf("threshold %d = %v, want %v", i, r.Thresholds[i], w)
		}
	}
	if last := r.Thresholds[len(r.Thresholds)-1]; !(last > 0.9 && last < 0.9+1e-15) {
		t.Errorf("last threshold %v, want just above 0.9", last)
	}
	if math.Abs(r.AUC-0.825) > rocTol {
		t.Errorf("AUC = %v, want 0.825", r.AUC)
	}
	if want := []Point{{0, 0.75}, {0.2, 0.25}, {0.6, 0}, {1, 0}}; !closePoints(r.Envelope.Points, want) {
		t.Errorf("envelope = %v, want %v", r.Envelope.Points, want)
	}
	if want := []Point{{0, 0.6}, {0.2, 0.25}, {0.25, 0.2}, {0.6, 0}, {1, 0}}; !closePoints(r.SymmetricEnvelope.Points, want) {
		t.Errorf("symmetric envelope = %v, want %v", r.SymmetricEnvelope.Points, want)
	}
	if math.Abs(r.TPRAt1e3-0.4) > rocTol || math.Abs(r.TPRAt1e2-0.4) > rocTol {
		t.Errorf("TPR at 1e-3, 1e-2 = %v, %v, want 0.4, 0.4", r.TPRAt1e3, r.TPRAt1e2)
	}
	if math.Abs(r.BestBalancedAccuracy-0.775) > rocTol {
		t.Errorf("best balanced accuracy = %v, want 0.775", r.BestBalancedAccuracy)
	}
	// Envelope interpolation: halfway between (.2,.25) and (.6,0).
	if got := r.Envelope.At(0.4); math.Abs(got-0.125) > rocTol {
		t.Errorf("Envelope.At(0.4) = %v, want 0.125", got)
	}
}

// pairwiseAUC is the O(n0 n1) Mann-Whitney count, ties 1/2.
func pairwiseAUC(c, cp []float64) float64 {
	s := 0.0
	for _, a := range c {
		for _, b := range cp {
			switch {
			case a > b:
				s++
			case a == b:
				s += 0.5
			}
		}
	}
	return s / float64(len(c)*len(cp))
}

// TestROCAgainstBruteForce compares AUC with the pairwise count and every ROC point with a
// direct count at its threshold, on random data with many ties (scores rounded to a coarse
// grid) and without.
func TestROCAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 40; trial++ {
		n0, n1 := 1+rng.IntN(60), 1+rng.IntN(60)
		grid := []float64{0, 0.5, 0.05}[trial%3] // 0: continuous
		draw := func(n int, shift float64) []float64 {
			s := make([]float64, n)
			for i := range s {
				s[i] = rng.NormFloat64() + shift
				if grid > 0 {
					s[i] = math.Round(s[i]/grid) * grid
				}
			}
			return s
		}
		c, cp := draw(n0, 0.7), draw(n1, 0)
		r, err := NewROC(c, cp)
		if err != nil {
			t.Fatal(err)
		}
		// Summing n0 n1 halves and dividing is exact to ~1e-15.
		if want := pairwiseAUC(c, cp); math.Abs(r.AUC-want) > 1e-12 {
			t.Errorf("trial %d: AUC %v, pairwise %v", trial, r.AUC, want)
		}
		for i, th := range r.Thresholds {
			below, above := 0, 0
			for _, v := range c {
				if v < th {
					below++
				}
			}
			for _, v := range cp {
				if v >= th {
					above++
				}
			}
			want := Point{float64(below) / float64(n0), float64(above) / float64(n1)}
			if r.Points[i] != want {
				t.Errorf("trial %d: point at %v = %v, direct count %v", trial, th, r.Points[i], want)
			}
			if i > 0 && !(th > r.Thresholds[i-1]) {
				t.Errorf("trial %d: thresholds not increasing at %d", trial, i)
			}
		}
		checkEnvelope(t, r.Envelope, r.Points)
		mirrored := append([]Point(nil), r.Points...)
		for _, p := range r.Points {
			mirrored = append(mirrored, Point{p.Beta, p.Alpha})
		}
		checkEnvelope(t, r.SymmetricEnvelope, mirrored)
	}
}

// checkEnvelope asserts that env is convex, non-increasing, and lies on or below every point
// while passing through points of the set.
func checkEnvelope(t *testing.T, env Curve, points []Point) {
	t.Helper()
	e := env.Points
	for i := 1; i < len(e); i++ {
		if !(e[i].Alpha > e[i-1].Alpha) || e[i].Beta > e[i-1].Beta {
			t.Fatalf("envelope not increasing in alpha / non-increasing in beta at %d: %v", i, e)
		}
		if i >= 2 {
			s1 := (e[i-1].Beta - e[i-2].Beta) / (e[i-1].Alpha - e[i-2].Alpha)
			s2 := (e[i].Beta - e[i-1].Beta) / (e[i].Alpha - e[i-1].Alpha)
			if s2 < s1-1e-12 {
				t.Fatalf("envelope not convex at %d: slopes %v then %v", i, s1, s2)
			}
		}
	}
	for _, p := range points {
		if env.At(p.Alpha) > p.Beta+1e-12 {
			t.Fatalf("envelope %v above point %v", env.At(p.Alpha), p)
		}
	}
	in := map[Point]bool{}
	for _, p := range points {
		in[p] = true
	}
	for _, p := range e {
		if !in[p] {
			t.Fatalf("envelope vertex %v is not a data point", p)
		}
	}
}

func TestROCInputErrors(t *testing.T) {
	good := []float64{1, 2}
	cases := []struct {
		name  string
		c, cp []float64
	}{
		{"empty C", nil, good},
		{"empty C'", good, []float64{}},
		{"NaN", []float64{1, math.NaN()}, good},
		{"+Inf", good, []float64{math.Inf(1)}},
		{"-Inf", []float64{math.Inf(-1)}, good},
	}
	for _, tc := range cases {
		if _, err := NewROC(tc.c, tc.cp); err == nil {
			t.Errorf("%s: NewROC gave no error", tc.name)
		}
		if _, err := Analyze(tc.c, tc.cp, Options{}); err == nil {
			t.Errorf("%s: Analyze gave no error", tc.name)
		}
	}
}

func TestROCDoesNotModifyInput(t *testing.T) {
	c := []float64{3, 1, 2}
	cp := []float64{0, 5, -1}
	if _, err := Analyze(c, cp, Options{Method: Split}); err != nil {
		t.Fatal(err)
	}
	if c[0] != 3 || c[1] != 1 || cp[1] != 5 || cp[2] != -1 {
		t.Errorf("inputs were modified: %v %v", c, cp)
	}
}

func TestCurveAtEdges(t *testing.T) {
	c := Curve{Points: []Point{{0, 0.8}, {0.5, 0.2}, {1, 0}}}
	for _, tc := range []struct{ a, want float64 }{{-1, 0.8}, {0, 0.8}, {0.25, 0.5}, {0.5, 0.2}, {0.75, 0.1}, {1, 0}, {2, 0}} {
		if got := c.At(tc.a); math.Abs(got-tc.want) > rocTol {
			t.Errorf("At(%v) = %v, want %v", tc.a, got, tc.want)
		}
	}
	if !math.IsNaN((Curve{}).At(0.5)) {
		t.Error("empty curve should give NaN")
	}
}
