package accounting

import (
	"context"
	"math"
	"testing"
)

// testOrders is a short grid that keeps the calibration tests fast.
var testOrders = []float64{1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64}

func testClaim(conv Conversion) Claim {
	return Claim{Orders: testOrders, Conversion: conv, Delta: 1e-5}
}

func TestDPFedAvgEpsilonIsComposition(t *testing.T) {
	c := testClaim(Balle)
	g, err := DPFedAvgEpsilon(0.1, 1.2, 40, c)
	if err != nil {
		t.Fatal(err)
	}
	sched := make([]Round, 40)
	for i := range sched {
		sched[i] = Round{Q: 0.1, Z: 1.2}
	}
	h, err := ScheduleEpsilon(sched, c)
	if err != nil {
		t.Fatal(err)
	}
	if g != h {
		t.Errorf("DP-FedAvg %+v, schedule %+v", g, h)
	}
	// Heterogeneous: a schedule with a cheaper half sits between the two uniform ones.
	for i := 0; i < 20; i++ {
		sched[i].Q = 0.05
	}
	mixed, _ := ScheduleEpsilon(sched, c)
	low, _ := DPFedAvgEpsilon(0.05, 1.2, 40, c)
	if !(low.Epsilon < mixed.Epsilon && mixed.Epsilon < g.Epsilon) {
		t.Errorf("mixed schedule %v not between %v and %v", mixed.Epsilon, low.Epsilon, g.Epsilon)
	}
	if _, err := DPFedAvgEpsilon(0.1, 1, 10, Claim{Delta: 0}); err == nil {
		t.Error("delta 0 accepted")
	}
	if _, err := ScheduleEpsilon([]Round{{Q: 2, Z: 1}}, c); err == nil {
		t.Error("q = 2 accepted")
	}
}

