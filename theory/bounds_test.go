package theory

import (
	"context"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/audit"
)

// workedConfig is the worked example of docs/theory.md.
func workedConfig(schedule string) Config {
	return Config{Algo: algo.FedAvg, ScheduleName: schedule, Eta: 0.01, L: 1, K: 5, M: 20, Sigma: 0.1, Clip: 10}
}

func mustBounds(t *testing.T, cfg Config, rounds ...int) []Bound {
	t.Helper()
	bs, err := Bounds(cfg, rounds)
	if err != nil {
		t.Fatalf("Bounds(%+v): %v", cfg, err)
	}
	return bs
}

// TestWorkedExample reproduces every number of the worked example of docs/theory.md, which
// prints six decimals, so 1e-6 absolute.
func TestWorkedExample(t *testing.T) {
	const tol = 1e-6
	check := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s: got %.6f, docs/theory.md says %.6f", what, got, want)
		}
	}
	rounds := []int{1, 10, 100, 1000}
	constant := mustBounds(t, workedConfig("constant"), rounds...)
	stage := mustBounds(t, workedConfig("stage"), rounds...)
	for i, want := range []float64{2.236068, 7.000262, 14.081248, 14.178850} {
		check("constant mu", constant[i].Mu, want)
		check("constant closed form", constant[i].MuClosedForm, want)
		if constant[i].ClosedFormKind != "exact" {
			t.Errorf("constant closed form kind %q", constant[i].ClosedFormKind)
		}
	}
	for i, want := range []float64{2.236068, 2.121933, 1.249680, 0.605536} {
		check("stage mu", stage[i].Mu, want)
	}
	for i, want := range []float64{2.236068, 3.082207, 3.154362, 3.161487} {
		check("stage closed form", stage[i].MuClosedForm, want)
		if stage[i].ClosedFormKind != "upper" {
			t.Errorf("stage closed form kind %q", stage[i].ClosedFormKind)
		}
	}
	prox := Config{Algo: algo.FedProx, ProxConstant: true, Alpha: 2, Eta: 0.01, L: 1, K: 5, M: 20, Sigma: 0.1, Clip: 10}
	for i, b := range mustBounds(t, prox, 1, 10, 100) {
		want := []float64{22.360680, 38.692030, 38.729833}[i]
		check("fedprox mu", b.Mu, want)
		check("fedprox closed form", b.MuClosedForm, want)
	}
}

// TestClosedFormsExact: where docs/theory.md marks a closed form "=", it equals the exact H_0
// computation to 1e-9 relative over a sweep (the recurrence accumulates about T ulps).
func TestClosedFormsExact(t *testing.T) {
	n := 0
	for _, eta := range []float64{1e-4, 0.01, 0.2} {
		for _, L := range []float64{0.1, 1, 30} {
			for _, K := range []int{1, 5, 50} {
				for _, T := range []int{1, 2, 7, 100, 10000} {
					cfg := Config{Algo: algo.FedAvg, Eta: eta, L: L, K: K, M: 7, Sigma: 0.3, Clip: 2}
					b := mustBounds(t, cfg, T)[0]
					if e := relErr(b.MuClosedForm, b.Mu); e > 1e-9 || b.ClosedFormKind != "exact" {
						t.Errorf("constant eta=%v L=%v K=%v T=%v: exact %.15g closed %.15g (%q)", eta, L, K, T, b.Mu, b.MuClosedForm, b.ClosedFormKind)
					}
					n++
				}
			}
		}
	}
	for _, alpha := range []float64{1.01, 1.5, 4, 100} {
		for _, T := range []int{1, 3, 50, 10000} {
			cfg := Config{Algo: algo.FedProx, ProxConstant: true, Alpha: alpha, ScheduleName: "cyclic", Eta: 0.001, L: 1, K: 3, M: 4, N: 3, Sigma: 1, Clip: 1}
			b := mustBounds(t, cfg, T)[0]
			if e := relErr(b.MuClosedForm, b.Mu); e > 1e-9 || b.ClosedFormKind != "exact" {
				t.Errorf("fedprox alpha=%v T=%v: exact %.15g closed %.15g", alpha, T, b.Mu, b.MuClosedForm)
			}
			n++
		}
	}
	if n != 151 {
		t.Fatalf("swept %d cases", n)
	}
}

