package audit

import (
	"math"
	"testing"
)

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), math.SmallestNonzeroFloat64)
}

// TestEpsilonFromGDPCheckValues reproduces the check values of docs/theory.md to the five
// decimals it prints, and to 1e-10 relative against 20-digit values of the same root found
// with mpmath at 50 digits (root of log delta(eps) = log 1e-5).
func TestEpsilonFromGDPCheckValues(t *testing.T) {
	for _, tc := range []struct {
		mu, doc, precise float64
	}{
		{0.5, 1.99309, 1.9930914044151196311},
		{1, 4.37718, 4.3771780956812246277},
		{2, 9.99726, 9.9972561464343003965},
	} {
		eps, err := EpsilonFromGDP(tc.mu, 1e-5)
		if err != nil {
			t.Fatalf("mu=%v: %v", tc.mu, err)
		}
		if math.Abs(eps-tc.doc) > 0.5e-5 {
			t.Errorf("mu=%v: eps=%.7f, docs/theory.md says %.5f", tc.mu, eps, tc.doc)
		}
		if e := relErr(eps, tc.precise); e > 1e-10 {
			t.Errorf("mu=%v: eps=%.15g, want %.15g (rel err %.2g)", tc.mu, eps, tc.precise, e)
		}
	}
}

// TestDeltaFromGDPTails compares delta(eps) with 20-digit mpmath values (50-digit arithmetic)
// where the naive formula overflows (e^eps), cancels (eps >> mu) or underflows. 1e-9 relative:
// the log-space form loses about log(1/delta) * 1e-16 / |r| of relative precision.
func TestDeltaFromGDPTails(t *testing.T) {
	for _, tc := range []struct{ mu, eps, want float64 }{
		{1, 1, 0.1269367375066439458},
		{0.5, 3, 3.4009117356735288242e-10},
		{2, 40, 8.0828663732942988358e-82},
		{10, 100, 1.8797170020519157446e-7},
		{30, 500, 0.044652092298350787049},
		{0.01, 0.05, 5.4814402007468725614e-10},
		{100, 6000, 6.9204018544273568559e-24},
	} {
		got := DeltaFromGDP(tc.mu, tc.eps)
		if e := relErr(got, tc.want); e > 1e-9 {
			t.Errorf("delta(mu=%v, eps=%v) = %.17g, want %.17g (rel err %.2g)", tc.mu, tc.eps, got, tc.want, e)
		}
	}
	// delta(3, 1000) is 1.66e-23916: its log must still be right (-55066.8...), which is
	// what the root finder compares.
	want := math.Log(1.6584932586278856676) - 23916*math.Ln10
	if got := logDeltaFromGDP(3, 1000); relErr(got, want) > 1e-12 {
		t.Errorf("log delta(3, 1000) = %.17g, want %.17g", got, want)
	}
}

// TestDeltaFromGDPNaive checks the log-space evaluation against the textbook formula where
// the latter is accurate (moderate eps, delta not tiny): 1e-12 absolute.
func TestDeltaFromGDPNaive(t *testing.T) {
	for _, mu := range []float64{0.1, 0.5, 1, 2, 3} {
		prev := math.Inf(1)
		for eps := 0.0; eps <= 6; eps += 0.25 {
			naive := normalCDF(-eps/mu+mu/2) - math.Exp(eps)*normalCDF(-eps/mu-mu/2)
			got := DeltaFromGDP(mu, eps)
			if math.Abs(got-naive) > 1e-12 {
				t.Errorf("delta(%v, %v) = %.15g, naive %.15g", mu, eps, got, naive)
			}
			if got > prev {
				t.Errorf("delta(%v, .) increases at eps=%v: %g > %g", mu, eps, got, prev)
			}
			prev = got
		}
	}
}

