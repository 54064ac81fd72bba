package experiment

import (
	"testing"

	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/canary"
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
		{canary.StatCosFinal, runs.CanaryCosFinal},
		{canary.StatCosMax, runs.CanaryCosMax},
		{canary.StatLLRAll, runs.CanaryLLRAll},
		{canary.StatLoss, runs.CanaryLoss},
		{canary.StatMargin, runs.CanaryMargin},
		{canary.StatLossAlt, runs.CanaryLossAlt},
		{canary.StatMarginAlt, runs.CanaryMarginAlt},
	} {
		if tc.train != tc.runs {
			t.Errorf("train records %q, runs names the column %q", tc.train, tc.runs)
		}
	}
}
