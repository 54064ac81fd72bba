package accounting

import (
	"math"
	"testing"
)

func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// gaussDelta is the Gaussian mechanism's privacy profile at mu (Dong, Roth and Su):
// Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
func gaussDelta(mu, eps float64) float64 {
	return normCDF(-eps/mu+mu/2) - math.Exp(eps)*normCDF(-eps/mu-mu/2)
}

func mustLastIterate(t *testing.T, q, z float64, T int) *LastIterate {
	t.Helper()
	s := make([]Round, T)
	for i := range s {
		s[i] = Round{Q: q, Z: z}
	}
	l, err := LastIterateOfSchedule(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustDelta(t *testing.T, l *LastIterate, eps float64) (float64, float64) {
	t.Helper()
	d, e, err := l.Delta(eps)
	if err != nil {
		t.Fatal(err)
	}
	return d, e
}

// TestLastIterateFullParticipation: with q = 1 the final model is N(T, T z^2) against
// N(0, T z^2), the Gaussian mechanism with mu = sqrt(T)/z: the profile is the closed form and
// epsilon at 1e-5 is docs/theory.md's check values.
func TestLastIterateFullParticipation(t *testing.T) {
	for _, c := range []struct {
		T      int
		z, eps float64 // eps: the epsilon of docs/theory.md at 1e-5 for mu = sqrt(T)/z
	}{{4, 4, 1.99309}, {1, 1, 4.37718}, {9, 3, 4.37718}, {4, 1, 9.99726}} {
		l := mustLastIterate(t, 1, c.z, c.T)
		mu := math.Sqrt(float64(c.T)) / c.z
		for _, eps := range []float64{0, 0.1, 0.5, 1, 2, 4, 8} {
			d, e := mustDelta(t, l, eps)
			want := gaussDelta(mu, eps)
			if math.Abs(d-want) > 1e-14+1e-11*want || e > 1e-12 {
				t.Errorf("T=%d z=%v eps=%v: delta %v (err bound %v), Gaussian %v", c.T, c.z, eps, d, e, want)
			}
		}
		g, err := l.Epsilon(1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(g.Epsilon-c.eps) > 6e-6 || g.Epsilon-g.EpsilonLower > 1e-9*g.Epsilon {
			t.Errorf("T=%d z=%v: epsilon %v [%v], docs/theory.md %v", c.T, c.z, g.Epsilon, g.EpsilonLower, c.eps)
		}
	}
}

// TestLastIterateOneRound: T = 1 is one step of the Poisson-subsampled Gaussian, whose
// profile has a closed form: (1-q) + q e^{mu x - mu^2/2} = e^{+-eps} solves for the
// threshold, and the divergences are Gaussian tails there. It is also below the epsilon
// of accounting's RDP (an upper bound on the same mechanism).
func TestLastIterateOneRound(t *testing.T) {
	for _, q := range []float64{1e-3, 0.01, 0.1, 0.5, 0.9} {
		for _, z := range []float64{0.5, 1, 2, 5} {
			l := mustLastIterate(t, q, z, 1)
			mu := 1 / z
			for _, eps := range []float64{0, 0.01, 0.1, 0.5, 1, 2, 4} {
				x := math.Log((math.Exp(eps)-(1-q))/q)/mu + mu/2
				in := q*normCDF(mu-x) - (math.Exp(eps)-1+q)*normCDF(-x)
				out := 0.0
				if r := math.Exp(-eps) - (1 - q); r > 0 {
					x := math.Log(r/q)/mu + mu/2
					out = normCDF(x) - math.Exp(eps)*((1-q)*normCDF(x)+q*normCDF(x-mu))
				}
				gotIn, gotOut, err := l.Directions(eps)
				if err != nil {
					t.Fatal(err)
				}
				d, e := mustDelta(t, l, eps)
				if math.Abs(gotIn-in) > 1e-14+1e-9*in || math.Abs(gotOut-out) > 1e-14+1e-9*out ||
					d != math.Max(gotIn, gotOut) || e > 1e-12 {
					t.Errorf("q=%v z=%v eps=%v: directions (%v, %v) err %v, closed form (%v, %v)", q, z, eps, gotIn, gotOut, e, in, out)
				}
				if eps == 0 && math.Abs(gotIn-gotOut) > 1e-13 {
					t.Errorf("q=%v z=%v: at eps = 0 both directions are the total variation: %v, %v", q, z, gotIn, gotOut)
				}
			}
			checkBelowRDP(t, l, q, z, 1)
		}
	}
}

// checkBelowRDP: the heuristic for T rounds is the privacy of a post-processing of the
// rounds' outputs (their sum) under linear losses, so it can never exceed the accountant's
// RDP claim for the same rounds.
func checkBelowRDP(t *testing.T, l *LastIterate, q, z float64, T int) {
	t.Helper()
	for _, delta := range []float64{1e-5, 1e-8} {
		g, err := l.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		rdp, err := DPFedAvgEpsilon(q, z, T, Claim{Delta: delta, Conversion: Balle})
		if err != nil {
			t.Fatal(err)
		}
		if g.Epsilon > rdp.Epsilon {
			t.Errorf("q=%v z=%v T=%d delta=%v: heuristic epsilon %v above the RDP claim %v", q, z, T, delta, g.Epsilon, rdp.Epsilon)
		}
	}
}

// quadDirections integrates (p - e^eps q)_+ and (q - e^eps p)_+ for the mixture
// P = sum_k w_k N(m_k, 1), Q = N(0, 1) by the trapezoid rule on a fine grid: a check of the
// closed form at the root that shares nothing with it.
func quadDirections(w, m []float64, eps float64) (in, out float64) {
	lo, hi := -14.0, 14.0
	for _, v := range m {
		hi = math.Max(hi, v+14)
	}
	const h = 2e-4
	n := int((hi - lo) / h)
	ee := math.Exp(eps)
	for i := 0; i <= n; i++ {
		x := lo + float64(i)*h
		q := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
		p := 0.0
		for k, v := range m {
			p += w[k] * math.Exp(-(x-v)*(x-v)/2) / math.Sqrt(2*math.Pi)
		}
		c := h
		if i == 0 || i == n {
			c = h / 2
		}
		in += c * math.Max(0, p-ee*q)
		out += c * math.Max(0, q-ee*p)
	}
	return in, out
}

// TestLastIterateQuadrature checks the binomial (equal rates), Poisson-binomial (unequal
// rates) and multi-shift paths against direct integration.
func TestLastIterateQuadrature(t *testing.T) {
	binom := func(n int, q float64) []float64 {
		w := make([]float64, n+1)
		for k := range w {
			w[k] = math.Exp(logBinomial(float64(n), float64(k)) + float64(k)*math.Log(q) + float64(n-k)*math.Log1p(-q))
		}
		return w
	}
	type tc struct {
		name   string
		rounds []LastIterateRound
		w, m   []float64 // the mixture in units of the total noise std
	}
	var cases []tc
	for _, c := range []struct {
		T    int
		q, z float64
	}{{3, 0.2, 0.7}, {10, 0.1, 0.5}, {10, 0.5, 1}, {25, 0.05, 0.4}} {
		r := make([]LastIterateRound, c.T)
		for i := range r {
			r[i] = LastIterateRound{Q: c.q, Shift: 1, Std: c.z}
		}
		s := math.Sqrt(float64(c.T)) * c.z
		m := make([]float64, c.T+1)
		for k := range m {
			m[k] = float64(k) / s
		}
		cases = append(cases, tc{"binomial", r, binom(c.T, c.q), m})
	}
	// Unequal rates: Poisson binomial of (0.1, 0.3, 0.6), shift 2, std 1 each.
	{
		qs := []float64{0.1, 0.3, 0.6}
		w := []float64{1}
		for _, q := range qs {
			next := make([]float64, len(w)+1)
			for k, v := range w {
				next[k] += v * (1 - q)
				next[k+1] += v * q
			}
			w = next
		}
		s := math.Sqrt(3)
		var r []LastIterateRound
		for _, q := range qs {
			r = append(r, LastIterateRound{Q: q, Shift: 2, Std: 1})
		}
		cases = append(cases, tc{"poisson binomial", r, w, []float64{0, 2 / s, 4 / s, 6 / s}})
	}
	// Two shifts: rounds (q 0.3, shift 1) and (q 0.5, shift 2.5), noise 0.8 and 1.2, plus a
	// round that only adds noise (q 0).
	{
		s := math.Sqrt(0.8*0.8 + 1.2*1.2 + 0.5*0.5)
		r := []LastIterateRound{{0.3, 1, 0.8}, {0.5, 2.5, 1.2}, {0, 7, 0.5}}
		w := []float64{0.7 * 0.5, 0.3 * 0.5, 0.7 * 0.5, 0.3 * 0.5}
		m := []float64{0, 1 / s, 2.5 / s, 3.5 / s}
		cases = append(cases, tc{"two shifts", r, w, m})
	}
	for _, c := range cases {
		l, err := NewLastIterate(c.rounds)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 0.05, 0.3, 1, 2} {
			in, out, err := l.Directions(eps)
			if err != nil {
				t.Fatal(err)
			}
			qin, qout := quadDirections(c.w, c.m, eps)
			if math.Abs(in-qin) > 1e-8 || math.Abs(out-qout) > 1e-8 {
				t.Errorf("%s eps=%v: directions (%.10g, %.10g), quadrature (%.10g, %.10g)", c.name, eps, in, out, qin, qout)
			}
		}
	}
}

// TestLastIterateMonotone: epsilon at fixed delta grows with the sampling rate at every T
// and stays below the RDP claim. It grows with the rounds from T = 10 on in this grid, and at
// every T for q >= 0.2, but not in general: with rare participation a second round adds more
// noise (std sqrt(2) z) than signal (one participation stays the likely one), so epsilon can
// fall from T = 1 to T = 2 (q = 0.01, z = 0.8, delta = 1e-5: 0.4833 then 0.3069; a trapezoid
// rule on the mixtures agrees: delta(0.307) = 3.64e-5 at T = 1 and 1.00e-5 at T = 2).
func TestLastIterateMonotone(t *testing.T) {
	const delta = 1e-5
	for _, z := range []float64{0.8, 2} {
		prevQ := make(map[int]float64)
		for _, q := range []float64{0.001, 0.01, 0.05, 0.2, 0.5, 1} {
			prev := 0.0
			for _, T := range []int{1, 2, 5, 10, 50, 200, 1000} {
				g, err := LastIterateEpsilon(q, z, T, delta)
				if err != nil {
					t.Fatal(err)
				}
				if g.Epsilon < prev && (T > 10 || q >= 0.2) {
					t.Errorf("z=%v q=%v: epsilon falls from %v to %v at T=%d", z, q, prev, g.Epsilon, T)
				}
				if g.Epsilon < prevQ[T] {
					t.Errorf("z=%v T=%d: epsilon falls from %v to %v at q=%v", z, T, prevQ[T], g.Epsilon, q)
				}
				if g.DeltaError > 1e-6*delta {
					t.Errorf("z=%v q=%v T=%d: delta error %v", z, q, T, g.DeltaError)
				}
				if T <= 200 && q < 1 {
					checkBelowRDP(t, mustLastIterate(t, q, z, T), q, z, T)
				}
				prev, prevQ[T] = g.Epsilon, g.Epsilon
			}
		}
	}
}

// TestLastIterateFallsWithRounds pins the counterexample to monotonicity in T above.
func TestLastIterateFallsWithRounds(t *testing.T) {
	var eps [3]float64
	for T := 1; T <= 2; T++ {
		g, err := LastIterateEpsilon(0.01, 0.8, T, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		eps[T] = g.Epsilon
	}
	if math.Abs(eps[1]-0.48333) > 1e-4 || math.Abs(eps[2]-0.30695) > 1e-4 {
		t.Errorf("q=0.01 z=0.8: epsilon %v at T=1, %v at T=2; want 0.48333, 0.30695", eps[1], eps[2])
	}
}

// TestLastIterateNotGDPBelowComposition: no mu below the composition's sqrt(T)/z makes the
// heuristic mu-GDP: the atom of weight q^T at shift T has the tail of the full Gaussian, so
// at large eps the profile crosses above the GDP profile of any smaller mu. That is why the
// heuristic is reported as epsilon at delta, not as a mu.
func TestLastIterateNotGDPBelowComposition(t *testing.T) {
	const q, z, T = 0.3, 1.0, 2
	l := mustLastIterate(t, q, z, T)
	muComp := math.Sqrt(T) / z
	small := 0.9 * muComp
	crossed := false
	for eps := 0.5; eps < 40; eps += 0.5 {
		d, _ := mustDelta(t, l, eps)
		if d > gaussDelta(small, eps) && gaussDelta(small, eps) > 0 {
			crossed = true
			break
		}
	}
	if !crossed {
		t.Errorf("the heuristic stayed below the %v-GDP profile: expected a crossing at large eps", small)
	}
	// And below the composition's own profile everywhere.
	for eps := 0.0; eps < 20; eps += 0.25 {
		if d, e := mustDelta(t, l, eps); d-e > gaussDelta(muComp, eps)+1e-15 {
			t.Errorf("eps=%v: heuristic delta %v above the composition's %v", eps, d, gaussDelta(muComp, eps))
		}
	}
}

func TestLastIterateErrors(t *testing.T) {
	for _, r := range [][]LastIterateRound{
		nil,
		{{Q: -0.1, Shift: 1, Std: 1}},
		{{Q: 0.5, Shift: -1, Std: 1}},
		{{Q: 0.5, Shift: 1, Std: math.NaN()}},
		{{Q: 0.5, Shift: 1, Std: 0}},
	} {
		if _, err := NewLastIterate(r); err == nil {
			t.Errorf("NewLastIterate(%v): no error", r)
		}
	}
	if _, err := LastIterateEpsilon(0.1, 1, 0, 1e-5); err == nil {
		t.Error("zero rounds: no error")
	}
	l := mustLastIterate(t, 0.1, 1, 3)
	if _, err := l.Epsilon(0); err == nil {
		t.Error("delta 0: no error")
	}
	if _, _, err := l.Delta(-1); err == nil {
		t.Error("negative epsilon: no error")
	}
	// No participation: nothing leaks.
	z, err := NewLastIterate([]LastIterateRound{{Q: 0, Shift: 1, Std: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := z.Epsilon(1e-5); err != nil || g.Epsilon != 0 {
		t.Errorf("q = 0: %+v, %v", g, err)
	}
}

// TestLastIterateEpsilons: the per-T column from a schedule agrees with the one-T function,
// and a time-varying schedule goes through the Poisson-binomial path.
func TestLastIterateEpsilons(t *testing.T) {
	sched := make([]Round, 50)
	for i := range sched {
		sched[i] = Round{Q: 0.05, Z: 1.1}
	}
	rounds := []int{50, 1, 10}
	gs, err := LastIterateEpsilons(sched, rounds, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	for i, T := range rounds {
		g, err := LastIterateEpsilon(0.05, 1.1, T, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if gs[i] != g {
			t.Errorf("T=%d: %+v, want %+v", T, gs[i], g)
		}
	}
	if _, err := LastIterateEpsilons(sched, []int{51}, 1e-5); err == nil {
		t.Error("T beyond the schedule: no error")
	}
	// Rates that differ by rounding alone: the recurrence must agree with the binomial.
	varied := make([]Round, 40)
	for i := range varied {
		varied[i] = Round{Q: 0.05 * (1 + float64(i%2)*1e-15), Z: 1.1}
	}
	gv, err := LastIterateEpsilons(varied, []int{40}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := LastIterateEpsilon(0.05, 1.1, 40, 1e-5)
	if math.Abs(gv[0].Epsilon-gb.Epsilon) > 1e-9 {
		t.Errorf("Poisson binomial %v, binomial %v", gv[0].Epsilon, gb.Epsilon)
	}
}

// TestLastIterateRoundsEpsilons: only the ratios of the shifts and stds matter, and a plan in
// two phases (another clip over divisor and noise from round 20 on) goes through the
// two-shift path.
func TestLastIterateRoundsEpsilons(t *testing.T) {
	var a, b []LastIterateRound
	for i := 0; i < 40; i++ {
		r := LastIterateRound{Q: 0.1, Shift: 0.02, Std: 0.025}
		if i >= 20 {
			r = LastIterateRound{Q: 0.2, Shift: 0.03, Std: 0.05}
		}
		a = append(a, r)
		b = append(b, LastIterateRound{Q: r.Q, Shift: 1e3 * r.Shift, Std: 1e3 * r.Std})
	}
	ga, err := LastIterateRoundsEpsilons(a, []int{10, 40}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := LastIterateRoundsEpsilons(b, []int{10, 40}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ga {
		if math.Abs(ga[i].Epsilon-gb[i].Epsilon) > 1e-8*ga[i].Epsilon {
			t.Errorf("scaled rounds: %v, %v", ga[i].Epsilon, gb[i].Epsilon)
		}
	}
	// The first 10 rounds are one phase: DP-FedAvg with z = 1.25.
	g, _ := LastIterateEpsilon(0.1, 1.25, 10, 1e-5)
	if math.Abs(ga[0].Epsilon-g.Epsilon) > 1e-8*g.Epsilon {
		t.Errorf("one phase: %v, DP-FedAvg %v", ga[0].Epsilon, g.Epsilon)
	}
	if !(ga[1].Epsilon > ga[0].Epsilon) {
		t.Errorf("two phases: epsilon %v at T=40 not above %v at T=10", ga[1].Epsilon, ga[0].Epsilon)
	}
}
