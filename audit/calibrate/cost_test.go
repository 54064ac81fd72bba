package calibrate

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
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
			if r.MedianRelError == 0 && (r.Reached != (r.Power >= DefaultPower) || r.Reached && r.Median < r.Target) {
				t.Errorf("mu %v %s: reached %v with %v of the audits at the target %v (median %v)", mu, r.Method, r.Reached, r.Power, r.Target, r.Median)
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

// The size the table names is one at which an audit reaches the target with the stated chance:
// it named the first size whose median of 11 or 21 simulated bounds did, an audit of which
// reached it with probability about 1/2 (0.23 to 0.40 at four of 60 sizes; 16 of 40 real audits
// of the quadratic instance). At the size named now, 400 fresh simulated audits reach it in at
// least 65% of cases: the table asks 80% of 21, and a size whose true chance is 0.65 passes
// that with probability 0.2 (each of the four methods at each mu may be such a size; the
// sampling error of 400 audits is 0.024).
func TestCostTablePowerHolds(t *testing.T) {
	methods := map[string]struct {
		method  audit.ThresholdMethod
		coupled bool
	}{
		"pairs + DKW and band":           {audit.DKWBand, true},
		"pairs + DKW":                    {audit.DKW, true},
		"pairs + rank band":              {audit.RankBand, true},
		"independent pairs + Bonferroni": {audit.Bonferroni, false},
	}
	for _, mu := range []float64{0.75, 2} {
		rows, err := CostTable(context.Background(), CostOptions{Mu: mu, Seed: 5, MaxPairs: 6400, MaxCanaries: 100})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(17, uint64(mu*100)))
		for _, r := range rows {
			m, ok := methods[r.Method]
			if !ok || !r.Reached {
				continue
			}
			n, hit := r.Trainings/2, 0
			const reps = 400
			for range reps {
				c, cp := mechanismScores(rng, mu, n, m.coupled)
				res, err := audit.Analyze(c, cp, audit.Options{Confidence: 0.95, Method: m.method, Delta: 1e-5, Dependent: m.coupled, Seed: rng.Uint64()})
				if err != nil {
					t.Fatal(err)
				}
				if res.MuLower >= r.Target {
					hit++
				}
			}
			t.Logf("mu %v %s: %d pairs, table %.2f, %d of %d fresh audits reach %.3f", mu, r.Method, n, r.Power, hit, reps, r.Target)
			if float64(hit)/reps < 0.65 {
				t.Errorf("mu %v %s at %d pairs: %d of %d audits reach the target, the table says %.2f", mu, r.Method, n, hit, reps, r.Power)
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
		"power 1.5":    {Mu: 1, Power: 1.5},
		"delta 2":      {Mu: 1, Delta: 2},
	} {
		if _, err := CostTable(context.Background(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
