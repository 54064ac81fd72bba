package experiment

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/runs"
)

// FindingsFormat names the layout of findings.json and of `--json` analyses.
const FindingsFormat = "fedaudit-findings/2"

// AnalysisRecord is the machine-readable form of an Analysis: DIR/findings.json and the output
// of `audit analyze --json` and `audit run --json`. The headline comes first, as in the human
// output.
type AnalysisRecord struct {
	Format   string   `json:"format"`
	Headline Headline `json:"headline"`
	Family   Family   `json:"family"`
	Findings []Record `json:"findings"`
}

// Record is the machine-readable form of a Finding: one object per (attack, threat, round).
// Fields without a value (no theory, no claim) are null.
type Record struct {
	Attack      string  `json:"attack"`
	Threat      string  `json:"threat"`
	Round       int     `json:"round"`
	N0          int     `json:"n0"`
	N1          int     `json:"n1"`
	AUC         float64 `json:"auc"`
	TPRAt1e3    float64 `json:"tpr_at_fpr_0.001"`
	TPRAt1e2    float64 `json:"tpr_at_fpr_0.01"`
	BalancedAcc float64 `json:"best_balanced_accuracy"`
	MuLower     float64 `json:"mu_lower"`
	EpsLower    float64 `json:"eps_lower"`
	MuEstimate  float64 `json:"mu_estimate"`
	Delta       float64 `json:"delta"`
	// Confidence is the row's own level; the family's statement is in AnalysisRecord.Family.
	Confidence float64 `json:"confidence"`
	Method     string  `json:"method"`
	// Paired: the scores were certified as complete coupled pairs.
	Paired bool `json:"paired"`
	// Unpaired counts coupled scores without a partner in the other world.
	Unpaired int `json:"unpaired,omitempty"`
	// Seed is the split method's seed (null for the other methods).
	Seed          *uint64  `json:"split_seed,omitempty"`
	MuExact       *float64 `json:"mu_exact"`
	MuConvergent  *float64 `json:"mu_convergent"`
	MuComposition *float64 `json:"mu_composition"`
	// MuUploads is the bound of the uploads observer (sqrt(Mu(T-1)^2 + (Gamma/sigma)^2)), set
	// on uploads rows only.
	MuUploads   *float64 `json:"mu_uploads,omitempty"`
	Verdict     *string  `json:"verdict"`
	ClaimSource *string  `json:"claim_source"`
	// ClaimKind is "claim" (the deployment's), "bound" (theory that holds for it) or
	// "estimate" (theory from an assumed constant).
	ClaimKind *string  `json:"claim_kind"`
	Tightness *float64 `json:"tightness"`
	// ReversedMuLower is the mu certified by the scores read the other way round; set only when
	// positive, i.e. when the attack is worse than guessing in its stated direction.
	ReversedMuLower *float64 `json:"reversed_mu_lower,omitempty"`
	// Metrics are the means of the attack's own success metrics (label accuracy, PSNR, ...).
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// Record converts the analysis for JSON output.
func (a *Analysis) Record() AnalysisRecord {
	return AnalysisRecord{Format: FindingsFormat, Headline: a.Headline, Family: a.Family, Findings: Records(a.Findings)}
}

// WriteJSON writes the analysis as indented JSON (findings.json, `--json`), with ">=" and the
// like left as they are for people who read the file.
func (a *Analysis) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(a.Record())
}

// Records converts findings for JSON output.
func Records(fs []Finding) []Record {
	out := make([]Record, 0, len(fs))
	for _, f := range fs {
		r := f.Result
		rec := Record{
			Attack: f.Attack, Threat: f.Threat, Round: f.Round, N0: r.N0, N1: r.N1,
			AUC: r.AUC, TPRAt1e3: r.TPRAt1e3, TPRAt1e2: r.TPRAt1e2, BalancedAcc: r.BestBalancedAccuracy,
			MuLower: r.MuLower, EpsLower: r.EpsLower, MuEstimate: r.MuEstimate,
			Delta: r.Delta, Confidence: r.Confidence, Method: string(r.Method), Paired: r.Paired,
			Unpaired: len(f.Unpaired),
			Metrics:  f.Metrics,
		}
		if r.Method == audit.Split {
			seed := f.Seed
			rec.Seed = &seed
		}
		rec.MuExact = finite(f.ExactMu)
		if f.Theory != nil {
			rec.MuConvergent = finite(f.Theory.Mu)
			rec.MuComposition = finite(f.Theory.MuComposition)
			if f.Threat == runs.ThreatUploads {
				rec.MuUploads = finite(f.Theory.MuUploads)
				if rec.MuUploads == nil {
					rec.MuUploads = finite(f.Theory.MuUploadsComposition)
				}
			}
		}
		if f.Verdict != nil {
			s, src, kind := string(f.Verdict.Status), f.ClaimSource, f.ClaimKind
			rec.Verdict, rec.ClaimSource, rec.ClaimKind = &s, &src, &kind
			rec.Tightness = finite(f.Verdict.Tightness)
		}
		if f.Reversed() {
			rec.ReversedMuLower = finite(f.ReversedMuLower)
		}
		out = append(out, rec)
	}
	return out
}