// TestUpperFormsNeverBelow: the stage-wise closed form is never below the exact bound, nor
// below the composition bound, across a sweep; mu never exceeds the composition bound.
func TestUpperFormsNeverBelow(t *testing.T) {
	for _, eta := range []float64{1e-3, 0.05, 0.5, 3} {
		for _, L := range []float64{0.01, 1, 10} {
			for _, K := range []int{1, 4, 20} {
				cfg := Config{Algo: algo.FedAvg, ScheduleName: "stage", Eta: eta, L: L, K: K, M: 10, Sigma: 0.5, Clip: 3}
				for _, b := range mustBounds(t, cfg, 1, 2, 3, 10, 57, 1000) {
					if b.MuClosedForm < b.Mu*(1-1e-12) || b.MuClosedForm < b.MuComposition*(1-1e-12) {
						t.Errorf("stage eta=%v L=%v K=%v T=%v: upper %.12g < exact %.12g or composition %.12g", eta, L, K, b.T, b.MuClosedForm, b.Mu, b.MuComposition)
					}
					if b.Mu > b.MuComposition*(1+1e-12) {
						t.Errorf("mu %.12g above composition %.12g", b.Mu, b.MuComposition)
					}
				}
			}
		}
	}
}

// TestLongRun: T = 10^6 rounds with (1 + eta L)^{KT} = 1.01^{5e6} ~ 10^{21605}, far beyond
// float64, gives finite values equal to the T -> infinity limit of Theorem 3a,
// (2 eta V K/(sqrt(m) sigma)) sqrt((a+1)/(a-1)), to 1e-9 relative.
func TestLongRun(t *testing.T) {
	cfg := workedConfig("constant")
	bs := mustBounds(t, cfg, 1000000, 1000)
	a := math.Pow(1.01, 5)
	limit := 2 * 0.01 * 10 * 5 / (math.Sqrt(20) * 0.1) * math.Sqrt((a+1)/(a-1))
	for _, b := range bs {
		if math.IsInf(b.Mu, 0) || math.IsNaN(b.Mu) {
			t.Fatalf("T=%d: mu = %v", b.T, b.Mu)
		}
	}
	if e := relErr(bs[0].Mu, limit); e > 1e-9 {
		t.Errorf("T=1e6: mu %.15g, limit %.15g (rel err %.2g)", bs[0].Mu, limit, e)
	}
	// The composition bound grows like sqrt(T): 2.236068 sqrt(1e6).
	if e := relErr(bs[0].MuComposition, 2.23606797749979*1000); e > 1e-9 {
		t.Errorf("T=1e6: composition %.15g", bs[0].MuComposition)
	}
	// A general (non-invariant) schedule over 10^6 rounds: the stage-wise bound must keep
	// decreasing and stay finite and positive.
	st := mustBounds(t, workedConfig("stage"), 1000, 1000000)
	if !(st[1].Mu > 0 && st[1].Mu < st[0].Mu) {
		t.Errorf("stage-wise T=1e6: %v after %v at T=1000", st[1].Mu, st[0].Mu)
	}
}

