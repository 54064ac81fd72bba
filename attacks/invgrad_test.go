package attacks

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/model"
)

// imageSpec is a one-sample client on a 16-16-4 tanh MLP whose 16 inputs are a 4x4 image in
// [0, 1], so the TV prior is active.
func imageSpec(steps int) simSpec {
	return simSpec{model: model.Config{Kind: "mlp", Hidden: []int{16}, Activation: "tanh"}, dim: 16, classes: 4,
		pairs: 4, steps: steps, eta: 0.3, seed: 21}
}

func invgradScores(t *testing.T, spec simSpec, workers int) (*Result, Env) {
	t.Helper()
	path, env, _ := simulate(t, spec)
	env.Shape = []int{1, 4, 4}
	res, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{"invgrad"}, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	return res, env
}

// TestInvgradRecoversWithoutNoise: with sigma = 0 and a one-sample client the objective's
// minimum 0 (up to the small TV term) is at the sample itself, and the reconstruction must reach
// PSNR > 30 dB (RMS error < 0.032 on [0, 1]) for K = 1 and K = 3 local steps; the score must
// have the sign of the world.
func TestInvgradRecoversWithoutNoise(t *testing.T) {
	for _, K := range []int{1, 3} {
		spec := imageSpec(K)
		res, _ := invgradScores(t, spec, 2)
		col := slices.Index(res.MetricNames, MetricPSNR)
		for _, s := range res.Scores {
			if p := s.Metrics[col]; !(p > 30) {
				t.Errorf("K=%d run %d (world %s): PSNR %.1f dB, want > 30", K, s.RunID, runs.WorldName(s.World), p)
			}
			if (s.World == runs.WorldC) != (s.Score > 0) {
				t.Errorf("K=%d run %d (world %s): score %g has the wrong sign", K, s.RunID, runs.WorldName(s.World), s.Score)
			}
		}
		t.Logf("K=%d: mean PSNR %.1f dB, SSIM %.3f", K, summaryOf(t, res, "invgrad").Means[MetricPSNR], summaryOf(t, res, "invgrad").Means[MetricSSIM])
	}
}

// TestInvgradNoiseLowersPSNR: the mean PSNR over 8 runs must fall strictly as sigma goes through
// 0, 0.01, 0.1, 1, a factor 10 apart; the update's entries are of order eta |grad| ~ 0.05, so
// the levels go from exact to noise-dominated.
func TestInvgradNoiseLowersPSNR(t *testing.T) {
	sigmas := []float64{0, 0.01, 0.1, 1}
	var psnrs []float64
	for _, sigma := range sigmas {
		spec := imageSpec(1)
		spec.sigma = sigma
		res, _ := invgradScores(t, spec, 2)
		psnrs = append(psnrs, summaryOf(t, res, "invgrad").Means[MetricPSNR])
	}
	t.Logf("mean PSNR %.1f dB at sigma %v", psnrs, sigmas)
	for i := 1; i < len(psnrs); i++ {
		if !(psnrs[i] < psnrs[i-1]) {
			t.Errorf("mean PSNR %v does not fall as sigma goes through %v", psnrs, sigmas)
			break
		}
	}
}

// TestInvgradIgnoresTruth: the reconstruction and its objective are bit-identical when the
// ground truth in the Env is replaced by other samples; only the score and metrics change.
func TestInvgradIgnoresTruth(t *testing.T) {
	spec := imageSpec(2)
	spec.sigma, spec.pairs = 0.05, 1
	path, env, _ := simulate(t, spec)
	env.Shape = []int{1, 4, 4}
	tb := openTable(t, path)
	env.Meta = tb.Meta()
	obs := observation(t, tb, 1)
	rng := rand.New(rand.NewPCG(9, 9))
	other := env
	other.Target = randomSample(rng, spec.dim, 3)
	other.TargetPrime = randomSample(rng, spec.dim, 2)
	var xs [][]float64
	var objs []float64
	for _, e := range []*Env{&env, &other} {
		if err := check(invgradAttack{}, e); err != nil {
			t.Fatal(err)
		}
		x, obj, err := invgradAttack{}.reconstruct(e, obs)
		if err != nil || x == nil {
			t.Fatalf("reconstruct: %v, %v", x, err)
		}
		xs, objs = append(xs, x), append(objs, obj)
	}
	if !slices.Equal(xs[0], xs[1]) || objs[0] != objs[1] {
		t.Errorf("the reconstruction depends on the ground truth: objective %v vs %v", objs[0], objs[1])
	}
}

