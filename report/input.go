package report

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/audit"
)

// Finding is the audit of one attack under one threat model after one number of rounds.
type Finding struct {
	Attack string
	// Threat is the threat model the attack's scores were computed under: "final" (the final
	// model), "all-iterates" (every global model) or "uploads" (the target client's uploads).
	Threat string
	Round  int
	Result *audit.Result
	// Theory is the bound of the configuration at Round; nil when unknown.
	Theory *audit.Bound
	// Verdict judges a claimed guarantee against Result; nil when no claim was judged.
	Verdict *audit.Verdict
	// ClaimSource says where the claim came from, e.g. "convergent bound" or "--claim-mu".
	ClaimSource string
	// ClaimKind is what the claim is: "claim" (the deployment's own), "bound" (theory that
	// holds for the deployment) or "estimate" (theory computed from an assumed or estimated
	// constant). A certified bound above an estimate is shown as "exceeds estimate", not as a
	// violation. Empty means "claim".
	ClaimKind string
	// ExactMu is the mechanism's exact mu for this threat model and T where the instance has
	// one (the quadratic reference instance); nil when unknown.
	ExactMu *float64
	// Metrics are the means of the attack's own success metrics (label accuracy, PSNR, MSE,
	// ...), shown in the attack-metrics table; nil when the attack reports none.
	Metrics map[string]float64
}

// RoundStats is what training measured after Round rounds. Unknown values are NaN.
type RoundStats struct {
	Round int
	// Sensitivity is the mean distance ||w_T - w'_T|| between the final models of coupled
	// pairs of runs.
	Sensitivity float64
	// RealizedMu is sqrt(mean of the recorded mu^2): the privacy loss the informed adversary
	// would see in the runs that were actually trained.
	RealizedMu   float64
	TrainLoss    float64
	TestAccuracy float64
	// Diverged counts the runs whose loss became non-finite.
	Diverged int
}

// Claim kinds of Finding.ClaimKind.
const (
	ClaimDeployment = "claim"
	ClaimTheory     = "bound"
	ClaimEstimate   = "estimate"
)

// Headline statuses.
const (
	StatusViolated   = "violated"
	StatusConsistent = "consistent"
	StatusNoClaim    = "no claim"
)

// Headline is the audit's overall answer, the first thing the report shows.
type Headline struct {
	// Status is StatusViolated, StatusConsistent or StatusNoClaim.
	Status string
	// Text states the verdict, the strongest attack and its certified bound against the claim.
	Text string
	// Notes qualify the verdict (estimates exceeded, reversed scores, settings overridden).
	Notes []string
	// Confidence is the family-wise level: every certified bound of the Rows rows holds at
	// once with at least this probability. RowConfidence is each row's own level
	// (Bonferroni: 1 - (1 - Confidence)/Rows); 0 when not given.
	Confidence    float64
	Rows          int
	RowConfidence float64
}

// Input is everything a report shows.
type Input struct {
	Title string
	// Headline is the overall verdict shown first; nil shows none.
	Headline *Headline
	// ClaimMu is the deployment's claimed mu, drawn on the mu-against-T and trade-off figures;
	// 0 when there is no single claimed mu. ClaimLabel names it (e.g. "config claim").
	ClaimMu    float64
	ClaimLabel string
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
	Findings   []Finding
	Rounds     []RoundStats
	// Bounds is the theory at each T; optional, the Theory of the findings fills the gaps.
	Bounds []audit.Bound
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
	if h := in.Headline; h != nil {
		switch h.Status {
		case StatusViolated, StatusConsistent, StatusNoClaim:
		default:
			return fmt.Errorf("report: headline status %q is none of %q, %q, %q", h.Status, StatusViolated, StatusConsistent, StatusNoClaim)
		}
		if math.IsNaN(h.Confidence) || h.Confidence < 0 || h.Confidence >= 1 || h.Rows < 0 {
			return fmt.Errorf("report: headline confidence %v over %d rows is not a level in [0, 1) over a row count", h.Confidence, h.Rows)
		}
	}
	for i, f := range in.Findings {
		switch f.ClaimKind {
		case "", ClaimDeployment, ClaimTheory, ClaimEstimate:
		default:
			return fmt.Errorf("report: finding %d (%s, %s, T=%d) has unknown claim kind %q", i, f.Attack, f.Threat, f.Round, f.ClaimKind)
		}
	}
	return nil
}
