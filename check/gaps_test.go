package check

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// Every check either runs or is listed as skipped with what would enable it (docs/check.md):
// with no two consecutive rounds among the checkpoints, coupled-difference has nothing to compare
// and must say so, not vanish from a report that passes.
func TestCoupledDifferenceNeedsConsecutiveRounds(t *testing.T) {
	cfg := parseConfig(t)
	cfg.Train.Checkpoints = []int{0, 2, 4, 6}
	rep, err := Run(context.Background(), trainOwn(t, cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ran := slices.ContainsFunc(rep.Checks, func(r findings.CheckResult) bool { return r.Name == "coupled-difference" })
	listed := slices.ContainsFunc(rep.Skipped, func(s findings.CheckSkipped) bool {
		return strings.HasPrefix(s.Check, "coupled-difference") && strings.Contains(s.Why, "consecutive")
	})
	if ran || !listed {
		t.Errorf("coupled-difference ran %v, listed as skipped %v; checks %+v, skipped %+v", ran, listed, rep.Checks, rep.Skipped)
	}
}

// Runs that allow no check (no round 0, no two consecutive rounds) verify nothing: the report
// lists every check as skipped and does not pass, so that `audit check` can refuse to pass them.
func TestNoCheckRanDoesNotPass(t *testing.T) {
	cfg := parseConfig(t)
	cfg.Train.Checkpoints = []int{1, 3, 5}
	rep, err := Run(context.Background(), trainOwn(t, cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 0 || rep.Passed || len(rep.Skipped) == 0 {
		t.Errorf("%d checks ran, passed %v, %d skipped; want none, false and the skipped listed: %+v", len(rep.Checks), rep.Passed, len(rep.Skipped), rep)
	}
}
