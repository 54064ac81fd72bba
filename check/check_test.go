package check

import (
	"context"
	"fmt"
	"github.com/fedaudit/fedaudit/findings"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/importer"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

const checkYAML = `
name: check
seed: 3
pairs: 2
data:
  source: synthetic
  synthetic: {dim: 12, classes: 3}
  clients: 4
  per_client: 8
  test_samples: 10
adjacency: {kind: replace, client: 0, index: 2, canary: relabel}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [16], activation: tanh}
  rounds: 6
  local_steps: 3
  learning_rate: 0.5
  batching: full
  clip_norm: 0.05
  noise_std: 0.2
  checkpoints: [0, 1, 2, 3, 4, 5, 6]
  informed: true
  record_params: true
  record_upload: true
`

func parseConfig(t testing.TB) *spec.Config {
	t.Helper()
	cfg, err := spec.Parse([]byte(checkYAML))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fedaudit's own trainer passes every check, and every check runs: its worlds share their noise
// and its rounds replay bit for bit.
func TestOwnRunsPass(t *testing.T) {
	rep, err := Run(context.Background(), trainOwn(t, parseConfig(t)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed {
		t.Fatalf("fedaudit's own runs fail: %+v", rep.Failed())
	}
	for _, name := range []string{"shared-w0", "coupled-difference", "coupled-residuals", "noise-scale", "noise-independence"} {
		if !slices.ContainsFunc(rep.Checks, func(r findings.CheckResult) bool { return r.Name == name }) {
			t.Errorf("check %s did not run; skipped: %+v", name, rep.Skipped)
		}
	}
	for _, c := range rep.Checks {
		if c.Name == "coupled-residuals" && c.Statistic > 1e-3 {
			t.Errorf("coupled residuals of fedaudit's own runs differ by %g of their tolerance", c.Statistic)
		}
	}
}

// A deployment bug of the simulated external trainer.
type bug struct {
	name string
	// noiseScale multiplies every noise draw; tensorFree leaves the layout's last tensor (a
	// bias) without noise; reuse draws a pair's noise once; uncoupled gives each world its own
	// draws; noClip trains without the declared clipping; otherW0 starts one run elsewhere.
	noiseScale            float64
	tensorFree, reuse     bool
	uncoupled, noClip, w0 bool
	caughtBy              string // the check that must fail; "" for a correct deployment
	skipped               string // a check that must be skipped instead
}

// simulate writes an experiment directory of runs trained by an external trainer: the rounds
// replayed without noise by train.ReplayRound, then noised as the bug says, like a deployment
// that records every round and the target's uploads.
func simulate(t testing.TB, cfg *spec.Config, b bug, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.SetUpDirectory(cfg, dir, 1); err != nil {
		t.Fatal(err)
	}
	lay, err := importer.LayoutOf(cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(expdir.Dir(dir).Runs(), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := runs.Create(filepath.Join(expdir.Dir(dir).Runs(), runs.Shard{}.FileName()), runs.Meta{
		Config: cfg.TrainingJSON(), DatasetHash: data.Hash, ToolVersion: "test", HasParams: true, HasUpload: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	trainCfg := cfg.Train
	if b.noClip {
		trainCfg.ClipNorm = 0
	}
	job := train.Job{Config: trainCfg, WorldC: data.Pair.C, WorldCPrime: data.Pair.CPrime, Target: data.Target,
		Pairs: train.PairRange{Count: cfg.Pairs}}
	rng := rand.New(rand.NewPCG(seed, 11))
	d, n := lay.D, float64(len(data.Pair.C))
	sigma := cfg.Train.NoiseStd
	if b.noiseScale != 0 {
		sigma *= b.noiseScale
	}
	last := lay.Slots[len(lay.Slots)-1]
	draw := func() []float32 {
		z := make([]float32, d)
		for i := range z {
			if b.tensorFree && i >= last.Offset {
				continue
			}
			z[i] = float32(rng.NormFloat64())
		}
		return z
	}
	R := 2 * cfg.Pairs
	params := writeStartRows(t, w, b, rng, d, R)
	var first [][2][]float32 // per replica, round 0's draws of the target and the others
	for round := 0; round < cfg.Train.Rounds; round++ {
		rp, err := train.ReplayRound(context.Background(), job, round, params)
		if err != nil {
			t.Fatal(err)
		}
		next := make([][]float32, R)
		cur := make([][2][]float32, R)
		for r := range R {
			own := r % 2
			switch {
			case b.reuse && round > 0:
				cur[r] = first[r]
			case own == 1 && !b.uncoupled:
				cur[r] = cur[r-1] // the pair's world C drew them this round
			default:
				cur[r] = [2][]float32{draw(), draw()}
			}
			zt, zo := cur[r][0], cur[r][1]
			upload := make([]float32, d)
			next[r] = make([]float32, d)
			for i := range upload {
				upload[i] = rp.Target[r][own][i] + float32(sigma)*zt[i]
				// The average: the target's noise over n, the others' as one N(0, (n-1) sigma^2) draw.
				next[r][i] = rp.Mean[r][own][i] + float32(sigma/n)*zt[i] + float32(sigma*math.Sqrt(n-1)/n)*zo[i]
			}
			if err := w.Write(runs.Row{RunID: int64(r), PairID: int64(r / 2), World: int8(own), Round: int32(round + 1), Params: next[r], Upload: upload}); err != nil {
				t.Fatal(err)
			}
		}
		params = next
		if round == 0 {
			first = cur
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeStartRows draws the starting model w0 from rng and writes round 0's row of each of
// the R runs to w (the model, no upload: NaNs), the last run started elsewhere with b.w0; it
// returns the runs' parameters. It is its own piece because it is the deployment's start,
// before the rounds that simulate replays and noises.
func writeStartRows(t testing.TB, w *runs.Writer, b bug, rng *rand.Rand, d, R int) [][]float32 {
	t.Helper()
	params := make([][]float32, R)
	w0 := make([]float32, d)
	for i := range w0 {
		w0[i] = float32(rng.NormFloat64() * 0.3)
	}
	nan := make([]float32, d)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	for r := range params {
		params[r] = w0
		if b.w0 && r == R-1 {
			params[r] = slices.Clone(w0)
			params[r][0] += 1e-3
		}
		if err := w.Write(runs.Row{RunID: int64(r), PairID: int64(r / 2), World: int8(r % 2), Params: params[r], Upload: nan}); err != nil {
			t.Fatal(err)
		}
	}
	return params
}

// Each simulated bug fails the check that looks at what it breaks, and the correct external
// trainer passes; a deployment whose worlds draw their own noise skips the coupled checks
// instead of failing them.
func TestSimulatedBugs(t *testing.T) {
	cfg := parseConfig(t)
	for _, b := range []bug{
		{name: "correct"},
		{name: "half noise", noiseScale: 0.5, caughtBy: "noise-scale"},
		{name: "variance as std", noiseScale: 0.2, caughtBy: "noise-scale"},
		{name: "noise twice", noiseScale: math.Sqrt2, caughtBy: "noise-scale"},
		{name: "unnoised bias", tensorFree: true, caughtBy: "noise-scale"},
		{name: "reused noise", reuse: true, caughtBy: "noise-independence"},
		{name: "no clipping", noClip: true, caughtBy: "coupled-residuals"},
		{name: "second w0", w0: true, caughtBy: "shared-w0"},
		{name: "uncoupled", uncoupled: true, skipped: "coupled-difference and coupled-residuals"},
	} {
		t.Run(b.name, func(t *testing.T) {
			rep, err := Run(context.Background(), simulate(t, cfg, b, 1), Options{})
			if err != nil {
				t.Fatal(err)
			}
			failed := rep.Failed()
			if b.caughtBy == "" {
				if !rep.Passed {
					t.Fatalf("a correct deployment fails: %+v", failed)
				}
			} else if !slices.ContainsFunc(failed, func(r findings.CheckResult) bool { return r.Name == b.caughtBy }) {
				t.Fatalf("%s not caught by %s; failed: %+v", b.name, b.caughtBy, failed)
			}
			if b.skipped != "" && !slices.ContainsFunc(rep.Skipped, func(s findings.CheckSkipped) bool { return strings.HasPrefix(s.Check, b.skipped) }) {
				t.Errorf("%s not skipped: %+v", b.skipped, rep.Skipped)
			}
		})
	}
}

// The family-wise level holds: over 100 seeds of the correct external trainer, at most 10
// reports fail (5 expected at most at alpha 0.05; Bonferroni is conservative; the chance of 11
// or more when the level holds is about 1%).
func TestCorrectDeploymentFalseAlarms(t *testing.T) {
	if testing.Short() {
		t.Skip("100 simulated deployments")
	}
	cfg := parseConfig(t)
	fails := 0
	for seed := range uint64(100) {
		rep, err := Run(context.Background(), simulate(t, cfg, bug{}, seed+100), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Passed {
			fails++
		}
	}
	t.Logf("%d of 100 correct deployments flagged", fails)
	if fails > 10 {
		t.Errorf("%d of 100 correct deployments flagged at alpha 0.05", fails)
	}
}

const participationYAML = `
name: participation
seed: 5
pairs: 40
data:
  source: synthetic
  synthetic: {dim: 8, classes: 2, separation: 4, noise: 1}
  clients: 10
  per_client: 8
adjacency: {kind: remove-client, client: 0, index: 0}
train:
  algorithm: dp-fedavg
  model: {kind: quadratic, curvature: 1}
  rounds: 3
  local_steps: 2
  learning_rate: 0.5
  sampling_rate: 0.4
  noise_multiplier: 1.2
  update_clip: 1
  checkpoints: [0, 1, 2, 3]
  record_params: true
`

// The participation check on fedaudit's own DP-FedAvg runs (q = 0.4): the target took part in
// round 1 of about 40% of the pairs, which passes against the sampling rate the runs used and
// fails against an accountant's rate ten times smaller (audit.claim_sampling_rate 0.04: the
// dp-fedavg-10x deployment of results/), from 40 pairs.
func TestParticipation(t *testing.T) {
	for _, tc := range []struct {
		claimRate float64
		pass      bool
	}{{0, true}, {0.04, false}} {
		cfg, err := spec.Parse([]byte(participationYAML))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Audit.ClaimSamplingRate = tc.claimRate
		rep, err := Run(context.Background(), trainOwn(t, cfg), Options{})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(rep.Checks, func(r findings.CheckResult) bool { return r.Name == "participation" })
		if i < 0 {
			t.Fatalf("claim rate %v: no participation check; skipped %+v", tc.claimRate, rep.Skipped)
		}
		c := rep.Checks[i]
		t.Logf("claim rate %v: %s (p = %.3g)", tc.claimRate, c.Meaning, c.PValue)
		if c.Passed != tc.pass || !(c.Statistic > 0.2 && c.Statistic < 0.6) {
			t.Errorf("claim rate %v: %+v, want passed %v at a rate near 0.4", tc.claimRate, c, tc.pass)
		}
	}
}

func TestBinomialTwoSided(t *testing.T) {
	for _, tc := range []struct {
		k, n int
		q    float64
		want float64
	}{
		{5, 10, 0.5, 1},           // the median: both tails above 1/2
		{0, 10, 0.5, 2 / 1024.0},  // twice P(X = 0)
		{10, 10, 0.5, 2 / 1024.0}, // twice P(X = 10)
		{3, 10, 0, 0}, {0, 10, 0, 1}, {10, 10, 1, 1},
	} {
		if got := binomialTwoSided(tc.k, tc.n, tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("binomialTwoSided(%d, %d, %v) = %v, want %v", tc.k, tc.n, tc.q, got, tc.want)
		}
	}
}

// trainOwn trains cfg's runs with fedaudit's own trainer into a fresh experiment directory.
func trainOwn(t *testing.T, cfg *spec.Config) string {
	t.Helper()
	dir := t.TempDir()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.SetUpDirectory(cfg, dir, 1); err != nil {
		t.Fatal(err)
	}
	if err := experiment.TrainShards(context.Background(), cfg, data, dir, experiment.AllShards(1), experiment.TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A diverged run keeps its last finite parameters, so its later rounds follow no mechanism:
// fedaudit's own runs that diverged failed the checks (clipping skipped, noise off its scale,
// exit 3) as if the deployment were broken. Pairs with a diverged run are left out, and the
// report says how many; when every pair diverged, no check applies and the check is an error.
func TestDivergedPairsLeftOut(t *testing.T) {
	for _, c := range []struct {
		norm     float64
		pairs    int
		diverged int // the pairs with a diverged run; all of them: an error
	}{{3, 2, 2}, {5, 8, 2}} {
		cfg := parseConfig(t)
		cfg.Pairs = c.pairs
		cfg.Train.DivergenceNorm = c.norm
		dir := trainOwn(t, cfg)
		rep, err := Run(context.Background(), dir, Options{})
		if c.diverged == c.pairs {
			if err == nil || !strings.Contains(err.Error(), "every pair") || !strings.Contains(err.Error(), "diverged") {
				t.Errorf("divergence norm %g: every pair diverged, got %v, want an error saying so", c.norm, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d pairs with a diverged run", c.diverged)
		if !rep.Passed || rep.Pairs != c.pairs-c.diverged || !slices.ContainsFunc(rep.Skipped, func(s findings.CheckSkipped) bool { return s.Check == want }) {
			t.Errorf("divergence norm %g: passed %v over %d pairs, skipped %+v; want a pass over %d pairs and %q", c.norm, rep.Passed, rep.Pairs, rep.Skipped, c.pairs-c.diverged, want)
		}
	}
}