// TestEpsilonInvertsDelta: eps(delta(eps)) = eps to 1e-9 relative over a grid of mu and eps
// wherever delta(eps) is representable and not so close to delta(0) that eps is
// ill-conditioned (delta <= 0.2).
func TestEpsilonInvertsDelta(t *testing.T) {
	checked := 0
	for _, mu := range []float64{0.01, 0.1, 0.5, 1, 2, 5, 20, 100, 1e4} {
		for _, scale := range []float64{0.01, 0.1, 0.5, 1, 2, 5, 10, 50, 200} {
			eps := scale * math.Max(mu, mu*mu/2)
			delta := DeltaFromGDP(mu, eps)
			if delta < 1e-280 || delta > 0.2 {
				continue
			}
			got, err := EpsilonFromGDP(mu, delta)
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(got, eps); e > 1e-9 {
				t.Errorf("mu=%v: eps(delta(%v)=%g) = %.15g (rel err %.2g)", mu, eps, delta, got, e)
			}
			checked++
		}
	}
	if checked < 30 {
		t.Fatalf("only %d grid points were checked", checked)
	}
}

func TestEpsilonFromGDPEdges(t *testing.T) {
	if eps, err := EpsilonFromGDP(0, 1e-5); err != nil || eps != 0 {
		t.Errorf("mu=0: got %v, %v; want 0", eps, err)
	}
	d0 := DeltaFromGDP(1, 0)
	if want := math.Erf(0.5 / math.Sqrt2); relErr(d0, want) > 1e-14 {
		t.Errorf("delta(1, 0) = %v, want 2 Phi(1/2) - 1 = %v", d0, want)
	}
	for _, delta := range []float64{d0, 0.5, 1} {
		if eps, err := EpsilonFromGDP(1, delta); err != nil || eps != 0 {
			t.Errorf("delta=%v >= delta(0): got %v, %v; want 0", delta, eps, err)
		}
	}
	if eps, err := EpsilonFromGDP(math.Inf(1), 1e-5); err != nil || !math.IsInf(eps, 1) {
		t.Errorf("mu=Inf: got %v, %v; want +Inf", eps, err)
	}
	// Very large mu: eps ~ mu^2/2 + mu Phi^{-1}(1-delta); delta at the root must match.
	for _, mu := range []float64{1e3, 1e6, 1e100} {
		eps, err := EpsilonFromGDP(mu, 1e-5)
		if err != nil || math.IsInf(eps, 0) || eps < mu*mu/2 {
			t.Errorf("mu=%g: eps=%g, %v", mu, eps, err)
			continue
		}
		if mu <= 1e6 {
			// -eps/mu + mu/2 still resolves a to 1e-9 here.
			if got := logDeltaFromGDP(mu, eps); math.Abs(got-math.Log(1e-5)) > 1e-6 {
				t.Errorf("mu=%g: log delta at the root = %v, want %v", mu, got, math.Log(1e-5))
			}
			continue
		}
		// As mu grows, delta(a) -> Phi(a), so eps -> mu (mu/2 - Phi^{-1}(delta)).
		if want := mu * (mu/2 - normalQuantile(1e-5)); relErr(eps, want) > 1e-12 {
			t.Errorf("mu=%g: eps=%g, want %g", mu, eps, want)
		}
	}
	for _, bad := range []struct{ mu, delta float64 }{
		{-1, 1e-5}, {math.NaN(), 1e-5}, {1, 0}, {1, -1}, {1, 1.5}, {1, math.NaN()},
	} {
		if _, err := EpsilonFromGDP(bad.mu, bad.delta); err == nil {
			t.Errorf("EpsilonFromGDP(%v, %v): no error", bad.mu, bad.delta)
		}
	}
}

// TestLogNormalCDF against mpmath (50 digits) on both sides of the switch to the series.
func TestLogNormalCDF(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{-5, -15.0649983939887257360837},
		{-36.9, -685.3328831653506121583552},
		{-40, -804.6084420137537881666068},
		{-100, -5005.524208694205088626302},
	} {
		if got := logNormalCDF(tc.x); relErr(got, tc.want) > 1e-14 {
			t.Errorf("log Phi(%v) = %.17g, want %.17g", tc.x, got, tc.want)
		}
	}
	below, above := logNormalCDF(math.Nextafter(logTailCutoff, -1)), logNormalCDF(logTailCutoff)
	if relErr(below, above) > 1e-13 {
		t.Errorf("log Phi jumps at the cutoff: %.17g vs %.17g", below, above)
	}
}

