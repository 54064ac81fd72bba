// Package recorder holds fedaudit_recorder.py, the module with which a training loop writes what
// `audit import` reads (snapshots, manifest, the declared deployment), and the tests that run its
// Python unit tests and import what it writes.
package recorder

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/importer"
)

// python finds an interpreter with NumPy (the recorder needs nothing else): Debian's
// /usr/bin/python3 first. Without one the tests skip, or fail when FEDAUDIT_REQUIRE_TORCH=1
// (CI, which installs python3-numpy with python3-torch).
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import numpy").Run() == nil {
			return p
		}
	}
	msg := "no python3 with numpy (apt-get install python3-numpy)"
	if os.Getenv("FEDAUDIT_REQUIRE_TORCH") == "1" {
		t.Fatal(msg + ", and FEDAUDIT_REQUIRE_TORCH=1 requires this test")
	}
	t.Skip(msg)
	return ""
}

// TestPythonUnitTests runs the recorder's unittest suite (test_fedaudit_recorder.py).
func TestPythonUnitTests(t *testing.T) {
	py := python(t)
	cmd := exec.Command(py, "-W", "error::ResourceWarning", "-m", "unittest", "-v", "test_fedaudit_recorder")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("python unit tests: %v\n%s", err, out.String())
	}
	t.Logf("%s", out.String())
}

const deployment = `name: recorder
seed: 3
pairs: 7
data: {source: synthetic, synthetic: {dim: 10, classes: 3}, clients: 3, per_client: 6, test_samples: 20}
adjacency: {kind: replace, client: 2, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [8], activation: tanh}
  rounds: 2
  local_steps: 1
  learning_rate: 0.5
  batching: full
  clip_norm: 0.05
  noise_std: 0.01
audit: {claim_mu: 1}
`

// A training loop in NumPy alone (no real training: w_{t+1} = w_t + noise shared by both worlds of
// a pair, and a small step of world C' only, as the differing sample would make) that records
// its runs under the YAML config above given as JSON.
const loop = `
import json, sys
import numpy as np
from fedaudit_recorder import Deployment, Recorder
out, base = sys.argv[1], json.load(open(sys.argv[2]))
shapes = {"fc1.weight": (8, 10), "fc1.bias": (8,), "fc2.weight": (3, 8), "fc2.bias": (3,)}
dep = Deployment({"kind": "mlp", "hidden": [8], "activation": "tanh"}, rounds=2, local_steps=1,
                 learning_rate=0.5, clip_norm=0.05, noise_std=0.01)
rng = np.random.default_rng(0)
w0 = {k: rng.standard_normal(s).astype(np.float32) * 0.1 for k, s in shapes.items()}
with Recorder(out, 3, dep, base_config=base) as rec:
    for p in range(3):
        noise = [{k: 0.01 * rng.standard_normal(s) for k, s in shapes.items()} for t in range(2)]
        for world in ("C", "C'"):
            w = dict(w0)
            rec.global_model(p, world, 0, w)
            for t in range(2):
                up = {k: w[k] + noise[t][k] for k in shapes}
                rec.upload(p, world, t + 1, up)
                w = {k: v + 0.1 * noise[t][k] + (0.001 if world == "C'" else 0.0) for k, v in up.items()}
                rec.global_model(p, world, t + 1, w)
`

// TestRecordedRunsImport: what the recorder writes from a NumPy training loop, given the
// experiment config as its base, imports as it is: config.json loads as the deployment's config
// with the declared values, the manifest's every row (globals, the target's uploads, canary
// column) is accepted, and the import replays the rounds.
func TestRecordedRunsImport(t *testing.T) {
	py := python(t)
	work := t.TempDir()
	cfg, err := spec.Parse([]byte(deployment))
	if err != nil {
		t.Fatal(err)
	}
	base, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	basePath := filepath.Join(work, "base.json")
	if err := os.WriteFile(basePath, base, 0o644); err != nil {
		t.Fatal(err)
	}
	snaps := filepath.Join(work, "snaps")
	cmd := exec.Command(py, "-c", loop, snaps, basePath)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("recording: %v\n%s", err, out)
	}
	got, err := spec.Load(filepath.Join(snaps, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tc := got.Train
	if got.Pairs != 3 || tc.Rounds != 2 || tc.LocalSteps != 1 || tc.LearningRate != 0.5 || tc.ClipNorm != 0.05 ||
		tc.NoiseStd != 0.01 || !tc.Informed || len(tc.Checkpoints) != 3 || got.Data != cfg.Data || got.Adjacency.Client != 2 {
		t.Fatalf("config.json: %+v", got)
	}
	m, err := importer.ReadManifest(filepath.Join(snaps, "manifest.csv"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := importer.Import(context.Background(), importer.Options{Manifest: m, Config: got, Out: filepath.Join(work, "imported"), ToolVersion: "test", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pairs != 3 || len(res.Rounds) != 3 || res.Uploads != 3*2*2 || !res.Replayed || res.Params != 115 {
		t.Fatalf("import: %+v", res)
	}
}
