package experiment

import (
	"context"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/canary"
)

// PlannedMeta, what CheckStages checks the attack stage against before training, is the
// metadata the trainer writes: the same columns for each family and recording option.
func TestPlannedMetaIsTrainedMeta(t *testing.T) {
	noInformed := smallConfig()
	noInformed.Train.Informed = false
	params := smallConfig()
	params.Train.RecordParams, params.Train.RecordUpload = true, true
	records := smallConfig()
	records.Pairs = 1
	records.Train.Canaries = &canary.Config{Count: 4, Kind: "relabel"}
	direction := directionConfig(8, 1)
	direction.Train.Informed = true
	for name, cfg := range map[string]*spec.Config{"fedavg informed": smallConfig(), "fedavg": noInformed, "params and uploads": params,
		"record canaries": records, "dp-fedavg direction canaries": direction} {
		t.Run(name, func(t *testing.T) {
			data, err := spec.Prepare(cfg)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, _, err := TrainShard(context.Background(), cfg, data, runs.Shard{Index: 0, Count: 1}, dir, TrainOptions{}); err != nil {
				t.Fatal(err)
			}
			tab, err := runs.Open(expdir.Dir(dir).Runs())
			if err != nil {
				t.Fatal(err)
			}
			got := tab.Meta()
			tab.Close()
			want := spec.PlannedMeta(cfg)
			if !slices.Equal(got.StatNames, want.StatNames) || got.HasParams != want.HasParams || got.HasUpload != want.HasUpload ||
				got.Canaries != want.Canaries || !slices.Equal(got.CanaryStatNames, want.CanaryStatNames) {
				t.Fatalf("trained %+v\nplanned %+v", got, want)
			}
		})
	}
}

// The attack stage leaves out, by default, the learned attacks too few pairs cannot fit, and
// CheckStages and the attack stage choose alike.
func TestRunAttacksFewPairs(t *testing.T) {
	cfg := smallConfig()
	meta := spec.PlannedMeta(cfg)
	for _, c := range []struct {
		pairs int
		lira  bool
	}{{1, false}, {9, false}, {10, true}} {
		names, skipped := spec.RunAttacks(nil, meta, cfg.Train.Model, c.pairs)
		if slices.Contains(names, "lira-online") != c.lira || (len(skipped) > 0) == c.lira {
			t.Errorf("%d pairs: attacks %v, skipped %v", c.pairs, names, skipped)
		}
		if !slices.Contains(names, "informed-all") || !slices.Contains(names, "loss") {
			t.Errorf("%d pairs: attacks %v lack the pointwise ones", c.pairs, names)
		}
	}
	// Listed attacks are what the config asks for, canary attacks scored apart.
	if names, _ := spec.RunAttacks([]string{"loss", "canary-loss"}, meta, cfg.Train.Model, 1); !slices.Equal(names, []string{"loss"}) {
		t.Errorf("listed: %v", names)
	}
}

// PlannedRows, the family `audit plan` sizes its cost tables for, is the number of rows the
// analysis of the trained runs certifies: the default attacks, listed ones, one-run canary
// rows. (It may only count more, never fewer: fewer would plan too few pairs.)
func TestPlannedRowsAreTheFamily(t *testing.T) {
	listed := smallConfig()
	listed.Audit.Attacks = []string{"informed-all", "loss"}
	params := smallConfig()
	params.Train.RecordParams, params.Train.RecordUpload = true, true
	params.Train.Checkpoints = []int{0, 1, 2, 3} // the upload attacks at T read w_{T-1}
	records := smallConfig()
	records.Pairs = 2
	records.Train.Canaries = &canary.Config{Count: 20, Kind: "relabel"}
	for name, cfg := range map[string]*spec.Config{"demo": spec.Demo(), "small": smallConfig(), "listed": listed,
		"params and uploads": params, "record canaries": records} {
		t.Run(name, func(t *testing.T) {
			a, err := Run(context.Background(), cfg, t.TempDir(), RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := spec.PlannedRows(cfg), a.Family.Rows; got != want {
				t.Errorf("planned %d rows, the analysis certified %d", got, want)
			}
		})
	}
}
