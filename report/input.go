package report

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/theory"
)

// Input is everything a report shows.
type Input struct {
	Title string
	// Name is the experiment's name; it tells its LaTeX tables' labels from another
	// experiment's (LatexLabel). Empty: labels of the table's name alone.
	Name string
	// Headline is the overall verdict shown first; nil shows none.
	Headline *findings.Headline
	// Family is the family-wise statement of the findings; its RowConfidence (each row's own
	// level) is shown beside the headline's confidence when not 0.
	Family findings.Family
	// ClaimMu is the deployment's claimed mu, drawn on the mu-against-T and trade-off figures;
	// 0 when there is no single claimed mu. ClaimLabel names it (e.g. "config claim").
	ClaimMu    float64
	ClaimLabel string
	// ClaimEps at ClaimDelta is the deployment's claimed epsilon where the claim is one (an
	// accountant's), drawn on the trade-off figures as the (epsilon, delta)-DP trade-off curve;
	// 0 with a claimed mu or without a single claim. ClaimLabel names it too.
	ClaimEps, ClaimDelta float64
	// ConfigJSON is the experiment configuration; it is shown pretty-printed (verbatim when it
	// is not valid JSON).
	ConfigJSON  []byte
	DatasetHash string
	ToolVersion string
	// Pairs is the number of coupled pairs of runs, Runs the number of runs trained.
	Pairs, Runs int
	Confidence  float64
	Method      string
	Delta       float64
	// Smoothness states the smoothness constant and its status, e.g.
	// "L = 1 (given: bounds are estimates)".
	Smoothness string
	// NoiseLabel names the noise level in the rows of the attack-success tables, e.g.
	// "sigma = 0.05".
	NoiseLabel string
	Findings   []findings.Finding
	Rounds     []findings.RoundSummary
	// Bounds is the theory at each T; optional, the Theory of the findings fills the gaps.
	Bounds []theory.Bound
	// Gallery holds the reconstructing attacks' images (DIR/reconstructions.json); nil, or
	// without reconstructions, shows no gallery.
	Gallery *findings.Gallery
	// Check is the outcome of the grey-box checks (DIR/check.json); nil shows none.
	Check *findings.CheckReport
	// Generated is a fixed line for the footer (tool, command). It must not hold a
	// timestamp if the report is to be reproducible.
	Generated string
}

// Options chooses optional outputs of Write.
type Options struct {
	// PNG also writes every figure as a PNG next to its SVG.
	PNG bool
}

func (in *Input) validate() error {
	type key struct {
		attack, threat string
		round          int
	}
	seen := make(map[key]bool, len(in.Findings))
	for i, f := range in.Findings {
		if f.Result == nil {
			return fmt.Errorf("report: finding %d (%s, %s, T=%d) has no result", i, f.Attack, f.Threat, f.Round)
		}
		if f.Attack == "" || f.Threat == "" {
			return fmt.Errorf("report: finding %d (T=%d) lacks an attack or threat model name", i, f.Round)
		}
		k := key{f.Attack, f.Threat, f.Round}
		if seen[k] {
			return fmt.Errorf("report: two findings for attack %s, threat %s, T=%d", f.Attack, f.Threat, f.Round)
		}
		seen[k] = true
	}
	rounds := make(map[int]bool, len(in.Rounds))
	for _, r := range in.Rounds {
		if rounds[r.Round] {
			return fmt.Errorf("report: two round statistics for T=%d", r.Round)
		}
		rounds[r.Round] = true
	}
	if math.IsNaN(in.Confidence) || in.Confidence < 0 || in.Confidence >= 1 {
		return fmt.Errorf("report: confidence %v outside [0, 1)", in.Confidence)
	}
	if math.IsNaN(in.ClaimMu) || math.IsInf(in.ClaimMu, 0) || in.ClaimMu < 0 {
		return fmt.Errorf("report: claimed mu %v is not a finite non-negative number", in.ClaimMu)
	}
	if math.IsNaN(in.ClaimEps) || math.IsInf(in.ClaimEps, 0) || in.ClaimEps < 0 || !(in.ClaimDelta >= 0 && in.ClaimDelta < 1) {
		return fmt.Errorf("report: claimed epsilon %v at delta %v is not a finite non-negative epsilon at a delta in [0, 1)", in.ClaimEps, in.ClaimDelta)
	}
	if in.ClaimMu > 0 && in.ClaimEps > 0 {
		return fmt.Errorf("report: a claimed mu (%v) and a claimed epsilon (%v): the deployment makes one claim", in.ClaimMu, in.ClaimEps)
	}
	if h := in.Headline; h != nil {
		switch h.Status {
		case findings.StatusViolated, findings.StatusConsistent, findings.StatusNoClaim, findings.StatusInconclusive:
		default:
			return fmt.Errorf("report: headline status %q is none of %q, %q, %q, %q", h.Status, findings.StatusViolated, findings.StatusConsistent, findings.StatusNoClaim, findings.StatusInconclusive)
		}
		if math.IsNaN(h.Confidence) || h.Confidence < 0 || h.Confidence >= 1 || h.Rows < 0 {
			return fmt.Errorf("report: headline confidence %v over %d rows is not a level in [0, 1) over a row count", h.Confidence, h.Rows)
		}
	}
	for i, f := range in.Findings {
		switch f.ClaimKind {
		case "", findings.ClaimDeployment, findings.ClaimTheory, findings.ClaimEstimate:
		default:
			return fmt.Errorf("report: finding %d (%s, %s, T=%d) has unknown claim kind %q", i, f.Attack, f.Threat, f.Round, f.ClaimKind)
		}
	}
	return nil
}
