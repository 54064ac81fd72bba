package audit

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

// directPValue is the Steinke et al. p-value summed naively in linear space with exact
// binomial coefficients from gonum's Beta function; fine for small r.
func directPValue(m, r, v int, eps, delta float64) float64 {
	q := math.Exp(eps) / (1 + math.Exp(eps))
	pmf := func(j int) float64 {
		return math.Exp(-math.Log(float64(r+1))-mathext.Lbeta(float64(j+1), float64(r-j+1))) *
			math.Pow(q, float64(j)) * math.Pow(1-q, float64(r-j))
	}
	beta := 0.0
	for j := v; j <= r; j++ {
		beta += pmf(j)
	}
	alpha, sum := 0.0, 0.0
	for i := 1; i <= v; i++ {
		sum += pmf(v - i)
		alpha = math.Max(alpha, sum/float64(i))
	}
	return math.Min(1, beta+2*float64(m)*delta*alpha)
}

// TestOneRunPValueDirect checks the log-space p-value against the naive sum on small cases.
// Tolerance 1e-10 relative: both sides are exact formulas in float64, differing by rounding in
// a few dozen terms.
func TestOneRunPValueDirect(t *testing.T) {
	cases := []struct {
		m, r, v    int
		eps, delta float64
	}{
		{10, 10, 10, 0, 0}, {10, 10, 7, 1, 0}, {100, 20, 15, 0.5, 1e-3}, {100, 40, 30, 2, 1e-5},
		{1000, 30, 25, 1.5, 1e-4}, {50, 50, 1, 0.2, 0.01}, {5, 5, 0, 1, 0.1}, {200, 60, 60, 3, 1e-6},
	}
	for _, c := range cases {
		got, err := OneRunPValue(c.m, c.r, c.v, c.eps, c.delta)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		want := directPValue(c.m, c.r, c.v, c.eps, c.delta)
		if math.Abs(got-want) > 1e-10*math.Max(want, 1e-300) {
			t.Errorf("%+v: p = %.15g, direct sum %.15g", c, got, want)
		}
	}
}

// TestOneRunPValueLargeR checks the delta = 0 tail against the regularized incomplete beta
// function, P[Bin(r, q) >= v] = I_q(v, r-v+1), at r up to 10^5 where naive sums underflow
// term by term. Tolerance 1e-8 relative: gonum's continued fraction and our log-space sum of
// ~10^4 terms each carry about 1e-12 relative error per term of lgamma at arguments ~10^5.
func TestOneRunPValueLargeR(t *testing.T) {
	cases := []struct {
		r, v int
		eps  float64
	}{{10000, 9000, 1.5}, {10000, 9500, 2}, {100000, 99000, 4}, {100000, 60000, 0.3}, {20000, 11000, 0}}
	for _, c := range cases {
		got, err := OneRunPValue(c.r, c.r, c.v, c.eps, 0)
		if err != nil {
			t.Fatal(err)
		}
		q := 1 / (1 + math.Exp(-c.eps))
		want := mathext.RegIncBeta(float64(c.v), float64(c.r-c.v+1), q)
		if want < 1e-290 {
			t.Fatalf("%+v: reference %g underflows; pick another case", c, want)
		}
		if math.Abs(got-want) > 1e-8*want {
			t.Errorf("%+v: p = %.12g, I_q = %.12g", c, got, want)
		}
	}
}

