package report

import (
	"fmt"
	"strings"
)

// The grey-box checks (DIR/check.json, written by `audit check`) as a section of the report
// and, when one failed, a note under the headline: a deployment that departs from its declared
// mechanism makes every theory column a statement about a mechanism that did not run.

// checkSection is the section of the grey-box checks, or an empty one (dropped) without them.
func (r *rendered) checkSection() section {
	c := r.in.Check
	if c == nil {
		return section{}
	}
	t := &table{name: "checks", title: "Grey-box checks",
		caption: fmt.Sprintf("Each check of %d pair(s), rounds 0..%d (docs/check.md). Exact checks hold for every correct deployment up to float rounding; the %d statistical tests share the family-wise level %g (each fails below p = %.3g).",
			c.Pairs, c.Rounds, c.Family, c.Alpha, c.Threshold),
		header: []string{"Check", "Observer", "Tensor", "Statistic", "p-value", "Result", "Meaning"}}
	for _, ch := range c.Checks {
		p := fmt.Sprintf("%.3g", ch.PValue)
		if ch.Exact {
			p = "exact"
		}
		result := "pass"
		if !ch.Passed {
			result = "FAIL"
		}
		t.rows = append(t.rows, []string{ch.Name, textOrDash(ch.Observer), textOrDash(ch.Tensor), num(ch.Statistic), p, result, ch.Meaning})
	}
	intro := "What one or two coupled pairs show without any attack: both worlds of a pair share their noise, so their difference is bounded by the declared sensitivity, and each round replayed without noise leaves the noise itself, which must follow the declared distribution."
	if failed := c.Failed(); len(failed) > 0 {
		intro += fmt.Sprintf(" %d check(s) FAILED: the deployment does not run the mechanism it declares.", len(failed))
	} else {
		intro += " Every check passed."
	}
	if len(c.Skipped) > 0 {
		var s []string
		for _, sk := range c.Skipped {
			s = append(s, sk.Check+" ("+sk.Why+")")
		}
		intro += " Not checked: " + strings.Join(s, "; ") + "."
	}
	sec := section{ID: "checks", Title: "Grey-box checks", Intro: intro, tables: []*table{t}}
	if c.Passed {
		sec.fold("Table: every grey-box check with its statistic and p-value", t)
	}
	return sec
}

// textOrDash is s, or "-" (unknown or not applicable) when empty.
func textOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
