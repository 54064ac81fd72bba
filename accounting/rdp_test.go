package accounting

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
)

// logIntegral is log of the integral of exp(logf) over the line, by Gauss-Legendre on
// panels of width h covering where logf is within 80 of its maximum on [lo, hi] (the rest
// contributes below e^-80 relative). Scaling by the maximum keeps huge integrands finite.
func logIntegral(logf func(float64) float64, lo, hi, h float64) float64 {
	m := math.Inf(-1)
	for x := lo; x <= hi; x += h / 8 {
		m = math.Max(m, logf(x))
	}
	var sum float64
	for a := lo; a < hi; a += h {
		if logf(a) < m-80 && logf(a+h) < m-80 && logf(a+h/2) < m-80 {
			continue
		}
		sum += quad.Fixed(func(x float64) float64 { return math.Exp(logf(x) - m) }, a, a+h, 64, quad.Legendre{}, 0)
	}
	return m + math.Log(sum)
}

// sgmLogAByIntegration is log A_alpha = log of the integral of mu0 (mu/mu0)^alpha, with
// mu0 = N(0, sigma^2) and mu = (1-q) mu0 + q N(1, sigma^2), integrated numerically:
// independent of the series and the binomial expansion.
func sgmLogAByIntegration(q, sigma, alpha float64) float64 {
	s2 := sigma * sigma
	logf := func(z float64) float64 {
		logPhi := -z*z/(2*s2) - math.Log(sigma*math.Sqrt(2*math.Pi))
		ratio := LogAddExp(math.Log1p(-q), math.Log(q)+(2*z-1)/(2*s2)) // log(mu/mu0)
		return logPhi + alpha*ratio
	}
	return logIntegral(logf, -40*sigma-1, alpha+40*sigma+1, sigma/4)
}

// TestSampledGaussianAgainstIntegration compares the accountant with numerical
// integration of the mixture density ratio, at integer orders (binomial expansion) and
// fractional ones (the two series). Tolerance 1e-8 relative on log A: the quadrature is
// accurate to about 1e-13, the series bound adds at most 1e-13 to A.
func TestSampledGaussianAgainstIntegration(t *testing.T) {
	for _, q := range []float64{0.01, 0.05, 0.2, 0.5} {
		for _, sigma := range []float64{0.8, 1.1, 2, 4} {
			for _, alpha := range []float64{1.25, 1.5, 2, 2.5, 3, 4.75, 5, 8, 12.5, 20, 32} {
				got, err := SampledGaussianRDPAt(q, sigma, alpha)
				if err != nil {
					t.Fatal(err)
				}
				want := sgmLogAByIntegration(q, sigma, alpha) / (alpha - 1)
				if math.Abs(got-want) > 1e-8*math.Max(want, 1e-6) {
					t.Errorf("q=%v sigma=%v alpha=%v: accountant %.12g, integration %.12g", q, sigma, alpha, got, want)
				}
			}
		}
	}
}

// TestSampledGaussianFractionalContinuity checks that the series at alpha = n +- 1e-7 meet
// the binomial expansion at integer n (the two computations share no code path).
func TestSampledGaussianFractionalContinuity(t *testing.T) {
	for _, q := range []float64{0.004, 0.1, 0.9} {
		for _, n := range []float64{2, 3, 7, 16} {
			at, _ := SampledGaussianRDPAt(q, 1.3, n)
			lo, _ := SampledGaussianRDPAt(q, 1.3, n-1e-7)
			hi, _ := SampledGaussianRDPAt(q, 1.3, n+1e-7)
			if !(lo <= at*(1+1e-6) && at <= hi*(1+1e-6)) || math.Abs(hi-lo) > 1e-5*at {
				t.Errorf("q=%v n=%v: rdp(n-)=%.12g rdp(n)=%.12g rdp(n+)=%.12g", q, n, lo, at, hi)
			}
		}
	}
}

