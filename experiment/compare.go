package experiment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Analyzed is one analyzed experiment directory: its config and findings as written by Run.
type Analyzed struct {
	Dir     string
	Config  *Config
	Records []Record
	// Headline is the analysis's overall verdict (nil for findings of older versions, which
	// held only the rows).
	Headline *Headline
	// Rounds are the per-round training summaries (DIR/rounds.json), nil when absent.
	Rounds []RoundSummary
}

// LoadAnalyzed reads DIR/config.json and DIR/findings.json.
func LoadAnalyzed(dir string) (*Analyzed, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (run `audit run` there first)", dir, err)
	}
	cfg, err := FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "findings.json"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (run `audit run` there first)", dir, err)
	}
	recs, head, err := decodeFindings(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FindingsPath(dir), err)
	}
	a := &Analyzed{Dir: dir, Config: cfg, Records: recs, Headline: head}
	if raw, err := os.ReadFile(filepath.Join(dir, "rounds.json")); err == nil {
		var sums []roundSummaryJSON
		if err := json.Unmarshal(raw, &sums); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "rounds.json"), err)
		}
		for _, s := range sums {
			a.Rounds = append(a.Rounds, s.summary())
		}
	}
	return a, nil
}

// decodeFindings reads findings.json: an AnalysisRecord, or the bare array of rows that older
// versions wrote.
func decodeFindings(raw []byte) ([]Record, *Headline, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var recs []Record
		if err := json.Unmarshal(trimmed, &recs); err != nil {
			return nil, nil, err
		}
		return recs, nil, nil
	}
	var a AnalysisRecord
	if err := json.Unmarshal(trimmed, &a); err != nil {
		return nil, nil, err
	}
	if a.Format != FindingsFormat {
		return nil, nil, fmt.Errorf("format %q, this version reads %q", a.Format, FindingsFormat)
	}
	return a.Findings, &a.Headline, nil
}

// RoundMetrics are the training measurements a comparison can show, one table each.
var RoundMetrics = []string{"test_accuracy", "train_loss", "sensitivity", "realized_mu", "diverged"}

func roundValue(s RoundSummary, metric string) (float64, bool) {
	switch metric {
	case "test_accuracy":
		return s.TestAccuracy, true
	case "train_loss":
		return s.TrainLoss, true
	case "sensitivity":
		return s.Sensitivity, true
	case "realized_mu":
		return s.RealizedMu, true
	case "diverged":
		return float64(s.Diverged), true
	}
	return 0, false
}

// roundSummaryJSON is RoundSummary with NaN written as null, which JSON cannot hold otherwise.
type roundSummaryJSON struct {
	Round          int      `json:"round"`
	Runs           int      `json:"runs"`
	Diverged       int      `json:"diverged"`
	TrainLoss      *float64 `json:"train_loss"`
	TestAccuracy   *float64 `json:"test_accuracy"`
	RealizedMu     *float64 `json:"realized_mu"`
	Sensitivity    *float64 `json:"sensitivity"`
	MaxSensitivity *float64 `json:"max_sensitivity"`
}

func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func (j roundSummaryJSON) summary() RoundSummary {
	return RoundSummary{Round: j.Round, Runs: j.Runs, Diverged: j.Diverged, TrainLoss: orNaN(j.TrainLoss),
		TestAccuracy: orNaN(j.TestAccuracy), RealizedMu: orNaN(j.RealizedMu), Sensitivity: orNaN(j.Sensitivity),
		MaxSensitivity: orNaN(j.MaxSensitivity)}
}

// RoundSummariesJSON encodes summaries for DIR/rounds.json.
func RoundSummariesJSON(sums []RoundSummary) ([]byte, error) {
	out := make([]roundSummaryJSON, len(sums))
	for i, s := range sums {
		out[i] = roundSummaryJSON{Round: s.Round, Runs: s.Runs, Diverged: s.Diverged, TrainLoss: finite(s.TrainLoss),
			TestAccuracy: finite(s.TestAccuracy), RealizedMu: finite(s.RealizedMu), Sensitivity: finite(s.Sensitivity),
			MaxSensitivity: finite(s.MaxSensitivity)}
	}
	return json.MarshalIndent(out, "", "  ")
}