// bruteForceMu computes mu_T from docs/theory.md directly: rho_t and gamma_t from the nested
// sums and products exactly as printed, then c_t = prod_{j>t} rho_j as explicit products and
// H_0 = (sum c_t gamma_t)^2 / sum c_t^2, all in 256-bit big.Float (whose exponent range
// holds the products that overflow float64).
func bruteForceMu(cfg Config, sched Schedule, T int) float64 {
	const prec = 256
	nf := func(x float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(x) }
	n := float64(cfg.EffectiveClients())
	rho := make([]*big.Float, T)
	gamma := make([]*big.Float, T)
	for t := 0; t < T; t++ {
		eta := func(k int) *big.Float { return nf(sched.Eta(k, t)) }
		prodFrom := func(from int, coef float64) *big.Float { // prod_{j>=from} (1 - eta_j coef)
			p := nf(1)
			for j := from; j < cfg.K; j++ {
				f := nf(1)
				f.Sub(f, new(big.Float).Mul(eta(j), nf(coef)))
				p.Mul(p, f)
			}
			return p
		}
		r, g := nf(0), nf(0)
		switch {
		case cfg.Algo == algo.FedProx && cfg.ProxConstant:
			r = nf(cfg.Alpha / (cfg.Alpha - cfg.L))
			g = nf(2 * cfg.Clip / (n * cfg.Alpha))
		case cfg.Algo == algo.FedProx:
			r.Add(r, prodFrom(0, cfg.Alpha-cfg.L))
			for k := 0; k < cfg.K; k++ {
				r.Add(r, new(big.Float).Mul(new(big.Float).Mul(prodFrom(k+1, cfg.Alpha-cfg.L), eta(k)), nf(cfg.Alpha)))
				g.Add(g, new(big.Float).Mul(prodFrom(k+1, cfg.Alpha), eta(k)))
			}
			g.Mul(g, nf(2*cfg.Clip/n))
		default:
			r = prodFrom(0, -cfg.L)
			for k := 0; k < cfg.K; k++ {
				g.Add(g, eta(k))
			}
			g.Mul(g, nf(2*cfg.Clip/n))
		}
		rho[t], gamma[t] = r, g
	}
	num, den := nf(0), nf(0)
	for t := 0; t < T; t++ {
		c := nf(1)
		for j := t + 1; j < T; j++ {
			c.Mul(c, rho[j])
		}
		num.Add(num, new(big.Float).Mul(c, gamma[t]))
		den.Add(den, new(big.Float).Mul(c, c))
	}
	h := new(big.Float).Quo(new(big.Float).Mul(num, num), den)
	h.Mul(h, nf(n))
	mu, _ := new(big.Float).Sqrt(h).Float64()
	return mu / cfg.Sigma
}

// TestBoundsBruteForce: the log-space one-pass computation agrees with the direct big.Float
// computation to 1e-12 relative for every schedule, both algorithms and random tables,
// including cases where prod rho_t overflows float64.
func TestBoundsBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randomTable := func(rounds, K int, hi float64) *TableSchedule {
		rows := make([][]float64, rounds)
		for i := range rows {
			rows[i] = make([]float64, K)
			for k := range rows[i] {
				rows[i][k] = hi * (0.05 + 0.95*rng.Float64())
			}
		}
		ts, err := NewTableSchedule(rows)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	const maxT = 40
	cases := []Config{
		{Algo: algo.FedAvg, ScheduleName: "constant", Eta: 0.01, L: 1, K: 5, M: 20},
		{Algo: algo.FedAvg, ScheduleName: "cyclic", Eta: 0.3, L: 2, K: 7, M: 3},
		{Algo: algo.FedAvg, ScheduleName: "stage", Eta: 0.1, L: 0.5, K: 4, M: 9, N: 4},
		{Algo: algo.FedAvg, ScheduleName: "iterative", Eta: 0.5, L: 3, K: 6, M: 2},
		{Algo: algo.FedAvg, ScheduleName: "constant", Eta: 1, L: 50, K: 20, M: 5}, // (51^20)^40 ~ 1e1366
		{Algo: algo.DPSGD, ScheduleName: "iterative", Eta: 0.05, L: 1, K: 1},
		{Algo: algo.FedAvg, Schedule: randomTable(maxT, 5, 0.2), L: 1.5, K: 5, M: 10},
		{Algo: algo.FedProx, ScheduleName: "constant", Eta: 0.05, L: 1, Alpha: 3, K: 5, M: 20},
		{Algo: algo.FedProx, ScheduleName: "cyclic", Eta: 0.2, L: 0.5, Alpha: 1, K: 8, M: 4, N: 2},
		{Algo: algo.FedProx, Schedule: randomTable(maxT, 4, 0.4), L: 1, Alpha: 2.5, K: 4, M: 6},
		{Algo: algo.FedProx, ScheduleName: "stage", ProxConstant: true, Eta: 0.1, L: 1, Alpha: 1.2, K: 3, M: 5},
	}
	for i, cfg := range cases {
		cfg.Sigma, cfg.Clip = 0.7, 2
		sched, err := cfg.resolve()
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		rounds := []int{1, 2, 3, 5, 8, 13, 21, 34, maxT}
		for j, b := range mustBounds(t, cfg, rounds...) {
			want := bruteForceMu(cfg, sched, rounds[j])
			if e := relErr(b.Mu, want); e > 1e-12 {
				t.Errorf("case %d (%s %s) T=%d: mu %.17g, brute force %.17g (rel err %.2g)", i, cfg.Algo, scheduleName(sched), b.T, b.Mu, want, e)
			}
		}
	}
}