func TestSampledGaussianLimits(t *testing.T) {
	orders := DefaultOrders()
	for _, sigma := range []float64{0.5, 1, 3} {
		full, err := SampledGaussianRDP(1, sigma, orders)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range orders {
			if want := a / (2 * sigma * sigma); full[i] != want {
				t.Errorf("q=1 sigma=%v alpha=%v: %v, want alpha/(2 sigma^2) = %v", sigma, a, full[i], want)
			}
			// Just below q = 1 the general formulas must approach the closed form.
			near, _ := SampledGaussianRDPAt(1-1e-9, sigma, a)
			if math.Abs(near-full[i]) > 1e-6*full[i] {
				t.Errorf("q=1-1e-9 sigma=%v alpha=%v: %.10g, q=1 gives %.10g", sigma, a, near, full[i])
			}
		}
		zero, _ := SampledGaussianRDP(0, sigma, orders)
		for i := range zero {
			if zero[i] != 0 {
				t.Errorf("q=0: rdp %v at order %v", zero[i], orders[i])
			}
		}
	}
	// Monotone in q and in alpha.
	prev := 0.0
	for _, q := range []float64{0.001, 0.01, 0.1, 0.5, 0.99} {
		v, _ := SampledGaussianRDPAt(q, 1, 6.5)
		if v <= prev {
			t.Errorf("rdp not increasing in q at q=%v: %v <= %v", q, v, prev)
		}
		prev = v
	}
}

