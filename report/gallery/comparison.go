package gallery

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/fedaudit/fedaudit/findings"
)

// Experiment is one experiment's reconstructions in a comparison across experiments.
type Experiment struct {
	// Label names the experiment's row (e.g. "sigma = 0.1").
	Label string
	// Gallery is the experiment's reconstructions; nil when it has none.
	Gallery *findings.Gallery
}

// Comparison renders the reconstructions of one attack across experiments as a PNG: one row
// per experiment with that attack's images, its sample and then the reconstruction at each T
// (comparisonPage). It is nil when no experiment has that attack's reconstructions of an
// image.
func Comparison(exps []Experiment, attack string) ([]byte, error) {
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
func comparisonPage(exps []Experiment, attack string) (*galleryPage, error) {
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
