package claims

import (
	"math"

	"context"
	"github.com/fedaudit/fedaudit/accounting"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

func dpFedAvg() train.Config {
	return train.Config{Algorithm: algo.DPFedAvg, Model: model.Config{Kind: "quadratic", Curvature: 1},
		Rounds: 10, LocalSteps: 2, LearningRate: 0.5, SamplingRate: 0.5, NoiseMultiplier: 1.5, UpdateClip: 1}
}

// Systems without an accountant make no claim; an accountant's claim needs remove-client
// adjacency; the sampled Gaussian claim grows when the accountant assumes a smaller sampling
// rate than the one the deployment runs (the claim of experiment/claims_test.go's DP-FedAvg
// deployment is epsilon 6.45 at delta 1e-5, 0.51 with q = 0.02).
func TestFor(t *testing.T) {
	ctx := context.Background()
	base := Deployment{Train: dpFedAvg(), Clients: 10, Target: 0, Adjacency: "remove-client", Dim: 8, Classes: 2}
	for _, tc := range []struct {
		name         string
		edit         func(*Deployment)
		lo, hi       float64
		wantErr      string
		wantNoClaims bool
	}{
		{"sampled gaussian", func(*Deployment) {}, 6.4, 6.5, "", false},
		{"mis-calibrated rate", func(d *Deployment) { d.ClaimSamplingRate = 0.02 }, 0.5, 0.52, "", false},
		{"replace adjacency", func(d *Deployment) { d.Adjacency = "replace-client" }, 0, 0, "adjacency.kind", false},
		{"noisy fedavg", func(d *Deployment) { d.Train = train.Config{Algorithm: algo.FedAvg} }, 0, 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := base
			tc.edit(&d)
			claim, line, err := For(ctx, d, 1e-5)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.wantNoClaims:
				if claim.Epsilon != 0 || claim.Mu != 0 || line != "" {
					t.Fatalf("claim %+v %q for a system without an accountant", claim, line)
				}
			default:
				if claim.Epsilon < tc.lo || claim.Epsilon > tc.hi || claim.Delta != 1e-5 || !strings.HasPrefix(line, "accountant: dp-fedavg, sampled Gaussian RDP") {
					t.Fatalf("claim %+v %q, want epsilon in [%g, %g]", claim, line, tc.lo, tc.hi)
				}
			}
		})
	}
}

// The heuristic of a constant DP-FedAvg deployment is accounting.LastIterateEpsilon's with the
// trained sampling rate and noise multiplier (the divisor and the clip norm cancel), whatever
// rate the accountant is told; it grows with T and stays below the accountant's claim for
// every iterate; systems without an accountant get none.
func TestLastIterate(t *testing.T) {
	ctx := context.Background()
	d := Deployment{Train: dpFedAvg(), Clients: 10, Target: 0, Adjacency: "remove-client", Dim: 8, Classes: 2,
		ClaimSamplingRate: 0.02}
	rounds := []int{1, 5, 10}
	got, err := LastIterate(ctx, d, 1e-5, rounds)
	if err != nil {
		t.Fatal(err)
	}
	claim, _, err := For(ctx, Deployment{Train: dpFedAvg(), Clients: 10, Target: 0, Adjacency: "remove-client", Dim: 8, Classes: 2}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	for i, T := range rounds {
		want, err := accounting.LastIterateEpsilon(0.5, 1.5, T, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		// Same computation along another path (the plan's clip and divisor scale both the
		// shift and the std): only float rounding differs.
		if math.Abs(got[i]-want.Epsilon) > 1e-9*want.Epsilon {
			t.Errorf("T=%d: heuristic eps %.12g, want %.12g", T, got[i], want.Epsilon)
		}
		if i > 0 && !(got[i] > got[i-1]) {
			t.Errorf("T=%d: heuristic %g not above %g at the checkpoint before", T, got[i], got[i-1])
		}
	}
	if !(got[len(got)-1] < claim.Epsilon) {
		t.Errorf("final-model heuristic %g at T=10 not below the accountant's %g", got[len(got)-1], claim.Epsilon)
	}
	for _, edit := range []func(*Deployment){
		func(d *Deployment) { d.Train = train.Config{Algorithm: algo.FedAvg} },
		func(d *Deployment) { d.Adjacency = "replace-client" },
	} {
		e := d
		edit(&e)
		if h, err := LastIterate(ctx, e, 1e-5, rounds); err != nil || h != nil {
			t.Errorf("%+v: heuristic %v, %v; want none", e.Adjacency, h, err)
		}
	}
}

// For and LastIterate of one deployment share its privacy plan (an adaptive plan takes
// seconds); another deployment gets its own.
func TestPlanComputedOnce(t *testing.T) {
	ctx := context.Background()
	tc := dpFedAvg()
	a, err := planOf(ctx, tc, 10)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := planOf(ctx, tc, 10); err != nil || b != a {
		t.Errorf("the same deployment's plan computed again (%v)", err)
	}
	other := tc
	other.NoiseMultiplier *= 2
	c, err := planOf(ctx, other, 10)
	if err != nil || c == a || c.Std[0] == a.Std[0] {
		t.Errorf("another noise multiplier got the first deployment's plan (%v)", err)
	}
	if d, err := planOf(ctx, other, 12); err != nil || d == c {
		t.Errorf("another client count got the same plan (%v)", err)
	}
}
