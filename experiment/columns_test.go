package experiment

import (
	"testing"

	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// runs/ owns the names of the statistic columns; train still declares the names it records
// (in ReplicaState.Stats) for itself. They must be the same strings, or run files would hold
// columns the attacks cannot find.
func TestTrainStatNamesAreRunsColumns(t *testing.T) {
	for _, tc := range []struct{ train, runs string }{
		{checkpoint.StatLLRAll, runs.StatLLRAll},
		{checkpoint.StatLLRLast, runs.StatLLRLast},
		{checkpoint.StatMu2, runs.StatMu2},
		{checkpoint.StatLLRUpload, runs.StatLLRUpload},
		{checkpoint.StatMu2Upload, runs.StatMu2Upload},
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
