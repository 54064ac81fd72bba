package spec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whole numbers: a fraction in an integer field is refused wherever it is, a float spelling of
// a whole number accepted.
func TestWholeNumbers(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"pairs: 200.5", "pairs: need a whole number, got 200.5 (line 1)"},
		{"pairs: 1e3", ""},
		{"pairs: 2.0", ""},
		{"train: {rounds: 3.7}", "train.rounds: need a whole number, got 3.7"},
		{"train: {checkpoints: [1, 2.5]}", "train.checkpoints[1]: need a whole number, got 2.5"},
		{"train: {model: {hidden: [16.5]}}", "train.model.hidden[0]: need a whole number, got 16.5"},
		{"data: {clients: .inf}", "data.clients: need a whole number, got .inf"},
		{"train: {learning_rate: 0.5}", ""},
		{"train: {algorithm: fedavg}", ""},
		{"seed: 3.5", "seed: need a whole number, got 3.5"},
	} {
		err := wholeNumbers([]byte(c.yaml))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.yaml, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
}

// Kinds whose worlds hold no canary (remove, gradient) do not build the one adjacency.canary
// names: a pattern canary on flat data used to fail the data's preparation for a sample nobody
// uses.
func TestNoCanaryBuiltWhereNoneEnters(t *testing.T) {
	for _, adj := range []string{
		"{kind: remove, client: 0, index: 1, canary: pattern}",
		"{kind: gradient, client: 0, index: 1, canary: pattern, gradient: {norm: 3}}",
	} {
		cfg, err := Parse([]byte(tinyHead + "train: {algorithm: fedavg, model: {kind: softmax}, rounds: 1, local_steps: 1, learning_rate: 0.1}\nadjacency: " + adj + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", adj, err)
		}
		if _, err := Prepare(cfg); err != nil {
			t.Errorf("%s: %v", adj, err)
		}
	}
}

// TestCheckStagesNeedsCheckpointAfterZero: the attacks score the models of rounds 1 and later,
// and a run file records the checkpoints only. With no checkpoint every shard trained to its end
// and then failed ("no checkpoint was recorded"); with round 0 alone training succeeded and the
// attack stage found no rounds to score. Both are config errors before training now, saying
// what to set.
func TestCheckStagesNeedsCheckpointAfterZero(t *testing.T) {
	for _, c := range []struct {
		checkpoints string
		want        string // "" when accepted
	}{
		{"[]", "train.checkpoints: none listed"},
		{"[0]", "train.checkpoints: [0] lists no round after 0"},
		{"[0, 3]", ""},
		{"[3]", ""},
	} {
		t.Run(c.checkpoints, func(t *testing.T) {
			cfg, err := Parse([]byte(tinyHead +
				"train: {algorithm: fedavg, model: {kind: softmax}, rounds: 3, local_steps: 1, learning_rate: 0.1, checkpoints: " + c.checkpoints + "}\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckStages(cfg)
			if c.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			wantConfigError(t, err, c.want, "e.g. 3 for the final model")
		})
	}
}

// An attack whose statistic only audit import writes (informed-diff) cannot be had by
// recording more: the refusal says it scores imported runs, not which train.record_* to set.
// An attack that recording would enable keeps the advice to record it.
func TestCheckStagesImportOnlyAttack(t *testing.T) {
	for _, c := range []struct {
		attack, want, not string
	}{
		{"informed-diff", "informed-diff scores imported runs only", "record what it needs"},
		{"informed-all", "record what it needs", "imported runs only"},
	} {
		cfg, err := Parse([]byte(tinyHead +
			"train: {algorithm: fedavg, model: {kind: softmax}, rounds: 3, local_steps: 1, learning_rate: 0.1, noise_std: 0.1, checkpoints: [3]}\n" +
			"audit: {attacks: [" + c.attack + "]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckStages(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("%s: %v, want an error saying %q and not %q", c.attack, err, c.want, c.not)
		}
	}
}

// A stated claim about a threat model none of the attacks that will run observes is refused
// before training: the analysis would judge it on no row. One some attack observes, or no
// stated claim, passes.
func TestCheckStagesClaimCovered(t *testing.T) {
	for _, c := range []struct {
		audit, want string // want "" when accepted
	}{
		{"{attacks: [informed-all, loss], claim_mu: 1, claim_about: uploads}", "audit.claim_about: uploads, but none of the attacks that will run (informed-all, loss) observes the uploads"},
		{"{attacks: [informed-upload], claim_mu: 1}", "audit.claim_about: models, but none of the attacks that will run (informed-upload) observes the models"},
		{"{attacks: [informed-all, informed-upload], claim_mu: 1, claim_about: uploads}", ""},
		{"{attacks: [informed-all, loss], claim_mu: 1}", ""},
		{"{attacks: [informed-all, loss], claim_about: uploads}", ""},
	} {
		cfg, err := Parse([]byte(tinyHead +
			"train: {algorithm: fedavg, model: {kind: softmax}, rounds: 3, local_steps: 1, learning_rate: 0.1, noise_std: 0.1, informed: true, checkpoints: [3]}\n" +
			"audit: " + c.audit + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckStages(cfg)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.audit, err, c.want)
		}
	}
}

// TestUnreadableDataIsNoConfigError: data the config names and cannot have is a config error
// (exit 2: an unknown name, a missing file), but a file there that cannot be read is a failure
// a retry may clear (exit 1), not one the config must fix: a Kubernetes index fails at once on
// exit 2. A path through a file (ENOTDIR) stands for the read errors root cannot be given.
func TestUnreadableDataIsNoConfigError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source string
		config bool
	}{{"nosuch-dataset", true}, {filepath.Join(t.TempDir(), "missing.idx"), true}, {filepath.Join(file, "images.idx"), false}} {
		cfg := &Config{Name: "x", Pairs: 1, Data: DataConfig{Source: c.source, Clients: 1, PerClient: 2},
			Adjacency: AdjacencyConfig{Kind: "replace", Canary: "dirac"}}
		_, err := PrepareContext(context.Background(), cfg)
		var ce *ConfigError
		if err == nil || errors.As(err, &ce) != c.config {
			t.Errorf("%s: %v (a config error: %v), want one: %v", c.source, err, errors.As(err, &ce), c.config)
		}
	}
}

// TestNoiselessDPFedAvgNeedsAStatedClaim: without a stated claim a dp-fedavg audit judges its
// accountant's, which a noise multiplier of 0 (or so small that 2 z^2 underflows) makes
// infinite; `audit plan` accepted such a config and `audit run` failed with the accountant's
// error after training. A stated claim, or real noise, is accepted.
func TestNoiselessDPFedAvgNeedsAStatedClaim(t *testing.T) {
	const head = "name: t\nseed: 1\npairs: 4\ndata: {source: synthetic, synthetic: {dim: 4, classes: 2}, clients: 4, per_client: 4}\n" +
		"adjacency: {kind: remove-client, client: 0, index: 0}\n"
	for _, c := range []struct {
		z, audit, want string // want "" when accepted
	}{
		{"0", "", "train.noise_multiplier: 0 adds no noise the accountant can count"},
		{"1e-300", "", "train.noise_multiplier: 1e-300 adds no noise"},
		{"0", "audit: {claim_epsilon: 2, claim_delta: 1e-5}\n", ""},
		{"0", "audit: {claim_mu: 1}\n", ""},
		{"1.5", "", ""},
	} {
		_, err := Parse([]byte(head + "train: {algorithm: dp-fedavg, model: {kind: quadratic, curvature: 1}, rounds: 2, local_steps: 1, learning_rate: 0.5, sampling_rate: 0.5, noise_multiplier: " +
			c.z + ", update_clip: 1, checkpoints: [2]}\n" + c.audit))
		if c.want == "" {
			if err != nil {
				t.Errorf("z %s, %q: refused: %v", c.z, c.audit, err)
			}
			continue
		}
		wantConfigError(t, err, c.want, "state audit.claim_epsilon or audit.claim_mu")
	}
}
