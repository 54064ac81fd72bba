package theory

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
)

// TestHeuristicEqualsCompositionForRoundInvariantSchedules: with every client in every round
// and linear losses, w_T is a Gaussian with shift sum_t gamma_t and noise sqrt(T) sigma/sqrt(n);
// when gamma_t does not depend on t that is sqrt(T) gamma sqrt(n)/sigma, the composition bound.
func TestHeuristicEqualsCompositionForRoundInvariantSchedules(t *testing.T) {
	rounds := []int{1, 2, 10, 100, 1000}
	cfgs := []Config{
		workedConfig("constant"),
		workedConfig("cyclic"),
		{Algo: algo.DPSGD, Eta: 0.05, L: 2, K: 3, Sigma: 1.3, Clip: 1, Batch: 4},
		{Algo: algo.FedProx, Alpha: 2, Eta: 0.01, L: 1, K: 5, M: 20, Sigma: 0.1, Clip: 10},
		{Algo: algo.FedProx, ProxConstant: true, Alpha: 2, Eta: 0.01, L: 1, K: 5, M: 20, Sigma: 0.1, Clip: 10},
	}
	for _, cfg := range cfgs {
		for _, b := range mustBounds(t, cfg, rounds...) {
			if e := relErr(b.MuHeuristic, b.MuComposition); e > 1e-12 {
				t.Errorf("%s %s T=%d: heuristic %v, composition %v (rel %.2g)", cfg.Algo, cfg.ScheduleName, b.T, b.MuHeuristic, b.MuComposition, e)
			}
			if e := relErr(b.EpsilonHeuristic, b.EpsilonComposition); e > 1e-9 {
				t.Errorf("%s T=%d: epsilon heuristic %v, composition %v", cfg.Algo, b.T, b.EpsilonHeuristic, b.EpsilonComposition)
			}
		}
	}
	// The worked example: 2 eta V K sqrt(T)/(sqrt(n) sigma) = sqrt(5 T).
	for _, b := range mustBounds(t, workedConfig("constant"), rounds...) {
		if want := math.Sqrt(5 * float64(b.T)); relErr(b.MuHeuristic, want) > 1e-12 {
			t.Errorf("worked example T=%d: heuristic %v, want %v", b.T, b.MuHeuristic, want)
		}
	}
}

// TestHeuristicDecayingSchedules: with gamma_t decaying (stage-wise, iterative) the heuristic
// is (sum gamma_t)/sqrt(T) against composition's sqrt(sum gamma_t^2): strictly smaller from
// T = 2 on, equal at T = 1; and it is the convergent bound's H_0 with every rho_t = 1 (L -> 0).
func TestHeuristicDecayingSchedules(t *testing.T) {
	rounds := []int{1, 2, 10, 100, 1000}
	for _, name := range []string{"stage", "iterative"} {
		cfg := workedConfig(name)
		bs := mustBounds(t, cfg, rounds...)
		flat := cfg
		flat.L = 1e-300 // rho_t = 1 to float64 precision
		flatBs := mustBounds(t, flat, rounds...)
		n := float64(cfg.EffectiveClients())
		for i, b := range bs {
			// Direct sum of the schedule's gamma_t.
			sum := 0.0
			for r := 0; r < b.T; r++ {
				eta := 0.0
				for k := 0; k < cfg.K; k++ {
					eta += mustSchedule(t, name, cfg).Eta(k, r)
				}
				sum += 2 * cfg.Clip / n * eta
			}
			want := math.Sqrt(n) / cfg.Sigma * sum / math.Sqrt(float64(b.T))
			if e := relErr(b.MuHeuristic, want); e > 1e-12 {
				t.Errorf("%s T=%d: heuristic %v, direct sum %v", name, b.T, b.MuHeuristic, want)
			}
			if e := relErr(flatBs[i].Mu, b.MuHeuristic); e > 1e-12 {
				t.Errorf("%s T=%d: convergent bound at L=0 is %v, heuristic %v", name, b.T, flatBs[i].Mu, b.MuHeuristic)
			}
			switch {
			case b.T == 1 && relErr(b.MuHeuristic, b.MuComposition) > 1e-12:
				t.Errorf("%s T=1: heuristic %v != composition %v", name, b.MuHeuristic, b.MuComposition)
			case b.T > 1 && !(b.MuHeuristic < b.MuComposition):
				t.Errorf("%s T=%d: heuristic %v not below composition %v", name, b.T, b.MuHeuristic, b.MuComposition)
			}
		}
	}
}

