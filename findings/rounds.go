package findings

import (
	"encoding/json"
)

// RoundSummary is what training measured at one checkpoint, over the runs of an experiment:
// utility, divergence, the realized mu of the informed adversary, and the measured sensitivity
// of coupled pairs. Unknown values are NaN (null in JSON). Its JSON form is one element of
// rounds.json.
type RoundSummary struct {
	Round int
	Runs  int
	// Diverged counts runs flagged as diverged (their loss became non-finite; the paper's "-"
	// entries).
	Diverged int
	// TrainLoss and TestAccuracy are means over runs that did not diverge.
	TrainLoss    float64
	TestAccuracy float64
	// RealizedMu is sqrt of the mean recorded mu^2 = (m/sigma^2) sum_t ||phi(w_t) - phi'(w_t)||^2
	// over world-C runs: the privacy loss the informed adversary would see in the runs that
	// were actually trained.
	RealizedMu float64
	// Sensitivity is the mean of ||w_T - w'_T|| over pairs whose runs both kept their
	// parameters.
	Sensitivity float64
	// MaxSensitivity is the largest ||w_T - w'_T|| over those pairs.
	MaxSensitivity float64
}

// roundJSON is the JSON form of a RoundSummary, NaN written as null.
type roundJSON struct {
	Round          int      `json:"round"`
	Runs           int      `json:"runs"`
	Diverged       int      `json:"diverged"`
	TrainLoss      *float64 `json:"train_loss"`
	TestAccuracy   *float64 `json:"test_accuracy"`
	RealizedMu     *float64 `json:"realized_mu"`
	Sensitivity    *float64 `json:"sensitivity"`
	MaxSensitivity *float64 `json:"max_sensitivity"`
}

// MarshalJSON writes the summary with NaN as null.
func (s RoundSummary) MarshalJSON() ([]byte, error) {
	return json.Marshal(roundJSON{Round: s.Round, Runs: s.Runs, Diverged: s.Diverged, TrainLoss: finite(s.TrainLoss),
		TestAccuracy: finite(s.TestAccuracy), RealizedMu: finite(s.RealizedMu), Sensitivity: finite(s.Sensitivity),
		MaxSensitivity: finite(s.MaxSensitivity)})
}

// UnmarshalJSON reads the summary, null as NaN.
func (s *RoundSummary) UnmarshalJSON(raw []byte) error {
	var j roundJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return err
	}
	*s = RoundSummary{Round: j.Round, Runs: j.Runs, Diverged: j.Diverged, TrainLoss: orNaN(j.TrainLoss),
		TestAccuracy: orNaN(j.TestAccuracy), RealizedMu: orNaN(j.RealizedMu), Sensitivity: orNaN(j.Sensitivity),
		MaxSensitivity: orNaN(j.MaxSensitivity)}
	return nil
}

// MarshalRounds encodes summaries as rounds.json holds them (indented, one object per round).
func MarshalRounds(sums []RoundSummary) ([]byte, error) {
	if sums == nil {
		sums = []RoundSummary{}
	}
	return json.MarshalIndent(sums, "", "  ")
}

// UnmarshalRounds decodes rounds.json.
func UnmarshalRounds(raw []byte) ([]RoundSummary, error) {
	var sums []RoundSummary
	if err := json.Unmarshal(raw, &sums); err != nil {
		return nil, err
	}
	return sums, nil
}
