package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `audit run` on a tiny CNN (testdata/run_cnn.yaml: a sequential spec of package nn, 10 pairs,
// 2 rounds) completes with a headline and the loss attack's rows; with parameters and uploads
// recorded, the attacks that evaluate the model on the host (not available for CNNs yet) are
// skipped with the reason, not failed, and the loss attack still runs.
func TestRunCNN(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_cnn.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := strings.Replace(string(base), "  checkpoints: [1, 2]\n", "  checkpoints: [1, 2]\n  record_params: true\n  record_upload: true\n", 1)
	recorded = strings.Replace(recorded, "attacks: [loss]", "attacks: [loss, grad-align, label]", 1)
	if recorded == string(base) {
		t.Fatal("run_cnn.yaml changed: the test's edits do not apply")
	}
	for _, tc := range []struct {
		name, config string
		skipped      []string
	}{{"plain", string(base), nil}, {"recorded", recorded, []string{"skipped grad-align: it evaluates the model on the host", "skipped label:"}}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "cnn.yaml")
			if err := os.WriteFile(cfg, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := exitCode(&stderr, run(context.Background(), []string{"run", "--config", cfg, "--out", filepath.Join(dir, "out"), "--backend", "cpu"}, &stdout, &stderr))
			if code != 0 && code != 3 {
				t.Fatalf("run: exit %d\n%s", code, stderr.String())
			}
			out := stdout.String()
			for _, want := range []string{"model sequential", "NO CLAIM", "loss   final  1  10  10", "loss   final  2  10  10"} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			for _, want := range tc.skipped {
				if !strings.Contains(stderr.String()+out, want) {
					t.Errorf("output lacks %q:\n%s", want, stderr.String())
				}
			}
			findings, err := os.ReadFile(filepath.Join(dir, "out", "findings.json"))
			if err != nil || !bytes.Contains(findings, []byte(`"loss"`)) {
				t.Fatalf("findings.json: %v\n%s", err, findings)
			}
		})
	}
}
