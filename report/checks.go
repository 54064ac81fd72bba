package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/findings"
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
		t.rows = append(t.rows, append(checkCells(ch), ch.Meaning))
	}
	intro := "What one or two coupled pairs show without any attack: both worlds of a pair share their noise, so their difference is bounded by the declared sensitivity, and each round replayed without noise leaves the noise itself, which must follow the declared distribution."
	switch failed := c.Failed(); {
	case len(failed) > 0:
		intro += fmt.Sprintf(" %d check(s) FAILED: the deployment does not run the mechanism it declares.", len(failed))
	case len(c.Checks) == 0:
		intro += " No check could run on these runs: nothing was verified."
	default:
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

// checkCells are a check's name, observer, tensor, statistic, p-value ("exact" for an exact
// check) and outcome, as the report's table and the terminal print them.
func checkCells(ch findings.CheckResult) []string {
	p := fmt.Sprintf("%.3g", ch.PValue)
	if ch.Exact {
		p = "exact"
	}
	result := "pass"
	if !ch.Passed {
		result = "FAIL"
	}
	return []string{ch.Name, textOrDash(ch.Observer), textOrDash(ch.Tensor), num(ch.Statistic), p, result}
}

// WriteCheck prints the grey-box checks for the terminal (`audit check`): one line per check,
// each failure with what it means, and the checks that could not run with what would enable
// them.
func WriteCheck(w io.Writer, rep *findings.CheckReport) error {
	// With no statistical test the family-wise threshold is empty (Threshold 0): name none.
	tests := "no statistical test"
	if rep.Family > 0 {
		tests = fmt.Sprintf("%d statistical tests at family-wise level %g (each at p >= %.3g)", rep.Family, rep.Alpha, rep.Threshold)
	}
	fmt.Fprintf(w, "Grey-box checks of %d pair(s), rounds 0..%d: %s, %d exact checks.\n\n",
		rep.Pairs, rep.Rounds, tests, len(rep.Checks)-rep.Family)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tobserver\ttensor\tstatistic\tp-value\tresult")
	for _, ch := range rep.Checks {
		cells := checkCells(ch)
		cells[1], cells[2] = strings.ReplaceAll(cells[1], " ", "_"), strings.ReplaceAll(cells[2], " ", "_")
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed := rep.Failed(); len(failed) > 0 {
		fmt.Fprintf(w, "\n%d check(s) FAILED:\n", len(failed))
		for _, ch := range failed {
			fmt.Fprintf(w, "  %s: %s\n", ch.Where(), ch.Meaning)
		}
	} else if len(rep.Checks) == 0 {
		fmt.Fprintln(w, "\nNo check could run on these runs: nothing was verified (what each check needs is below).")
	} else {
		fmt.Fprintln(w, "\nEvery check passed: nothing in these rounds departs from the declared mechanism.")
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintln(w, "\nNot checked:")
		for _, sk := range rep.Skipped {
			fmt.Fprintf(w, "  %s: %s\n", sk.Check, sk.Why)
		}
	}
	return nil
}
