package experiment

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
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
	for name, cfg := range map[string]*Config{"fedavg informed": smallConfig(), "fedavg": noInformed, "params and uploads": params,
		"record canaries": records, "dp-fedavg direction canaries": direction} {
		t.Run(name, func(t *testing.T) {
			data, err := Prepare(cfg)
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
			want := PlannedMeta(cfg)
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
	meta := PlannedMeta(cfg)
	for _, c := range []struct {
		pairs int
		lira  bool
	}{{1, false}, {9, false}, {10, true}} {
		names, skipped := runAttacks(nil, meta, cfg.Train.Model, c.pairs)
		if slices.Contains(names, "lira-online") != c.lira || (len(skipped) > 0) == c.lira {
			t.Errorf("%d pairs: attacks %v, skipped %v", c.pairs, names, skipped)
		}
		if !slices.Contains(names, "informed-all") || !slices.Contains(names, "loss") {
			t.Errorf("%d pairs: attacks %v lack the pointwise ones", c.pairs, names)
		}
	}
	// Listed attacks are what the config asks for, canary attacks scored apart.
	if names, _ := runAttacks([]string{"loss", "canary-loss"}, meta, cfg.Train.Model, 1); !slices.Equal(names, []string{"loss"}) {
		t.Errorf("listed: %v", names)
	}
}

// Whole numbers: a fraction in an integer field is refused wherever it is, a float spelling of
// a whole number accepted.
func TestWholeNumbers(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"pairs: 200.5", "pairs: need a whole number, got 200.5 (line 1)"},
		{"pairs: 1e3", ""},
		{"pairs: 2.0", ""},
		{"train: {rounds: 3.7}", "train.rounds: need a whole number, got 3.7"},
		{"train: {checkpoints: [1, 2.5]}", "train.checkpoints[1]: need a whole number, got 2.5"},
		{"train: {model: {hidden: [16.5]}}", "train.model.hidden[0]: need a whole number, got 16.5"},
		{"data: {clients: .inf}", "data.clients: need a whole number, got .inf"},
		{"train: {learning_rate: 0.5}", ""},
		{"train: {algorithm: fedavg}", ""},
		{"seed: 3.5", "seed: need a whole number, got 3.5"},
	} {
		err := wholeNumbers([]byte(c.yaml))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.yaml, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
}
