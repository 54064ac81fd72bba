package experiment

import (
	"fmt"
	"os"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/report"
)

// Analyzed is one analyzed experiment directory: its config and findings as written by Run.
type Analyzed struct {
	Dir      string
	Config   *spec.Config
	Findings []findings.Finding
	// Headline is the analysis's overall verdict (nil for findings of older versions, which
	// held only the rows).
	Headline *findings.Headline
	// Family is the family-wise statement the rows' bounds hold under (nil for findings of
	// older versions).
	Family *findings.Family
	// Rounds are the per-round training summaries (DIR/rounds.json), nil when absent.
	Rounds []findings.RoundSummary
	// Gallery is the reconstructing attacks' images (DIR/reconstructions.json), nil when absent.
	Gallery *findings.Gallery
}

// LoadAnalyzed reads DIR/config.json, DIR/findings.json and, when present, DIR/rounds.json and
// DIR/reconstructions.json.
func LoadAnalyzed(dir string) (*Analyzed, error) {
	d := expdir.Dir(dir)
	raw, err := os.ReadFile(d.Config())
	if err != nil {
		if IsOutputsDir(dir) {
			// `audit run` cannot apply to imported model outputs: they have no config to
			// compare by.
			return nil, fmt.Errorf("%s holds imported model outputs, which have no config to compare by: `audit analyze %s` judges them", dir, dir)
		}
		return nil, fmt.Errorf("%s: %w (run `audit run` there first)", dir, err)
	}
	cfg, err := spec.FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Config(), err)
	}
	raw, err = os.ReadFile(d.Findings())
	if err != nil {
		return nil, fmt.Errorf("%s: %w (run `audit run` there first)", dir, err)
	}
	dec, err := findings.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Findings(), err)
	}
	a := &Analyzed{Dir: dir, Config: cfg, Findings: dec.Findings, Headline: dec.Headline, Family: dec.Family}
	if raw, err := os.ReadFile(d.Rounds()); err == nil {
		if a.Rounds, err = findings.UnmarshalRounds(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Rounds(), err)
		}
	}
	if a.Gallery, err = readGallery(dir); err != nil {
		return nil, err
	}
	return a, nil
}

// Compared is the experiment as a row of a comparison, labelled by label.
func (a *Analyzed) Compared(label func(*spec.Config) string) report.Compared {
	return report.Compared{Label: label(a.Config), Findings: a.Findings, Rounds: a.Rounds, Gallery: a.Gallery,
		Headline: a.Headline, Family: a.Family}
}