func TestSampledGaussianRejects(t *testing.T) {
	for _, c := range []struct{ q, sigma, alpha float64 }{
		{-0.1, 1, 2}, {1.1, 1, 2}, {math.NaN(), 1, 2}, {0.1, 0, 2}, {0.1, -1, 2},
		{0.1, math.Inf(1), 2}, {0.1, 1, 1}, {0.1, 1, 0.5}, {0.1, 1, math.NaN()},
	} {
		if _, err := SampledGaussianRDPAt(c.q, c.sigma, c.alpha); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := SampledGaussianRDP(0.1, 1, nil); err == nil {
		t.Error("empty orders accepted")
	}
}

// tfPrivacyOrders is the order list of TF-Privacy's compute_dp_sgd_privacy (2019-2021):
// 1.1, 1.2, ..., 10.9 and 12, ..., 63.
func tfPrivacyOrders() []float64 {
	var o []float64
	for x := 1; x < 100; x++ {
		o = append(o, 1+float64(x)/10)
	}
	for a := 12; a < 64; a++ {
		o = append(o, float64(a))
	}
	return o
}

// TestPublishedDPSGDNumbers reproduces accountant numbers published with TF-Privacy and
// Opacus. Sources:
//   - tensorflow/privacy, tutorials/README.md ("Select Parameters" table and the
//     compute_dp_sgd_privacy example): MNIST, N = 60000, batch 256, delta = 1e-5, RDP
//     accountant with the standard conversion, steps = epochs*60000/256 (integer division):
//     sigma 1.1, 60 epochs -> 3.01; sigma 1.3, 15 epochs -> 1.19; sigma 0.7, 45 epochs ->
//     7.10; sigma 1.1 after 1 and 2 epochs -> 1.03 and 1.11.
//   - opacus.ai/api/compute_dp_sgd_privacy.html: q = 0.01, sigma = 1.0, 300 steps, alphas
//     {2, 5, 10, 20, 100}, delta = 1e-5 -> eps 2.39 at alpha 5 (Opacus >= 1.0 converts with
//     Balle et al.'s bound).
//
// The numbers are printed to two decimals, so the tolerance is 0.005 plus 0.001 for the
// rounding of the step count.
func TestPublishedDPSGDNumbers(t *testing.T) {
	cases := []struct {
		name         string
		q, sigma     float64
		steps        int
		orders       []float64
		conv         Conversion
		want, wantAt float64
	}{
		{"tf 1.1x60", 256.0 / 60000, 1.1, 60 * 60000 / 256, tfPrivacyOrders(), Standard, 3.01, 0},
		{"tf 1.3x15", 256.0 / 60000, 1.3, 15 * 60000 / 256, tfPrivacyOrders(), Standard, 1.19, 0},
		{"tf 0.7x45", 256.0 / 60000, 0.7, 45 * 60000 / 256, tfPrivacyOrders(), Standard, 7.10, 0},
		{"tf 1.1x1", 256.0 / 60000, 1.1, 60000 / 256, tfPrivacyOrders(), Standard, 1.03, 0},
		{"tf 1.1x2", 256.0 / 60000, 1.1, 2 * 60000 / 256, tfPrivacyOrders(), Standard, 1.11, 0},
		{"opacus", 0.01, 1.0, 300, []float64{2, 5, 10, 20, 100}, Balle, 2.39, 5},
	}
	for _, c := range cases {
		acc, err := NewAccountant(c.orders)
		if err != nil {
			t.Fatal(err)
		}
		if err := acc.AddSampledGaussian(c.q, c.sigma, c.steps); err != nil {
			t.Fatal(err)
		}
		eps, at, err := acc.Epsilon(1e-5, c.conv)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(eps-c.want) > 0.006 {
			t.Errorf("%s: eps %.4f (order %v), published %.2f", c.name, eps, at, c.want)
		}
		if c.wantAt != 0 && at != c.wantAt {
			t.Errorf("%s: optimal order %v, published %v", c.name, at, c.wantAt)
		}
	}
}

// TestLaplaceRDPAgainstIntegration integrates the Rényi divergence of Lap(0, b) and
// Lap(1, b) numerically (the density ratio has kinks only at 0 and 1, which are panel
// edges) and compares with the closed form; it also checks the limits alpha -> 1 (KL) and
// alpha -> infinity (pure DP, 1/b).
func TestLaplaceRDPAgainstIntegration(t *testing.T) {
	for _, b := range []float64{0.3, 1, 2.5, 10} {
		for _, alpha := range []float64{1.25, 2, 3.5, 10, 40} {
			got, err := LaplaceRDP(b, alpha)
			if err != nil {
				t.Fatal(err)
			}
			logf := func(x float64) float64 {
				// p = Lap(1, b) (shifted), p' = Lap(0, b): p^alpha p'^(1-alpha).
				return alpha*(-math.Abs(x-1)/b) + (1-alpha)*(-math.Abs(x)/b) - math.Log(2*b)
			}
			want := logIntegral(logf, -200*b-1, 200*b+2, 0.5) / (alpha - 1)
			if math.Abs(got-want) > 1e-9*math.Max(want, 1e-6) {
				t.Errorf("b=%v alpha=%v: closed form %.12g, integration %.12g", b, alpha, got, want)
			}
		}
		kl := 1/b + math.Exp(-1/b) - 1
		if near, _ := LaplaceRDP(b, 1+1e-6); math.Abs(near-kl) > 1e-5*kl {
			t.Errorf("b=%v: rdp(1+) %.10g, KL %.10g", b, near, kl)
		}
		if far, _ := LaplaceRDP(b, 1e7); math.Abs(far-1/b) > 1e-5/b {
			t.Errorf("b=%v: rdp(inf) %.10g, 1/b = %.10g", b, far, 1/b)
		}
	}
}

func TestConversions(t *testing.T) {
	orders := DefaultOrders()
	rdp, _ := SampledGaussianRDP(0.05, 1.2, orders)
	for i := range rdp {
		rdp[i] *= 500
	}
	for _, delta := range []float64{1e-3, 1e-5, 1e-9} {
		es, as, err := EpsilonFromRDP(orders, rdp, delta, Standard)
		if err != nil {
			t.Fatal(err)
		}
		eb, ab, err := EpsilonFromRDP(orders, rdp, delta, Balle)
		if err != nil {
			t.Fatal(err)
		}
		if eb > es {
			t.Errorf("delta=%v: Balle %v looser than standard %v", delta, eb, es)
		}
		// Direct evaluation at the reported orders.
		i := indexOf(orders, as)
		if want := rdp[i] + math.Log(1/delta)/(as-1); math.Abs(es-want) > 1e-12*want {
			t.Errorf("standard: %v, formula %v", es, want)
		}
		j := indexOf(orders, ab)
		if want := rdp[j] + math.Log((ab-1)/ab) - (math.Log(delta)+math.Log(ab))/(ab-1); math.Abs(eb-want) > 1e-12*want {
			t.Errorf("balle: %v, formula %v", eb, want)
		}
		// delta(eps(delta)) = delta for both conversions.
		for _, c := range []struct {
			conv Conversion
			eps  float64
		}{{Standard, es}, {Balle, eb}} {
			d, _, err := DeltaFromRDP(orders, rdp, c.eps, c.conv)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(math.Log(d)-math.Log(delta)) > 1e-9 {
				t.Errorf("%v: delta(eps(%v)) = %v", c.conv, delta, d)
			}
		}
	}
	// The Gaussian mechanism: RDP alpha/(2 s^2) on a fine grid gives the standard
	// conversion's closed-form optimum eps = 1/(2s^2) + sqrt(2 log(1/delta))/s, up to the
	// grid spacing.
	var fine []float64
	for a := 1.001; a < 400; a += 0.001 {
		fine = append(fine, a)
	}
	g, _ := GaussianRDPCurve(3, fine)
	eps, _, _ := EpsilonFromRDP(fine, g, 1e-5, Standard)
	if want := 1/(2*9.0) + math.Sqrt(2*math.Log(1e5))/3; math.Abs(eps-want) > 1e-6 {
		t.Errorf("gaussian: eps %v, closed form %v", eps, want)
	}
	if _, _, err := EpsilonFromRDP(orders, rdp, 0, Standard); err == nil {
		t.Error("delta 0 accepted")
	}
	if _, _, err := EpsilonFromRDP(orders, rdp[:3], 1e-5, Standard); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, _, err := DeltaFromRDP(orders, rdp, -1, Balle); err == nil {
		t.Error("negative epsilon accepted")
	}
}

func indexOf(xs []float64, v float64) int {
	for i, x := range xs {
		if x == v {
			return i
		}
	}
	return -1
}

// TestAccountantComposition checks that heterogeneous rounds add order by order.
func TestAccountantComposition(t *testing.T) {
	orders := []float64{1.5, 2, 8, 32}
	acc, err := NewAccountant(orders)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := SampledGaussianRDP(0.1, 1, orders)
	b, _ := LaplaceRDPCurve(2, orders)
	if err := acc.Add(a, 3); err != nil {
		t.Fatal(err)
	}
	if err := acc.Add(b, 2); err != nil {
		t.Fatal(err)
	}
	for i, v := range acc.RDP() {
		if want := 3*a[i] + 2*b[i]; math.Abs(v-want) > 1e-15*want {
			t.Errorf("order %v: %v, want %v", orders[i], v, want)
		}
	}
	if err := acc.Add(a[:2], 1); err == nil {
		t.Error("short curve accepted")
	}
	if err := acc.Add([]float64{1, 1, math.NaN(), 1}, 1); err == nil {
		t.Error("NaN accepted")
	}
}

func TestLogErfc(t *testing.T) {
	for _, x := range []float64{-3, 0, 1, 5, 20, 24.999} {
		if got, want := logErfc(x), math.Log(math.Erfc(x)); math.Abs(got-want) > 1e-14*math.Max(1, math.Abs(want)) {
			t.Errorf("logErfc(%v) = %v, want %v", x, got, want)
		}
	}
	// Past the cutoff, where math.Erfc is still a normal float64, the series must agree
	// with it.
	for _, x := range []float64{erfcSeriesCutoff, 25.5, 26.3} {
		if got, want := logErfc(x), math.Log(math.Erfc(x)); math.Abs(got-want) > 1e-13*math.Abs(want) {
			t.Errorf("logErfc(%v) = %.17g, math.Erfc gives %.17g", x, got, want)
		}
	}
	if v := logErfc(1e4); math.IsInf(v, 0) || math.IsNaN(v) {
		t.Errorf("logErfc(1e4) = %v", v)
	}
}

// TestAbadiSettingRDP is the setting of Abadi et al., "Deep learning with differential
// privacy" (2016), as recomputed with the RDP accountant by Mironov, Talwar and Zhang,
// "Rényi differential privacy of the sampled Gaussian mechanism" (2019): q = 0.01, sigma = 4,
// 10^4 steps, delta = 1e-5 give epsilon of about 1.26 with the standard conversion (the
// moments accountant of the 2016 paper reported 1.26 too). The band [1.2, 1.3] allows for the
// order grid (DefaultOrders and TF-Privacy's give the same optimum, order 20); Balle et al.'s
// conversion can only be lower.
func TestAbadiSettingRDP(t *testing.T) {
	for _, orders := range [][]float64{nil, tfPrivacyOrders()} {
		std, err := DPFedAvgEpsilon(0.01, 4, 10000, Claim{Orders: orders, Delta: 1e-5, Conversion: Standard})
		if err != nil {
			t.Fatal(err)
		}
		if std.Epsilon < 1.2 || std.Epsilon > 1.3 {
			t.Errorf("orders %d: eps %.4f at order %v, want about 1.26", len(orders), std.Epsilon, std.Order)
		}
		balle, err := DPFedAvgEpsilon(0.01, 4, 10000, Claim{Orders: orders, Delta: 1e-5, Conversion: Balle})
		if err != nil {
			t.Fatal(err)
		}
		if !(balle.Epsilon <= std.Epsilon) {
			t.Errorf("orders %d: Balle eps %.4f above the standard %.4f", len(orders), balle.Epsilon, std.Epsilon)
		}
	}
}

// TestFullParticipationIsGDPComposition checks the q = 1 claim against the exact answer: T
// rounds of the Gaussian mechanism with noise multiplier z are exactly sqrt(T)/z-GDP (Dong,
// Roth and Su, "Gaussian differential privacy", 2022), whose delta at epsilon is
// Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2). The RDP claim must be valid, delta_GDP(eps)
// <= delta (to 1e-12 relative, float rounding), and no looser than the standard conversion's
// optimum over all real orders, mu^2/2 + mu sqrt(2 log(1/delta)), plus 0.5% for the order grid
// (the exact epsilons at delta 1e-5 for mu = 0.5, 1, 2 are 1.99309, 4.37718, 9.99726; RDP's
// conversion is 8-27% above them, which is its known slack, not an error).
func TestFullParticipationIsGDPComposition(t *testing.T) {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	gdpDelta := func(mu, eps float64) float64 {
		return phi(-eps/mu+mu/2) - math.Exp(eps)*phi(-eps/mu-mu/2)
	}
	for _, c := range []struct {
		z     float64
		T     int
		exact float64 // epsilon of sqrt(T)/z-GDP at delta 1e-5
	}{{4, 4, 1.99309}, {2, 4, 4.37718}, {1, 4, 9.99726}, {8, 16, 1.99309}} {
		mu := math.Sqrt(float64(c.T)) / c.z
		if d := gdpDelta(mu, c.exact); math.Abs(d-1e-5) > 1e-9 {
			t.Fatalf("mu %g: delta at the reference epsilon %g is %g, not 1e-5", mu, c.exact, d)
		}
		for _, conv := range []Conversion{Standard, Balle} {
			g, err := DPFedAvgEpsilon(1, c.z, c.T, Claim{Delta: 1e-5, Conversion: conv})
			if err != nil {
				t.Fatal(err)
			}
			if d := gdpDelta(mu, g.Epsilon); d > 1e-5*(1+1e-12) {
				t.Errorf("z=%g T=%d %v: claim eps %.5f, but the exact delta there is %.3g > 1e-5", c.z, c.T, conv, g.Epsilon, d)
			}
			if bound := mu*mu/2 + mu*math.Sqrt(2*math.Log(1e5)); g.Epsilon > 1.005*bound {
				t.Errorf("z=%g T=%d %v: claim eps %.5f above the real-order optimum %.5f (exact %.5f)", c.z, c.T, conv, g.Epsilon, bound, c.exact)
			}
		}
	}
}

// TestSubsampledGaussianAgainstCLT compares the RDP claim of DP-SGD with the central limit
// theorem of Bu, Dong, Long and Su, "Deep learning with Gaussian differential privacy" (2020):
// T steps of the Poisson-subsampled Gaussian with small q are approximately mu-GDP with
// mu = q sqrt(T (e^{1/sigma^2} - 1)). The CLT is an approximation, not a bound, and RDP's
// conversion to (epsilon, delta) is loose, so the RDP epsilon is above the CLT's by 25-45% on
// these settings (1.30, 1.43, 1.40, 1.34); the band [1, 1.6] catches a sampling rate off by a
// factor 2 either way (epsilon moves by -45% to +100%) or twice the steps (+35% to +45%)
// without depending on that slack. Settings: the tensorflow/privacy MNIST table (TestPublishedDPSGDNumbers) and
// Abadi et al. (2016).
func TestSubsampledGaussianAgainstCLT(t *testing.T) {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	gdpEps := func(mu, delta float64) float64 { // bisection of the GDP delta(eps), decreasing
		lo, hi := 0.0, 100.0
		for i := 0; i < 200; i++ {
			m := (lo + hi) / 2
			if phi(-m/mu+mu/2)-math.Exp(m)*phi(-m/mu-mu/2) > delta {
				lo = m
			} else {
				hi = m
			}
		}
		return hi
	}
	for _, c := range []struct {
		q, sigma float64
		steps    int
	}{
		{256.0 / 60000, 1.1, 60 * 60000 / 256},
		{256.0 / 60000, 1.3, 15 * 60000 / 256},
		{256.0 / 60000, 0.7, 45 * 60000 / 256},
		{0.01, 4, 10000},
	} {
		mu := c.q * math.Sqrt(float64(c.steps)*math.Expm1(1/(c.sigma*c.sigma)))
		clt := gdpEps(mu, 1e-5)
		g, err := DPFedAvgEpsilon(c.q, c.sigma, c.steps, Claim{Orders: tfPrivacyOrders(), Delta: 1e-5, Conversion: Standard})
		if err != nil {
			t.Fatal(err)
		}
		if r := g.Epsilon / clt; r < 1 || r > 1.6 {
			t.Errorf("q=%.4g sigma=%g T=%d: RDP eps %.4f, CLT eps %.4f (mu %.4f): ratio %.3f outside [1, 1.6]", c.q, c.sigma, c.steps, g.Epsilon, clt, mu, r)
		}
	}
}
