package accounting

import (
	"math"
	"testing"
)

type stairCase struct{ eps, gamma float64 }

func stairGrid() []stairCase {
	var out []stairCase
	for _, eps := range []float64{0.1, 0.5, 1, 3, 6} {
		for _, g := range []float64{OptimalStaircaseGamma(eps), 0, 0.3, 0.5, 0.7, 1} {
			out = append(out, stairCase{eps, g})
		}
	}
	return out
}

var stairOrders = []float64{1.01, 1.5, 2, 3.5, 8, 32, 256}

// TestStaircaseRDPClosedFormMatchesPieceSum: the closed form of StaircaseRDP against the
// exact piece sum of StaircaseDivergence at full shift (1e-12 relative: both are exact,
// they differ by rounding only).
func TestStaircaseRDPClosedFormMatchesPieceSum(t *testing.T) {
	for _, c := range stairGrid() {
		for _, a := range stairOrders {
			closed, err := StaircaseRDP(c.eps, c.gamma, a)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := StaircaseDivergence(c.eps, c.gamma, 1, a)
			if err != nil {
				t.Fatal(err)
			}
			// Rounding of log I (about 1e-16) is divided by alpha-1.
			if math.Abs(closed-sum) > 1e-12*math.Max(sum, 1e-3)+1e-15/(a-1) {
				t.Errorf("%+v alpha=%v: closed form %.15g, piece sum %.15g", c, a, closed, sum)
			}
			// RDP never exceeds the pure-DP epsilon and tends to it as alpha grows.
			if closed > c.eps*(1+1e-12) {
				t.Errorf("%+v alpha=%v: rdp %v > eps", c, a, closed)
			}
		}
		if far, _ := StaircaseRDP(c.eps, c.gamma, 1e6); math.Abs(far-c.eps) > 1e-4*c.eps {
			t.Errorf("%+v: rdp(alpha=1e6) = %v, want about eps", c, far)
		}
	}
}

// TestStaircaseDivergenceRiemann checks the piece sum (and its folding of the tails)
// against a brute-force midpoint sum on a uniform grid of width h over [-L, L], which
// shares neither the breakpoint enumeration nor the fold. Each jump of the integrand costs
// the midpoint rule at most h times the jump, hence the 4e-3 relative tolerance at
// h = 2e-4 (the tails beyond L = 40/eps weigh below e^-40).
func TestStaircaseDivergenceRiemann(t *testing.T) {
	const h = 2e-4
	for _, c := range []stairCase{{1, OptimalStaircaseGamma(1)}, {2, 0.7}, {0.7, 0.2}} {
		s, _ := NewStaircase(c.eps, 1, c.gamma)
		for _, shift := range []float64{0.37, 1} {
			for _, a := range []float64{1.5, 4} {
				want, _ := StaircaseDivergence(c.eps, c.gamma, shift, a)
				L := 40 / c.eps
				var sum float64
				for x := -L + h/2; x < L; x += h {
					sum += math.Exp(a*s.logDensity(x) + (1-a)*s.logDensity(x-shift))
				}
				got := math.Log(sum*h) / (a - 1)
				if math.Abs(got-want) > 4e-3*want {
					t.Errorf("%+v shift=%v alpha=%v: riemann %.8g, piece sum %.8g", c, shift, a, got, want)
				}
			}
		}
	}
}

// TestStaircaseWorstShiftIsFull: over shifts in (0, Delta] the divergence is largest at the
// full shift, so StaircaseRDP (full shift) is the RDP of a 1-D query.
func TestStaircaseWorstShiftIsFull(t *testing.T) {
	for _, c := range stairGrid() {
		for _, a := range []float64{1.5, 2, 8, 32} {
			full, _ := StaircaseDivergence(c.eps, c.gamma, 1, a)
			prev := 0.0
			for i := 1; i <= 200; i++ {
				d, _ := StaircaseDivergence(c.eps, c.gamma, float64(i)/200, a)
				if d > full*(1+1e-12) || d < prev*(1-1e-12) {
					t.Fatalf("%+v alpha=%v: divergence %v at shift %v (previous %v, full %v)", c, a, d, float64(i)/200, prev, full)
				}
				prev = d
			}
		}
	}
}

