package attacks

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// gaussianRuns writes coupled runs of the Gaussian mechanism in parameter space, for a model of
// unknown architecture: w_0 shared by all runs; w_1 = w_0 + delta [world C] + sigma z, z shared by
// both worlds of a pair; the target's upload of round 1, U = w_0 + deltaUp [world C] + sigma z',
// z' shared too (with independent, each run draws its own). The best test of w_1 has
// mu = |delta| / sigma, of U |deltaUp| / sigma.
func gaussianRuns(t *testing.T, pairs, d int, delta, deltaUp []float64, sigma float64, independent bool, seed uint64) (*runs.Table, Env) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	w0 := make([]float32, d)
	for i := range w0 {
		w0[i] = float32(rng.NormFloat64())
	}
	meta := runs.Meta{Config: []byte(`{"synthetic":true}`), DatasetHash: "00", ToolVersion: "test", HasParams: true, HasUpload: true}
	path := filepath.Join(t.TempDir(), "runs.arrow")
	w, err := runs.Create(path, meta)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	nan := make([]float32, d)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	var rows []runs.Row
	for p := 0; p < pairs; p++ {
		z, zu := make([]float64, d), make([]float64, d)
		for i := range z {
			z[i], zu[i] = sigma*rng.NormFloat64(), sigma*rng.NormFloat64()
		}
		for world := 0; world < 2; world++ {
			if independent && world == 1 {
				for i := range z {
					z[i], zu[i] = sigma*rng.NormFloat64(), sigma*rng.NormFloat64()
				}
			}
			w1, up := make([]float32, d), make([]float32, d)
			for i := range w1 {
				shift, shiftUp := 0.0, 0.0
				if world == 0 {
					shift, shiftUp = delta[i], deltaUp[i]
				}
				w1[i] = w0[i] + float32(shift+z[i])
				up[i] = w0[i] + float32(shiftUp+zu[i])
			}
			id := int64(2*p + world)
			rows = append(rows,
				runs.Row{RunID: id, PairID: int64(p), World: int8(world), Round: 0, Params: w0, Upload: nan},
				runs.Row{RunID: id, PairID: int64(p), World: int8(world), Round: 1, Params: w1, Upload: up})
		}
	}
	if err := w.Write(rows...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	env := Env{Config: train.Config{Model: model.Config{Kind: model.External}, Checkpoints: []int{0, 1}}, Seed: 1}
	return openTable(t, path), env
}

// muOfAUC is the Gaussian mu with the given AUC: AUC = Phi(mu / sqrt 2).
func muOfAUC(auc float64) float64 { return math.Sqrt2 * distuv.UnitNormal.Quantile(auc) }

// The parameter-space attacks need no model and reach the best test's mu on the Gaussian
// mechanism: coupled pairs share their noise, so the shadow pairs' mean difference is the
// mechanism's shift itself and the fitted direction is the optimal one. Without a shift, and
// with noise drawn independently by every run (so that the fitted direction is pure noise), they
// stay at chance: the shadow pairs they were fitted on are not scored.
func TestVectorAttacksOnGaussianMechanism(t *testing.T) {
	const pairs, d, sigma = 1500, 400, 0.1
	delta, deltaUp := make([]float64, d), make([]float64, d)
	for i := 0; i < 8; i++ {
		delta[3*i] = sigma * 1.5 / math.Sqrt(8) // |delta| / sigma = 1.5
		deltaUp[5*i+1] = sigma * 1.0 / math.Sqrt(8)
	}
	// The AUC of 2 x 1200 scored runs has a standard error below 0.01; mu = sqrt 2 Phi^-1(AUC)
	// then moves by less than 0.05 near mu = 1 to 1.5, so 0.15 is three standard errors. The
	// cosine divides by |w_1 - w_0|, which varies by about 1/sqrt(2 d) = 4% around its mean,
	// costing it a little power: its tolerance is one-sided below.
	cases := []struct {
		name        string
		delta, up   []float64
		attack      string
		want, tol   float64
		lowerSlack  float64
		independent bool
	}{
		{"lda", delta, deltaUp, "param-lda", 1.5, 0.15, 0, false},
		{"cosine", delta, deltaUp, "param-cosine", 1.5, 0.15, 0.15, false},
		{"upload", delta, deltaUp, "upload-lda", 1.0, 0.15, 0, false},
		{"lda, no shift", make([]float64, d), make([]float64, d), "param-lda", 0, 0.15, 0, true},
		{"cosine, no shift", make([]float64, d), make([]float64, d), "param-cosine", 0, 0.15, 0, true},
		{"upload, no shift", make([]float64, d), make([]float64, d), "upload-lda", 0, 0.15, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb, env := gaussianRuns(t, pairs, d, tc.delta, tc.up, sigma, tc.independent, 9)
			res, err := Score(context.Background(), tb, env, Options{Attacks: []string{tc.attack}, Rounds: []int{1}, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			m := summaryOf(t, res, tc.attack)
			mu := muOfAUC(m.AUC)
			t.Logf("%s: AUC %.4f, mu %.3f (best test %.3f), %d runs scored", tc.attack, m.AUC, mu, tc.want, m.Runs)
			if m.Runs != 2*(pairs-pairs/5) || m.Missing != 0 {
				t.Errorf("%d runs scored, %d missing; want %d, 0", m.Runs, m.Missing, 2*(pairs-pairs/5))
			}
			if mu > tc.want+tc.tol || mu < tc.want-tc.tol-tc.lowerSlack {
				t.Errorf("mu %.3f, want %.3f +- %.2f", mu, tc.want, tc.tol)
			}
		})
	}
}

// The vector attacks run on a model fedaudit does not know, where the model-based attacks are
// skipped with the reason.
func TestExternalModelSkips(t *testing.T) {
	skips := ModelSkipped(model.Config{Kind: model.External})
	names := map[string]bool{}
	for _, s := range skips {
		names[s.Name] = true
	}
	for _, n := range []string{"grad-align", "linear", "label", "inversion", "invgrad"} {
		if !names[n] {
			t.Errorf("%s is not skipped for an external model", n)
		}
	}
	for _, n := range []string{"param-lda", "param-cosine", "upload-lda", "loss", "informed-all"} {
		if names[n] {
			t.Errorf("%s is skipped for an external model", n)
		}
	}
}
