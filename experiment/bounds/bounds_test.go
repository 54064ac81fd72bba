package bounds

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/theory"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/model"
)

// TestTheoryAtDPSGDSumsPerExampleGradients checks the convergent bound of dpsgd against an
// instance with a known answer. dpsgd steps on the sum of its batch's per-example gradients
// with a rate that is the mean-gradient rate divided by the batch size (docs/training.md,
// "Algorithms as implemented"), and with one local step the bound's gamma_t = 2V eta is that of
// the sum (TestTheoryAtDPSGDLocalSteps has more steps); so
// with B examples of per-example smoothness L (what SmoothnessOf certifies) one step is
// Lipschitz with constant 1 + eta B L, and B L is the theorem's L, not L. The per-example
// losses f_j(w) = -(L/2) w^2 - x_j w (each L-smooth, clipping never active) make one step
// (K = 1) the affine map w -> (1 + eta B L) w + eta sum_j x_j, and replacing x_j by x_j' with
// |x_j - x_j'| = 2V shifts it by 2 V eta = gamma: the exact reference instance of
// docs/theory.md with a = -B L, which attains the convergent bound (Theorem 3a's shape), so
// the bound must equal its final model's mu (theory.QuadraticFinalMu).
func TestTheoryAtDPSGDSumsPerExampleGradients(t *testing.T) {
	const (
		perClient = 50
		batch     = 10
		L         = 1.0
		eta       = 0.01
		sigma     = 0.1
		clip      = 1.0
	)
	for _, c := range []struct {
		batching algo.Batching
		kind     string
		batch    int // the largest batch a step can hold
	}{
		{algo.Full, "replace", perClient},
		{algo.Full, "add", perClient + 1}, // C' holds one example more
		{algo.Fixed, "replace", batch},
		{algo.Poisson, "replace", perClient}, // a Poisson batch may hold every example
	} {
		cfg := &spec.Config{
			Data:      spec.DataConfig{Clients: 1, PerClient: perClient},
			Adjacency: spec.AdjacencyConfig{Kind: c.kind},
			Train: train.Config{
				Algorithm: algo.DPSGD, Model: model.Config{Kind: "softmax"},
				LearningRate: eta, LocalSteps: 1, Schedule: "constant",
				Batching: c.batching, BatchSize: batch, NoiseStd: sigma, ClipNorm: clip,
			},
		}
		rounds := []int{1, 2, 10, 100}
		got, err := TheoryAt(cfg, Smoothness{L: L, Source: "certified"}, rounds)
		if err != nil {
			t.Fatal(err)
		}
		rho := 1 + eta*float64(c.batch)*L
		for i, T := range rounds {
			exact := theory.QuadraticFinalMu(1, 2*clip*eta, sigma, rho, T)
			// The instance attains the bound: rho and gamma are both tight for it.
			if math.Abs(got[i].Mu-exact) > 1e-9*exact {
				t.Errorf("%s batches, %s: T=%d: convergent bound %.10g, want %.10g", c.batching, c.kind, T, got[i].Mu, exact)
			}
		}
	}
}

