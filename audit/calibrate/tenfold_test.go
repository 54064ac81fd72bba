package calibrate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
)

// tenfoldPair draws one coupled pair of the optimal adversary's scores for DP-FedAvg with
// client sampling q, noise multiplier z and T rounds, remove-one-client adjacency and the
// target's update at the clip in every round (results/dp-fedavg-10x: the realized mu is
// sqrt(T)/z at every round): the exact log-likelihood ratio of the subsampled Gaussian, per
// round log((1-q) + q e^{(y - 1/2)/z^2}) in units of the clip, the worlds sharing the
// sampling draw and the noise.
func tenfoldPair(rng *rand.Rand, q, z float64, T int) (c, cp float64) {
	mix := func(a float64) float64 {
		x, y := math.Log1p(-q), math.Log(q)+a
		if x < y {
			x, y = y, x
		}
		return x + math.Log1p(math.Exp(y-x))
	}
	for t := 0; t < T; t++ {
		n := rng.NormFloat64() * z
		in := 0.0
		if rng.Float64() < q {
			in = 1
		}
		c += mix((in + n - 0.5) / (z * z))
		cp += mix((n - 0.5) / (z * z))
	}
	return c, cp
}

// Issue 25 asked the sequential audit to catch dp-fedavg-10x (q = 0.4 deployed, 0.04 claimed:
// eps 1.193 at delta 1e-5) at a median of 500 pairs, 4x below the fixed audit's 2000. This
// measures what the Neyman-Pearson adversary itself reaches with the default thresholds
// (dkw+band, 95%), on 21 simulated audits per size: at 2000 pairs its median certified eps must
// exceed the claim (the fixed audit catches the deployment; measured 1.447), while at 500 it is
// logged (measured 0.964, below the claim: no adversary on these scores does better, so the
// goal is beyond the statistics, not the attack).
func TestTenfoldSamplingOptimalAdversary(t *testing.T) {
	const (
		q, z, T = 0.4, 1.2, 8
		claim   = 1.193
		delta   = 1e-5
		reps    = 21
	)
	median := func(n int) float64 {
		var eps []float64
		for rep := 0; rep < reps; rep++ {
			rng := rand.New(rand.NewPCG(uint64(rep), uint64(n)))
			x, y := make([]float64, n), make([]float64, n)
			for i := range x {
				x[i], y[i] = tenfoldPair(rng, q, z, T)
			}
			r, err := audit.Analyze(x, y, audit.Options{Method: audit.DKWBand, Delta: delta, Paired: true})
			if err != nil {
				t.Fatal(err)
			}
			eps = append(eps, r.EpsLowerAt(delta))
		}
		slices.Sort(eps)
		return eps[len(eps)/2]
	}
	m500, m2000 := median(500), median(2000)
	t.Logf("optimal adversary, dkw+band at 95%%: median certified eps %.3f at 500 pairs, %.3f at 2000 (claim %.3f)", m500, m2000, claim)
	if m2000 <= claim {
		t.Errorf("2000 pairs: median certified eps %.3f, not above the claim %.3f", m2000, claim)
	}
}