// observation returns the round-1 observation of run id of a simulated table, with its round-0
// row as Prev.
func observation(t *testing.T, tb *runs.Table, id int64) *Observation {
	t.Helper()
	var rows [2]*runs.Row
	err := tb.Scan(context.Background(), func(r runs.Row) error {
		if r.RunID == id && r.Round <= 1 {
			rows[r.Round] = &r
		}
		return nil
	})
	if err != nil || rows[0] == nil || rows[1] == nil {
		t.Fatalf("run %d: rows %v, %v", id, rows, err)
	}
	return &Observation{RunID: id, PairID: id / 2, World: int8(id % 2), Round: 1, Row: *rows[1], Prev: rows[0]}
}

// TestInvgradDeterministic: results are bit-identical for 1 and 3 workers and for a second call;
// a different Env.Seed changes the restarts' starts and hence, at sigma > 0, some reconstruction.
func TestInvgradDeterministic(t *testing.T) {
	spec := imageSpec(1)
	spec.sigma = 0.1
	a, env := invgradScores(t, spec, 1)
	b, _ := invgradScores(t, spec, 3)
	if !sameResults(a, b) {
		t.Error("results with 3 workers differ from those with 1")
	}
	path, _, _ := simulate(t, spec)
	env.Seed++
	c, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{"invgrad"}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sameResults(a, c) {
		t.Error("Env.Seed does not reach the restarts")
	}
}

// TestInvgradBudget: scoring 1000 runs of the 16-16-4 MLP must take under a minute on 2 cores
// with the default budget. We time 40 runs with 2 workers and extrapolate, asserting < 2.4 s (60 s
// * 40/1000) with a factor 2 of slack for a loaded machine.
func TestInvgradBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	spec := imageSpec(1)
	spec.sigma, spec.pairs = 0.01, 20
	path, env, _ := simulate(t, spec)
	env.Shape = []int{1, 4, 4}
	tb := openTable(t, path)
	start := time.Now()
	if _, err := Score(context.Background(), tb, env, Options{Attacks: []string{"invgrad"}, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("40 runs in %v: %v per 1000", el, el*25)
	if el > 4800*time.Millisecond {
		t.Errorf("40 runs took %v, over twice the 2.4 s that 1000 runs in a minute allow", el)
	}
}

// TestInvgradLargerClient: with 4 samples per client the one-sample model is misspecified; the
// attack must still return finite scores and metrics for every run (none missing, none
// non-finite), and its reconstruction stays in the box, so the MSE is at most 1.
func TestInvgradLargerClient(t *testing.T) {
	spec := imageSpec(2)
	spec.extra, spec.sigma = 3, 0.01
	res, _ := invgradScores(t, spec, 2)
	m := summaryOf(t, res, "invgrad")
	if m.Missing != 0 || m.NonFinite != 0 || m.Runs != 2*spec.pairs {
		t.Errorf("%d runs, %d missing, %d non-finite; want %d, 0, 0", m.Runs, m.Missing, m.NonFinite, 2*spec.pairs)
	}
	col := slices.Index(res.MetricNames, MetricMSE)
	for _, s := range res.Scores {
		if mse := s.Metrics[col]; !(mse >= 0 && mse <= 1) {
			t.Errorf("run %d: MSE %v outside [0, 1]", s.RunID, mse)
		}
	}
}

// TestInvgradStopsOnCancel: an interrupt stops a reconstruction under way, on an MLP and on a
// CNN, where the runner only stopped handing out work and waited seconds to minutes for each
// worker's reconstruction (Slurm kills 30 s after its SIGTERM).
func TestInvgradStopsOnCancel(t *testing.T) {
	mlp := imageSpec(1)
	cnn := cnnSpec("tanh-avgpool", 1)
	for _, tc := range []struct {
		name  string
		spec  simSpec
		shape []int
	}{{"mlp", mlp, []int{1, 4, 4}}, {"cnn", cnn, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			path, env, _ := simulate(t, tc.spec)
			if tc.shape != nil {
				env.Shape = tc.shape
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				// A budget no test waits for: only the cancel ends it.
				_, err := Score(ctx, openTable(t, path), env, Options{Attacks: []string{"invgrad"}, Workers: 1, InvgradIterations: 100_000_000})
				done <- err
			}()
			time.Sleep(200 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Score after the cancel: %v, want context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Score still runs 5 s after the cancel")
			}
		})
	}
}