// TestBoundsComposition: mu_comp = sqrt(m)/sigma sqrt(sum_t gamma_t^2), here for the
// stage-wise schedule where gamma_t = 2 V K eta/(m (t+1)), summed directly; and mu = mu_comp at
// T = 1 (one round is one Gaussian mechanism either way).
func TestBoundsComposition(t *testing.T) {
	cfg := workedConfig("stage")
	for _, b := range mustBounds(t, cfg, 1, 10, 100) {
		sum := 0.0
		for s := 0; s < b.T; s++ {
			g := 2 * 10 * 5 * 0.01 / (20 * float64(s+1))
			sum += g * g
		}
		want := math.Sqrt(20) / 0.1 * math.Sqrt(sum)
		if e := relErr(b.MuComposition, want); e > 1e-13 {
			t.Errorf("T=%d: composition %.15g, want %.15g", b.T, b.MuComposition, want)
		}
		if b.T == 1 && relErr(b.Mu, b.MuComposition) > 1e-15 {
			t.Errorf("T=1: mu %v != composition %v", b.Mu, b.MuComposition)
		}
	}
}

// TestBoundsRoundsOrder: answers come in the order asked, repeats included, and equal the
// answers asked one at a time.
func TestBoundsRoundsOrder(t *testing.T) {
	cfg := workedConfig("iterative")
	rounds := []int{100, 1, 10, 1, 37}
	all := mustBounds(t, cfg, rounds...)
	for i, T := range rounds {
		one := mustBounds(t, cfg, T)[0]
		if all[i] != one && !(math.IsNaN(all[i].MuClosedForm) && math.IsNaN(one.MuClosedForm) && all[i].Mu == one.Mu && all[i].T == one.T) {
			t.Errorf("rounds[%d]=%d: %+v, alone %+v", i, T, all[i], one)
		}
	}
}

