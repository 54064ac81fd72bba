package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// TestOneRunSection: one-run rows get their own section and table, with the certified bounds
// in columns of their own and the estimates in columns that say so; the terminal table prints
// them apart from the pair rows with a legend naming the estimates. Without one-run rows
// neither appears (the golden reports cover that).
func TestOneRunSection(t *testing.T) {
	in := syntheticInput(t)
	scores := gaussianScores(400, 0)
	bits := make([]bool, 400)
	for i := range scores {
		if i%2 == 0 {
			bits[i] = true
			scores[i] += 1.5
		}
	}
	res, err := audit.OneRunAnalyze(scores, bits, nil, 1e-5, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	est := audit.OneShotEstimate{Mu: 1.49, Epsilon: 7.25, Delta: 1e-5}
	in.Findings = append(in.Findings, findings.Finding{Attack: "canary-cos", Threat: "final", Round: 10, Result: res,
		ExactMu: math.NaN(), Runs: 1, Estimate: &est})
	_, files := writeReport(t, in, Options{})
	md := string(files["report.md"])
	for _, want := range []string{"## One-run audit", "| canary-cos | final | 10 | 1 | 400 | 200 |", "mu (estimate, one-shot)", "eps (estimate, one-shot)", "| 1.49 | 7.25 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if _, ok := files["tables/one_run.csv"]; !ok {
		t.Error("no tables/one_run.csv")
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, in.Findings); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "one-run") || !strings.Contains(out, "oneshot_eps") || strings.Count(out, "canary-cos") != 1 {
		t.Errorf("terminal table:\n%s", out)
	}
	line := methodLine(&findings.Analysis{Findings: in.Findings, Family: in.Family})
	if !strings.Contains(line, "are ESTIMATES, not bounds") || !strings.Contains(line, "CERTIFIED") {
		t.Errorf("method line: %s", line)
	}
	// The Setup counts the runs trained, both worlds of a pair, and says which the audit reads.
	in.Method, in.Pairs, in.Runs = string(audit.OneRunMethod), 1, 2
	_, files = writeReport(t, in, Options{})
	if want := "- **Runs trained**: 2 (the one-run audit reads the 1 of world C)"; !strings.Contains(string(files["report.md"]), want) {
		t.Errorf("report.md lacks %q", want)
	}
	in.Findings = in.Findings[:len(in.Findings)-1]
	_, files = writeReport(t, in, Options{})
	if strings.Contains(string(files["report.md"]), "One-run") {
		t.Error("a report without one-run rows has a one-run section")
	}
}
