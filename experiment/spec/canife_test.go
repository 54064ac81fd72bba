package spec

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/train"
)

const canifeYAML = `
name: canife-test
seed: 12
pairs: 2
data:
  source: synthetic
  synthetic: {dim: 8, classes: 3, separation: 3, noise: 1}
  clients: 3
  per_client: 6
adjacency: {kind: replace, client: 0, index: 1, canary: canife}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [6], activation: tanh}
  rounds: 2
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.1
  checkpoints: [2]
`

// The canife canary is the sample of C' in place of the target, crafted deterministically (two
// preparations give the same data hash) inside the range of the clients' features; with
// pretraining it is crafted at the pretrained w_0, so it changes. Adjacencies and models it
// cannot serve are refused with the field named.
func TestCANIFECanary(t *testing.T) {
	prepare := func(raw string) *Data {
		t.Helper()
		cfg, err := Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		d, err := Prepare(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := prepare(canifeYAML)
	crafted.Lock()
	crafted.canaries = nil // craft again, not from this process's memo
	crafted.Unlock()
	if b := prepare(canifeYAML); a.Hash != b.Hash {
		t.Fatal("two craftings of one config's canary differ")
	}
	canary := a.Pair.CPrime[0].Sample(1)
	target := a.Pair.C[0].Sample(1)
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, c := range a.Pair.C {
		for _, v := range c.Features {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	same := true
	for i, v := range canary.Features {
		if v < lo || v > hi {
			t.Fatalf("feature %d = %g outside the clients' range [%g, %g]", i, v, lo, hi)
		}
		same = same && v == target.Features[i]
	}
	if same {
		t.Fatal("the canary is the target sample")
	}
	if a.Initial != nil {
		t.Error("a canary crafted at the seeded w_0 hands the trainer a w_0")
	}
	preYAML := strings.Replace(canifeYAML, "  checkpoints: [2]", "  checkpoints: [2]\n  pretrain: {rounds: 20}", 1)
	pre := prepare(preYAML)
	if pre.Hash == a.Hash {
		t.Fatal("the canary crafted at the pretrained w_0 is the one crafted at the seeded w_0")
	}
	// The trainer starts from the w_0 the canary was crafted at: the pretraining's own.
	cfg, err := Parse([]byte(preYAML))
	if err != nil {
		t.Fatal(err)
	}
	w0, err := train.InitialParams(context.Background(), train.Job{Config: cfg.Train, WorldC: pre.Pair.C, WorldCPrime: pre.Pair.CPrime, Target: pre.Target})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pre.Initial, w0) {
		t.Errorf("Data.Initial (%d values) is not the pretrained w_0 (%d values)", len(pre.Initial), len(w0))
	}
	// Kind add: the canary is inserted and C's target sample is shared, so it is in the pool.
	add := prepare(strings.Replace(canifeYAML, "kind: replace, client: 0", "kind: add, client: 0", 1))
	if add.Pair.CPrime[0].Len() != add.Pair.C[0].Len()+1 {
		t.Fatalf("add: C' has %d samples at the target client, C %d", add.Pair.CPrime[0].Len(), add.Pair.C[0].Len())
	}
	for _, edit := range [][2]string{
		{"adjacency: {kind: replace, client: 0, index: 1, canary: canife}", "adjacency: {kind: remove, client: 0, index: 1, canary: canife}"},
		{"model: {kind: mlp, hidden: [6], activation: tanh}", "model: {kind: quadratic, curvature: 1}"},
	} {
		raw := strings.Replace(canifeYAML, edit[0], edit[1], 1)
		if _, err := Parse([]byte(raw)); err == nil || !strings.Contains(err.Error(), "adjacency.canary") {
			t.Errorf("%s: %v, want adjacency.canary named", edit[1], err)
		}
	}
}

// PrepareNote names the crafting, and the pretraining before it, and nothing for other canaries.
func TestPrepareNote(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{canifeYAML, "crafting the canife canary at the seeded w_0"},
		{strings.Replace(canifeYAML, "  checkpoints: [2]", "  checkpoints: [2]\n  pretrain: {rounds: 20}", 1), "at the pretrained w_0 (20 rounds of pretraining"},
		{strings.Replace(canifeYAML, "canary: canife", "canary: dirac", 1), ""},
	} {
		cfg, err := Parse([]byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.PrepareNote(); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("note %q, want one containing %q", got, c.want)
		}
	}
}

// Crafting a canife canary (minutes for a CNN) ends when its context is cancelled, with the
// context's error, so Ctrl-C or a cluster's SIGTERM at its time limit stops a command that is
// preparing its data; nothing cancelled is memoised.
func TestPrepareContextCancelsCrafting(t *testing.T) {
	cfg, err := Parse([]byte(strings.Replace(canifeYAML, "seed: 12", "seed: 13", 1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := PrepareContext(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("crafting under a cancelled context: %v, want %v", err, context.Canceled)
	}
	if _, err := PrepareContext(context.Background(), cfg); err != nil {
		t.Fatalf("after a cancelled crafting: %v", err)
	}
}