// TestBoundsParticipationAndDPSGD: n of m participating gives the bound of n clients, and
// DP-SGD gives the bound of one client.
func TestBoundsParticipationAndDPSGD(t *testing.T) {
	partial := workedConfig("cyclic")
	partial.N = 4
	full := workedConfig("cyclic")
	full.M = 4
	dp := workedConfig("cyclic")
	dp.Algo, dp.M, dp.Batch = algo.DPSGD, 0, 1 // a batch of one example: one client's clipped step
	one := workedConfig("cyclic")
	one.M = 1
	for _, pair := range [][2]Config{{partial, full}, {dp, one}} {
		a, b := mustBounds(t, pair[0], 1, 50), mustBounds(t, pair[1], 1, 50)
		for i := range a {
			if a[i].Mu != b[i].Mu || a[i].MuComposition != b[i].MuComposition {
				t.Errorf("%+v vs %+v: %v vs %v", pair[0], pair[1], a[i], b[i])
			}
		}
	}
	// Under partial participation the bound scales as 1/sqrt(n).
	p := mustBounds(t, partial, 10)[0].Mu
	f := mustBounds(t, workedConfig("cyclic"), 10)[0].Mu
	if e := relErr(p/f, math.Sqrt(20.0/4)); e > 1e-12 {
		t.Errorf("n=4 vs m=20: ratio %v, want sqrt(5)", p/f)
	}
}

// TestDPSGDLocalStepsAgainstExactInstance: DP-SGD sums its batch's clipped gradients, so from
// the second local step on the other examples' gradients differ between the worlds too; gamma_t
// = 2V sum_k eta_k (right for one step, or one example a batch) understated a round of K >= 2
// steps up to (B+1)/2 times, and a deployment that met the bound could be judged violated.
// Exact instance, one dimension, T = 1: B - 1 examples of loss -(l/2) w^2 (gradient -l w, l the
// per-example smoothness; below the clip norm on this path) and the target's gradient -V in C,
// +V in C' from w_0 = 0. Then d_{k+1} = (1 + eta (B-1) l) d_k + 2 eta V exactly, and the round
// is one Gaussian mechanism: mu = d_K / sigma. The bound (L = B l, the sum's smoothness) must
// equal it, and without L it must cover it with every other example at its largest change.
func TestDPSGDLocalStepsAgainstExactInstance(t *testing.T) {
	for _, c := range []struct {
		eta, l float64
		K, B   int
	}{{0.01, 1, 5, 100}, {0.05, 2, 2, 5}, {0.002, 0.5, 8, 32}, {0.01, 1, 1, 100}} {
		const V, sigma = 1.0, 1.0
		d, w := 0.0, 0.0
		for range c.K {
			d = (1+c.eta*float64(c.B-1)*c.l)*d + 2*c.eta*V
			w = (1+c.eta*float64(c.B-1)*c.l)*w + c.eta*V
		}
		if c.l*w > V {
			t.Fatalf("%+v: the examples' gradients reach the clip norm (%v): not the exact instance", c, c.l*w)
		}
		exact := d / sigma
		cfg := Config{Algo: algo.DPSGD, Eta: c.eta, L: float64(c.B) * c.l, K: c.K, Sigma: sigma, Clip: V, Batch: c.B}
		b := mustBounds(t, cfg, 1)[0]
		if relErr(b.MuComposition, exact) > 1e-12 || relErr(b.Mu, exact) > 1e-12 {
			t.Errorf("%+v: composition %v, convergent %v; exact mu %v", c, b.MuComposition, b.Mu, exact)
		}
		cfg.SmoothnessUnknown = true
		free := mustBounds(t, cfg, 1)[0].MuComposition
		// Without L every other example may change by 2V: 2 eta V (1 + B (K - 1)).
		if want := 2 * c.eta * V * (1 + float64(c.B)*float64(c.K-1)) / sigma; relErr(free, want) > 1e-12 || free < exact {
			t.Errorf("%+v: without L %v, want %v (>= exact %v)", c, free, want, exact)
		}
	}
}

// TestBoundsEpsilon: epsilon is the GDP conversion of mu at the configured delta.
func TestBoundsEpsilon(t *testing.T) {
	cfg := workedConfig("constant")
	cfg.Delta = 1e-7
	b := mustBounds(t, cfg, 10)[0]
	want, _ := audit.EpsilonFromGDP(b.Mu, 1e-7)
	wantComp, _ := audit.EpsilonFromGDP(b.MuComposition, 1e-7)
	if b.Delta != 1e-7 || b.Epsilon != want || b.EpsilonComposition != wantComp || !(want > 0) {
		t.Errorf("got %+v, want eps %v, composition eps %v", b, want, wantComp)
	}
	cfg.Delta = 0
	if b := mustBounds(t, cfg, 10)[0]; b.Delta != DefaultDelta {
		t.Errorf("default delta %v", b.Delta)
	}
}