// TestTradeoffGDP: T_G(mu) is symmetric (an involution: f(f(a)) = a), T_G(0) is 1 - a, and
// MuFromPoint inverts it along the curve.
func TestTradeoffGDP(t *testing.T) {
	for _, mu := range []float64{0, 0.3, 1, 2.5, 6} {
		for _, a := range []float64{1e-12, 1e-6, 0.001, 0.05, 0.3, 0.5, 0.9, 0.999} {
			b := TradeoffGDP(mu, a)
			// b close to 1 carries only 1e-16 absolute precision, so the round trip is
			// checked to 1e-12 absolute plus 1e-9 relative.
			if back := TradeoffGDP(mu, b); math.Abs(back-a) > 1e-12+1e-9*a {
				t.Errorf("mu=%v: T(T(%v)) = %v", mu, a, back)
			}
			if mu == 0 && math.Abs(b-(1-a)) > 1e-15 {
				t.Errorf("T_G(0)(%v) = %v, want %v", a, b, 1-a)
			}
			if b > 1e-300 && b < 0.99 {
				if got := MuFromPoint(a, b); math.Abs(got-mu) > 1e-9 {
					t.Errorf("MuFromPoint(%v, T_G(%v)) = %v", a, mu, got)
				}
			}
		}
	}
	if TradeoffGDP(1, 0) != 1 || TradeoffGDP(1, 1) != 0 || TradeoffGDP(1, -1) != 1 {
		t.Error("T_G at the ends of [0, 1]")
	}
	// One value by hand: Phi^{-1}(0.95) = 1.6448536269514722, Phi(0.6448536...) = 0.74040...
	if got := TradeoffGDP(1, 0.05); math.Abs(got-0.7404) > 1e-4 {
		t.Errorf("T_G(1)(0.05) = %v, want 0.7404", got)
	}
	if got := MuFromPoint(0, 1); got != 0 {
		t.Errorf("MuFromPoint(0, 1) = %v", got)
	}
	if !math.IsNaN(MuFromPoint(-0.1, 0.5)) || !math.IsNaN(MuFromPoint(0.5, 2)) {
		t.Error("MuFromPoint accepts errors outside [0, 1]")
	}
}

func TestComposeGDP(t *testing.T) {
	if got := ComposeGDP(3, 4); relErr(got, 5) > 1e-15 {
		t.Errorf("ComposeGDP(3, 4) = %v", got)
	}
	mus := make([]float64, 100)
	for i := range mus {
		mus[i] = 0.7
	}
	if got := ComposeGDP(mus...); relErr(got, 7) > 1e-14 {
		t.Errorf("100-fold 0.7 = %v, want 7", got)
	}
	if got := ComposeGDP(1e200, 1e200); relErr(got, math.Sqrt2*1e200) > 1e-15 {
		t.Errorf("no overflow: %v", got)
	}
	if ComposeGDP() != 0 || !math.IsNaN(ComposeGDP(1, -1)) || !math.IsInf(ComposeGDP(1, math.Inf(1)), 1) {
		t.Error("edge cases")
	}
	// Composition is associative: (a (x) b) (x) c = a (x) (b (x) c).
	if l, r := ComposeGDP(ComposeGDP(0.3, 1.1), 2), ComposeGDP(0.3, ComposeGDP(1.1, 2)); relErr(l, r) > 1e-15 {
		t.Errorf("not associative: %v vs %v", l, r)
	}
}

