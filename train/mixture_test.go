package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/datasets"
)

// TestDPFedAvgInformedMixture is a known answer for the informed adversary under client
// sampling. With remove-client adjacency and a target whose clipped update always has norm c
// (the clip binds), round t's statistic in the sum's scale is exactly
//
//	llr_t = log((1-q) + q exp(m zeta_t - m^2/2 + B_t m^2)),  m = c / std,
//
// with zeta_t ~ N(0, 1) the noise along the update and B_t ~ Bernoulli(q) in world C (the target
// was sampled), B_t = 0 in world C' (there is no target): the likelihood ratio of the mixture
// "took part with probability q, or not" against the noise alone. The recorded informed_llr_all
// of 1500 pairs over 4 rounds must follow the sum of those four, simulated here with 100,000
// draws per world: a two-sample Kolmogorov-Smirnov test at the 1e-3 level
// (sup |F1 - F2| < 1.949 sqrt((n1 + n2) / (n1 n2))). The statistic that ignores the sampling
// (the Gaussian ratio m zeta - m^2/2 + B m^2 itself) fails the same test.
func TestDPFedAvgInformedMixture(t *testing.T) {
	const m, n, dim, pairs, rounds = 4, 3, 2, 1500, 4
	const q, z = 0.5, 1.0
	clients, canary := quadClients(m, n, dim, 40) // a canary far out: its update is always clipped
	c := append([]*datasets.Dataset{canary}, clients...)
	cfg := dpConfig()
	cfg.Rounds, cfg.Checkpoints = rounds, []int{rounds}
	cfg.SamplingRate, cfg.NoiseMultiplier, cfg.Informed, cfg.RecordParams = q, z, true, false
	cps := run(t, cfg, c, clients, TargetInfo{Client: 0, WholeClient: true, Absent: true}, PairRange{0, pairs})
	last := cps[len(cps)-1]
	var got [2][]float64
	for _, rs := range last.Replicas {
		// mu^2 sums (|u|/std)^2 over the rounds: the clip binds in every round exactly when it
		// is rounds / z^2.
		if mu2 := rs.Stats[2]; math.Abs(mu2-rounds/(z*z)) > 1e-3 {
			t.Fatalf("pair %d: informed_mu2 %g, want %g: the canary's update is not clipped in every round", rs.Pair, mu2, rounds/(z*z))
		}
		got[rs.World] = append(got[rs.World], rs.Stats[0])
	}
	mix := func(a float64) float64 { return math.Log1p(-q) + math.Log1p(q/(1-q)*math.Exp(a)) }
	for _, tc := range []struct {
		name  string
		stat  func(a float64) float64
		match bool
	}{{"mixture", mix, true}, {"gaussian ratio", func(a float64) float64 { return a }, false}} {
		rng := rand.New(rand.NewPCG(7, 8))
		mm := 1 / z
		for w := range 2 {
			sim := make([]float64, 100000)
			for i := range sim {
				for range rounds {
					a := mm*rng.NormFloat64() - mm*mm/2
					if w == 0 && rng.Float64() < q {
						a += mm * mm
					}
					sim[i] += tc.stat(a)
				}
			}
			d := ksDistance(got[w], sim)
			t.Logf("%s, world %d: KS distance %.4f", tc.name, w, d)
			crit := 1.949 * math.Sqrt(float64(len(got[w])+len(sim))/float64(len(got[w])*len(sim)))
			if (d < crit) != tc.match {
				t.Errorf("%s, world %d: KS distance %.4f against critical %.4f (want a match: %v)", tc.name, w, d, crit, tc.match)
			}
		}
	}
}

// ksDistance is the two-sample Kolmogorov-Smirnov statistic sup |F_a - F_b|.
func ksDistance(a, b []float64) float64 {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	var i, j int
	var d float64
	for i < len(a) && j < len(b) {
		x := min(a[i], b[j])
		for i < len(a) && a[i] <= x {
			i++
		}
		for j < len(b) && b[j] <= x {
			j++
		}
		d = math.Max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}
