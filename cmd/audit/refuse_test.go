package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRefusedBeforeWork checks that configs no machine can train (absurd pair counts, a model of
// 10^8 hidden units) are refused by every command that trains or plans, with exit status 2 and
// the numbers named, before any file is written (the output directory is never created).
func TestRefusedBeforeWork(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	configs := []struct {
		name, from, to, want string
	}{
		{"pairs 1e12", "pairs: 40", "pairs: 1e12", "pairs: need 1 to 100000000, got 1000000000000"},
		{"pairs 2e8", "pairs: 40", "pairs: 200000000", "pairs: need 1 to 100000000"},
		{"hidden 1e8", "model: {kind: softmax}", "model: {kind: mlp, hidden: [100000000], activation: tanh}", "memory: training one pair of this model (d = 1200000003 parameters) needs an estimated"},
		{"hidden 1e9", "model: {kind: softmax}", "model: {kind: mlp, hidden: [1000000000], activation: tanh}", "the most one replica may have"},
		{"hidden 0", "model: {kind: softmax}", "model: {kind: mlp, hidden: [0], activation: tanh}", "model.hidden: widths must be positive"},
		{"batch too large", "  clip_norm: 1\n", "  clip_norm: 1\n  batching: fixed\n  batch_size: 11\n", "batch_size: need 1 to 10"},
		// A CNN whose layers cannot take the data's shape (LeNet-5 on flat features): known only
		// once the data is, and still refused before anything is written.
		{"lenet5 on flat data", "model: {kind: softmax}", "model: {kind: lenet5}", "lenet5 is a convolutional network for images, and the data's samples are vectors of 8 features"},
		// Data the config asks for and cannot have exited 1, after run had created its
		// directory (and left it behind with its lock).
		{"too few samples", "synthetic: {dim: 8, classes: 3}", "synthetic: {dim: 8, classes: 3, samples: 50}", "50 samples, need 124"},
		{"unknown source", "source: synthetic\n", "source: nosuch\n", `dataset "nosuch": no such file, and not a dataset name`},
		{"canary of the wrong size", "canary: dirac}", "canary: custom, features: [1, 2], label: 0}", "adjacency"},
		// Runs of an unknown architecture are imported, never trained.
		{"external model", "model: {kind: softmax}", "model: {kind: external}", "model kind external: the architecture is unknown to fedaudit"},
	}
	for _, c := range configs {
		if !strings.Contains(string(base), c.from) {
			t.Fatalf("%s: %q not in run_small.yaml", c.name, c.from)
		}
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(base), c.from, c.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		for _, args := range [][]string{
			{"plan", "--config", cfgPath, "--no-calibrate", "--memory", "8GiB"},
			{"train", "--config", cfgPath, "--out", out, "--memory", "8GiB"},
			{"train", "--config", cfgPath, "--out", out, "--shard", "1/4", "--memory", "8GiB"},
			{"train", "--config", cfgPath, "--out", out, "--shards", "4", "--memory", "8GiB", "--check"},
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
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("%s exists after a refused %s (%v)", out, args[0], err)
				}
			})
		}
	}
}

// TestTrainCheckWritesNothing: train --check of a config every task could train says so on
// stdout, exit 0, and creates nothing.
func TestTrainCheckWritesNothing(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	args := []string{"train", "--config", filepath.Join("testdata", "run_small.yaml"), "--out", out, "--shards", "4", "--check"}
	if code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr)); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if want := "train: 4 shards of 40 pairs can be trained into " + out; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout %q lacks %q", stdout.String(), want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after train --check (%v)", out, err)
	}
}