// TestBoundsTableMatchesNamed: a table that spells out a named schedule gives the same bound
// (to rounding: the table path has no closed form and recomputes every round).
func TestBoundsTableMatchesNamed(t *testing.T) {
	const T, K = 30, 5
	for _, name := range []string{"constant", "cyclic", "stage", "iterative"} {
		s, err := ParseSchedule(name, 0.02, K)
		if err != nil {
			t.Fatal(err)
		}
		rows := make([][]float64, T)
		for r := range rows {
			rows[r] = make([]float64, K)
			for k := range rows[r] {
				rows[r][k] = s.Eta(k, r)
			}
		}
		table, err := NewTableSchedule(rows)
		if err != nil {
			t.Fatal(err)
		}
		named := workedConfig(name)
		named.Eta = 0.02
		tab := named
		tab.Schedule, tab.Eta = table, 0
		a, b := mustBounds(t, named, 1, T)[1], mustBounds(t, tab, 1, T)[1]
		if e := relErr(a.Mu, b.Mu); e > 1e-13 {
			t.Errorf("%s: named %v, table %v", name, a.Mu, b.Mu)
		}
		if !math.IsNaN(b.MuClosedForm) {
			t.Errorf("%s: table schedule got closed form %v", name, b.MuClosedForm)
		}
	}
}

func TestRoundCoefficients(t *testing.T) {
	rho, gamma, err := workedConfig("constant").RoundCoefficients(3)
	if err != nil {
		t.Fatal(err)
	}
	if relErr(rho, math.Pow(1.01, 5)) > 1e-14 || relErr(gamma, 2*10*5*0.01/20.0) > 1e-14 {
		t.Errorf("constant: rho %v gamma %v", rho, gamma)
	}
	// FedProx, constant eta: Lemma 10 gives alpha/(alpha-L) - L (1 - eta(alpha-L))^K/(alpha-L)
	// and Lemma 9 gives (2V/m)(1 - (1 - eta alpha)^K)/alpha.
	cfg := Config{Algo: algo.FedProx, Eta: 0.1, L: 1, Alpha: 3, K: 4, M: 5, Sigma: 1, Clip: 2}
	rho, gamma, err = cfg.RoundCoefficients(0)
	if err != nil {
		t.Fatal(err)
	}
	wantRho := 3.0/2 - math.Pow(1-0.1*2, 4)/2
	wantGamma := 2 * 2.0 / 5 * (1 - math.Pow(1-0.3, 4)) / 3
	if relErr(rho, wantRho) > 1e-14 || relErr(gamma, wantGamma) > 1e-14 {
		t.Errorf("fedprox: rho %v (want %v) gamma %v (want %v)", rho, wantRho, gamma, wantGamma)
	}
	if _, _, err := cfg.RoundCoefficients(-1); err == nil {
		t.Error("negative round accepted")
	}
}

func TestBoundsCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BoundsContext(ctx, workedConfig("stage"), []int{10}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// customSchedule is a Schedule of the caller's own, checked step by step during the pass.
type customSchedule func(k, t int) float64

func (f customSchedule) Eta(k, t int) float64 { return f(k, t) }

func TestValidate(t *testing.T) {
	good := workedConfig("constant")
	if err := good.Validate(); err != nil {
		t.Fatalf("worked example rejected: %v", err)
	}
	prox := Config{Algo: algo.FedProx, Eta: 0.1, L: 1, Alpha: 2, K: 5, M: 20, Sigma: 0.1, Clip: 10}
	if err := prox.Validate(); err != nil {
		t.Fatalf("fedprox rejected: %v", err)
	}
	table, _ := NewTableSchedule([][]float64{{0.1, 0.1}, {0.1, 0.9}})
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"algo", func(c *Config) { c.Algo = "sgd" }, "Algo"},
		{"K", func(c *Config) { c.K = 0 }, "K"},
		{"M", func(c *Config) { c.M = 0 }, "M"},
		{"N>M", func(c *Config) { c.N = 21 }, "N"},
		{"N<0", func(c *Config) { c.N = -1 }, "N"},
		{"sigma", func(c *Config) { c.Sigma = 0 }, "Sigma"},
		{"sigma NaN", func(c *Config) { c.Sigma = math.NaN() }, "Sigma"},
		{"clip", func(c *Config) { c.Clip = -1 }, "Clip"},
		{"L", func(c *Config) { c.L = 0 }, "L"},
		{"eta", func(c *Config) { c.Eta = 0 }, "Eta"},
		{"eta inf", func(c *Config) { c.Eta = math.Inf(1) }, "Eta"},
		{"schedule", func(c *Config) { c.ScheduleName = "cosine" }, "ScheduleName"},
		{"delta", func(c *Config) { c.Delta = 1 }, "Delta"},
		{"prox constant on fedavg", func(c *Config) { c.ProxConstant = true }, "ProxConstant"},
		{"dpsgd with m", func(c *Config) { c.Algo = algo.DPSGD }, "M"},
		{"dpsgd with n", func(c *Config) { c.Algo, c.M, c.N = algo.DPSGD, 1, 2 }, "N"},
		{"table too few steps", func(c *Config) { c.Schedule = table }, "Schedule"},
		{"fedprox alpha <= L", func(c *Config) { *c = prox; c.Alpha = 1 }, "Alpha"},
		{"fedprox alpha NaN", func(c *Config) { *c = prox; c.Alpha = math.NaN() }, "Alpha"},
		{"fedprox eta >= 1/(alpha-L)", func(c *Config) { *c = prox; c.Eta = 1 }, "Eta"},
		{"fedprox eta > 1/alpha", func(c *Config) { *c = prox; c.Eta = 0.6 }, "Eta"},
		{"fedprox table round 1", func(c *Config) { *c = prox; c.K = 2; c.Schedule = table }, "Eta"},
	} {
		cfg := good
		tc.edit(&cfg)
		err := cfg.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v, want an error on %s", tc.name, err, tc.field)
		}
		if _, err := Bounds(cfg, []int{1}); err == nil {
			t.Errorf("%s: Bounds accepted an invalid config", tc.name)
		}
	}
	// Errors found only during the pass: a table too short for T, a custom schedule that
	// turns invalid later, rounds < 1.
	short := good
	short.Schedule, short.K = table, 2
	if _, err := Bounds(short, []int{3}); err == nil {
		t.Error("table of 2 rounds accepted for T=3")
	}
	custom := good
	custom.Schedule = customSchedule(func(k, t int) float64 { return 0.1 - 0.01*float64(t) })
	if _, err := Bounds(custom, []int{5}); err != nil {
		t.Errorf("custom schedule, valid for T=5: %v", err)
	}
	if _, err := Bounds(custom, []int{20}); err == nil {
		t.Error("custom schedule with eta <= 0 at t=10 accepted")
	}
	customProx := prox
	customProx.Schedule = customSchedule(func(k, t int) float64 { return 0.1 * float64(t+1) })
	if _, err := Bounds(customProx, []int{10}); err == nil {
		t.Error("custom FedProx schedule exceeding 1/alpha accepted")
	}
	for _, rounds := range [][]int{nil, {0}, {5, -1}} {
		if _, err := Bounds(good, rounds); err == nil {
			t.Errorf("rounds %v accepted", rounds)
		}
	}
}
