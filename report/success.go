package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/report/gallery"
)

// SuccessAttacks names the attacks behind the rows of the attack-success table.
type SuccessAttacks struct {
	// MI is the membership-inference attack of the AUC and TPR rows ("loss" when empty: it
	// reads recorded losses, so every experiment has it).
	MI string
	// Label is the label-reconstruction attack ("label" when empty).
	Label string
	// Inversion is the reconstructing attack of the PSNR, SSIM and L2 rows ("invgrad" when
	// empty, or "inversion" when no experiment has invgrad findings).
	Inversion string
}

func (a SuccessAttacks) withDefaults(exps []Compared) SuccessAttacks {
	if a.MI == "" {
		a.MI = "loss"
	}
	if a.Label == "" {
		a.Label = "label"
	}
	if a.Inversion == "" {
		a.Inversion = "invgrad"
		if !hasAttack(exps, "invgrad") && hasAttack(exps, "inversion") {
			a.Inversion = "inversion"
		}
	}
	return a
}

func hasAttack(exps []Compared, attack string) bool {
	for _, e := range exps {
		for _, f := range e.Findings {
			if f.Attack == attack {
				return true
			}
		}
	}
	return false
}

// successRow is one row kind of the attack-success table: what it shows and how to read it
// from a finding of its attack.
type successRow struct {
	name   string
	attack func(SuccessAttacks) string
	value  func(*findings.Finding) float64
	format func(float64) string
}

var successRows = []successRow{
	{"MI AUC", func(a SuccessAttacks) string { return a.MI },
		func(f *findings.Finding) float64 { return f.Result.AUC }, rate},
	{"MI TPR at 1% FPR", func(a SuccessAttacks) string { return a.MI },
		func(f *findings.Finding) float64 { return f.Result.TPRAt1e2 }, rate},
	{"Label accuracy", func(a SuccessAttacks) string { return a.Label },
		func(f *findings.Finding) float64 { return metricOrNaN(f, "label_accuracy") }, rate},
	{"Inversion PSNR (dB)", func(a SuccessAttacks) string { return a.Inversion },
		func(f *findings.Finding) float64 { return metricOrNaN(f, "inversion_psnr") }, fixed2},
	{"Flat-image PSNR (dB)", func(a SuccessAttacks) string { return a.Inversion },
		func(f *findings.Finding) float64 { return metricOrNaN(f, "inversion_psnr_flat") }, fixed2},
	{"Inversion SSIM", func(a SuccessAttacks) string { return a.Inversion },
		func(f *findings.Finding) float64 { return metricOrNaN(f, "inversion_ssim") }, rate},
	{"Inversion L2", func(a SuccessAttacks) string { return a.Inversion },
		func(f *findings.Finding) float64 { return metricOrNaN(f, "inversion_l2") }, fixed2},
}

func metricOrNaN(f *findings.Finding, name string) float64 {
	if v, ok := f.Metrics[name]; ok {
		return v
	}
	return math.NaN()
}