// TestCalibrations: the calibrated parameter meets the budget and a parameter 1e-5 less
// favourable (relative) does not, for both calibrations and both conversions.
func TestCalibrations(t *testing.T) {
	ctx := context.Background()
	for _, conv := range []Conversion{Standard, Balle} {
		c := testClaim(conv)
		for _, p := range []struct {
			eps, q float64
			rounds int
		}{{1, 0.01, 1000}, {10, 0.9, 25}, {3, 0.2, 50}} {
			z, err := NoiseForBudget(ctx, p.eps, p.q, p.rounds, c)
			if err != nil {
				t.Fatal(err)
			}
			at, _ := DPFedAvgEpsilon(p.q, z, p.rounds, c)
			below, _ := DPFedAvgEpsilon(p.q, z*(1-1e-5), p.rounds, c)
			if at.Epsilon > p.eps || below.Epsilon <= p.eps {
				t.Errorf("%v %+v: z=%v gives eps %v, z(1-1e-5) gives %v", conv, p, z, at.Epsilon, below.Epsilon)
			}
			q, err := SamplingRateForBudget(ctx, p.eps, 1.5, p.rounds, c)
			if err != nil {
				t.Fatal(err)
			}
			at, _ = DPFedAvgEpsilon(q, 1.5, p.rounds, c)
			if at.Epsilon > p.eps {
				t.Errorf("%v %+v: q=%v gives eps %v", conv, p, q, at.Epsilon)
			}
			if q < 1 {
				above, _ := DPFedAvgEpsilon(q*(1+1e-5), 1.5, p.rounds, c)
				if above.Epsilon <= p.eps {
					t.Errorf("%v %+v: q(1+1e-5) still meets the budget (%v)", conv, p, above.Epsilon)
				}
			}
		}
	}
	if _, err := NoiseForBudget(ctx, 1e-9, 1, 1000, testClaim(Balle)); err == nil {
		t.Error("impossible budget calibrated")
	}
	if _, err := NoiseForBudget(ctx, -1, 0.1, 10, testClaim(Balle)); err == nil {
		t.Error("negative budget accepted")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := NoiseForBudget(cancelled, 1, 0.1, 10, testClaim(Balle)); err == nil {
		t.Error("cancelled context ignored")
	}
}

func TestIDPFedAvg(t *testing.T) {
	ctx := context.Background()
	c := testClaim(Balle)
	budgets := []float64{10, 20, 30, 10, 20}
	p, err := IDPFedAvg(ctx, budgets, 0.9, 25, 250, c)
	if err != nil {
		t.Fatal(err)
	}
	var meanClip, inv float64
	for n, eps := range budgets {
		meanClip += p.Clips[n] / float64(len(budgets))
		inv += 1 / p.Sigmas[n]
		if g := p.Guarantees[n]; g.Epsilon > eps || g.Epsilon < eps*(1-1e-4) {
			t.Errorf("client %d: claim %v for budget %v", n, g.Epsilon, eps)
		}
		// The server noise c*Sigma is Sigmas[n] times the client's clipping norm.
		if math.Abs(250*p.Sigma-p.Sigmas[n]*p.Clips[n]) > 1e-9*250*p.Sigma {
			t.Errorf("client %d: noise %v != sigma_n c_n = %v", n, 250*p.Sigma, p.Sigmas[n]*p.Clips[n])
		}
	}
	if math.Abs(meanClip-250) > 1e-9*250 {
		t.Errorf("mean clipping norm %v, want 250 (Alg. 5)", meanClip)
	}
	if !(p.Sigmas[0] > p.Sigmas[1] && p.Sigmas[1] > p.Sigmas[2]) {
		t.Errorf("noise not decreasing in budget: %v", p.Sigmas)
	}
	rates, err := IDPSamplingRates(ctx, budgets, 2, 25, c)
	if err != nil {
		t.Fatal(err)
	}
	for n, eps := range budgets {
		if g, _ := DPFedAvgEpsilon(rates[n], 2, 25, c); g.Epsilon > eps {
			t.Errorf("client %d: rate %v exceeds budget %v (eps %v)", n, rates[n], eps, g.Epsilon)
		}
	}
	if _, err := IDPFedAvg(ctx, nil, 0.9, 25, 250, c); err == nil {
		t.Error("no clients accepted")
	}
}

// TestSpendAsYouGo runs Alg. 1 on a scaled-down version of the paper's setting (three
// groups, q = 0.9, saving rates 0.5/0.6/0.7, transition at mid-training).
func TestSpendAsYouGo(t *testing.T) {
	ctx := context.Background()
	c := testClaim(Balle)
	clients := []SpendClient{{10, 0.5, 6, 34}, {20, 0.6, 6, 43}, {30, 0.7, 6, 23}}
	const rounds, q, clip = 10, 0.9, 250.0
	for _, book := range []Bookkeeping{PaperBookkeeping, ComposedBookkeeping} {
		plan, err := SpendAsYouGo(ctx, clients, q, clip, rounds, book, c)
		if err != nil {
			t.Fatal(err)
		}
		for n, cl := range clients {
			sched := make([]Round, rounds)
			for r := range sched {
				sched[r] = Round{Q: plan.ClientQ[n][r], Z: plan.ClientSigma[n][r]}
				want := q
				if r+1 < cl.Transition {
					want = cl.SavingRate
				}
				if plan.ClientQ[n][r] != want {
					t.Errorf("book %d client %d round %d: q %v, want %v", book, n, r+1, plan.ClientQ[n][r], want)
				}
			}
			g, err := ScheduleEpsilon(sched, c)
			if err != nil {
				t.Fatal(err)
			}
			// Same composition summed in a different order: equal to rounding.
			if math.Abs(g.Epsilon-plan.Spent[n].Epsilon) > 1e-12*g.Epsilon || g.Order != plan.Spent[n].Order {
				t.Errorf("book %d client %d: Spent %+v, schedule gives %+v", book, n, plan.Spent[n], g)
			}
			if g.Epsilon > cl.Epsilon {
				t.Errorf("book %d client %d: spends %v > budget %v", book, n, g.Epsilon, cl.Epsilon)
			}
			if book == ComposedBookkeeping && g.Epsilon < cl.Epsilon*(1-1e-4) {
				t.Errorf("composed bookkeeping client %d: spends %v of %v", n, g.Epsilon, cl.Epsilon)
			}
			if book == PaperBookkeeping && g.Epsilon > cl.Epsilon*0.99 {
				t.Errorf("paper bookkeeping client %d: spends %v of %v, expected a visible shortfall", n, g.Epsilon, cl.Epsilon)
			}
		}
		for r := 0; r < rounds; r++ {
			var count, clipSum float64
			for n, cl := range clients {
				count += float64(cl.Count)
				clipSum += float64(cl.Count) * plan.ClientClip[n][r]
			}
			if math.Abs(clipSum/count-clip) > 1e-9*clip {
				t.Errorf("round %d: mean clip %v, want %v", r+1, clipSum/count, clip)
			}
		}
	}
	if _, err := SpendAsYouGo(ctx, []SpendClient{{10, 0.95, 6, 1}}, q, clip, rounds, PaperBookkeeping, c); err == nil {
		t.Error("saving rate above q accepted")
	}
	if _, err := SpendAsYouGo(ctx, []SpendClient{{10, 0.5, 11, 1}}, q, clip, rounds, PaperBookkeeping, c); err == nil {
		t.Error("transition after the last round accepted")
	}
}

// TestSpendSharesLemma1 checks the recursion of eq. (1) against the closed form of Lemma 1,
// eq. (2), that the shares sum to the whole budget, and Theorem 1 (non-decreasing up to
// T_n, constant after).
func TestSpendSharesLemma1(t *testing.T) {
	for _, p := range []struct {
		T, Tn int
		r     float64
	}{{25, 13, 0.5 / 0.9}, {25, 13, 0.7 / 0.9}, {10, 1, 0.3}, {10, 10, 0.9}, {50, 20, 0}} {
		got, err := SpendShares(p.T, p.Tn, p.r)
		if err != nil {
			t.Fatal(err)
		}
		r2 := p.r * p.r
		sum := 0.0
		for t1 := 1; t1 <= p.T; t1++ {
			var want float64
			if t1 < p.Tn {
				want = r2 / float64(p.T-t1+1)
				for i := 1; i <= t1-1; i++ {
					want *= 1 - r2/float64(p.T-t1+1+i)
				}
			} else {
				want = 1 / float64(p.T-p.Tn+1)
				for i := 1; i <= p.Tn-1; i++ {
					want *= 1 - r2/float64(p.T-p.Tn+1+i)
				}
			}
			if math.Abs(got[t1-1]-want) > 1e-14 {
				t.Errorf("%+v round %d: recursion %.16g, Lemma 1 %.16g", p, t1, got[t1-1], want)
			}
			if t1 > 1 && t1 <= p.Tn && got[t1-1] < got[t1-2]-1e-15 {
				t.Errorf("%+v: share decreases at round %d (Theorem 1)", p, t1)
			}
			if t1 > p.Tn && math.Abs(got[t1-1]-got[t1-2]) > 1e-15 {
				t.Errorf("%+v: share not constant at round %d (Theorem 1)", p, t1)
			}
			sum += got[t1-1]
		}
		if math.Abs(sum-1) > 1e-13 {
			t.Errorf("%+v: shares sum to %v", p, sum)
		}
	}
	if _, err := SpendShares(10, 0, 0.5); err == nil {
		t.Error("transition 0 accepted")
	}
}
