package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// The comparison table puts experiments in rows and rounds in columns, leaves "-" where an
// experiment lacks a round, and skips metrics an attack never reports. A table of what each
// experiment's numbers are comes first: compared without their confidence, rows and method,
// bounds of one row beside bounds of 27 read as attacks of different strength.
func TestWriteComparison(t *testing.T) {
	row := func(round int, auc float64, metrics map[string]float64) findings.Finding {
		return findings.Finding{Attack: "loss", Threat: "final", Round: round,
			Result:  &audit.Result{AUC: auc, N0: 40, N1: 40, Method: audit.DKWBand, Delta: 1e-5},
			ExactMu: math.NaN(), ReversedMuLower: math.NaN(), Metrics: metrics}
	}
	exps := []Compared{
		{Label: "sigma = 1", Findings: []findings.Finding{row(1, 0.5, nil), row(5, 0.51, nil)},
			Headline: &findings.Headline{Status: findings.StatusConsistent},
			Family:   &findings.Family{Confidence: 0.95, Rows: 2, RowConfidence: 0.975}},
		{Label: "sigma = 0.1", Findings: []findings.Finding{row(5, 0.75, map[string]float64{"psnr": math.NaN()})},
			Rounds: []findings.RoundSummary{{Round: 5, Runs: 4, TrainLoss: 0.25, TestAccuracy: math.NaN()}}},
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, exps, []string{"auc", "psnr", "test_accuracy", "train_loss"}); err != nil {
		t.Fatal(err)
	}
	want := `Experiments: each one's certified bounds hold jointly at its confidence over its rows (Bonferroni: each row at the level shown), so a bound of more rows is more conservative.

| experiment | verdict | pairs | confidence | rows | each row at | method | delta |
|---|---|---|---|---|---|---|---|
| sigma = 1 | consistent | 40 | 95% | 2 | 97.5% | dkw+band | 1e-05 |
| sigma = 0.1 | - | 40 | - | - | - | dkw+band | 1e-05 |

**training**, test_accuracy by T:

| experiment | T=5 |
|---|---|
| sigma = 1 | - |
| sigma = 0.1 | - |

**training**, train_loss by T:

| experiment | T=5 |
|---|---|
| sigma = 1 | - |
| sigma = 0.1 | 0.25 |

**loss** (final threat), auc by T:

| experiment | T=1 | T=5 |
|---|---|---|
| sigma = 1 | 0.5 | 0.51 |
| sigma = 0.1 | - | 0.75 |
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// One attack under two threat models gets a table per threat, each with its own values: a table
// per attack took each cell from whichever finding came last and titled it with the last threat.
func TestWriteComparisonKeepsThreatsApart(t *testing.T) {
	f := func(threat string, auc float64) findings.Finding {
		return findings.Finding{Attack: "loss", Threat: threat, Round: 5, Result: &audit.Result{AUC: auc},
			ExactMu: math.NaN(), ReversedMuLower: math.NaN()}
	}
	exps := []Compared{{Label: "a", Findings: []findings.Finding{f("final", 0.6), f("all-iterates", 0.9)}}}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, exps, []string{"auc"}); err != nil {
		t.Fatal(err)
	}
	want := `
**loss** (all-iterates threat), auc by T:

| experiment | T=5 |
|---|---|
| a | 0.9 |

**loss** (final threat), auc by T:

| experiment | T=5 |
|---|---|
| a | 0.6 |
`
	if got := afterContext(buf.String()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// eps_lower, the quantity the DP-FedAvg family's verdicts are judged on, tabulates like
// mu_lower: a certified bound, rounded down at its fourth digit (0.58417 as "0.5841").
func TestWriteComparisonEpsLower(t *testing.T) {
	f := findings.Finding{Attack: "loss", Threat: "final", Round: 3, Result: &audit.Result{EpsLower: 0.58417, MuLower: 0.89605},
		ExactMu: math.NaN(), ReversedMuLower: math.NaN()}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, []Compared{{Label: "a", Findings: []findings.Finding{f}}}, []string{"eps_lower", "mu_lower"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**loss** (final threat), eps_lower by T:", "| a | 0.5841 |", "| a | 0.896 |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, buf.String())
		}
	}
}

// afterContext is a comparison without the table of experiments that opens it
// (TestWriteComparison checks that table).
func afterContext(s string) string {
	if i := strings.Index(s, "\n\n**"); i >= 0 {
		return s[i+1:]
	}
	return s
}
