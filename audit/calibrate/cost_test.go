package calibrate

import (
	"context"
	"math"
	"testing"
)

// The cost table on the Gaussian mechanism: every row that claims to reach the target has a
// median certified bound at or above it, the bounds never exceed the truth in the median
// (they are certified lower bounds), and at a large mu the rank band needs fewer trainings
// than DKW, whose constant caps what a given number of pairs can certify (the reason the band
// exists). The one-shot estimate's median error of mu with 2000 canaries is a few percent
// (standard error of the mean shift over the pooled spread is about 1/sqrt(500) = 4.5%).
func TestCostTable(t *testing.T) {
	for _, mu := range []float64{1, 5} {
		rows, err := CostTable(context.Background(), CostOptions{Mu: mu, Seed: 3, MaxPairs: 12800, MaxCanaries: 6400, Reps: 11})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]CostRow{}
		for _, r := range rows {
			t.Logf("mu %v: %+v", mu, r)
			byName[r.Method] = r
			if r.Reached != (r.Median >= r.Target) && r.MedianRelError == 0 {
				t.Errorf("mu %v %s: reached %v with median %v against target %v", mu, r.Method, r.Reached, r.Median, r.Target)
			}
			if r.MedianRelError == 0 && r.Method != "one run + epsilon (Steinke et al.)" && r.Median > mu {
				t.Errorf("mu %v %s: median certified mu %v above the truth", mu, r.Method, r.Median)
			}
		}
		shot := byName["one-shot estimate (Andrew et al.)"]
		if shot.MedianRelError > 0.1 {
			t.Errorf("mu %v: one-shot median relative error %v", mu, shot.MedianRelError)
		}
		dkw, band := byName["pairs + DKW"], byName["pairs + rank band"]
		if mu == 1 && !dkw.Reached {
			t.Errorf("mu 1: DKW did not reach 0.8 within 12800 pairs: %+v", dkw)
		}
		if mu == 5 {
			if !band.Reached {
				t.Errorf("mu 5: the band did not reach 0.8 within 12800 pairs: %+v", band)
			} else if dkw.Reached && dkw.Trainings <= band.Trainings {
				t.Errorf("mu 5: DKW needs %d trainings, the band %d: the band should be cheaper", dkw.Trainings, band.Trainings)
			}
		}
	}
}

func TestCostTableRefusesBadOptions(t *testing.T) {
	for name, o := range map[string]CostOptions{
		"mu 0":         {Mu: 0},
		"mu inf":       {Mu: math.Inf(1)},
		"fraction 1":   {Mu: 1, Fraction: 1},
		"confidence 1": {Mu: 1, Confidence: 1},
		"reps -1":      {Mu: 1, Reps: -1},
		"delta 2":      {Mu: 1, Delta: 2},
	} {
		if _, err := CostTable(context.Background(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