func mustSchedule(t *testing.T, name string, cfg Config) Schedule {
	t.Helper()
	s, err := ParseSchedule(name, cfg.Eta, cfg.K)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHeuristicOnQuadratic compares the heuristic with the exact mu of the final model of the
// quadratic instance f_i(w) = (a/2)||w||^2 - <b_i, w>, at the instance's own sensitivity: the
// per-step gradient difference between the worlds is bDiff, so Clip = ||bDiff||/2.
//
//   - a = 0 is a linear loss: the heuristic is exact (equal to QuadraticFinalMu).
//   - 0 <= eta a <= 2 (convex, stable descent) or K = 1: the heuristic is never below the
//     exact mu. The ratio exact/heuristic is (|gain|/(eta K)) S(rho, T)/sqrt(T) with
//     S = sum rho^j / sqrt(sum rho^2j) <= sqrt(T) (Cauchy-Schwarz) and |gain|/(eta K) =
//     |sum_{k<K} (1 - eta a)^k|/K <= 1 when |1 - eta a| <= 1 (and = 1 when K = 1).
//   - a < 0 (negative curvature, the shape of Theorem 3a) with K >= 2: at T = 1 the ratio is
//     ((1 + eta|a|)^K - 1)/(K eta|a|) > 1: the heuristic understates the leak, as the linear
//     assumption can when local steps amplify the target's gradient.
func TestHeuristicOnQuadratic(t *testing.T) {
	const (
		m     = 10
		sigma = 0.3
		eta   = 0.1
		bNorm = 0.8
	)
	rounds := []int{1, 2, 3, 10, 100, 1000}
	for _, K := range []int{1, 2, 5} {
		for _, a := range []float64{0, 1e-6, 0.5, 3, 10, 19.9, 20, -0.5, -3} {
			cfg := Config{Algo: algo.FedAvg, Eta: eta, L: math.Max(math.Abs(a), 1), K: K, M: m, Sigma: sigma, Clip: bNorm / 2}
			bs := mustBounds(t, cfg, rounds...)
			rho, dnorm, err := QuadraticDelta(a, eta, K, m, []float64{bNorm * 0.6, bNorm * 0.8})
			if err != nil {
				t.Fatal(err)
			}
			_, gain, _ := QuadraticLocalMap(a, eta, K)
			for _, b := range bs {
				exact := QuadraticFinalMu(m, dnorm, sigma, rho, b.T)
				switch {
				case a == 0:
					if e := relErr(b.MuHeuristic, exact); e > 1e-12 {
						t.Errorf("K=%d a=0 T=%d: heuristic %v, exact %v (linear loss: must be equal)", K, b.T, b.MuHeuristic, exact)
					}
				case (a > 0 && eta*a <= 2) || K == 1:
					if exact > b.MuHeuristic*(1+1e-12) {
						t.Errorf("K=%d a=%v T=%d: exact %v above heuristic %v", K, a, b.T, exact, b.MuHeuristic)
					}
				case a < 0 && b.T == 1:
					want := math.Abs(gain) / (eta * float64(K))
					if !(want > 1) || relErr(exact/b.MuHeuristic, want) > 1e-9 {
						t.Errorf("K=%d a=%v T=1: exact/heuristic %v, want %v > 1", K, a, exact/b.MuHeuristic, want)
					}
				}
			}
		}
	}
}