// CompareMetrics are the per-finding numbers a comparison table can show.
var CompareMetrics = []string{"auc", "tpr_at_fpr_0.01", "best_balanced_accuracy", "mu_lower", "mu_estimate"}

func recordValue(r Record, metric string) (float64, bool) {
	switch metric {
	case "auc":
		return r.AUC, true
	case "tpr_at_fpr_0.01":
		return r.TPRAt1e2, true
	case "best_balanced_accuracy":
		return r.BalancedAcc, true
	case "mu_lower":
		return r.MuLower, true
	case "mu_estimate":
		return r.MuEstimate, true
	}
	v, ok := r.Metrics[metric]
	return v, ok
}

// WriteComparison prints, for every attack and metric, a Markdown table shaped like the paper's
// attack-success tables: one row per experiment (labelled by label(cfg)), one column per round
// T. A metric an attack does not report is left out; "-" marks a round an experiment lacks.
func WriteComparison(w io.Writer, exps []*Analyzed, metrics []string, label func(*Config) string) error {
	writeRoundTables(w, exps, metrics, label)
	var attacks []string
	roundsOf := map[string][]int{}
	for _, e := range exps {
		for _, r := range e.Records {
			if !slices.Contains(attacks, r.Attack) {
				attacks = append(attacks, r.Attack)
			}
			if !slices.Contains(roundsOf[r.Attack], r.Round) {
				roundsOf[r.Attack] = append(roundsOf[r.Attack], r.Round)
			}
		}
	}
	sort.Strings(attacks)
	for _, a := range attacks {
		rounds := roundsOf[a]
		slices.Sort(rounds)
		for _, metric := range metrics {
			rows := make([][]string, 0, len(exps))
			any := false
			for _, e := range exps {
				row := []string{label(e.Config)}
				for _, T := range rounds {
					cell := "-"
					for _, r := range e.Records {
						if r.Attack == a && r.Round == T {
							if v, ok := recordValue(r, metric); ok && !math.IsNaN(v) {
								cell, any = fmt.Sprintf("%.4g", v), true
							}
						}
					}
					row = append(row, cell)
				}
				rows = append(rows, row)
			}
			if !any {
				continue
			}
			threat := ""
			for _, e := range exps {
				for _, r := range e.Records {
					if r.Attack == a {
						threat = r.Threat
					}
				}
			}
			fmt.Fprintf(w, "\n**%s** (%s threat), %s by T:\n\n", a, threat, metric)
			head := []string{"experiment"}
			for _, T := range rounds {
				head = append(head, fmt.Sprintf("T=%d", T))
			}
			fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
			for _, row := range rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			}
		}
	}
	return nil
}

// writeRoundTables prints one table per training metric requested (rows: experiments, columns:
// T), from the experiments' round summaries.
func writeRoundTables(w io.Writer, exps []*Analyzed, metrics []string, label func(*Config) string) {
	var rounds []int
	for _, e := range exps {
		for _, s := range e.Rounds {
			if !slices.Contains(rounds, s.Round) {
				rounds = append(rounds, s.Round)
			}
		}
	}
	slices.Sort(rounds)
	for _, metric := range metrics {
		if !slices.Contains(RoundMetrics, metric) || len(rounds) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n**training**, %s by T:\n\n", metric)
		head := []string{"experiment"}
		for _, T := range rounds {
			head = append(head, fmt.Sprintf("T=%d", T))
		}
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
		for _, e := range exps {
			row := []string{label(e.Config)}
			for _, T := range rounds {
				cell := "-"
				for _, s := range e.Rounds {
					if s.Round == T {
						if v, _ := roundValue(s, metric); !math.IsNaN(v) {
							cell = fmt.Sprintf("%.4g", v)
						}
					}
				}
				row = append(row, cell)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
}
