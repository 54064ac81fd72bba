package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/ingest"
)

const importYAML = `name: imported
seed: 2
pairs: 12
data: {source: synthetic, synthetic: {dim: 8, classes: 2}, clients: 2, per_client: 5, test_samples: 10}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: softmax}
  rounds: 2
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.5
  checkpoints: [0, 2]
  informed: true
audit:
  attacks: [informed-all, loss]
`

// TestImportCLI imports random snapshots of a softmax model (18 parameters) through the CLI,
// then scores them with `audit attack`, which must say which attacks it skipped and why; a
// manifest that lists a snapshot twice exits with status 2 and writes nothing.
func TestImportCLI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfgPath, []byte(importYAML), 0o644)
	rng := rand.New(rand.NewPCG(1, 2))
	lines := []string{"file,world,pair,round,canary"}
	for p := 0; p < 12; p++ {
		for w, name := range []string{"C", "C'"} {
			for _, r := range []int{0, 2} {
				v := make([]float32, 18)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				b, _ := ingest.WriteNPY([]int{18}, v)
				f := fmt.Sprintf("s%d_%d_%d.npy", p, w, r)
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
				lines = append(lines, fmt.Sprintf("%s,%s,%d,%d,%v", f, name, p, r, w == 0))
			}
		}
	}
	man := filepath.Join(dir, "m.csv")
	os.WriteFile(man, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	call := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		return code, stdout.String(), stderr.String()
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := call("import", "--manifest", man, "--config", cfgPath, "--out", out)
	if code != 0 || !strings.Contains(stdout, "imported 12 pairs") || !strings.Contains(stderr, "dropping informed-all") {
		t.Fatalf("import: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, stdout, stderr = call("attack", "--runs", out)
	if code != 0 || !strings.Contains(stdout, "scores written") || !strings.Contains(stderr, "skipped informed-all: the run file lacks statistic column") {
		t.Fatalf("attack: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if code, stdout, stderr = call("analyze", out, "--json"); code != 0 && code != 3 {
		t.Fatalf("analyze: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	// `audit run` resumes the imported directory with the config the import recorded: nothing
	// to train, the report is written.
	if code, stdout, stderr = call("run", "--config", filepath.Join(out, "config.json"), "--out", out); (code != 0 && code != 3) || !strings.Contains(stderr, "already complete") {
		t.Fatalf("run: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	os.WriteFile(man, []byte(strings.Join(append(lines, lines[1]), "\n")+"\n"), 0o644)
	out2 := filepath.Join(dir, "out2")
	code, _, stderr = call("import", "--manifest", man, "--config", cfgPath, "--out", out2)
	if code != 2 || !strings.Contains(stderr, "listed twice") {
		t.Fatalf("duplicate: code %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Fatalf("a refused import created %s", out2)
	}
	if code, _, stderr = call("import", "--manifest", man, "--config", cfgPath, "--out", out); code != 2 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("existing out: code %d, stderr %s", code, stderr)
	}
}
