package calibrate

import (
	"context"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"github.com/fedaudit/fedaudit/audit"
)

func TestSelfTest(t *testing.T) {
	rep, err := SelfTest(context.Background(), SelfTestOptions{Reps: 100, N: 500, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Every pair method (the three threshold methods, the band and dkw+band) on 3 Gaussian mu,
	// the Laplace mechanism and the family; the one-run mu, eps and adaptive mu on 3 Gaussian mu,
	// Laplace and 3 shared-level Gaussian mu; the sequential eps on Laplace; the sequential
	// pairs audit on 3 Gaussian mu.
	methods := len(audit.ThresholdMethods) + 2
	if len(rep.Rows) != 5*methods+3*7+1+3 || !rep.Pass {
		t.Fatalf("rows %d, pass %v", len(rep.Rows), rep.Pass)
	}
	for _, r := range rep.Rows {
		t.Logf("%-16s %-15s %s mu=%g family %d coverage %.3f mean bound %.4f tightness %.3f", r.Method, r.Mechanism, r.Quantity, r.Mu, r.Family, r.Coverage, r.MeanLower, r.Tightness)
		// Bounds at n = 500 reach 0.25-0.89 of mu for mu in {0.5, 1, 2} (split at mu = 0.5 is the
		// weakest: half the data, small effect) and stay below it on average; one run of 500
		// canaries certifies eps at a third of the truth or less. On the shared-level mechanism
		// (every canary of a run as easy as the others) one run certifies less, down to a tenth
		// of mu = 0.5 and of the eps.
		lo := 0.2
		if r.Mechanism == "gaussian-shared" {
			lo = 0.02
		}
		if !(r.Tightness > lo && r.Tightness < 1) {
			t.Errorf("%s %s %s mu=%g: tightness %v", r.Method, r.Mechanism, r.Quantity, r.Mu, r.Tightness)
		}
		if r.Coverage < 0.93 {
			t.Errorf("%s mu=%g: coverage %v", r.Method, r.Mu, r.Coverage)
		}
	}
	again, err := SelfTest(context.Background(), SelfTestOptions{Reps: 100, N: 500, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rep.Rows {
		if rep.Rows[i] != again.Rows[i] {
			t.Errorf("not deterministic: %+v vs %+v", rep.Rows[i], again.Rows[i])
		}
	}
}

// TestSelfTestFailsOvershoot: the pass rule catches a "bound" that is really the best
// threshold's point estimate (rates of zero floored at 1/(2n)); it exceeds the true mu in most
// repetitions. (On the Gaussian pair the certified methods are so conservative that even
// confidence 0.5 covers over 90%, so an honest-but-weak level is not a useful fault here.)
func TestSelfTestFailsOvershoot(t *testing.T) {
	weak := func(x, y []float64, _ audit.Options, _ *audit.BonferroniPlan) (float64, error) {
		roc, err := audit.NewROC(x, y)
		if err != nil {
			return 0, err
		}
		best := 0.0
		n0, n1 := float64(len(x)), float64(len(y))
		for _, p := range roc.Points {
			a := max(p.Alpha, 0.5/n0)
			b := max(p.Beta, 0.5/n1)
			best = max(best, audit.MuFromPoint(a, b))
		}
		return best, nil
	}
	rep, err := selfTest(context.Background(), SelfTestOptions{Reps: 100, N: 200, Mus: []float64{1}, Seed: 2}, weak)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass {
		t.Errorf("bounds at confidence 0.5 passed the 0.95 rule: %+v", rep.Rows)
	}
	for _, r := range rep.Rows {
		t.Logf("%-10s misses %d of %d (allowed %d), pass %v", r.Method, r.Misses, r.Reps, r.MaxMisses, r.Pass)
	}
}

// TestSelfTestFamilyNeedsCorrection: the family-wise check fails when every row is certified at
// the family's confidence without the correction, on bounds as tight as the level allows (the
// Gaussian mechanism's exact lower confidence bound from the known-variance z statistic, whose
// per-row miss rate is exactly 1 - confidence), and passes with the Bonferroni row level.
func TestSelfTestFamilyNeedsCorrection(t *testing.T) {
	exact := func(x, y []float64, o audit.Options, _ *audit.BonferroniPlan) (float64, error) {
		var mx, my float64
		for i := range x {
			mx += x[i]
		}
		for i := range y {
			my += y[i]
		}
		n0, n1 := float64(len(x)), float64(len(y))
		se := math.Sqrt(1/n0 + 1/n1)
		return mx/n0 - my/n1 - mathext.NormalQuantile(o.Confidence)*se, nil
	}
	uncorrected := func(x, y []float64, o audit.Options, p *audit.BonferroniPlan) (float64, error) {
		o.Confidence = 0.95 // ignores the row level the family asks for
		return exact(x, y, o, p)
	}
	opts := SelfTestOptions{Reps: 200, N: 200, Mus: []float64{1}, Seed: 4, Family: 8, Methods: []audit.ThresholdMethod{audit.DKW}}
	for _, tc := range []struct {
		name  string
		bound lowerBoundFunc
		pass  bool
	}{{"bonferroni rows", exact, true}, {"uncorrected rows", uncorrected, false}} {
		rep, err := selfTest(context.Background(), opts, tc.bound)
		if err != nil {
			t.Fatal(err)
		}
		fam := rep.Rows[len(rep.Rows)-1]
		t.Logf("%s: family coverage %.3f (misses %d, allowed %d)", tc.name, fam.Coverage, fam.Misses, fam.MaxMisses)
		if fam.Family != 8 || fam.Pass != tc.pass {
			t.Errorf("%s: family row %+v, want pass %v", tc.name, fam, tc.pass)
		}
	}
}

func TestMaxAllowedMisses(t *testing.T) {
	// P(Bin(200, 0.05) >= 21) = 0.00116 >= 1e-3 and P(>= 22) = 0.000481 < 1e-3 (direct sums
	// of the binomial probabilities), so 21 misses pass and 22 fail.
	if got := maxAllowedMisses(200, 0.05, 1e-3); got != 21 {
		t.Errorf("maxAllowedMisses(200, 0.05) = %d, want 21", got)
	}
	// With 20 repetitions: P(Bin(20, 0.05) >= 5) = 0.00257, P(>= 6) = 0.000329.
	if got := maxAllowedMisses(20, 0.05, 1e-3); got != 5 {
		t.Errorf("maxAllowedMisses(20, 0.05) = %d, want 5", got)
	}
}

func TestSelfTestErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SelfTest(ctx, SelfTestOptions{Reps: 5, N: 50}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	for _, o := range []SelfTestOptions{{Reps: -1}, {N: 1}, {Mus: []float64{-1}}, {Confidence: 2}, {Methods: []audit.ThresholdMethod{"x"}}, {Family: -1}} {
		if _, err := SelfTest(context.Background(), o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// TestSelfTestOneRunAndLaplaceRows: the default self-test has, besides the Gaussian rows of
// every method (the band included), the Laplace rows of every method and the one-run rows (mu,
// eps and the adaptive mu, for the Gaussian mechanism at each mu, Laplace and the shared-level
// Gaussian mechanism at each mu), and they pass. (TestOneRunCoverageHasTeeth shows
// that the one-run coverage check can fail.)
func TestSelfTestOneRunAndLaplaceRows(t *testing.T) {
	rep, err := SelfTest(context.Background(), SelfTestOptions{Reps: 60, N: 500, Mus: []float64{1, 2}, Family: 1})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rep.Rows {
		count[r.Mechanism+"/"+string(r.Method)+"/"+r.Quantity]++
	}
	want := map[string]int{"gaussian/band/mu": 2, "laplace/dkw/mu": 1, "laplace/band/mu": 1, "gaussian/one-run/mu": 2, "gaussian/one-run/eps": 2,
		"laplace/one-run/mu": 1, "laplace/one-run/eps": 1, "gaussian/one-run-adaptive/mu": 2, "laplace/one-run-adaptive/mu": 1,
		"gaussian-shared/one-run/mu": 2, "gaussian-shared/one-run/eps": 2, "gaussian-shared/one-run-adaptive/mu": 2,
		"laplace/one-run-sequential/eps": 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d rows %s, want %d (rows %v)", count[k], k, n, count)
		}
	}
	if !rep.Pass {
		t.Errorf("self-test failed: %+v", rep.Rows)
	}
}