// TestOneRunEpsilonAllCorrect: with delta = 0 and every one of r guesses right, the p-value is
// q^r and the certified eps is log(q/(1-q)) at q = (1-confidence)^(1/r) exactly: the curve of
// the best possible lower bound that Steinke et al. plot against the number of guesses. The
// search stops within 1e-7 relative (oneRunSearchTol), so we allow 2e-7.
func TestOneRunEpsilonAllCorrect(t *testing.T) {
	for _, conf := range []float64{0.95, 0.99} {
		for _, r := range []int{1, 10, 100, 1000, 10000} {
			got, err := OneRunEpsilon(r, r, r, 0, conf)
			if err != nil {
				t.Fatal(err)
			}
			q := math.Pow(1-conf, 1/float64(r))
			want := math.Log(q / (1 - q))
			if want < 0 {
				want = 0
			}
			if got > want || want-got > 2e-7*math.Max(1, want) {
				t.Errorf("r=%d conf=%v: eps %.10f, closed form %.10f", r, conf, got, want)
			}
		}
	}
	// Values at 95% (delta = 0), for the record: r = 100 gives 3.4930, 1000 gives 5.8091,
	// 10000 gives 8.1130. A delta term can only lower them, more so for more canaries.
	e0, _ := OneRunEpsilon(10000, 1000, 1000, 0, 0.95)
	e1, _ := OneRunEpsilon(1000, 1000, 1000, 1e-5, 0.95)
	e2, _ := OneRunEpsilon(10000, 1000, 1000, 1e-5, 0.95)
	if !(e0 > e1 && e1 > e2 && e2 > 0) {
		t.Errorf("delta term not monotone: eps %v (delta 0), %v (m=1000), %v (m=10000)", e0, e1, e2)
	}
}

// TestOneRunGDPExactAtZero: at mu = 0 the canaries' outputs carry no information, each guess
// is right with probability 1/2 independently, and k right out of k has probability 2^-k.
// The f-DP recursion rejects mu = 0 exactly when 2^-k <= tau (table over k and tau).
func TestOneRunGDPExactAtZero(t *testing.T) {
	for _, tau := range []float64{0.05, 0.01, 0.2} {
		for k := 1; k <= 12; k++ {
			got, err := OneRunGDPRejects(0, k, k, k, tau)
			if err != nil {
				t.Fatal(err)
			}
			if want := math.Pow(2, -float64(k)) <= tau; got != want {
				t.Errorf("tau=%v k=%d: rejects %v, want %v", tau, k, got, want)
			}
		}
	}
}

