package report

import (
	"strconv"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// TestVerdictTableMarksReversedScores: a row whose scores certify privacy loss only when read
// the other way round (AUC below 1/2, Finding.Reversed) has a verdict that says nothing about
// the claim. docs/statistics.md ("Scores in the wrong direction") says its verdict is marked
// "[reversed scores?]", as the terminal table (verdictText) marks it; the report's verdicts
// table showed a plain "consistent" (results/lenet5-fmnist, loss at T = 1).
func TestVerdictTableMarksReversedScores(t *testing.T) {
	in := syntheticInput(t)
	var row *findings.Finding
	for i := range in.Findings {
		if f := &in.Findings[i]; f.Verdict != nil && f.Attack == "loss" {
			row = f
			break
		}
	}
	if row == nil {
		t.Fatal("the input has no judged loss row")
	}
	row.ReversedMuLower = 0.05
	m := newModel(&in)
	var verdicts *table
	for _, tb := range m.tables() {
		if tb.name == "verdicts" {
			verdicts = tb
		}
	}
	status := len(verdicts.header) - 1
	for _, r := range verdicts.rows {
		reversed := r[0] == row.Attack && r[1] == row.Threat && r[2] == strconv.Itoa(row.Round)
		if got := strings.Contains(r[status], "[reversed scores?]"); got != reversed {
			t.Errorf("%s (%s, T = %s): status %q, want the reversed mark %v", r[0], r[1], r[2], r[status], reversed)
		}
	}
}
