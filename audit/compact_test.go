package audit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestCompactKeepsEveryBound checks Compact against the Result it compacts: the certified mu of
// the best kept test (where positive: a negative one certifies nothing) and the eps at every
// delta must equal the full set's exactly (both are maxima over the same tests' bounds,
// computed by the same code), on Gaussian scores with and without ties (rounded to integers:
// long runs of equal thresholds), for every method, while fewer tests are kept.
func TestCompactKeepsEveryBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	deltas := []float64{0, 1e-12, 1e-8, 1e-5, 1e-3, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99}
	methods := []struct {
		m      ThresholdMethod
		paired bool
	}{{Bonferroni, false}, {Split, false}, {DKW, false}, {RankBand, true}, {DKWBand, true}, {Split, true}}
	var kept, all int
	for trial := 0; trial < 24; trial++ {
		n := 50 + rng.IntN(3000)
		shift := []float64{0, 0.3, 1, 2.5, 6}[trial%5]
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i], y[i] = shift+rng.NormFloat64(), rng.NormFloat64()
			if trial%3 == 1 {
				x[i], y[i] = math.Round(x[i]), math.Round(y[i])
			}
		}
		for _, m := range methods {
			opts := Options{Confidence: 0.95, Method: m.m, Paired: m.paired, Dependent: m.paired, Seed: 5, Delta: 1e-5}
			full, err := Analyze(x, y, opts)
			if err != nil {
				t.Fatal(err)
			}
			c := *full
			c.Compact()
			if c.ROC.Points != nil || c.ROC.Thresholds != nil || c.Band != nil {
				t.Errorf("trial %d %s: the ROC's points or the band kept", trial, m.m)
			}
			if c.ROC.Envelope.Points == nil || full.ROC.Points == nil {
				t.Errorf("trial %d %s: the envelope dropped, or the full result's ROC changed", trial, m.m)
			}
			if got, want := math.Max(0, c.Certified[bestMu(c.Certified)].Mu()), math.Max(0, full.Certified[bestMu(full.Certified)].Mu()); got != want {
				t.Errorf("trial %d %s: best mu of the kept tests %v, of all %v", trial, m.m, got, want)
			}
			for _, d := range deltas {
				if got, want := c.EpsLowerAt(d), full.EpsLowerAt(d); got != want {
					t.Errorf("trial %d %s (n %d, shift %v): eps at delta %g %v, of all tests %v", trial, m.m, n, shift, d, got, want)
				}
			}
			if c.MuLower != full.MuLower || c.EpsLower != full.EpsLower {
				t.Errorf("trial %d %s: bounds changed", trial, m.m)
			}
			kept += len(c.Certified)
			all += len(full.Certified)
		}
	}
	if kept*5 > all*4 {
		// A staircase's inner corners lie inside its hull: a third of the tests.
		t.Errorf("kept %d of %d certified tests; the inner corners of the tests' staircase are inside its hull", kept, all)
	}
	t.Logf("kept %d of %d certified tests", kept, all)
}
