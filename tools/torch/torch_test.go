// Package torch holds the reference external trainer (noisy_fedavg.py) and the test that audits
// its runs through `audit import`.
package torch

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/importer"
	"github.com/fedaudit/fedaudit/ingest"
)

// The deployment both trainers run: Noisy-FedAvg of a small tanh MLP, clipping to V = 0.01 and
// noise sigma = 0.03 on each upload; the composition bound for all five global models is
// 2 V K eta sqrt(T) / (sigma sqrt(m)) = 0.67, so the claim mu = 1 holds for the correct
// algorithm. Without clipping the canary moves the model about a hundred times further.
const deployment = `name: torch-reference
seed: 11
pairs: 200
data: {source: synthetic, synthetic: {dim: 10, classes: 3}, clients: 5, per_client: 10, test_samples: 100}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [8], activation: tanh}
  rounds: 5
  local_steps: 2
  learning_rate: 0.5
  batching: full
  clip_norm: 0.01
  noise_std: 0.03
  checkpoints: [0, 5]
  record_params: true
audit:
  attacks: [loss, margin, grad-align, linear]
  claim_mu: 1
`

// python finds an interpreter with torch and numpy: Debian's /usr/bin/python3 first (python3 on
// PATH may be another installation without them).
func python(t *testing.T) string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import torch, numpy").Run() == nil {
			return p
		}
	}
	msg := "no python3 with torch and numpy (apt-get install python3-torch python3-numpy)"
	if os.Getenv("FEDAUDIT_REQUIRE_TORCH") == "1" {
		t.Fatal(msg + ", and FEDAUDIT_REQUIRE_TORCH=1 requires this test")
	}
	t.Skip(msg)
	return ""
}

// writeData hands the experiment's clients of both worlds to the external trainer as .npz.
func writeData(t *testing.T, data *experiment.Data, path string) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(name + ".npy")
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	for w, clients := range [][]*datasets.Dataset{data.Pair.C, data.Pair.CPrime} {
		for i, c := range clients {
			x, err := ingest.WriteNPY([]int{c.Len(), c.Dim()}, c.Features)
			add(fmt.Sprintf("x_%d_%d", w, i), x, err)
			y, err := ingest.WriteNPYInt32([]int{c.Len()}, c.Labels)
			add(fmt.Sprintf("y_%d_%d", w, i), y, err)
		}
	}
	cl, err := ingest.WriteNPYInt32([]int{}, []int32{int32(data.Classes)})
	add("classes", cl, err)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

type summary struct {
	status string
	mu     map[string][2]float64 // attack at the final round -> (mu_lower, mu_estimate)
}

func analyze(t *testing.T, dir string) summary {
	a, err := experiment.AnalyzeDir(context.Background(), dir, experiment.AnalyzeOptions{}, experiment.AttackOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := summary{status: a.Headline.Status, mu: map[string][2]float64{}}
	for _, f := range a.Findings {
		if f.Round == 5 && f.Result != nil {
			s.mu[f.Attack+"/"+f.Threat] = [2]float64{f.Result.MuLower, f.Result.MuEstimate}
		}
	}
	t.Logf("%s: %s; %s", filepath.Base(dir), a.Headline.Status, a.Headline.Text)
	for k, v := range s.mu {
		t.Logf("  %-22s mu_lower %.3f  mu_est %.3f", k, v[0], v[1])
	}
	return s
}

func TestTorchReferenceTrainer(t *testing.T) {
	py := python(t)
	if testing.Short() {
		t.Skip("trains 2 x 200 pairs in PyTorch and 2 x 200 with fedaudit")
	}
	start := time.Now()
	ctx := context.Background()
	cfg, err := experiment.Parse([]byte(deployment))
	if err != nil {
		t.Fatal(err)
	}
	data, err := experiment.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	npz := filepath.Join(work, "data.npz")
	writeData(t, data, npz)
	h := cfg.Train.Model.Hidden[0]

	results := map[string]summary{}
	for _, bug := range []string{"none", "no-clip"} {
		snaps := filepath.Join(work, "snap-"+bug)
		cmd := exec.Command(py, "noisy_fedavg.py", "--data", npz, "--out", snaps, "--pairs", "200", "--hidden", fmt.Sprint(h),
			"--rounds", "5", "--local-steps", "2", "--lr", "0.5", "--clip", "0.01", "--sigma", "0.03", "--seed", "3", "--bug", bug)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("noisy_fedavg.py --bug %s: %v\n%s", bug, err, out.String())
		}
		t.Logf("PyTorch, bug %s: 200 pairs in %.1fs", bug, time.Since(t0).Seconds())
		m, err := importer.ReadManifest(filepath.Join(snaps, "manifest.csv"))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(work, "imported-"+bug)
		if _, err := importer.Import(ctx, importer.Options{Manifest: m, Config: cfg, Out: dir, ToolVersion: "test"}); err != nil {
			t.Fatal(err)
		}
		results["torch-"+bug] = analyze(t, dir)
	}
	// fedaudit's own trainer on the same deployment, and with clipping off (clip_norm 0), the
	// counterpart of the planted bug.
	for _, clip := range []float64{0.01, 0} {
		own := *cfg
		own.Train.ClipNorm = clip
		dir := filepath.Join(work, fmt.Sprintf("own-clip%g", clip))
		if _, err := experiment.SetUpDirectory(&own, dir, 1); err != nil {
			t.Fatal(err)
		}
		if err := experiment.TrainShards(ctx, &own, data, dir, experiment.AllShards(1), experiment.TrainOptions{ToolVersion: "test"}, nil); err != nil {
			t.Fatal(err)
		}
		results[fmt.Sprintf("own-clip%g", clip)] = analyze(t, dir)
	}

	if s := results["torch-none"].status; s != findings.StatusConsistent {
		t.Errorf("correct PyTorch deployment: verdict %s, want %s", s, findings.StatusConsistent)
	}
	if s := results["torch-no-clip"].status; s != findings.StatusViolated {
		t.Errorf("PyTorch deployment without clipping: verdict %s, want %s", s, findings.StatusViolated)
	}
	// Statistically equal: each trainer's certified lower bound lies below the other's point
	// estimate (plus a sampling allowance of 0.15 for mu near zero, where estimates scatter).
	for _, pair := range [][2]string{{"torch-none", "own-clip0.01"}, {"torch-no-clip", "own-clip0"}} {
		a, b := results[pair[0]], results[pair[1]]
		for k, va := range a.mu {
			vb, ok := b.mu[k]
			if !ok {
				continue
			}
			if va[0] > vb[1]+0.15 || vb[0] > va[1]+0.15 {
				t.Errorf("%s: %s mu_lower %.3f (est %.3f), %s mu_lower %.3f (est %.3f): not within each other's intervals",
					k, pair[0], va[0], va[1], pair[1], vb[0], vb[1])
			}
		}
	}
	t.Logf("whole test: %.1fs", time.Since(start).Seconds())
}