// TestStaircaseNotSuperadditive documents why vectors need StaircaseVectorRDP: splitting
// a shift of Delta over two coordinates costs nearly twice the 1-D divergence at large
// orders, whereas for the Laplace mechanism splitting never costs more (superadditivity of
// its divergence in the shift, checked on a grid).
func TestStaircaseNotSuperadditive(t *testing.T) {
	eps, g := 3.0, OptimalStaircaseGamma(3)
	half, _ := StaircaseDivergence(eps, g, 0.5, 32)
	full, _ := StaircaseDivergence(eps, g, 1, 32)
	if 2*half < 1.9*full {
		t.Errorf("two half shifts cost %v, one full shift %v: expected nearly double", 2*half, full)
	}
	vec, _ := StaircaseVectorRDP(eps, g, 32, 2)
	if vec < 2*half {
		t.Errorf("vector bound %v below the two-coordinate divergence %v", vec, 2*half)
	}
	for _, b := range []float64{0.5, 1, 4} {
		for _, a := range []float64{1.5, 2, 8, 64} {
			for s1 := 0.1; s1 < 1; s1 += 0.1 {
				d1, _ := LaplaceRDP(b/s1, a)
				d2, _ := LaplaceRDP(b/(1-s1), a)
				d, _ := LaplaceRDP(b, a)
				if d1+d2 > d*(1+1e-12) {
					t.Errorf("laplace b=%v alpha=%v: split %v+%v = %v > %v", b, a, d1, d2, d1+d2, d)
				}
			}
		}
	}
}

// TestStaircasePrintedFormula records where UDP-FL's printed Theorem 2 / Table 3
// expression departs from the exact sum: equal at gamma = 1/2 only, too large for
// gamma < 1/2 (including the optimal gamma*, always < 1/2), too small (unsafe) for
// gamma > 1/2.
func TestStaircasePrintedFormula(t *testing.T) {
	for _, eps := range []float64{0.1, 1, 3} {
		for _, a := range []float64{1.5, 2, 8} {
			exact, _ := StaircaseRDP(eps, 0.5, a)
			if p := staircaseRDPAsPrinted(eps, 0.5, a); math.Abs(p-exact) > 1e-12*exact {
				t.Errorf("gamma=1/2 eps=%v alpha=%v: printed %v, exact %v", eps, a, p, exact)
			}
			g := OptimalStaircaseGamma(eps)
			exact, _ = StaircaseRDP(eps, g, a)
			if p := staircaseRDPAsPrinted(eps, g, a); p <= exact {
				t.Errorf("gamma*=%v eps=%v alpha=%v: printed %v not above exact %v", g, eps, a, p, exact)
			}
			exact, _ = StaircaseRDP(eps, 0.9, a)
			if p := staircaseRDPAsPrinted(eps, 0.9, a); p >= exact {
				t.Errorf("gamma=0.9 eps=%v alpha=%v: printed %v not below exact %v", eps, a, p, exact)
			}
		}
	}
}

func TestStaircaseRDPRejects(t *testing.T) {
	if _, err := StaircaseRDP(1, 0.5, 1); err == nil {
		t.Error("order 1 accepted")
	}
	if _, err := StaircaseRDP(1, 1.5, 2); err == nil {
		t.Error("gamma 1.5 accepted")
	}
	if _, err := StaircaseDivergence(1, 0.5, 1.5, 2); err == nil {
		t.Error("shift 1.5 accepted")
	}
	if _, err := StaircaseVectorRDP(1, 0.5, 2, 0); err == nil {
		t.Error("dimension 0 accepted")
	}
}
