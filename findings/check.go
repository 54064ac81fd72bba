package findings

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// CheckFormat names the JSON form of a CheckReport (DIR/check.json).
const CheckFormat = "fedaudit-check/1"

// CheckResult is one grey-box check's outcome (package check, docs/check.md).
type CheckResult struct {
	Name string `json:"name"`
	// Observer is what the check looked at: "global" (the global models) or "upload" (the target
	// client's uploads); empty for checks of the runs as a whole.
	Observer string `json:"observer,omitempty"`
	// Tensor is the parameter tensor of a per-tensor check, as the model's layout names it.
	Tensor    string  `json:"tensor,omitempty"`
	Statistic float64 `json:"statistic"`
	// PValue is the test's p-value; for an exact check (Exact), 1 when it passed and 0 when not.
	PValue float64 `json:"p_value"`
	// Exact marks a deterministic check against a float tolerance: it holds for every correct
	// deployment, so it is not one of the family's tests.
	Exact  bool `json:"exact"`
	Passed bool `json:"passed"`
	// N is how many values the statistic was computed from.
	N       int    `json:"n,omitempty"`
	Meaning string `json:"meaning"`
}

// Where names the check with its observer and tensor, e.g. "noise-scale (upload, layer 1 bias)".
func (r CheckResult) Where() string {
	s := r.Name
	if r.Observer != "" {
		s += " (" + r.Observer
		if r.Tensor != "" {
			s += ", " + r.Tensor
		}
		s += ")"
	}
	return s
}

// CheckSkipped is a check that could not run, with what would enable it.
type CheckSkipped struct {
	Check string `json:"check"`
	Why   string `json:"why"`
}

// CheckReport is the outcome of the grey-box checks of a directory's runs.
type CheckReport struct {
	Format string `json:"format"`
	// Passed says that at least one check ran and every check that ran passed.
	Passed bool    `json:"passed"`
	Alpha  float64 `json:"alpha"`
	// Family is the number of statistical tests, and Threshold = Alpha / Family the p-value
	// below which one fails (Bonferroni): a correct deployment fails some test with probability
	// at most Alpha.
	Family    int            `json:"family"`
	Threshold float64        `json:"threshold"`
	Pairs     int            `json:"pairs"`
	Rounds    int            `json:"rounds"`
	Checks    []CheckResult  `json:"checks"`
	Skipped   []CheckSkipped `json:"skipped,omitempty"`
}

// Failed returns the checks that failed.
func (r *CheckReport) Failed() []CheckResult {
	var out []CheckResult
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

// MarshalCheck is the JSON of DIR/check.json. A statistic that is not finite (a ratio over a
// zero tolerance) is written as null.
func MarshalCheck(r *CheckReport) ([]byte, error) {
	type resultJSON struct {
		CheckResult
		Statistic *float64 `json:"statistic"`
	}
	out := struct {
		*CheckReport
		Checks []resultJSON `json:"checks"`
	}{CheckReport: r}
	for _, c := range r.Checks {
		out.Checks = append(out.Checks, resultJSON{CheckResult: c, Statistic: finite(c.Statistic)})
	}
	return json.MarshalIndent(out, "", "  ")
}

// UnmarshalCheck reads DIR/check.json; a null statistic reads as +Inf (the only non-finite
// statistic a check writes is an unbounded ratio).
func UnmarshalCheck(raw []byte) (*CheckReport, error) {
	var in struct {
		CheckReport
		Checks []struct {
			CheckResult
			Statistic *float64 `json:"statistic"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("check report: %w", err)
	}
	if in.Format != CheckFormat {
		return nil, fmt.Errorf("check report: format %q, want %q", in.Format, CheckFormat)
	}
	r := in.CheckReport
	r.Checks = nil
	for _, c := range in.Checks {
		res := c.CheckResult
		res.Statistic = math.Inf(1)
		if c.Statistic != nil {
			res.Statistic = *c.Statistic
		}
		r.Checks = append(r.Checks, res)
	}
	return &r, nil
}

// HeadlineNote is the note a headline carries when a grey-box check failed ("" when none did,
// or without checks): a deployment that departs from its declared mechanism makes its claim and
// every theory column statements about a mechanism that did not run.
func (r *CheckReport) HeadlineNote() string {
	if r == nil {
		return ""
	}
	failed := r.Failed()
	if len(failed) == 0 {
		return ""
	}
	names := make([]string, 0, 4)
	for i, f := range failed {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(failed)-3))
			break
		}
		names = append(names, f.Where())
	}
	return fmt.Sprintf("The grey-box checks (audit check) FAILED %d of %d: %s. The deployment does not run the mechanism it declares: its claim and the theory columns describe a mechanism that did not run.",
		len(failed), len(r.Checks), strings.Join(names, ", "))
}
