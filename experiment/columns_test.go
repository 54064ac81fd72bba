package experiment

import (
	"testing"

	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

// runs/ owns the names of the statistic columns; train still declares the names it records
// (in ReplicaState.Stats) for itself. They must be the same strings, or run files would hold
// columns the attacks cannot find.
func TestTrainStatNamesAreRunsColumns(t *testing.T) {
	for _, tc := range []struct{ train, runs string }{
		{train.StatLLRAll, runs.StatLLRAll},
		{train.StatLLRLast, runs.StatLLRLast},
		{train.StatMu2, runs.StatMu2},
		{train.StatLLRUpload, runs.StatLLRUpload},
		{train.StatMu2Upload, runs.StatMu2Upload},
		{train.CanaryStatCosFinal, runs.CanaryCosFinal},
		{train.CanaryStatCosMax, runs.CanaryCosMax},
		{train.CanaryStatLLRAll, runs.CanaryLLRAll},
		{train.CanaryStatLoss, runs.CanaryLoss},
		{train.CanaryStatMargin, runs.CanaryMargin},
		{train.CanaryStatLossAlt, runs.CanaryLossAlt},
		{train.CanaryStatMarginAlt, runs.CanaryMarginAlt},
	} {
		if tc.train != tc.runs {
			t.Errorf("train records %q, runs names the column %q", tc.train, tc.runs)
		}
	}
}