// verdictText is a row's verdict as the table prints it. A row judged against an estimate says
// so instead of "violated", and a row whose scores look reversed is marked.
func verdictText(r Record) string {
	if r.Verdict == nil {
		return "-"
	}
	v := *r.Verdict
	if r.ClaimKind != nil && *r.ClaimKind == ClaimEstimate && v == string(audit.Violated) {
		v = "exceeds estimate"
	}
	if r.Tightness != nil {
		v += fmt.Sprintf(" (%.2f of %s)", *r.Tightness, *r.ClaimSource)
	}
	if r.ReversedMuLower != nil {
		v += " [reversed scores?]"
	}
	return v
}

// WriteAnalysis prints an analysis as a person reads it: the headline first, its notes, then
// one table row per (attack, threat, T), and a line on how the bounds were certified.
func WriteAnalysis(w io.Writer, a *Analysis) error {
	fmt.Fprintf(w, "%s\n", a.Headline.Text)
	for _, n := range a.Headline.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
	if err := WriteTable(w, a.Findings); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", methodLine(a))
	return nil
}

// methodLine says how the table's bounds were certified: the method per row kind, the family
// and each row's level.
func methodLine(a *Analysis) string {
	var methods []string
	for _, f := range a.Findings {
		m := string(f.Result.Method)
		switch {
		case f.Result.Paired:
			m += " (paired scores)"
		case len(f.Unpaired) > 0:
			m += " (coupled scores, incomplete pairs)"
		}
		if f.Result.Method == audit.Split {
			m += fmt.Sprintf(" (split seed %d)", f.Seed)
		}
		if !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	fam := a.Family
	joint := fmt.Sprintf("at %s confidence", percent(fam.Confidence))
	if fam.Rows > 1 {
		joint = fmt.Sprintf("at %s confidence jointly over %d rows (Bonferroni: each row at %s)", percent(fam.Confidence), fam.Rows, percent(fam.RowConfidence))
	}
	return fmt.Sprintf("mu_lower: certified %s with %s thresholds; mu_est: a point estimate, not a bound.", joint, strings.Join(methods, ", "))
}

// WriteTable prints findings as the one table a person reads: attack, threat, T, AUC, TPR at
// 1% FPR, the certified mu lower bound, the point estimate, the exact mu where the instance has
// one, the two theoretical bounds and the verdict.
func WriteTable(w io.Writer, fs []Finding) error {
	recs := Records(fs)
	exact, uploads := false, false
	for _, r := range recs {
		exact = exact || r.MuExact != nil
		uploads = uploads || r.MuUploads != nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "attack\tthreat\tT\tn0\tn1\tAUC\tTPR@1pctFPR\tmu_lower\tmu_est\t"
	if exact {
		header += "exact\t"
	}
	header += "convergent\tcomposition\t"
	if uploads {
		header += "uploads\t"
	}
	io.WriteString(tw, header+"verdict\t\n")
	num := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.4g", *p)
	}
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t",
			r.Attack, r.Threat, r.Round, r.N0, r.N1, r.AUC, r.TPRAt1e2, r.MuLower, r.MuEstimate)
		if exact {
			fmt.Fprintf(tw, "%s\t", num(r.MuExact))
		}
		fmt.Fprintf(tw, "%s\t%s\t", num(r.MuConvergent), num(r.MuComposition))
		if uploads {
			fmt.Fprintf(tw, "%s\t", num(r.MuUploads))
		}
		fmt.Fprintf(tw, "%s\t\n", verdictText(r))
	}
	return tw.Flush()
}
