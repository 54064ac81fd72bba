package findings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/fedaudit/fedaudit/internal/numfmt"
)

// Format names the layout of findings.json and of `--json` analyses. Format 3 writes a row
// judged above an estimate as "verdict": "exceeds estimate" (VerdictExceedsEstimate), where
// format 2 wrote "violated" beside "claim_kind": "estimate"; Decode reads both.
const Format = "fedaudit-findings/3"

// formatPrevious is the format Decode reads besides Format: its rows mean the same once the
// verdict is read with the claim_kind.
const formatPrevious = "fedaudit-findings/2"

// Headline statuses.
const (
	// StatusViolated: some certified bound exceeds a claim of the deployment or a bound of the
	// theory that holds for it, at the family-wise confidence. The CLI exits with status 3.
	StatusViolated = "violated"
	// StatusConsistent: rows were judged against claims or proven bounds, and no certified
	// bound exceeds its claim. This does not prove the claim.
	StatusConsistent = "consistent"
	// StatusNoClaim: nothing was judged that the deployment promises (no claim, and no theory
	// bound that holds for it); estimates may still have been compared, see the notes.
	StatusNoClaim = "no claim"
	// StatusInconclusive: the runs do not show the mechanism the claim is about, so no verdict
	// is given whatever the rows say: most runs of some audited checkpoint diverged (a diverged
	// run keeps its last finite parameters; its attacks audit a stalled model). The notes keep
	// what the rows said. The CLI exits with status 4.
	StatusInconclusive = "inconclusive"
)

// Headline is the audit's overall answer, printed first by every command that judges and shown
// first in the report: the verdict over the whole family of rows, the row that decides it and
// its certified bound against the claim.
type Headline struct {
	// Status is StatusViolated, StatusConsistent, StatusNoClaim or StatusInconclusive.
	Status string `json:"status"`
	// Text is one sentence that states the verdict, the strongest attack and its certified
	// bound against the claim.
	Text string `json:"text"`
	// The row Text names: for a violation, the violated row of largest tightness; otherwise the
	// judged row of largest tightness (nearest its claim; Text adds the judged row of the
	// largest bound where that is another), or without any judged row the largest certified mu.
	Attack    string   `json:"attack,omitempty"`
	Threat    string   `json:"threat,omitempty"`
	Round     int      `json:"round"`
	MuLower   float64  `json:"mu_lower"`
	EpsLower  float64  `json:"eps_lower"`
	Claim     string   `json:"claim,omitempty"`
	Tightness *float64 `json:"tightness"`
	// Confidence is the family-wise confidence the verdict holds at, over Rows rows.
	Confidence float64 `json:"confidence"`
	Rows       int     `json:"rows"`
	// Notes qualify the verdict: where the settings came from, estimates exceeded, attacks
	// whose scores look reversed, coupled scores without a partner.
	Notes []string `json:"notes,omitempty"`
}

// Violated reports whether the headline verdict is a violation.
func (h Headline) Violated() bool { return h.Status == StatusViolated }

// Inconclusive reports whether the headline gives no verdict because the runs do not show the
// mechanism (StatusInconclusive).
func (h Headline) Inconclusive() bool { return h.Status == StatusInconclusive }

// Family is the statement the findings of one analysis make jointly: with probability at least
// Confidence every certified bound of every row holds at once. Bonferroni over the rows gives
// it: each row is certified at RowConfidence = 1 - (1 - Confidence)/Rows. So a verdict taken
// over all rows (violated if any row's bound exceeds its claim) errs with probability at most
// 1 - Confidence, however many attacks, threat models and checkpoints were tried.
type Family struct {
	Confidence    float64 `json:"confidence"`
	Rows          int     `json:"rows"`
	RowConfidence float64 `json:"row_confidence"`
	Correction    string  `json:"correction"`
}

// Analysis is an audit of a whole score file: one finding per (attack, threat, round), the
// family-wise statement they make together, and the headline verdict. Its JSON form is
// findings.json and the output of `audit analyze --json`; the headline comes first, as in the
// human output.
type Analysis struct {
	Findings []Finding
	Family   Family
	Headline Headline
}

// analysisJSON is the JSON form of an Analysis, format Format.
type analysisJSON struct {
	Format   string    `json:"format"`
	Headline Headline  `json:"headline"`
	Family   Family    `json:"family"`
	Numbers  *Numbers  `json:"numbers,omitempty"`
	Findings []Finding `json:"findings"`
}

// Numbers says, in the file itself, which numbers of the rows are certified and which are
// estimates. It is written only when some row carries an estimate beside its bounds (the
// one-run rows' one-shot estimate), so that files without such rows keep their old form.
type Numbers struct {
	Certified string `json:"certified"`
	Estimates string `json:"estimates"`
}

// numbersLegend is the legend written beside rows with estimates.
var numbersLegend = Numbers{
	Certified: "mu_lower and eps_lower (at delta): lower bounds that hold jointly over all rows at family.confidence; only these decide verdicts",
	Estimates: "mu_estimate (the Gaussian mu of the AUC) and estimate.* (the one-shot estimate): point estimates without a confidence statement, never judged",
}

// MarshalJSON writes the analysis in format Format.
func (a Analysis) MarshalJSON() ([]byte, error) {
	fs := a.Findings
	if fs == nil {
		fs = []Finding{} // an analysis without rows has an empty list, not null
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	aj := analysisJSON{Format: Format, Headline: a.Headline, Family: a.Family, Findings: fs}
	for i := range fs {
		if fs[i].Estimate != nil {
			aj.Numbers = &numbersLegend
		}
	}
	if err := enc.Encode(aj); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// WriteJSON writes the analysis as indented JSON (findings.json, `--json`), with ">=" and the
// like left as they are for people who read the file.
func (a *Analysis) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(a)
}

// Decoded is what a findings file holds.
type Decoded struct {
	Findings []Finding
	// Headline and Family are nil for the files of older versions, which held only the rows.
	Headline *Headline
	Family   *Family
}

// Decode reads findings.json: an analysis in format Format, or the bare array of rows that
// older versions wrote. Another format is an error naming it.
func Decode(raw []byte) (*Decoded, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var fs []Finding
		if err := json.Unmarshal(trimmed, &fs); err != nil {
			return nil, err
		}
		return &Decoded{Findings: fs}, nil
	}
	var a analysisJSON
	if err := json.Unmarshal(trimmed, &a); err != nil {
		return nil, err
	}
	if a.Format != Format && a.Format != formatPrevious {
		return nil, fmt.Errorf("format %q, this version reads %q and %q", a.Format, Format, formatPrevious)
	}
	return &Decoded{Findings: a.Findings, Headline: &a.Headline, Family: &a.Family}, nil
}

// Percent writes a confidence level as the headline and the terminal table state it: a
// percentage without needless digits (95%, 99.5%), rounded down at its fourth decimal, as a
// guarantee is never stated above itself (a row at 0.9988095 is "99.8809%", not "99.881%";
// see numfmt.LowerConfidence).
func Percent(p float64) string {
	s := numfmt.LowerConfidence(100*p, 'f', 4)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}
