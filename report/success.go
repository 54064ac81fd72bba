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
		caption: fmt.Sprintf("Rows: success measure and experiment; columns: number of rounds T. Membership inference: %s (AUC and TPR at 1%% FPR, world C positive); label reconstruction: %s (mean order-free label accuracy); inversion: %s (mean PSNR in dB, SSIM with the 11 x 11 Gaussian window, L2 distance to the sample, over the runs it reconstructed). Means and point estimates, not certified bounds.",
			a.MI, a.Label, a.Inversion),
		header: []string{"Measure", "Attack", "Experiment"}}
	for _, T := range rounds {
		t.header = append(t.header, "T="+strconv.Itoa(T))
	}
	for _, r := range successRows {
		attack := r.attack(a)
		for _, e := range exps {
			row := []string{r.name, attack, e.Label}
			for _, T := range rounds {
				cell := "-"
				for i := range e.Findings {
					f := &e.Findings[i]
					if f.Attack == attack && f.Round == T && f.Result != nil {
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
	return t
}

// comparisonGallery renders the reconstructions of one attack across experiments
// (comparisonPage); nil when no experiment has that attack's reconstructions of an image.
func comparisonGallery(exps []Compared, attack string) ([]byte, error) {
	p, err := comparisonPage(exps, attack)
	if p == nil || err != nil {
		return nil, err
	}
	return p.draw()
}

// comparisonPage lays out the reconstructions of one attack across experiments: one row per
// experiment with a gallery, its sample and then the attack's reconstruction at each T from the
// run of the world holding the canary (C', whose sample replaces epsilon; C when C' lacks the
// sample), with a title and a key that say one pair is shown and where the means are. Nil when
// no experiment has that attack's reconstructions of an image.
func comparisonPage(exps []Compared, attack string) (*galleryPage, error) {
	var shape []int
	var rounds []int
	for _, e := range exps {
		g := e.Gallery
		if g == nil {
			continue
		}
		if err := g.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Label, err)
		}
		for _, r := range g.Reconstructions {
			if r.Attack != attack {
				continue
			}
			if shape == nil {
				shape = g.Shape
			} else if !slices.Equal(shape, g.Shape) {
				return nil, fmt.Errorf("gallery: %s's samples are %v, another experiment's %v", e.Label, g.Shape, shape)
			}
			if !slices.Contains(rounds, r.Round) {
				rounds = append(rounds, r.Round)
			}
		}
	}
	if shape == nil {
		return nil, nil
	}
	slices.Sort(rounds)
	p := &galleryPage{shape: shape, cols: []string{"sample"}}
	for _, T := range rounds {
		p.cols = append(p.cols, "T = "+strconv.Itoa(T))
	}
	var pairs []int64
	worlds := map[int8]bool{}
	for _, e := range exps {
		g := e.Gallery
		if g == nil {
			continue
		}
		world := int8(1)
		if g.Sample(1) == nil {
			world = 0
		}
		s := g.Sample(world)
		if s == nil {
			continue
		}
		row := make([]*galleryCell, len(p.cols))
		row[0] = &galleryCell{pixels: s.Pixels, lines: []string{sampleName(world) + ", label " + strconv.Itoa(s.Label)}}
		any := false
		for ci, T := range rounds {
			for _, r := range g.Reconstructions {
				if r.Attack == attack && r.Round == T && r.World == world {
					row[ci+1] = &galleryCell{pixels: r.Pixels, lines: metricLines(r.Metrics)}
					any = true
					if !slices.Contains(pairs, r.Pair) {
						pairs = append(pairs, r.Pair)
					}
				}
			}
		}
		if any {
			worlds[world] = true
			p.rowLabels = append(p.rowLabels, e.Label)
			p.cells = append(p.cells, row)
		}
	}
	if len(p.cells) == 0 {
		return nil, nil
	}
	slices.Sort(pairs)
	of := "ε' (world C', the canary)"
	switch {
	case worlds[0] && worlds[1]:
		of = "the canary (ε' in C'; ε in C where C' lacks it)"
	case worlds[0]:
		of = "ε (world C)"
	}
	p.title = attack + ": reconstructions of " + of + " across experiments"
	p.key = []string{
		"Rows: experiments; columns: the sample (label = its class), then the reconstruction at each checkpoint T.",
		metricsKey,
		"One pair per experiment (" + pairsText(pairs) + ": the first the attack scored, not the best); tables/attack_success gives the means over all pairs.",
	}
	return p, nil
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
		{d.Table(t.name, "csv"), c}, {d.Table(t.name, "tex"), t.latex()}, {d.Table(t.name, "md"), []byte(md)},
	}
	for _, attack := range []string{"inversion", "invgrad"} {
		b, err := comparisonGallery(exps, attack)
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
