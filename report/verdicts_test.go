package report

import (
	"slices"
	"strconv"
	"testing"
)

// TestVerdictTableShowsComparedEpsilon: issue 24 item 4. An epsilon claim is judged on the
// certified eps lower bound at the claim's delta, which the verdicts table did not show (it had
// mu lower beside "Claimed eps"). Every row of an epsilon check shows the number it compared.
func TestVerdictTableShowsComparedEpsilon(t *testing.T) {
	in := syntheticInput(t)
	var verdicts *table
	for _, tb := range newModel(&in).tables() {
		if tb.name == "verdicts" {
			verdicts = tb
		}
	}
	if verdicts == nil {
		t.Fatal("no verdicts table")
	}
	col := slices.Index(verdicts.header, "eps lower")
	if col < 0 {
		t.Fatalf("verdicts header %q has no eps lower column", verdicts.header)
	}
	checked := 0
	for _, f := range in.Findings {
		if f.Verdict == nil {
			continue
		}
		for _, c := range f.Verdict.Checks {
			if c.Quantity != "epsilon" {
				continue
			}
			checked++
			if !slices.ContainsFunc(verdicts.rows, func(r []string) bool {
				return r[0] == f.Attack && r[1] == f.Threat && r[2] == strconv.Itoa(f.Round) && r[col] == num(c.Lower)
			}) {
				t.Errorf("%s (%s, T = %d): no row shows the compared eps lower %s", f.Attack, f.Threat, f.Round, num(c.Lower))
			}
		}
	}
	if checked == 0 {
		t.Fatal("the input has no epsilon check: the test shows nothing")
	}
}
