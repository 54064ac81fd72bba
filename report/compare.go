package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/findings"
)

// Compared is one analyzed experiment in a comparison: its row label, its findings and its
// per-round training summaries.
type Compared struct {
	Label    string
	Findings []findings.Finding
	Rounds   []findings.RoundSummary
	// Gallery is the experiment's reconstructions (nil: none).
	Gallery *findings.Gallery
	// Headline and Family are the verdict and the family-wise statement the bounds hold under
	// (nil: unknown, for the findings of older versions).
	Headline *findings.Headline
	Family   *findings.Family
}

// RoundMetrics are the training measurements a comparison can show, one table each.
var RoundMetrics = []string{"test_accuracy", "train_loss", "sensitivity", "realized_mu", "diverged"}

func roundValue(s findings.RoundSummary, metric string) (float64, bool) {
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

// CompareMetrics are the per-finding numbers a comparison table can show.
var CompareMetrics = []string{"auc", "tpr_at_fpr_0.01", "best_balanced_accuracy", "mu_lower", "eps_lower", "mu_estimate"}

func findingValue(f *findings.Finding, metric string) (float64, bool) {
	switch metric {
	case "auc":
		return f.Result.AUC, true
	case "tpr_at_fpr_0.01":
		return f.Result.TPRAt1e2, true
	case "best_balanced_accuracy":
		return f.Result.BestBalancedAccuracy, true
	case "mu_lower":
		return f.Result.MuLower, true
	case "eps_lower":
		return f.Result.EpsLower, true
	case "mu_estimate":
		return f.Result.MuEstimate, true
	}
	v, ok := f.Metrics[metric]
	return v, ok
}

// WriteComparison prints, for every attack and metric, a Markdown table shaped like Sun et al.'s
// attack-success tables: one row per experiment, one column per round T. A metric an attack
// does not report is left out; "-" marks a round an experiment lacks.
func WriteComparison(w io.Writer, exps []Compared, metrics []string) error {
	writeContext(w, exps)
	writeRoundTables(w, exps, metrics)
	// A table per attack and threat model: one attack can be scored under several (its rows
	// of different observers certify different things), and a table of one attack that took
	// each cell from whichever threat came last would mix them under one title.
	var keys []series
	roundsOf := map[series][]int{}
	for _, e := range exps {
		for _, f := range e.Findings {
			k := series{attack: f.Attack, threat: f.Threat}
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
			if !slices.Contains(roundsOf[k], f.Round) {
				roundsOf[k] = append(roundsOf[k], f.Round)
			}
		}
	}
	slices.SortFunc(keys, func(a, b series) int {
		return cmp.Or(strings.Compare(a.attack, b.attack), strings.Compare(a.threat, b.threat))
	})
	for _, k := range keys {
		rounds := roundsOf[k]
		slices.Sort(rounds)
		for _, metric := range metrics {
			writeAttackTable(w, exps, k, rounds, metric)
		}
	}
	return nil
}

// writeContext prints what each experiment's numbers are: its verdict, the pairs, and the
// confidence, the rows it is shared over and the method, without which bounds of experiments
// side by side are compared wrongly (a bound of one row at 95% beside one of 27 rows each at
// 99.8% differs by the correction, not by the attack).
func writeContext(w io.Writer, exps []Compared) {
	fmt.Fprintf(w, "Experiments: each one's certified bounds hold jointly at its confidence over its rows (Bonferroni: each row at the level shown), so a bound of more rows is more conservative.\n\n")
	fmt.Fprintln(w, "| experiment | verdict | pairs | confidence | rows | each row at | method | delta |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, e := range exps {
		verdict, conf, rows, level := "-", "-", "-", "-"
		if e.Headline != nil {
			verdict = e.Headline.Status
		}
		if f := e.Family; f != nil {
			conf, rows = findings.Percent(f.Confidence), fmt.Sprint(f.Rows)
			level = findings.Percent(f.RowConfidence)
		}
		pairs, methods, deltas := 0, []string{}, []string{}
		for _, f := range e.Findings {
			if f.Result == nil {
				continue
			}
			if !f.OneRun() {
				pairs = max(pairs, f.Result.N0, f.Result.N1)
			}
			if m := string(f.Result.Method); m != "" && !slices.Contains(methods, m) {
				methods = append(methods, m)
			}
			if d := num(f.Result.Delta); f.Result.Delta > 0 && !slices.Contains(deltas, d) {
				deltas = append(deltas, d)
			}
		}
		p := "-"
		if pairs > 0 {
			p = fmt.Sprint(pairs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", e.Label, verdict, p, conf, rows, level,
			cmp.Or(strings.Join(methods, ", "), "-"), cmp.Or(strings.Join(deltas, ", "), "-"))
	}
}

// writeAttackTable prints the table of one attack under one threat model for one metric, or
// nothing when no experiment has a value for it.
func writeAttackTable(w io.Writer, exps []Compared, k series, rounds []int, metric string) {
	rows := make([][]string, 0, len(exps))
	any := false
	for _, e := range exps {
		row := []string{e.Label}
		for _, T := range rounds {
			cell := "-"
			for i := range e.Findings {
				f := &e.Findings[i]
				if f.Attack == k.attack && f.Threat == k.threat && f.Round == T {
					if v, ok := findingValue(f, metric); ok && !math.IsNaN(v) {
						cell, any = fmt.Sprintf("%.4g", v), true
						switch metric {
						case "mu_lower", "eps_lower": // a certified bound: never printed above itself
							cell = lower(v)
						case "auc", "tpr_at_fpr_0.01", "best_balanced_accuracy":
							cell = offTheEnds(v, 'g', 4)
						}
					}
				}
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	if !any {
		return
	}
	fmt.Fprintf(w, "\n**%s** (%s threat), %s by T:\n\n", k.attack, k.threat, metric)
	// Round 0 of an attack's row is a score file's row without a round (findings.Finding.RoundGiven),
	// not the model before training.
	writeMarkdownRows(w, rounds, rows, "T unknown")
}

// writeMarkdownRows prints a table with an "experiment" column and one column per round,
// round 0's headed round0.
func writeMarkdownRows(w io.Writer, rounds []int, rows [][]string, round0 string) {
	head := []string{"experiment"}
	for _, T := range rounds {
		if T == 0 {
			head = append(head, round0)
			continue
		}
		head = append(head, fmt.Sprintf("T=%d", T))
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, row := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// writeRoundTables prints one table per training metric requested (rows: experiments, columns:
// T), from the experiments' round summaries.
func writeRoundTables(w io.Writer, exps []Compared, metrics []string) {
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
		rows := make([][]string, 0, len(exps))
		for _, e := range exps {
			row := []string{e.Label}
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
			rows = append(rows, row)
		}
		writeMarkdownRows(w, rounds, rows, "T=0")
	}
}
