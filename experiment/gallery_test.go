package experiment

import (
	"os"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/expdir"
)

// TestWriteGallery: the attack stage's reconstructions of image samples become
// reconstructions.json with both samples and each reconstruction's metrics by name, read back
// by readGallery; a later scoring without reconstructions removes the file, and no file reads
// as no gallery.
func TestWriteGallery(t *testing.T) {
	dir := t.TempDir()
	px := func(v float32) []float32 { return []float32{v, v, v, v} }
	env := &attacks.Env{Shape: []int{1, 2, 2}, Target: datasets.Sample{Features: px(0.5), Label: 1},
		TargetPrime: datasets.Sample{Features: px(0), Label: 4}}
	recs := []attacks.Reconstruction{
		{Attack: "invgrad", Round: 3, RunID: 0, PairID: 0, World: 0, X: []float64{0.1, 0.2, 0.3, 0.4}, Metrics: []float64{0.01, 20, 0.5, 0.2}},
		{Attack: "invgrad", Round: 3, RunID: 1, PairID: 0, World: 1, X: []float64{0, 0, 0, 1}, Metrics: []float64{0.25, 6, 0.1, 1}},
	}
	if err := writeGallery(dir, env, recs); err != nil {
		t.Fatal(err)
	}
	g, err := readGallery(dir)
	if err != nil || g == nil {
		t.Fatalf("readGallery: %v, %v", g, err)
	}
	if len(g.Samples) != 2 || g.Sample(1).Label != 4 || len(g.Reconstructions) != 2 {
		t.Fatalf("gallery %+v", g)
	}
	if m := g.Reconstructions[0].Metrics; m[attacks.MetricPSNR] != 20 || m[attacks.MetricSSIM] != 0.5 || m[attacks.MetricL2] != 0.2 {
		t.Errorf("metrics by name: %v", m)
	}
	if err := writeGallery(dir, env, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(expdir.Dir(dir).Reconstructions()); !os.IsNotExist(err) {
		t.Errorf("a stale reconstructions.json was left: %v", err)
	}
	if g, err := readGallery(dir); g != nil || err != nil {
		t.Errorf("no file: %v, %v", g, err)
	}
	if err := os.WriteFile(expdir.Dir(dir).Reconstructions(), []byte(`{"format":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readGallery(dir); err == nil || !strings.Contains(err.Error(), "reconstructions.json") {
		t.Errorf("a damaged file: %v", err)
	}
}

// TestScoringDiffersOnInvgradBudget: a score file is stale for invgrad when it was scored with
// another pair cap or iteration budget, and not for an attack selection without invgrad.
func TestScoringDiffersOnInvgradBudget(t *testing.T) {
	rec := []byte(`{"audit":{"attacks":["loss","invgrad"],"invgrad_pairs":4}}`)
	if why := scoringDiffers(rec, []string{"invgrad", "loss"}, nil, 4, 0); why != "" {
		t.Errorf("same settings: %q", why)
	}
	if why := scoringDiffers(rec, []string{"invgrad", "loss"}, nil, -1, 0); !strings.Contains(why, "4 pairs") || !strings.Contains(why, "every pair") {
		t.Errorf("other cap: %q", why)
	}
	if why := scoringDiffers(rec, []string{"invgrad", "loss"}, nil, 4, 100); !strings.Contains(why, "100") {
		t.Errorf("other budget: %q", why)
	}
	plain := []byte(`{"audit":{"attacks":["loss"]}}`)
	if why := scoringDiffers(plain, []string{"loss"}, nil, 7, 9); why != "" {
		t.Errorf("no invgrad: %q", why)
	}
}
