package audit

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestJudge(t *testing.T) {
	// A result whose only certified test has error rates (0.1, 0.2): mu lower bound
	// Phi^{-1}(0.9) - Phi^{-1}(0.2) = 1.281552 + 0.841621 = 2.123173; eps lower bound at delta
	// is max(log((0.9-delta)/0.2), log((0.8-delta)/0.1)) = log(8(1 - delta/0.8)) (2.079442 at 0).
	p := CertifiedPoint{AlphaUpper: 0.1, BetaUpper: 0.2}
	res := &Result{Confidence: 0.95, MuLower: p.Mu(), MuPoint: p, Certified: []CertifiedPoint{p}}
	const muLow, epsLow0 = 2.123173, 2.079442
	cases := []struct {
		name      string
		claim     Claim
		status    Status
		tightness float64
		checks    int
	}{
		{"mu claim violated", Claim{Mu: 2}, Violated, muLow / 2, 1},
		{"mu claim consistent", Claim{Mu: 3}, Consistent, muLow / 3, 1},
		{"mu claim equal to the bound is consistent", Claim{Mu: res.MuLower}, Consistent, 1, 1},
		{"eps claim violated", Claim{Epsilon: 1, Delta: 0}, Violated, epsLow0, 1},
		{"eps claim consistent", Claim{Epsilon: 4}, Consistent, epsLow0 / 4, 1},
		{"eps at larger delta", Claim{Epsilon: 2, Delta: 0.4}, Consistent, math.Log(4) / 2, 1},
		{"both, eps violated", Claim{Mu: 10, Epsilon: 2}, Violated, epsLow0 / 2, 2},
		{"both consistent", Claim{Mu: 10, Epsilon: 10}, Consistent, muLow / 10, 2},
		{"empty claim", Claim{}, Invalid, 0, 0},
		{"negative mu", Claim{Mu: -1}, Invalid, 0, 0},
		{"NaN epsilon", Claim{Epsilon: math.NaN()}, Invalid, 0, 0},
		{"delta without epsilon", Claim{Mu: 1, Delta: 1e-5}, Invalid, 0, 0},
		{"delta 1", Claim{Epsilon: 1, Delta: 1}, Invalid, 0, 0},
	}
	for _, tc := range cases {
		v := Judge(res, tc.claim)
		if v.Status != tc.status {
			t.Errorf("%s: status %q, want %q (%s)", tc.name, v.Status, tc.status, v.Reason)
		}
		if math.Abs(v.Tightness-tc.tightness) > 1e-5 {
			t.Errorf("%s: tightness %v, want %v", tc.name, v.Tightness, tc.tightness)
		}
		if len(v.Checks) != tc.checks {
			t.Errorf("%s: %d checks, want %d", tc.name, len(v.Checks), tc.checks)
		}
		if tc.status == Invalid && v.Reason == "" {
			t.Errorf("%s: invalid without a reason", tc.name)
		}
		for _, c := range v.Checks {
			if c.Violated != (c.Lower > c.Claimed) {
				t.Errorf("%s: check %+v inconsistent", tc.name, c)
			}
		}
		if tc.status != Invalid && v.Confidence != 0.95 {
			t.Errorf("%s: confidence %v", tc.name, v.Confidence)
		}
	}
	if v := Judge(nil, Claim{Mu: 1}); v.Status != Invalid {
		t.Errorf("nil result: %q", v.Status)
	}
}

// TestJudgeEndToEnd: scores from a 2-GDP Gaussian pair with 5000 per world violate a claim of
// mu = 1 and are consistent with the true mu = 2.
func TestJudgeEndToEnd(t *testing.T) {
	x, y := make([]float64, 5000), make([]float64, 5000)
	gaussianScenario(2).draw(newTestRand(12), x, y)
	res, err := Analyze(x, y, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := Judge(res, Claim{Mu: 1}); v.Status != Violated {
		t.Errorf("claim mu=1 against mu lower %v: %q", res.MuLower, v.Status)
	}
	if v := Judge(res, Claim{Mu: 2}); v.Status != Consistent || !(v.Tightness > 0.8 && v.Tightness <= 1) {
		t.Errorf("claim mu=2 against mu lower %v: %q, tightness %v", res.MuLower, v.Status, v.Tightness)
	}
}

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