// TestRDPFromGDP against the Renyi divergence of N(mu, 1) from N(0, 1) integrated
// numerically (trapezoid on [-30, 30+mu], step 1e-3: error far below the 1e-6 tolerance).
func TestRDPFromGDP(t *testing.T) {
	for _, mu := range []float64{0.5, 1, 2} {
		for _, order := range []float64{1.5, 2, 4} {
			const h = 1e-3
			sum := 0.0
			for x := -30.0; x <= 30+mu; x += h {
				lp := -x * x / 2
				lq := -(x - mu) * (x - mu) / 2
				sum += math.Exp(order*lq+(1-order)*lp) / math.Sqrt(2*math.Pi) * h
			}
			want := math.Log(sum) / (order - 1)
			if got := RDPFromGDP(mu, order); math.Abs(got-want) > 1e-6 {
				t.Errorf("RDP(mu=%v, order=%v) = %v, integral %v", mu, order, got, want)
			}
		}
	}
	if !math.IsNaN(RDPFromGDP(1, 0.5)) || !math.IsNaN(RDPFromGDP(-1, 2)) {
		t.Error("bad arguments accepted")
	}
}

// TestLaplaceGDPEquivalent: the closed form at the symmetric point equals the numerical
// supremum over the whole curve (1e-6: the grid search's resolution).
func TestLaplaceGDPEquivalent(t *testing.T) {
	for _, s := range []float64{0.3, 1, 2, 3, 5} {
		want := gdpEquivalent(func(a float64) float64 { return laplaceTradeoff(s, a) })
		if got := LaplaceGDPEquivalent(s); math.Abs(got-want) > 1e-6 {
			t.Errorf("s=%g: closed form %v, numerical %v", s, got, want)
		}
	}
}

// TestTradeoffApprox: the (epsilon, delta) trade-off curve is the boundary epsFromErrors
// inverts: on it a test certifies exactly epsilon (its kink and its two lines, away from the
// axes), above it less and below it more; it is symmetric (its own inverse), 1 - delta at 0 and
// 0 from 1 - delta on.
func TestTradeoffApprox(t *testing.T) {
	for _, tc := range []struct{ eps, delta float64 }{{0.5, 1e-5}, {2, 0}, {6.451, 1e-5}, {1, 0.1}} {
		f := func(a float64) float64 { return TradeoffApprox(tc.eps, tc.delta, a) }
		if got := f(0); got != 1-tc.delta {
			t.Errorf("eps %v: f(0) = %v, want 1 - delta", tc.eps, got)
		}
		if got := f(1 - tc.delta); got != 0 {
			t.Errorf("eps %v: f(1 - delta) = %v, want 0", tc.eps, got)
		}
		kink := (1 - tc.delta) / (1 + math.Exp(tc.eps))
		for _, a := range []float64{kink / 3, kink, (kink + 1 - tc.delta) / 2} {
			b := f(a)
			if got := epsFromErrors(a, b, tc.delta); math.Abs(got-tc.eps) > 1e-9*tc.eps {
				t.Errorf("eps %v: the test (%v, %v) on the curve certifies eps %v", tc.eps, a, b, got)
			}
			if got := epsFromErrors(a, b*1.01, tc.delta); got >= tc.eps {
				t.Errorf("eps %v: a test above the curve certifies %v", tc.eps, got)
			}
			if got := epsFromErrors(a, b*0.99, tc.delta); got <= tc.eps {
				t.Errorf("eps %v: a test below the curve certifies %v", tc.eps, got)
			}
			if back := f(b); math.Abs(back-a) > 1e-12 {
				t.Errorf("eps %v: f(f(%v)) = %v, want the curve symmetric", tc.eps, a, back)
			}
		}
	}
}

// TestEpsilonFromGDPAtSubnormalDelta: below the smallest normal float64 math.Log(delta) is about
// -709.09 on amd64 whatever delta, so epsilon stopped growing as delta fell (and was too small,
// the unsafe side). It must keep growing down to the smallest positive float64, as it does for
// normal deltas, by about mu/sqrt(2 log(1/delta)) log(2) per halving at this size.
func TestEpsilonFromGDPAtSubnormalDelta(t *testing.T) {
	prev := 0.0
	for _, k := range []int{1000, 1022, 1030, 1045, 1060, 1074} {
		eps, err := EpsilonFromGDP(1, math.Ldexp(1, -k))
		if err != nil {
			t.Fatal(err)
		}
		if eps <= prev+0.1 {
			t.Errorf("delta 2^-%d: eps %.6g, not above the previous %.6g", k, eps, prev)
		}
		prev = eps
	}
}
