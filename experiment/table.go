package experiment

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// Record is the machine-readable form of a Finding (`audit analyze --json`): one object per
// (attack, threat, round). Fields without a value (no theory, no claim) are null.
type Record struct {
	Attack        string   `json:"attack"`
	Threat        string   `json:"threat"`
	Round         int      `json:"round"`
	N0            int      `json:"n0"`
	N1            int      `json:"n1"`
	AUC           float64  `json:"auc"`
	TPRAt1e3      float64  `json:"tpr_at_fpr_0.001"`
	TPRAt1e2      float64  `json:"tpr_at_fpr_0.01"`
	BalancedAcc   float64  `json:"best_balanced_accuracy"`
	MuLower       float64  `json:"mu_lower"`
	EpsLower      float64  `json:"eps_lower"`
	MuEstimate    float64  `json:"mu_estimate"`
	Delta         float64  `json:"delta"`
	Confidence    float64  `json:"confidence"`
	Method        string   `json:"method"`
	MuExact       *float64 `json:"mu_exact"`
	MuConvergent  *float64 `json:"mu_convergent"`
	MuComposition *float64 `json:"mu_composition"`
	Verdict       *string  `json:"verdict"`
	ClaimSource   *string  `json:"claim_source"`
	Tightness     *float64 `json:"tightness"`
	// Metrics are the means of the attack's own success metrics (label accuracy, PSNR, ...).
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
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
			Delta: r.Delta, Confidence: r.Confidence, Method: string(r.Method),
			Metrics: f.Metrics,
		}
		rec.MuExact = finite(f.ExactMu)
		if f.Theory != nil {
			rec.MuConvergent = finite(f.Theory.Mu)
			rec.MuComposition = finite(f.Theory.MuComposition)
		}
		if f.Verdict != nil {
			s, src := string(f.Verdict.Status), f.ClaimSource
			rec.Verdict, rec.ClaimSource = &s, &src
			rec.Tightness = finite(f.Verdict.Tightness)
		}
		out = append(out, rec)
	}
	return out
}

// WriteTable prints findings as the one table a person reads: attack, threat, T, AUC, TPR at
// 1% FPR, the certified mu lower bound, the point estimate, the exact mu where the instance has
// one, the two theoretical bounds and the verdict.
func WriteTable(w io.Writer, fs []Finding) error {
	recs := Records(fs)
	exact := false
	for _, r := range recs {
		exact = exact || r.MuExact != nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "attack\tthreat\tT\tn0\tn1\tAUC\tTPR@1pctFPR\tmu_lower\tmu_est\t"
	if exact {
		header += "exact\t"
	}
	io.WriteString(tw, header+"convergent\tcomposition\tverdict\t\n")
	num := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.4g", *p)
	}
	for _, r := range recs {
		verdict := "-"
		if r.Verdict != nil {
			verdict = *r.Verdict
			if r.Tightness != nil {
				verdict += fmt.Sprintf(" (%.2f of %s)", *r.Tightness, *r.ClaimSource)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t",
			r.Attack, r.Threat, r.Round, r.N0, r.N1, r.AUC, r.TPRAt1e2, r.MuLower, r.MuEstimate)
		if exact {
			fmt.Fprintf(tw, "%s\t", num(r.MuExact))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", num(r.MuConvergent), num(r.MuComposition), verdict)
	}
	return tw.Flush()
}