// attackSuccessTable is the attack-success table across experiments in the shape of Sun et
// al.'s Tables 13 and 14 ("Convergent differential privacy analysis for general federated
// learning"): a block of rows per success measure (membership inference AUC and TPR at 1% FPR,
// label-reconstruction accuracy, inversion PSNR, SSIM and L2), one row per experiment (noise
// level) within it, one column per checkpoint T; "-" where an experiment lacks the attack or
// round.
func attackSuccessTable(exps []Compared, a SuccessAttacks) *table {
	a = a.withDefaults(exps)
	var rounds []int
	for _, e := range exps {
		for _, f := range e.Findings {
			if slices.ContainsFunc(successRows, func(r successRow) bool { return r.attack(a) == f.Attack }) && !slices.Contains(rounds, f.Round) {
				rounds = append(rounds, f.Round)
			}
		}
	}
	slices.Sort(rounds)
	t := &table{name: "attack_success", title: "Attack success across noise levels",
		caption: fmt.Sprintf("Rows: success measure and experiment; columns: number of rounds T. Membership inference: %s (AUC and TPR at 1%% FPR, world C positive); label reconstruction: %s (mean order-free label accuracy); inversion: %s (mean PSNR in dB, SSIM with the 11 x 11 Gaussian window, L2 distance to the sample, over the runs it reconstructed, an exact one's infinite PSNR left out of the mean; invgrad reconstructs the runs of its first invgrad_pairs pairs only; data outside [0, 1] gets no inversion measures). Flat-image PSNR: the PSNR of the flat image at the sample's mean brightness, which a reconstruction that learned nothing else reaches; an inversion PSNR at or below it recovered no structure, and a smoothing prior on an uninformative model tends toward it, so PSNR need not fall as the noise grows. Means and point estimates, not certified bounds.",
			a.MI, a.Label, a.Inversion),
		header: []string{"Measure", "Attack", "Experiment"}}
	for _, T := range rounds {
		if T == 0 { // a score file's rows without a round (findings.Finding.RoundGiven)
			t.header = append(t.header, "T unknown")
			continue
		}
		t.header = append(t.header, "T="+strconv.Itoa(T))
	}
	for _, r := range successRows {
		attack := r.attack(a)
		// An attack scored under several threat models gets a block of rows per threat, named
		// in the Attack column: one cell must not mix them.
		threats := threatsOf(exps, attack)
		for _, threat := range threats {
			name := attack
			if len(threats) > 1 {
				name = series{attack, threat}.String()
			}
			for _, e := range exps {
				row := []string{r.name, name, e.Label}
				for _, T := range rounds {
					cell := "-"
					for i := range e.Findings {
						f := &e.Findings[i]
						if f.Attack == attack && f.Threat == threat && f.Round == T && f.Result != nil {
							if v := r.value(f); !math.IsNaN(v) {
								cell = r.format(v)
							}
						}
					}
					row = append(row, cell)
				}
				t.rows = append(t.rows, row)
			}
		}
	}
	return t
}

// threatsOf is the threat models the experiments score attack under, sorted; one empty
// threat where none has it, so that its rows still show (as "-").
func threatsOf(exps []Compared, attack string) []string {
	var out []string
	for _, e := range exps {
		for _, f := range e.Findings {
			if f.Attack == attack && !slices.Contains(out, f.Threat) {
				out = append(out, f.Threat)
			}
		}
	}
	if len(out) == 0 {
		return []string{""}
	}
	slices.Sort(out)
	return out
}

// WriteComparisonFiles writes what a comparison of experiments adds to their reports into the
// folder dir, with expdir's names: the attack-success table (tables/attack_success.csv, .tex
// and .md) and, for each reconstructing attack with images, the gallery across experiments
// (figures/gallery_ATTACK.png). It returns the paths written, in order.
func WriteComparisonFiles(dir string, exps []Compared, a SuccessAttacks) ([]string, error) {
	d := expdir.Dir(dir)
	t := attackSuccessTable(exps, a)
	c, err := t.csv()
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	md := "**" + t.title + ".** " + t.caption + "\n\n" + t.markdown()
	files := []struct {
		path string
		data []byte
	}{
		{d.Table(t.name, "csv"), c}, {d.Table(t.name, "tex"), t.latex("")}, {d.Table(t.name, "md"), []byte(md)},
	}
	galleries := make([]gallery.Experiment, len(exps))
	for i, e := range exps {
		galleries[i] = gallery.Experiment{Label: e.Label, Gallery: e.Gallery}
	}
	for _, attack := range []string{"inversion", "invgrad"} {
		b, err := gallery.Comparison(galleries, attack)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		if b != nil {
			files = append(files, struct {
				path string
				data []byte
			}{d.Figure("gallery_"+attack, "png"), b})
		}
	}
	var out []string
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		if err := fsutil.WriteFile(f.path, f.data); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		out = append(out, f.path)
	}
	return out, nil
}
