package theory

import (
	"math"
	"math/big"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
)

// TestQuadraticLocalMap runs K gradient steps on the quadratic loss by hand and compares
// with rho w + gain b (1e-12 relative: K <= 50 steps of rounding).
func TestQuadraticLocalMap(t *testing.T) {
	for _, tc := range []struct {
		a, eta float64
		K      int
	}{
		{1, 0.1, 5}, {-1, 0.01, 5}, {0, 0.3, 7}, {2, 0.5, 3}, {3, 0.5, 4}, {3, 0.5, 5},
		{1e-9, 1e-3, 50}, {10, 0.1, 1}, {-2, 0.2, 20},
	} {
		rho, gain, err := QuadraticLocalMap(tc.a, tc.eta, tc.K)
		if err != nil {
			t.Fatal(err)
		}
		for _, w0 := range []float64{0, 0.7, -3} {
			const b = 1.3
			w := w0
			for k := 0; k < tc.K; k++ {
				w -= tc.eta * (tc.a*w - b)
			}
			if want := rho*w0 + gain*b; math.Abs(w-want) > 1e-12*math.Max(1, math.Abs(w)) {
				t.Errorf("a=%v eta=%v K=%v w0=%v: steps give %.15g, map %.15g", tc.a, tc.eta, tc.K, w0, w, want)
			}
		}
	}
	for _, bad := range []struct {
		a, eta float64
		K      int
	}{{1, 0.1, 0}, {1, 0, 3}, {math.NaN(), 0.1, 3}, {1, math.Inf(1), 3}} {
		if _, _, err := QuadraticLocalMap(bad.a, bad.eta, bad.K); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestQuadraticDelta simulates one round of the server's average over m clients for the two
// adjacent datasets from the same w and compares the difference with Delta.
func TestQuadraticDelta(t *testing.T) {
	const a, eta, K, m = -1.0, 0.05, 6, 4
	bs := [][]float64{{1, 2, 0}, {0.5, -1, 2}, {3, 3, 3}, {-2, 0, 1}}
	bPrime := []float64{1.5, 1, -0.5} // client 0 changes
	w := []float64{0.2, -0.4, 1}
	round := func(b0 []float64) []float64 {
		out := make([]float64, len(w))
		for i := 0; i < m; i++ {
			bi := bs[i]
			if i == 0 {
				bi = b0
			}
			wi := append([]float64(nil), w...)
			for k := 0; k < K; k++ {
				for d := range wi {
					wi[d] -= eta * (a*wi[d] - bi[d])
				}
			}
			for d := range out {
				out[d] += wi[d] / m
			}
		}
		return out
	}
	c, cp := round(bs[0]), round(bPrime)
	diff := 0.0
	for d := range c {
		diff += (c[d] - cp[d]) * (c[d] - cp[d])
	}
	bDiff := []float64{bs[0][0] - bPrime[0], bs[0][1] - bPrime[1], bs[0][2] - bPrime[2]}
	rho, norm, err := QuadraticDelta(a, eta, K, m, bDiff)
	if err != nil {
		t.Fatal(err)
	}
	if relErr(norm, math.Sqrt(diff)) > 1e-12 || relErr(rho, math.Pow(1+eta, K)) > 1e-14 {
		t.Errorf("norm %v (simulated %v), rho %v", norm, math.Sqrt(diff), rho)
	}
	if _, _, err := QuadraticDelta(a, eta, K, 0, bDiff); err == nil {
		t.Error("m = 0 accepted")
	}
	if _, _, err := QuadraticDelta(a, eta, K, m, []float64{math.NaN()}); err == nil {
		t.Error("NaN bDiff accepted")
	}
}

// bruteQuadraticRatio is |sum_{j<T} rho^j| / sqrt(sum_{j<T} rho^{2j}) in 256-bit big.Float.
func bruteQuadraticRatio(rho float64, T int) float64 {
	const prec = 256
	r := new(big.Float).SetPrec(prec).SetFloat64(rho)
	p := new(big.Float).SetPrec(prec).SetFloat64(1)
	s1 := new(big.Float).SetPrec(prec)
	s2 := new(big.Float).SetPrec(prec)
	for j := 0; j < T; j++ {
		s1.Add(s1, p)
		s2.Add(s2, new(big.Float).Mul(p, p))
		p.Mul(p, r)
	}
	s1.Abs(s1)
	q, _ := new(big.Float).Quo(s1, new(big.Float).Sqrt(s2)).Float64()
	return q
}

// TestQuadraticFinalMu against direct big.Float sums, 1e-10 relative: for rho within 1e-9 of
// 1 the inputs themselves carry 1e-16/|log rho| ~ 1e-7 relative uncertainty in log rho, but
// the ratio depends on it only to second order.
func TestQuadraticFinalMu(t *testing.T) {
	const m, norm, sigma = 5, 0.3, 0.2
	scale := math.Sqrt(m) * norm / sigma
	for _, rho := range []float64{-1.5, -1, -0.99999, -0.3, 0, 0.5, 1 - 1e-9, 1, 1 + 1e-7, 1.05, 3} {
		for _, T := range []int{1, 2, 5, 33, 200} {
			got := QuadraticFinalMu(m, norm, sigma, rho, T)
			want := scale * bruteQuadraticRatio(rho, T)
			if e := relErr(got, want); e > 1e-10 {
				t.Errorf("rho=%v T=%d: %.15g, brute force %.15g (rel err %.2g)", rho, T, got, want, e)
			}
		}
	}
	// rho > 1, T = 10^6: finite and at the limit sqrt((rho+1)/(rho-1)).
	if got, want := QuadraticFinalMu(m, norm, sigma, 1.05, 1000000), scale*math.Sqrt(2.05/0.05); relErr(got, want) > 1e-12 {
		t.Errorf("rho=1.05, T=1e6: %v, limit %v", got, want)
	}
	for _, bad := range []float64{
		QuadraticFinalMu(0, norm, sigma, 0.5, 3), QuadraticFinalMu(m, -1, sigma, 0.5, 3),
		QuadraticFinalMu(m, norm, 0, 0.5, 3), QuadraticFinalMu(m, norm, sigma, math.NaN(), 3),
		QuadraticFinalMu(m, norm, sigma, 0.5, 0), QuadraticAllIteratesMu(m, norm, sigma, 0),
	} {
		if !math.IsNaN(bad) {
			t.Errorf("invalid arguments gave %v", bad)
		}
	}
}

// TestQuadraticMatchesTheorem3a: with a = -L the quadratic instance has rho = (1 + eta L)^K,
// the rho of Noisy-FedAvg with a constant rate, so its exact mu equals the convergent bound
// scaled by ||Delta||/gamma at every T (1e-9 relative).
func TestQuadraticMatchesTheorem3a(t *testing.T) {
	cfg := workedConfig("constant")
	rho, norm, err := QuadraticDelta(-cfg.L, cfg.Eta, cfg.K, cfg.M, []float64{0.6, -0.8})
	if err != nil {
		t.Fatal(err)
	}
	_, gamma, err := cfg.RoundCoefficients(0)
	if err != nil {
		t.Fatal(err)
	}
	rounds := []int{1, 10, 100, 1000, 100000}
	for i, b := range mustBounds(t, cfg, rounds...) {
		exact := QuadraticFinalMu(cfg.M, norm, cfg.Sigma, rho, rounds[i])
		if e := relErr(exact, b.Mu*norm/gamma); e > 1e-9 {
			t.Errorf("T=%d: quadratic %.15g, bound x ||Delta||/gamma %.15g", b.T, exact, b.Mu*norm/gamma)
		}
		all := QuadraticAllIteratesMu(cfg.M, norm, cfg.Sigma, rounds[i])
		if e := relErr(all, b.MuComposition*norm/gamma); e > 1e-9 {
			t.Errorf("T=%d: all iterates %.15g, composition x ||Delta||/gamma %.15g", b.T, all, b.MuComposition*norm/gamma)
		}
	}
}

// TestQuadraticAllIterates: T rounds of the same Gaussian mechanism compose to sqrt(T) times
// one round (Lemma 5).
func TestQuadraticAllIterates(t *testing.T) {
	one := QuadraticAllIteratesMu(3, 0.5, 0.25, 1)
	mus := make([]float64, 49)
	for i := range mus {
		mus[i] = one
	}
	if got, want := QuadraticAllIteratesMu(3, 0.5, 0.25, 49), audit.ComposeGDP(mus...); relErr(got, want) > 1e-14 {
		t.Errorf("49 rounds: %v, composition %v", got, want)
	}
	if got := QuadraticFinalMu(3, 0.5, 0.25, 0.7, 1); relErr(got, one) > 1e-15 {
		t.Errorf("T=1: final %v != all iterates %v", got, one)
	}
}

// TestUploadBoundOnQuadratic checks MuUploads against the exact upload mu of the quadratic
// instance. The canary's bDiff is scaled so that one round shifts the target's upload by exactly
// Gamma = n gamma (the sensitivity the theory assumes), i.e. ||Delta|| = gamma. Then:
//   - with a = -L (the shape of Theorem 3a) the exact upload mu equals MuUploads at every T: the
//     bound is tight;
//   - for every curvature a in [-L, L] the exact upload mu is at most MuUploadsComposition, and
//     the observer of every iterate w_1..w_{T-1} plus the upload reaches it exactly;
//   - at T = 1 (w_0 public) all of them are Gamma/sigma, sqrt(n) times the composition bound of
//     the average: the factor by which an uploads row judged against MuComposition was off.
func TestUploadBoundOnQuadratic(t *testing.T) {
	cfg := workedConfig("constant")
	_, gamma, err := cfg.RoundCoefficients(0)
	if err != nil {
		t.Fatal(err)
	}
	rounds := []int{1, 2, 10, 100, 1000}
	bs := mustBounds(t, cfg, rounds...)
	for _, a := range []float64{-cfg.L, -cfg.L / 2, 0, cfg.L / 2, cfg.L} {
		rho, unit, err := QuadraticDelta(a, cfg.Eta, cfg.K, cfg.M, []float64{0.6, -0.8})
		if err != nil {
			t.Fatal(err)
		}
		scale := gamma / unit // ||Delta|| = gamma
		rho, norm, err := QuadraticDelta(a, cfg.Eta, cfg.K, cfg.M, []float64{0.6 * scale, -0.8 * scale})
		if err != nil {
			t.Fatal(err)
		}
		if relErr(norm, gamma) > 1e-12 {
			t.Fatalf("a=%v: ||Delta|| %v, want gamma %v", a, norm, gamma)
		}
		for i, b := range bs {
			T := rounds[i]
			exact := QuadraticUploadMu(cfg.M, norm, cfg.Sigma, rho, T)
			if a == -cfg.L {
				if e := relErr(exact, b.MuUploads); e > 1e-9 {
					t.Errorf("a=-L T=%d: exact upload mu %.15g, MuUploads %.15g (rel %.2g)", T, exact, b.MuUploads, e)
				}
			}
			if exact > b.MuUploadsComposition*(1+1e-12) {
				t.Errorf("a=%v T=%d: exact upload mu %.15g above MuUploadsComposition %.15g", a, T, exact, b.MuUploadsComposition)
			}
			// The observer of w_1..w_{T-1} and the upload: (T-1) rounds of the average, then one upload.
			allPrev := 0.0
			if T > 1 {
				allPrev = QuadraticAllIteratesMu(cfg.M, norm, cfg.Sigma, T-1)
			}
			if e := relErr(math.Hypot(allPrev, float64(cfg.M)*norm/cfg.Sigma), b.MuUploadsComposition); e > 1e-9 {
				t.Errorf("a=%v T=%d: all-iterates upload observer %.15g, MuUploadsComposition %.15g", a, T, allPrev, b.MuUploadsComposition)
			}
		}
	}
	b := bs[0]
	one := float64(cfg.M) * gamma / cfg.Sigma
	for name, v := range map[string]float64{"MuUploads": b.MuUploads, "MuUploadsComposition": b.MuUploadsComposition, "UploadSensitivity/sigma": b.UploadSensitivity / cfg.Sigma} {
		if relErr(v, one) > 1e-12 {
			t.Errorf("T=1: %s = %v, want Gamma/sigma = %v", name, v, one)
		}
	}
	if r := b.MuUploads / b.MuComposition; relErr(r, math.Sqrt(float64(cfg.M))) > 1e-12 {
		t.Errorf("T=1: MuUploads/MuComposition = %v, want sqrt(n) = %v", r, math.Sqrt(float64(cfg.M)))
	}
}

func TestQuadraticUploadMuInvalid(t *testing.T) {
	for _, tc := range []struct {
		m          int
		norm, s, r float64
		T          int
	}{{0, 1, 1, 0.5, 1}, {1, -1, 1, 0.5, 1}, {1, 1, 0, 0.5, 1}, {1, 1, 1, math.NaN(), 1}, {1, 1, 1, 0.5, 0}, {1, math.Inf(1), 1, 0.5, 2}} {
		if v := QuadraticUploadMu(tc.m, tc.norm, tc.s, tc.r, tc.T); !math.IsNaN(v) {
			t.Errorf("QuadraticUploadMu(%+v) = %v, want NaN", tc, v)
		}
	}
}
