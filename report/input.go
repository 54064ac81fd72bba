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

// Input is everything a report shows.
type Input struct {
	Title string
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
	return nil
}
