package check

import (
	"context"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// Without round 0 among the checkpoints the runs' first recorded models are not w_0: they differ
// from pair to pair by the noise of the rounds before. shared-w0 cannot be judged then and must
// be skipped, not failed: a correct deployment must not fail a check for a round it did not
// record.
func TestSharedW0NeedsRoundZero(t *testing.T) {
	cfg := parseConfig(t)
	cfg.Train.Checkpoints = []int{3, 4, 5, 6}
	rep, err := Run(context.Background(), trainOwn(t, cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(rep.Checks, func(r findings.CheckResult) bool { return r.Name == "shared-w0" }); i >= 0 && !rep.Checks[i].Passed {
		t.Errorf("fedaudit's own runs without round 0 fail shared-w0: %+v", rep.Checks[i])
	}
	if !rep.Passed {
		t.Errorf("fedaudit's own runs fail: %+v", rep.Failed())
	}
	if !slices.ContainsFunc(rep.Skipped, func(s findings.CheckSkipped) bool { return s.Check == "shared-w0" }) {
		t.Errorf("shared-w0 not listed as skipped: %+v", rep.Skipped)
	}
}