// TestPlanMemory checks that plan prints the memory estimate and that the budget it is given
// decides: a small MLP fits 1 GiB and is refused at 1 MiB.
func TestPlanMemory(t *testing.T) {
	cfg := filepath.Join("testdata", "run_small.yaml")
	var stdout, stderr bytes.Buffer
	code := exitCode(&stderr, run(context.Background(), []string{"plan", "--config", cfg, "--no-calibrate", "--memory", "1GiB"}, &stdout, &stderr))
	if code != 0 || !strings.Contains(stdout.String(), "memory: training about") || !strings.Contains(stdout.String(), "budget 1.0 GiB") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = exitCode(&stderr, run(context.Background(), []string{"plan", "--config", cfg, "--no-calibrate", "--memory", "1MiB"}, &stdout, &stderr))
	if code != 2 || !strings.Contains(stderr.String(), "the budget is 1 MiB") {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	stderr.Reset()
	code = exitCode(&stderr, run(context.Background(), []string{"plan", "--config", cfg, "--memory", "lots"}, &stdout, &stderr))
	if code != 2 || !strings.Contains(stderr.String(), "--memory") {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
}

// TestInterrupted checks that a cancelled run (Ctrl-C cancels the program's context) ends with
// "audit: interrupted" and exit status 130, and promptly.
func TestInterrupted(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that the run is certainly still training when it is interrupted.
	long := strings.Replace(strings.Replace(string(base), "rounds: 3", "rounds: 100000", 1), "checkpoints: [1, 3]", "checkpoints: [1, 100000]", 1)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := exitCode(&stderr, run(ctx, []string{"run", "--config", cfgPath, "--out", filepath.Join(dir, "out"), "--quiet"}, &stdout, &stderr))
	if code != 130 || !strings.Contains(stderr.String(), "audit: interrupted") {
		t.Fatalf("exit %d, want 130; stderr:\n%s", code, stderr.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to stop", d)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "out", "runs", "*.arrow")); len(m) > 0 {
		t.Errorf("an interrupted shard left run files: %v", m)
	}
}

// TestPlanSaysWhatComesBeforeThePairs: a pretrained w_0 and a crafted canary are named in the
// plan, with the pretraining's rounds and rate; a plain config names neither.
func TestPlanSaysWhatComesBeforeThePairs(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crafted := strings.Replace(strings.Replace(string(base), "canary: dirac}", "canary: canife}", 1),
		"  informed: true", "  informed: true\n  pretrain: {rounds: 7, learning_rate: 0.2}", 1)
	dir := t.TempDir()
	for _, c := range []struct {
		yaml string
		want []string
		not  []string
	}{
		{string(base), nil, []string{"w_0:", "canary: canife"}},
		{crafted, []string{"w_0:   pretrained without privacy (FedAvg, full batches, 7 rounds at rate 0.2)", "canary: canife, crafted at w_0"}, nil},
	} {
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := exitCode(&stderr, run(context.Background(), []string{"plan", "--config", path, "--no-calibrate"}, &stdout, &stderr)); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("plan does not say %q:\n%s", w, stdout.String())
			}
		}
		for _, w := range c.not {
			if strings.Contains(stdout.String(), w) {
				t.Errorf("plan of a plain config says %q", w)
			}
		}
	}
}

// TestTF32NeedsTheGPU: train.precision tf32 is the GPU's tensor cores; in a build without the
// gpu tag (or with --backend cpu) train and run refuse it with exit status 2 before the output
// directory exists, while plan, which trains nothing, still sizes the job.
func TestTF32NeedsTheGPU(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(base), "  informed: true", "  informed: true\n  precision: tf32", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, args := range [][]string{
		{"train", "--config", cfgPath, "--out", out, "--backend", "cpu"},
		{"train", "--config", cfgPath, "--out", out, "--shards", "4", "--check"},
		{"run", "--config", cfgPath, "--out", out, "--backend", "cpu"},
	} {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		if code != 2 || !strings.Contains(stderr.String(), "train.precision tf32 needs the gpu backend") {
			t.Errorf("%v: exit %d; stderr:\n%s", args, code, stderr.String())
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: %s exists after the refusal", args, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := exitCode(&stderr, run(context.Background(), []string{"plan", "--config", cfgPath, "--no-calibrate"}, &stdout, &stderr)); code != 0 {
		t.Errorf("plan: exit %d; stderr:\n%s", code, stderr.String())
	}
}
