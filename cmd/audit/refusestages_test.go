package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// TestRefusedBeforeTraining checks that configs whose attack or analysis stage would fail after
// the training, or whose numbers the YAML decoder would truncate, are refused by every command
// that trains or plans, with exit status 2 and the field named, before any file is written
// (issue 24, items 9, 11, 11b and 12: each of these trained and then failed, or truncated
// silently).
func TestRefusedBeforeTraining(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type edit struct{ from, to string }
	const attacksLine = "  attacks: [informed-all, loss]\n"
	configs := []struct {
		name  string
		edits []edit
		want  string
	}{
		// Item 9: attack names are checked with the config.
		{"unknown attack", []edit{{attacksLine, "  attacks: [informed-all, los]\n"}}, `audit.attacks: unknown attack "los"`},
		{"attack twice", []edit{{attacksLine, "  attacks: [loss, informed-all, loss]\n"}}, "audit.attacks: loss is listed twice"},
		{"attack without its columns", []edit{{attacksLine, "  attacks: [informed-all, grad-align]\n"}}, "audit.attacks: grad-align: the run files will lack global parameters"},
		{"canary attack without canaries", []edit{{attacksLine, "  attacks: [loss, canary-loss]\n"}}, "audit.attacks: canary-loss scores canaries, and the runs carry none"},
		{"grad-canary without a gradient canary", []edit{{"  informed: true\n", "  informed: true\n  record_params: true\n"}, {attacksLine, "  attacks: [loss, grad-canary]\n"}},
			"audit.attacks: grad-canary projects the final model on a gradient canary's or a crafted update's direction, and the runs have none"},
		{"learned attack on 5 pairs", []edit{{"pairs: 40", "pairs: 5"}, {attacksLine, "  attacks: [loss, lira-offline]\n"}}, "audit.attacks: lira-offline: a learned attack is fitted on every 5th pair (shadow pairs, never scored) and needs two of them: at least 10 pairs, and there are 5"},
		{"rounds not checkpoints", []edit{{attacksLine, attacksLine + "  rounds: [2]\n"}}, "audit.rounds: round 2 is not among the checkpoints after round 0"},
		// Item 11: one canary in one run leaves no guess to make.
		{"one canary one pair", []edit{{"pairs: 40", "pairs: 1"}, {"  informed: true\n", "  informed: true\n  canaries: {count: 1, kind: relabel}\n"}, {attacksLine, "  method: one-run\n"}},
			"train.canaries.count: a one-run audit guesses the inclusion of at least one canary in and one out of the world-C runs of all pairs: count x pairs must be at least 2, got 1 x 1"},
		// Item 11b: the default attacks that read w_0 need round 0, upload attacks round T-1.
		{"params without round 0", []edit{{"  informed: true\n", "  informed: true\n  record_params: true\n"}, {attacksLine, ""}},
			"train.checkpoints: the attacks grad-align, linear, param-cosine read the initial model w_0 from the round-0 checkpoint: add 0 to train.checkpoints"},
		{"uploads without T-1", []edit{{"  informed: true\n", "  informed: true\n  record_params: true\n  record_upload: true\n"}, {"checkpoints: [1, 3]", "checkpoints: [0, 1, 3]"}, {attacksLine, ""}},
			"at round T read the model w_{T-1} the upload started from: add [2] to train.checkpoints"},
		// Item 12: whole numbers, and the size of the job.
		{"pairs 200.5", []edit{{"pairs: 40", "pairs: 200.5"}}, "pairs: need a whole number, got 200.5 (line 4)"},
		{"rounds 3.7", []edit{{"rounds: 3", "rounds: 3.7"}}, "train.rounds: need a whole number, got 3.7"},
		{"checkpoint 1.5", []edit{{"checkpoints: [1, 3]", "checkpoints: [1.5, 3]"}}, "train.checkpoints[0]: need a whole number, got 1.5"},
		{"rounds 1e9", []edit{{"rounds: 3", "rounds: 1000000000"}}, "train.rounds: 1000000000 rounds of 40 pairs (2 runs each) with 4 local trainings of 2 steps a round are 6.4e+11 local steps, above the most one experiment may ask (1e+11)"},
		{"rounds 1e10", []edit{{"rounds: 3", "rounds: 10000000000"}}, "train.rounds: need at most 2147483647"},
		// Adjacencies the trainer refused only once it started (exit 1 after the output folder
		// was made).
		{"adjacency add", []edit{{"adjacency: {kind: replace, client: 0, index: 2, canary: dirac}", "adjacency: {kind: add, client: 0, canary: dirac}"}},
			"adjacency.kind: add changes client 0's number of samples between C and C'"},
		{"adjacency remove", []edit{{"adjacency: {kind: replace, client: 0, index: 2, canary: dirac}", "adjacency: {kind: remove, client: 0, index: 2}"}},
			"adjacency.kind: remove changes client 0's number of samples"},
		{"remove-client under fedavg", []edit{{"adjacency: {kind: replace, client: 0, index: 2, canary: dirac}", "adjacency: {kind: remove-client, client: 0}"}},
			`adjacency.kind: remove-client needs the DP-FedAvg family (server-side noise), not "fedavg"`},
	}
	for _, c := range configs {
		cfg := string(base)
		for _, e := range c.edits {
			if !strings.Contains(cfg, e.from) {
				t.Fatalf("%s: %q not in run_small.yaml", c.name, e.from)
			}
			cfg = strings.Replace(cfg, e.from, e.to, 1)
		}
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		for _, args := range [][]string{
			{"plan", "--config", cfgPath, "--no-calibrate", "--memory", "8GiB"},
			{"train", "--config", cfgPath, "--out", out, "--memory", "8GiB"},
			{"train", "--config", cfgPath, "--out", out, "--shard", "0/1", "--memory", "8GiB"},
			{"run", "--config", cfgPath, "--out", out, "--memory", "8GiB"},
		} {
			t.Run(c.name+"/"+args[0], func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
				if code != 2 {
					t.Errorf("exit status %d, want 2; stderr:\n%s", code, stderr.String())
				}
				if !strings.Contains(stderr.String(), c.want) {
					t.Errorf("stderr lacks %q:\n%s", c.want, stderr.String())
				}
				if strings.Contains(stderr.String(), "panic") {
					t.Errorf("panic:\n%s", stderr.String())
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("%s exists after a refused %s (%v)", out, args[0], err)
				}
			})
		}
	}
}

