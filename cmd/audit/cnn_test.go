package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `audit run` on a tiny CNN (testdata/run_cnn.yaml: a sequential spec of package nn, 10 pairs,
// 2 rounds) completes with a headline and the loss attack's rows; with parameters and uploads
// recorded, the attacks that evaluate the model on the host run on it too (grad-align, label),
// and no image attack leaves a gallery when none reconstructs.
func TestRunCNN(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_cnn.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := strings.Replace(string(base), "  checkpoints: [1, 2]\n", "  checkpoints: [0, 1, 2]\n  record_params: true\n  record_upload: true\n", 1)
	recorded = strings.Replace(recorded, "attacks: [loss]", "attacks: [loss, grad-align, label]", 1)
	if recorded == string(base) {
		t.Fatal("run_cnn.yaml changed: the test's edits do not apply")
	}
	for _, tc := range []struct {
		name, config string
		rows         []string
	}{{"plain", string(base), []string{"CONSISTENT", "consistent (0.00 of composition bound)"}}, {"recorded", recorded, []string{"CONSISTENT", "grad-align final 1 10 10", "label uploads 2 10 10"}}} {
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
			out := collapse(stdout.String())
			for _, want := range []string{"model sequential", "loss final 1 10 10", "loss final 2 10 10"} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			for _, want := range tc.rows {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			if tc.name == "recorded" && (strings.Contains(stderr.String(), "skipped grad-align") || strings.Contains(stderr.String(), "skipped label")) {
				t.Errorf("host-model attacks skipped on a CNN:\n%s", stderr.String())
			}
			if _, err := os.Stat(filepath.Join(dir, "out", "reconstructions.json")); err == nil {
				t.Error("reconstructions.json written without a reconstructing attack")
			}
			findings, err := os.ReadFile(filepath.Join(dir, "out", "findings.json"))
			if err != nil || !bytes.Contains(findings, []byte(`"loss"`)) {
				t.Fatalf("findings.json: %v\n%s", err, findings)
			}
		})
	}
}

// collapse replaces every run of white space in s by one space, so that checks of table rows
// do not depend on column widths.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkCNNRunFiles checks the files that `audit run` wrote in out at noise sigma: the report
// shows the gallery, gallery.png exists, reconstructions.json holds invgrad's four, whose
// canary PSNRs it records in canaryPSNR by "sigma/T=round", and findings.json has exact label
// reconstruction at the low noise. It is its own piece because it reads one run's files,
// apart from running it and from comparing the two noise levels.
func checkCNNRunFiles(t *testing.T, sigma, out string, canaryPSNR map[string]float64) {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !strings.Contains(string(page), `<img class="gallery" src="data:image/png;base64,`) {
		t.Errorf("sigma %s: report.html shows no gallery (%v)", sigma, err)
	}
	if _, err := os.Stat(filepath.Join(out, "figures", "gallery.png")); err != nil {
		t.Errorf("sigma %s: %v", sigma, err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "reconstructions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Reconstructions []struct {
			Attack  string
			Round   int
			World   int
			Metrics map[string]*float64
		}
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Reconstructions) != 4 {
		t.Fatalf("sigma %s: %d reconstructions, want invgrad at 2 rounds x 2 worlds", sigma, len(g.Reconstructions))
	}
	for _, r := range g.Reconstructions {
		if r.World == 1 { // the canary
			canaryPSNR[fmt.Sprintf("%s/T=%d", sigma, r.Round)] = *r.Metrics["inversion_psnr"]
		}
	}
	findings, err := os.ReadFile(filepath.Join(out, "findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if sigma == "0.001" && !strings.Contains(string(findings), `"label_accuracy": 1`) {
		t.Errorf("sigma %s: label accuracy is not 1 in findings.json", sigma)
	}
}

// checkCNNCompare runs `audit compare --out` on the runs in dirs and checks the attack-success
// table and gallery it writes under root/compare. It is its own piece because it is the
// second command of TestRunCNNImageAttacks, on the first one's outputs.
func checkCNNCompare(t *testing.T, root string, dirs []string) {
	t.Helper()
	cmp := filepath.Join(root, "compare")
	var stdout, stderr bytes.Buffer
	args := append([]string{"compare", "--label", "sigma", "--metrics", "auc", "--out", cmp}, dirs...)
	if code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr)); code != 0 {
		t.Fatalf("compare: exit %d\n%s", code, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(cmp, "tables", "attack_success.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| Inversion PSNR (dB) | invgrad | sigma = 0.001 |", "| Label accuracy | label | sigma = 0.5 |", "| MI AUC | loss | sigma = 0.001 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("attack_success.md lacks %q:\n%s", want, md)
		}
	}
	for _, f := range []string{"tables/attack_success.csv", "tables/attack_success.tex", "figures/gallery_invgrad.png"} {
		if _, err := os.Stat(filepath.Join(cmp, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestRunCNNImageAttacks runs the image attacks end to end on testdata/run_cnn_attacks.yaml (a
// tiny tanh/average-pool CNN on synthetic 28x28 images, one sample per client, a checkerboard
// canary) at sigma = 0.001 and 0.5: every host-model attack scores, invgrad its 2 pairs per
// round; the analytic inversion is skipped naming the convolution; the gallery is written and
// shown in the report; at the low noise label reconstruction is exact and invgrad recovers
// the checkerboard (measured 26.2 and 23.5 dB, SSIM 0.995 and 0.992, at T = 1 and 2), far
// better than at the high noise (measured 3.2 dB at both). Then `audit compare --out` writes the
// attack-success table and the gallery across the two noise levels.
func TestRunCNNImageAttacks(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "run_cnn_attacks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var dirs []string
	canaryPSNR := map[string]float64{}
	for _, sigma := range []string{"0.001", "0.5"} {
		cfg := strings.Replace(string(base), "noise_std: 0.001", "noise_std: "+sigma, 1)
		if sigma != "0.001" && cfg == string(base) {
			t.Fatal("run_cnn_attacks.yaml changed: the test's edit does not apply")
		}
		path := filepath.Join(root, "sigma-"+sigma+".yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(root, "sigma-"+sigma)
		dirs = append(dirs, out)
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), []string{"run", "--config", path, "--out", out, "--backend", "cpu"}, &stdout, &stderr))
		if code != 0 && code != 3 {
			t.Fatalf("sigma %s: run: exit %d\n%s", sigma, code, stderr.String())
		}
		so := collapse(stdout.String())
		for _, want := range []string{"grad-align final 1 12 12", "linear final 2 10 10", "label uploads 1 12 12", "invgrad uploads 1 2 2", "invgrad uploads 2 2 2", "loss final 2 12 12"} {
			if !strings.Contains(so, want) {
				t.Errorf("sigma %s: stdout lacks %q:\n%s", sigma, want, stdout.String())
			}
		}
		for _, want := range []string{"skipped inversion: analytic inversion reads the update of a dense first layer", "invgrad reconstructs the first 2 of 12 pairs"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("sigma %s: stderr lacks %q:\n%s", sigma, want, stderr.String())
			}
		}
		checkCNNRunFiles(t, sigma, out, canaryPSNR)
	}
	t.Logf("invgrad PSNR of the canary: %v", canaryPSNR)
	for _, T := range []string{"T=1", "T=2"} {
		low, high := canaryPSNR["0.001/"+T], canaryPSNR["0.5/"+T]
		if !(low > 20) || !(high < low-10) {
			t.Errorf("%s: canary PSNR %.1f dB at sigma 0.001, %.1f at 0.5: want > 20 and 10 dB more than at 0.5", T, low, high)
		}
	}
	checkCNNCompare(t, root, dirs)
}