// TestOneRunMuBeatsConversion: from the same guesses, the f-DP analysis certifies more mu than
// converting the eps bound (table of (m, r, v)).
func TestOneRunMuBeatsConversion(t *testing.T) {
	cases := []struct{ m, r, v int }{{1000, 1000, 1000}, {1000, 100, 100}, {1000, 200, 180}, {10000, 1000, 950}, {10000, 2000, 1700}}
	for _, c := range cases {
		mu, err := OneRunMu(c.m, c.r, c.v, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := OneRunEpsilon(c.m, c.r, c.v, 1e-5, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		conv, err := MuFromEpsilonBound(eps, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("m=%d r=%d v=%d: f-DP mu %.4f, eps(1e-5) %.4f -> mu %.4f", c.m, c.r, c.v, mu, eps, conv)
		if !(mu > conv) {
			t.Errorf("m=%d r=%d v=%d: f-DP mu %v not above converted %v", c.m, c.r, c.v, mu, conv)
		}
	}
}

func TestMuFromEpsilonBoundRoundTrip(t *testing.T) {
	for _, mu := range []float64{0.5, 1, 2, 4, 8} {
		eps, err := EpsilonFromGDP(mu, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MuFromEpsilonBound(eps, 1e-5)
		if err != nil || math.Abs(got-mu) > 1e-7*mu {
			t.Errorf("mu %v -> eps %v -> mu %v (%v)", mu, eps, got, err)
		}
	}
}

func TestOneRunGuesses(t *testing.T) {
	scores := []float64{0.1, 5, -3, 2, 2, -1, 0}
	incl := []bool{false, true, false, true, false, true, false}
	cases := []struct {
		kp, km, r, v int
	}{
		{0, 0, 0, 0}, {1, 0, 1, 1}, {0, 1, 1, 1}, {2, 2, 4, 2}, // ties at 2: index 3 sorts before 4, so 4 is a top guess
		{3, 0, 3, 2}, {7, 0, 7, 3}, {0, 7, 7, 4}, {3, 4, 7, 5},
	}
	for _, c := range cases {
		r, v, err := OneRunGuesses(scores, incl, c.kp, c.km)
		if err != nil || r != c.r || v != c.v {
			t.Errorf("k+=%d k-=%d: r=%d v=%d (%v), want %d %d", c.kp, c.km, r, v, err, c.r, c.v)
		}
	}
}

func TestOneRunErrors(t *testing.T) {
	if _, err := OneRunEpsilon(10, 11, 5, 0, 0.95); err == nil {
		t.Error("r > m accepted")
	}
	if _, err := OneRunEpsilon(10, 5, 6, 0, 0.95); err == nil {
		t.Error("v > r accepted")
	}
	if _, err := OneRunEpsilon(10, 5, 5, 1, 0.95); err == nil {
		t.Error("delta 1 accepted")
	}
	if _, err := OneRunMu(10, 5, 5, 1); err == nil {
		t.Error("confidence 1 accepted")
	}
	if _, err := OneRunPValue(10, 5, 5, -1, 0); err == nil {
		t.Error("negative eps accepted")
	}
	if _, _, err := OneRunGuesses([]float64{1, 2}, []bool{true}, 1, 0); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, _, err := OneRunGuesses([]float64{1, 2}, []bool{true, false}, 2, 1); err == nil {
		t.Error("k+ + k- > m accepted")
	}
	if _, _, err := OneRunGuesses([]float64{1, math.NaN()}, []bool{true, false}, 1, 0); err == nil {
		t.Error("NaN score accepted")
	}
	if _, err := OneRunAudit([]float64{1, 2}, []bool{true, false}, []OneRunChoice{}, 0, 0.95); err == nil {
		t.Error("empty grid accepted")
	}
}

// gaussianCanaries draws m inclusion bits and scores N(mu b_i, 1): each canary's score is
// exactly the Gaussian mechanism with sensitivity mu, so the mechanism is mu-GDP per canary.
func gaussianCanaries(rng *rand.Rand, mu float64, scores []float64, incl []bool) {
	for i := range scores {
		incl[i] = rng.IntN(2) == 1
		scores[i] = rng.NormFloat64()
		if incl[i] {
			scores[i] += mu
		}
	}
}

type oneRunStats struct {
	mu, eps, conv []float64
	muMiss        int
	epsMiss       int
}

func runOneRunCoverage(t *testing.T, m, reps int, mu, delta float64, seed uint64) oneRunStats {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 77))
	scores := make([]float64, m)
	incl := make([]bool, m)
	trueEps, err := EpsilonFromGDP(mu, delta)
	if err != nil {
		t.Fatal(err)
	}
	var st oneRunStats
	for range reps {
		gaussianCanaries(rng, mu, scores, incl)
		// The product's path: a one-run row of an analysis (mu and eps together at 95%).
		res, err := OneRunAnalyze(scores, incl, nil, delta, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		conv, err := MuFromEpsilonBound(res.EpsLower, delta)
		if err != nil {
			t.Fatal(err)
		}
		st.mu = append(st.mu, res.MuLower)
		st.eps = append(st.eps, res.EpsLower)
		st.conv = append(st.conv, conv)
		if res.MuLower > mu {
			st.muMiss++
		}
		if res.EpsLower > trueEps {
			st.epsMiss++
		}
	}
	return st
}

// TestOneRunCoverageGaussian: 200 one-run audits of m = 1000 canaries on the Gaussian mechanism
// at mu = 1, 2, 4 (delta = 1e-5, 95% confidence, the default grid). At least 95% of the
// certified mu must be at or below mu, and of the certified eps at or below the exact
// eps(delta) of mu-GDP. The bounds are conservative (the union over the grid, and one run's
// guesses are far from the worst case), so the observed coverage is near 1 and the 95%
// requirement is not at the edge; the median f-DP mu must beat the converted eps bound. The
// audits take the product's path, OneRunAnalyze (mu and eps each at 97.5%, so that they hold
// together at 95%, as every one-run row of audit run and analyze). At mu = 2 the median must
// reach 0.55 of the truth: 0.58 measured here (1.157), below issue 15's goal of 0.6, which
// only the mu test alone at the full 95% reached (OneRunAudit: 0.62).
func TestOneRunCoverageGaussian(t *testing.T) {
	const m, reps, delta = 1000, 200, 1e-5
	for i, mu := range []float64{1, 2, 4} {
		st := runOneRunCoverage(t, m, reps, mu, delta, uint64(100+i))
		t.Logf("m=%d mu=%g: mu misses %d/%d, eps misses %d/%d; median certified mu %.3f (%.2f of truth), converted from eps %.3f, eps %.3f",
			m, mu, st.muMiss, reps, st.epsMiss, reps, Median(st.mu), Median(st.mu)/mu, Median(st.conv), Median(st.eps))
		if st.muMiss > reps/20 || st.epsMiss > reps/20 {
			t.Errorf("mu=%g: coverage below 95%%: %d mu misses, %d eps misses of %d", mu, st.muMiss, st.epsMiss, reps)
		}
		if !(Median(st.mu) > Median(st.conv)) {
			t.Errorf("mu=%g: f-DP median %v not above converted eps median %v", mu, Median(st.mu), Median(st.conv))
		}
		if mu == 2 && !(Median(st.mu) >= 0.55*mu) {
			t.Errorf("mu=2: median certified mu %.3f, below 0.55 of the truth", Median(st.mu))
		}
	}
}

// TestDefaultOneRunGrid: 20% and 60% of the canaries as guesses with 85% and 15% of the level;
// with too few canaries for two choices the weights merge; weights must be finite shares.
func TestDefaultOneRunGrid(t *testing.T) {
	g := DefaultOneRunGrid(1000)
	if len(g) != 2 || g[0] != (OneRunChoice{100, 100, 0.85}) || g[1] != (OneRunChoice{300, 300, 0.15}) {
		t.Errorf("grid for 1000: %+v", g)
	}
	if g := DefaultOneRunGrid(3); len(g) != 1 || g[0].KPlus != 1 || math.Abs(g[0].Weight-1) > 1e-12 {
		t.Errorf("grid for 3: %+v", g)
	}
	if _, err := gridLevels([]OneRunChoice{{1, 1, -1}}); err == nil {
		t.Error("negative weight accepted")
	}
	lv, err := gridLevels([]OneRunChoice{{1, 1, 0}, {2, 2, 0}})
	if err != nil || lv[0] != 0.5 || lv[1] != 0.5 {
		t.Errorf("zero weights: %v %v", lv, err)
	}
	// A candidate's recorded level is its share of the error.
	s, b := make([]float64, 1000), make([]bool, 1000)
	gaussianCanaries(rand.New(rand.NewPCG(1, 2)), 2, s, b)
	res, err := OneRunAudit(s, b, nil, 1e-5, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Candidates; len(c) != 2 || math.Abs(c[0].Confidence-(1-0.05*0.85)) > 1e-12 || math.Abs(c[1].Confidence-(1-0.05*0.15)) > 1e-12 {
		t.Errorf("candidate levels %+v", res.Candidates)
	}
}

// TestOneRunCoverageHasTeeth is the control: the same audits compared against a truth that is
// too small (half the real mu) must miss far more than 5%, so the coverage test can fail.
func TestOneRunCoverageHasTeeth(t *testing.T) {
	const m, reps = 1000, 50
	st := runOneRunCoverage(t, m, reps, 2, 1e-5, 9)
	misses := 0
	for _, v := range st.mu {
		if v > 1 {
			misses++
		}
	}
	if misses < reps/2 {
		t.Errorf("only %d of %d certified mu exceed mu/2 = 1 at true mu 2: the coverage check has no power", misses, reps)
	}
}

// TestOneRunPower reports the power table for m = 1000 and 10000 (slow: set
// FEDAUDIT_LONG=1). It checks coverage like TestOneRunCoverageGaussian.
func TestOneRunPower(t *testing.T) {
	if os.Getenv("FEDAUDIT_LONG") == "" {
		t.Skip("set FEDAUDIT_LONG=1 for the power table")
	}
	for _, m := range []int{1000, 10000} {
		reps := 200
		for i, mu := range []float64{1, 2, 4} {
			st := runOneRunCoverage(t, m, reps, mu, 1e-5, uint64(1000+i))
			t.Logf("m=%d mu=%g reps=%d: coverage mu %.3f eps %.3f; median certified mu %.3f (%.2f of truth), converted-from-eps mu %.3f, eps %.3f (true eps %.3f)",
				m, mu, reps, 1-float64(st.muMiss)/float64(reps), 1-float64(st.epsMiss)/float64(reps),
				Median(st.mu), Median(st.mu)/mu, Median(st.conv), Median(st.eps), mustEps(t, mu, 1e-5))
			if st.muMiss > reps/20 || st.epsMiss > reps/20 {
				t.Errorf("m=%d mu=%g: coverage below 95%%", m, mu)
			}
		}
	}
}

func mustEps(t *testing.T, mu, delta float64) float64 {
	e, err := EpsilonFromGDP(mu, delta)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOneRunCoverageLaplace is the non-Gaussian case: each canary's score is s b_i + Laplace(0,
// 1), exactly s-DP per canary (delta = 0), whose GDP-equivalent mu (the smallest mu with
// T_G(mu) below its trade-off curve) is found numerically. Over 200 runs of m = 1000 canaries
// the certified eps must be at most s and the certified mu at most that mu. Here the eps bound
// is sharp: beyond the shift the Laplace likelihood ratio is exactly e^s, so the extreme
// guesses are right with exactly the probability e^s/(1+e^s) of the theorem's randomized
// response, and misses occur at close to the nominal rate (8 and 4 of 200 measured). A
// ">= 95% observed" rule would then fail by chance about a third of the time, so the eps rows
// use the self-test's rule: at most the largest m with P(Binomial(200, 0.05) >= m) >= 1e-3
// (21 misses).
func TestOneRunCoverageLaplace(t *testing.T) {
	const m, reps = 1000, 200
	for si, s := range []float64{1, 3} {
		sc := laplaceScenario(s)
		rng := rand.New(rand.NewPCG(uint64(si), 404))
		x, y := make([]float64, m), make([]float64, m)
		scores, incl := make([]float64, m), make([]bool, m)
		epsMiss, muMiss := 0, 0
		var mus []float64
		for range reps {
			sc.draw(rng, x, y)
			for i := range scores {
				incl[i] = rng.IntN(2) == 1
				if incl[i] {
					scores[i] = x[i]
				} else {
					scores[i] = y[i]
				}
			}
			res, err := OneRunAudit(scores, incl, nil, 0, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			if res.EpsLower > s {
				epsMiss++
			}
			if res.MuLower > sc.mu {
				muMiss++
			}
			mus = append(mus, res.MuLower)
		}
		t.Logf("laplace s=%g (GDP-equivalent mu %.3f): eps misses %d, mu misses %d of %d; median certified mu %.3f",
			s, sc.mu, epsMiss, muMiss, reps, Median(mus))
		if epsMiss > maxAllowedMisses(reps, 0.05, 1e-3) || muMiss > reps/20 {
			t.Errorf("laplace s=%g: too many misses (eps %d, mu %d of %d)", s, epsMiss, muMiss, reps)
		}
	}
}
