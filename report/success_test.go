package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/report/gallery"
)

func successExperiments() []Compared {
	f := func(attack, threat string, round int, auc, tpr float64, metrics map[string]float64) findings.Finding {
		return findings.Finding{Attack: attack, Threat: threat, Round: round, Result: &audit.Result{AUC: auc, TPRAt1e2: tpr},
			ExactMu: math.NaN(), ReversedMuLower: math.NaN(), Metrics: metrics}
	}
	return []Compared{
		{Label: "sigma = 0.1", Findings: []findings.Finding{
			f("loss", "final", 1, 0.51, 0.012, nil), f("loss", "final", 5, 0.55, 0.02, nil),
			f("margin", "final", 5, 0.99, 0.9, nil),
			f("label", "uploads", 1, 0.5, 0, map[string]float64{"label_accuracy": 0.25}),
			f("invgrad", "uploads", 1, 0.5, 0, map[string]float64{"inversion_psnr": 6.25, "inversion_ssim": 0.0123, "inversion_l2": 20.45, "inversion_psnr_flat": 10.5}),
		}},
		{Label: "sigma = 0", Gallery: testGallery(), Findings: []findings.Finding{
			f("loss", "final", 1, 0.8, 0.35, nil), f("loss", "final", 5, 1, 1, nil),
			f("label", "uploads", 1, 1, 1, map[string]float64{"label_accuracy": 1}),
			f("label", "uploads", 5, 1, 1, map[string]float64{"label_accuracy": 0.875}),
			f("invgrad", "uploads", 5, 1, 1, map[string]float64{"inversion_psnr": 31.5, "inversion_ssim": math.NaN(), "inversion_l2": 0.97, "inversion_psnr_flat": 11.25}),
		}},
	}
}

// TestAttackSuccessTable: a block of rows per measure, a row per experiment in the order given,
// a column per T; the membership rows read the chosen attack (margin's findings are ignored
// under the default loss), a missing round or unknown metric is "-".
func TestAttackSuccessTable(t *testing.T) {
	got := attackSuccessTable(successExperiments(), SuccessAttacks{}).markdown()
	want := `| Measure | Attack | Experiment | T=1 | T=5 |
|---|---|---|---:|---:|
| MI AUC | loss | sigma = 0.1 | 0.510 | 0.550 |
| MI AUC | loss | sigma = 0 | 0.800 | 1.000 |
| MI TPR at 1% FPR | loss | sigma = 0.1 | 0.012 | 0.020 |
| MI TPR at 1% FPR | loss | sigma = 0 | 0.350 | 1.000 |
| Label accuracy | label | sigma = 0.1 | 0.250 | - |
| Label accuracy | label | sigma = 0 | 1.000 | 0.875 |
| Inversion PSNR (dB) | invgrad | sigma = 0.1 | 6.25 | - |
| Inversion PSNR (dB) | invgrad | sigma = 0 | - | 31.50 |
| Flat-image PSNR (dB) | invgrad | sigma = 0.1 | 10.50 | - |
| Flat-image PSNR (dB) | invgrad | sigma = 0 | - | 11.25 |
| Inversion SSIM | invgrad | sigma = 0.1 | 0.012 | - |
| Inversion SSIM | invgrad | sigma = 0 | - | - |
| Inversion L2 | invgrad | sigma = 0.1 | 20.45 | - |
| Inversion L2 | invgrad | sigma = 0 | - | 0.97 |
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	margin := attackSuccessTable(successExperiments(), SuccessAttacks{MI: "margin"})
	if r := margin.rows[0]; r[1] != "margin" || r[3] != "-" || r[4] != "0.990" {
		t.Errorf("with MI margin the first row is %v", r)
	}
	// loss scored under a second threat model as well: a block of rows per threat, named.
	exps := successExperiments()
	exps[0].Findings = append(exps[0].Findings, findings.Finding{Attack: "loss", Threat: "all-iterates", Round: 5,
		Result: &audit.Result{AUC: 0.97, TPRAt1e2: 0.5}, ExactMu: math.NaN(), ReversedMuLower: math.NaN()})
	two := attackSuccessTable(exps, SuccessAttacks{})
	wantRows := [][]string{
		{"MI AUC", "loss (all-iterates)", "sigma = 0.1", "-", "0.970"},
		{"MI AUC", "loss (all-iterates)", "sigma = 0", "-", "-"},
		{"MI AUC", "loss (final)", "sigma = 0.1", "0.510", "0.550"},
		{"MI AUC", "loss (final)", "sigma = 0", "0.800", "1.000"},
	}
	for i, w := range wantRows {
		if !slices.Equal(two.rows[i], w) {
			t.Errorf("two threats, row %d: %v, want %v", i, two.rows[i], w)
		}
	}
}

// TestWriteComparisonFiles: the table in CSV, LaTeX and Markdown, and the gallery across
// experiments (gallery.Comparison) for the attack that has images only; nothing for an attack
// without images.
func TestWriteComparisonFiles(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteComparisonFiles(dir, successExperiments(), SuccessAttacks{})
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range paths {
		r, _ := filepath.Rel(dir, p)
		rel = append(rel, filepath.ToSlash(r))
	}
	want := []string{"tables/attack_success.csv", "tables/attack_success.tex", "tables/attack_success.md", "figures/gallery_invgrad.png"}
	if !slices.Equal(rel, want) {
		t.Fatalf("wrote %v, want %v", rel, want)
	}
	csv, _ := os.ReadFile(paths[0])
	if !strings.HasPrefix(string(csv), "Measure,Attack,Experiment,T=1,T=5\nMI AUC,loss,sigma = 0.1,0.510,0.550\n") {
		t.Errorf("CSV begins %q", csv[:min(len(csv), 120)])
	}
	tex, _ := os.ReadFile(paths[1])
	if !strings.Contains(string(tex), `\label{tab:attack_success}`) || !strings.Contains(string(tex), `MI TPR at 1\% FPR & loss & sigma = 0 & 0.350 & 1.000 \\`) {
		t.Errorf("LaTeX:\n%s", tex)
	}
	raw, _ := os.ReadFile(paths[3])
	wantPNG, err := gallery.Comparison([]gallery.Experiment{{Label: "sigma = 0.1"}, {Label: "sigma = 0", Gallery: testGallery()}}, "invgrad")
	if err != nil || !bytes.Equal(raw, wantPNG) {
		t.Errorf("figures/gallery_invgrad.png is not gallery.Comparison of the experiments (%v)", err)
	}
}