// TestTheoryAtDPSGDLocalSteps: with K >= 2 local steps, dpsgd's other examples move gamma_t
// once the worlds' iterates differ (theory.Config.Batch). The experiment passes the largest
// batch, and without a known L the composition bound takes every other example at its largest
// change, 2V each: gamma = 2 V eta (1 + B (K - 1)), never the smaller value the placeholder L
// of an unknown smoothness would give.
func TestTheoryAtDPSGDLocalSteps(t *testing.T) {
	const batch, K, eta, sigma, clip = 10, 3, 0.01, 0.5, 1.0
	cfg := &spec.Config{
		Data: spec.DataConfig{Clients: 1, PerClient: 50},
		Train: train.Config{
			Algorithm: algo.DPSGD, Model: model.Config{Kind: "softmax"},
			LearningRate: eta, LocalSteps: K, Schedule: "constant",
			Batching: algo.Fixed, BatchSize: batch, NoiseStd: sigma, ClipNorm: clip,
		},
	}
	free, err := TheoryAt(cfg, Smoothness{Source: "none"}, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	want := 2 * clip * eta * (1 + batch*(K-1)) / sigma
	if got := free[0].MuComposition; math.Abs(got-want) > 1e-12*want {
		t.Errorf("without L: composition %v, want %v", got, want)
	}
	known, err := TheoryAt(cfg, Smoothness{L: 1, Source: "certified"}, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	// With a known L the recurrence of theory.Config.Batch lies above the one-example value
	// 2 V eta K and below the L-free one.
	if got := known[0].MuComposition; !(got > 2*clip*eta*K/sigma && got < want) {
		t.Errorf("with L: composition %v, want between %v and %v", got, 2*clip*eta*K/sigma, want)
	}
}

// TestTheoryConfigFedAvgKeepsL checks that fedavg, which steps on the batch mean, keeps L.
func TestTheoryConfigFedAvgKeepsL(t *testing.T) {
	cfg := &spec.Config{
		Data: spec.DataConfig{Clients: 4, PerClient: 50},
		Train: train.Config{
			Algorithm: algo.FedAvg, Model: model.Config{Kind: "softmax"},
			LearningRate: 0.01, LocalSteps: 3, Schedule: "constant",
			Batching: algo.Full, NoiseStd: 0.1, ClipNorm: 1,
		},
	}
	tc, err := TheoryConfig(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tc.L != 2 {
		t.Errorf("fedavg: theory L = %v, want the smoothness 2 of the mean loss", tc.L)
	}
}

// FedProx with alpha <= L is outside Theorem 4: no convergent bound. Its per-round sensitivity
// needs only eta alpha <= 1, so the bounds that do not use L (composition, and the uploads
// bound of round 1) are still given, equal to those computed without any L; before, the whole
// theory was dropped and every row of such an audit went unjudged.
func TestTheoryAtFedProxAlphaBelowL(t *testing.T) {
	cfg := &spec.Config{
		Data: spec.DataConfig{Clients: 4, PerClient: 50},
		Train: train.Config{
			Algorithm: algo.FedProx, ProxAlpha: 0.5, Model: model.Config{Kind: "softmax"},
			LearningRate: 0.1, LocalSteps: 3, Schedule: "constant",
			Batching: algo.Full, NoiseStd: 0.1, ClipNorm: 1,
		},
	}
	rounds := []int{1, 5}
	got, err := TheoryAt(cfg, Smoothness{L: 2, Source: "certified"}, rounds)
	if err != nil {
		t.Fatalf("alpha 0.5 <= L 2: %v, want the bounds that need no L", err)
	}
	want, err := TheoryAt(cfg, Smoothness{Source: "none"}, rounds)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rounds {
		g, w := got[i], want[i]
		if !(g.MuComposition > 0) || g.MuComposition != w.MuComposition || g.MuUploadsComposition != w.MuUploadsComposition {
			t.Errorf("T=%d: composition %v / uploads composition %v, want %v / %v", g.T, g.MuComposition, g.MuUploadsComposition, w.MuComposition, w.MuUploadsComposition)
		}
		if !math.IsNaN(g.Mu) {
			t.Errorf("T=%d: convergent bound %v outside Theorem 4, want none (NaN)", g.T, g.Mu)
		}
	}
	// Above L the convergent bound is back.
	cfg.Train.ProxAlpha = 3
	ok, err := TheoryAt(cfg, Smoothness{L: 2, Source: "certified"}, rounds)
	if err != nil || math.IsNaN(ok[1].Mu) {
		t.Errorf("alpha 3 > L 2: %v, convergent bound %v", err, ok)
	}
}

// ExactMu's formulas hold only while clipping is never active. A gradient canary that alone
// takes the target client's mean gradient past the clip norm (Norm / n >= clip_norm) clips
// every step of the target: the final model's exact mu is then the composition's, not the
// instance's. Before, `audit run` printed an "exact" mu of 166.9 beside a composition bound of
// 1.34 for such a deployment (norm 1000, clip 1, 8 samples a client). The clients' own
// gradients count too: with clip 1 those of this data (|b| + |b - b_i| plus the noise's reach)
// pass it at w_0 already, so even a small canary's instance is no exact answer (it was given).
func TestExactMuRefusesAClippedGradientCanary(t *testing.T) {
	const base = `
seed: 101
pairs: 4
data:
  source: synthetic
  synthetic: {dim: 8, classes: 2, separation: 2, noise: 1}
  clients: 4
  per_client: 8
adjacency: {kind: gradient, client: 0, index: 0, gradient: {norm: NORM, opposite: true}}
train:
  algorithm: fedavg
  model: {kind: quadratic, curvature: 0.5}
  rounds: 2
  local_steps: 2
  learning_rate: 0.1
  clip_norm: CLIP
  noise_std: 0.5
  checkpoints: [0, 2]
  record_params: true
audit:
  attacks: [grad-canary]
`
	for _, tc := range []struct {
		norm, clip string
		pretrain   bool
		ok         bool
	}{{"4", "20", false, true}, {"160", "20", false, false}, {"1000", "20", false, false}, {"4", "1", false, false},
		// A pretrained w_0 is not the path from w_0 = 0 that clipNeverBinds bounds.
		{"4", "20", true, false}} {
		text := strings.NewReplacer("NORM", tc.norm, "CLIP", tc.clip).Replace(base)
		if tc.pretrain {
			text = strings.Replace(text, "  record_params: true\n", "  record_params: true\n  pretrain: {rounds: 3}\n", 1)
		}
		cfg, err := spec.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		data, err := spec.Prepare(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, ok := ExactMu(cfg, data); ok != tc.ok {
			t.Errorf("canary norm %s, clip %s, 8 samples, pretrained %v: ExactMu ok %v, want %v", tc.norm, tc.clip, tc.pretrain, ok, tc.ok)
		}
	}
}

// TestSmoothnessOf: the certified L where the model has one, a given L at or above it, a given
// L for models without one, none otherwise; a given L below the certified one is refused by
// spec.CheckSmoothness, the check spec.Prepare makes before training, as a config error
// (status 2) here too.
func TestSmoothnessOf(t *testing.T) {
	const base = "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\n" +
		"adjacency: {kind: replace, client: 0, index: 1, canary: dirac}\n" +
		"train: {algorithm: fedavg, rounds: 1, local_steps: 1, learning_rate: 0.1, checkpoints: [1], model: "
	for _, c := range []struct {
		name, model string
		given       float64
		wantL       float64 // 0: the certified constant
		source      string  // "": refused
	}{
		{"quadratic certified", "{kind: quadratic, curvature: 3}", 0, 3, "certified"},
		{"quadratic given", "{kind: quadratic, curvature: 3}", 4, 4, "given"},
		{"quadratic below", "{kind: quadratic, curvature: 3}", 2, 0, ""},
		{"softmax certified", "{kind: softmax}", 0, 0, "certified"},
		{"softmax below", "{kind: softmax}", 0.5, 0, ""},
		{"mlp given", "{kind: mlp, hidden: [4], activation: tanh}", 0.001, 0.001, "given"},
		{"mlp none", "{kind: mlp, hidden: [4], activation: tanh}", 0, 0, "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := spec.Parse([]byte(base + c.model + "}\n"))
			if err != nil {
				t.Fatal(err)
			}
			data, err := spec.Prepare(cfg) // before the given L, which Prepare would refuse
			if err != nil {
				t.Fatal(err)
			}
			cfg.Audit.Smoothness = c.given
			sm, err := SmoothnessOf(cfg, data)
			if c.source == "" {
				var ce *spec.ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), "is below the certified smoothness") {
					t.Errorf("got %+v, %v; want a config error on audit.smoothness", sm, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.wantL
			if c.source == "certified" && want == 0 {
				want, _ = spec.CertifiedSmoothness(cfg, data)
			}
			if sm.Source != c.source || sm.L != want {
				t.Errorf("got %+v, want L %v from %s", sm, want, c.source)
			}
		})
	}
}

// TestExactMuDirectionCanariesNeedUnclippedUpdates: the final model's exact mu of dp-fedavg's
// direction canaries on the quadratic model holds where no real client's update is clipped
// (directionCanaryMaps). There the round multiplies w_t by A = 1 + server_lr (n/m)(rho - 1),
// n the clients that train: m in C, m - 1 in C' under remove-client, so C' has the larger
// factor and the larger mu, which bounds every canary. Where the update clip can bind (a
// small clip, or the noise and the canaries of 2000 dimensions, which move w_t by about
// z c sqrt(d) server_lr/m a round, past c/|1 - rho| at rate 0.3) the final row has no exact
// mu; results/onerun-quadratic's 4000 dimensions at rate 0.1 keep it (its 1000 canaries'
// one-shot estimate is 2.005 at T = 4, the exact mu 1.997). A config of the binding kind (2
// clients, server_lr 1.8) was given 1.105, where 1000 canaries' one-shot estimate was 1.94.
// The observer of every iterate keeps sqrt(T)/z: its rounds' canary shifts do not depend on
// the real updates.
func TestExactMuDirectionCanariesNeedUnclippedUpdates(t *testing.T) {
	const base = `
seed: 5
pairs: 1
data:
  source: synthetic
  synthetic: {dim: DIM, classes: 2, separation: 3, noise: 1}
  clients: 10
  per_client: 10
adjacency: {kind: remove-client, client: 0}
train:
  algorithm: dp-fedavg
  model: {kind: quadratic, curvature: 1}
  rounds: 4
  local_steps: 1
  learning_rate: LR
  sampling_rate: 1
  noise_multiplier: 1
  update_clip: CLIP
  checkpoints: [4]
  canaries: {count: COUNT, kind: direction, orthogonal: true}
audit:
  method: one-run
`
	for _, tc := range []struct {
		dim, lr, clip, count string
		known                bool
	}{
		{"4", "0.05", "100", "4", true},
		{"4", "0.05", "0.01", "4", false},
		{"2000", "0.05", "100", "1000", true},
		{"2000", "0.3", "100", "1000", false},
		{"2000", "0.5", "1000", "1000", false},
	} {
		cfg, err := spec.Parse([]byte(strings.NewReplacer("DIM", tc.dim, "LR", tc.lr, "CLIP", tc.clip, "COUNT", tc.count).Replace(base)))
		if err != nil {
			t.Fatal(err)
		}
		data, err := spec.Prepare(cfg)
		if err != nil {
			t.Fatal(err)
		}
		exact, ok := ExactMuOneRun(cfg, data)
		if !ok {
			t.Fatalf("dim %s, clip %s: no exact mu at all", tc.dim, tc.clip)
		}
		const T = 4
		if got := exact("all-iterates", T); got != 2 {
			t.Errorf("dim %s, clip %s: all iterates %v, want sqrt(T)/z = 2", tc.dim, tc.clip, got)
		}
		got := exact("final", T)
		if !tc.known {
			if !math.IsNaN(got) {
				t.Errorf("dim %s, lr %s, clip %s, %s canaries: final %v where the update clip can bind", tc.dim, tc.lr, tc.clip, tc.count, got)
			}
			continue
		}
		rho := 1 - 0.05 // one step at rate 0.05 on curvature 1: |1 - rho| w_t stays below c
		inC := theory.QuadraticFinalMu(1, 1, 1, 1+(rho-1), T)
		inCPrime := theory.QuadraticFinalMu(1, 1, 1, 1+0.9*(rho-1), T)
		if !(inCPrime > inC) || math.Abs(got-inCPrime) > 1e-12 {
			t.Errorf("final %v, want C''s %v (C's %v)", got, inCPrime, inC)
		}
	}
}

// TestExactMuGaussianOnly: the quadratic instance's exact mu is the Gaussian mechanism's;
// with Laplace or staircase noise of the same standard deviation it was still reported as the
// exact mu (of the pairs, and of gradient and record canaries), and valid certified bounds of
// staircase noise came out above it in 93 audits of 100.
func TestExactMuGaussianOnly(t *testing.T) {
	const base = `
seed: 7
pairs: 4
data:
  source: synthetic
  synthetic: {dim: 2, classes: 2, separation: 2, noise: 1}
  clients: 1
  per_client: 8
adjacency: {kind: replace, client: 0, index: 0, canary: dirac, pixels: 1}
train:
  algorithm: fedavg
  model: {kind: quadratic, curvature: 0.5}
  rounds: 1
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 0
  noise_std: 0.1
MECHANISM  checkpoints: [1]
`
	for _, tc := range []struct {
		mechanism string
		ok        bool
	}{{"", true}, {"  mechanism: gaussian\n", true}, {"  mechanism: laplace\n", false}, {"  mechanism: staircase\n  staircase_epsilon: 6\n", false}} {
		cfg, err := spec.Parse([]byte(strings.Replace(base, "MECHANISM", tc.mechanism, 1)))
		if err != nil {
			t.Fatal(err)
		}
		data, err := spec.Prepare(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, ok := ExactMu(cfg, data); ok != tc.ok {
			t.Errorf("%q: ExactMu ok %v, want %v", strings.TrimSpace(tc.mechanism), ok, tc.ok)
		}
		cc := cfg.Train
		cc.Canaries = &canary.Config{Count: 1, Kind: canary.Gradients, Norm: 8, Client: 0, Orthogonal: true}
		cfg.Train = cc
		if _, ok := ExactMuOneRun(cfg, data); ok != tc.ok {
			t.Errorf("%q: ExactMuOneRun of gradient canaries ok %v, want %v", strings.TrimSpace(tc.mechanism), ok, tc.ok)
		}
	}
}

// DP-SGD with K >= 2 bounds the other examples' drift by L, so its composition bounds used the
// L: given or estimated, they are estimates, and TheoryAt gives beside them the bounds that
// hold whatever L (the experiment judges by those); certified, they are bounds as they are.
func TestCompositionWhateverL(t *testing.T) {
	cfg := spec.Demo()
	cfg.Train.Algorithm = algo.DPSGD
	cfg.Train.LocalSteps = 5
	cfg.Train.NoiseStd = 1
	cfg.Data.Clients = 1
	cfg.Train.Rounds = 5
	cfg.Train.Checkpoints = []int{5}
	at := func(sm Smoothness) theory.Bound {
		b, err := TheoryAt(cfg, sm, []int{5})
		if err != nil {
			t.Fatal(err)
		}
		return b[0]
	}
	none := at(Smoothness{Source: "none"})
	for _, source := range []string{"given", "estimated"} {
		b := at(Smoothness{L: 0.01, Source: source})
		if !(b.MuComposition < none.MuComposition) || b.MuCompositionAnyL != none.MuComposition || b.MuUploadsCompositionAnyL != none.MuUploadsComposition {
			t.Errorf("L %s: composition %g (whatever L %g, uploads %g), want below %g and the bounds without L beside it (%g, %g)",
				source, b.MuComposition, b.MuCompositionAnyL, b.MuUploadsCompositionAnyL, none.MuComposition, none.MuComposition, none.MuUploadsComposition)
		}
	}
	if b := at(Smoothness{L: 0.01, Source: "certified"}); b.MuCompositionAnyL != 0 || b.MuUploadsCompositionAnyL != 0 {
		t.Errorf("certified L: whatever-L bounds %g and %g set, want none", b.MuCompositionAnyL, b.MuUploadsCompositionAnyL)
	}
	cfg.Train.LocalSteps = 1 // one step: gamma_t needs no L
	if b := at(Smoothness{L: 0.01, Source: "given"}); b.MuCompositionAnyL != 0 || b.MuComposition != at(Smoothness{Source: "none"}).MuComposition {
		t.Errorf("K = 1: composition %g, whatever-L %g; want the bound without L and none beside it", b.MuComposition, b.MuCompositionAnyL)
	}
}