// TestDemoFewPairs runs `audit demo` with fewer pairs than the learned attacks need (issue 24,
// item 10: it trained, then failed in lira-offline): the attacks that fit run, the learned ones
// are left out with the minimum named, and the audit completes; at 10 pairs they run.
func TestDemoFewPairs(t *testing.T) {
	for _, c := range []struct {
		pairs string
		lira  bool
	}{{"1", false}, {"2", false}, {"5", false}, {"10", true}} {
		t.Run(c.pairs, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "demo")
			var stdout, stderr bytes.Buffer
			code := exitCode(&stderr, run(context.Background(), []string{"demo", "--pairs", c.pairs, "--out", out}, &stdout, &stderr))
			if code != 0 && code != 3 {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
			}
			if want := "skipped lira-online: a learned attack is fitted on every 5th pair (shadow pairs, never scored) and needs two of them: at least 10 pairs"; strings.Contains(stderr.String(), want) == c.lira {
				t.Errorf("stderr says %q: %v, want %v:\n%s", want, !c.lira, !c.lira, stderr.String())
			}
			raw, err := os.ReadFile(filepath.Join(out, "findings.json"))
			if err != nil {
				t.Fatal(err)
			}
			a, err := findings.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			lira, informed := false, false
			for _, f := range a.Findings {
				lira = lira || f.Attack == "lira-online"
				informed = informed || f.Attack == "informed-all"
			}
			if lira != c.lira || !informed {
				t.Errorf("findings: lira-online %v (want %v), informed-all %v (want true)", lira, c.lira, informed)
			}
		})
	}
}

// TestNegativeWorkers: --workers -3 is a usage error of every command that has the flag
// (issue 24, item 12: it was accepted).
func TestNegativeWorkers(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--out", filepath.Join(t.TempDir(), "demo"), "--workers", "-3"},
		{"run", "--config", "x.yaml", "--out", "x", "--workers", "-3"},
		{"attack", "--runs", "x", "--workers", "-3"},
		{"analyze", "x", "--workers", "-3"},
		{"report", "x", "--workers", "-3"},
		{"import", "--manifest", "m", "--config", "c", "--out", "x", "--workers", "-3"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
			if code != 2 || !strings.Contains(stderr.String(), "--workers must be >= 0 (0: all cores), got -3") {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
		})
	}
}

// A learned attack asked for on the command line of `audit attack` over too few pairs is
// refused with the minimum (exit 2), not a failed fit.
func TestAttackLearnedFewPairs(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(base), "pairs: 40", "pairs: 5", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	if code := exitCode(&stderr, run(context.Background(), []string{"train", "--quiet", "--config", cfgPath, "--out", out}, &stdout, &stderr)); code != 0 {
		t.Fatalf("train: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	code := exitCode(&stderr, run(context.Background(), []string{"attack", "--quiet", "--runs", out, "--attacks", "loss,lira-offline"}, &stdout, &stderr))
	if want := "attack lira-offline: a learned attack is fitted on every 5th pair (shadow pairs, never scored) and needs two of them: at least 10 pairs, and there are 5"; code != 2 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("exit %d, want 2 and %q; stderr:\n%s", code, want, stderr.String())
	}
}
