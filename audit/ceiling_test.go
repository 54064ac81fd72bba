package audit

import (
	"math/rand/v2"
	"testing"
)

// TestMuCeilingBoundsEverySample: no sample of n0 and n1 scores certifies more than
// MuCeiling(n0, n1) with the same options, whatever the method, for worlds from barely to
// completely apart (mu 1, 3 and 8: at 8 most samples separate completely and must reach the
// ceiling exactly, by the same computation, but under split: its thresholds are scores of the
// selection part, so that distinct scores of C below the lowest of them count as errors of the
// certification part); and the ceiling grows with the runs.
func TestMuCeilingBoundsEverySample(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	methods := []ThresholdMethod{Bonferroni, Split, DKW, RankBand, DKWBand}
	for _, m := range methods {
		for _, n := range [][2]int{{20, 20}, {100, 100}, {30, 200}, {500, 500}} {
			opts := Options{Method: m, Delta: 1e-5, Confidence: 0.95, Seed: 3}
			ceiling, err := MuCeiling(n[0], n[1], opts)
			if err != nil {
				t.Fatalf("%s %v: %v", m, n, err)
			}
			if ceiling <= 0 {
				t.Errorf("%s %v: ceiling %v, want positive", m, n, ceiling)
			}
			cr, err := Ceiling(n[0], n[1], opts)
			if err != nil || cr.MuLower != ceiling {
				t.Fatalf("%s %v: Ceiling %v, %v against MuCeiling %v", m, n, cr, err, ceiling)
			}
			epsCeiling := cr.EpsLowerAt(1e-3)
			reached := 0
			for _, mu := range []float64{1, 3, 8} {
				for rep := 0; rep < 20; rep++ {
					c, cPrime := make([]float64, n[0]), make([]float64, n[1])
					for i := range c {
						c[i] = mu + rng.NormFloat64()
					}
					for i := range cPrime {
						cPrime[i] = rng.NormFloat64()
					}
					res, err := Analyze(c, cPrime, opts)
					if err != nil {
						t.Fatal(err)
					}
					if res.MuLower > ceiling {
						t.Errorf("%s %v, mu %v: a sample certifies %v above the ceiling %v", m, n, mu, res.MuLower, ceiling)
					}
					if e := res.EpsLowerAt(1e-3); e > epsCeiling {
						t.Errorf("%s %v, mu %v: a sample certifies eps %v at delta 1e-3 above the ceiling %v", m, n, mu, e, epsCeiling)
					}
					if res.MuLower == ceiling {
						reached++
					}
				}
			}
			if reached == 0 && m != Split {
				t.Errorf("%s %v: no sample reached the ceiling %v, not even worlds 8 sd apart", m, n, ceiling)
			}
			more, err := MuCeiling(2*n[0], 2*n[1], opts)
			if err != nil || more <= ceiling {
				t.Errorf("%s %v: twice the runs give a ceiling of %v (%v), not above %v", m, n, more, err, ceiling)
			}
		}
	}
	if _, err := MuCeiling(0, 5, Options{}); err == nil {
		t.Error("a ceiling of no runs of world C was given")
	}
}
