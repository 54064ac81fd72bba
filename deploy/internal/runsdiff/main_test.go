package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
)

// TestDiff trains one small experiment as 1 shard and as 3, which must hold the same rows, and a
// variant with another noise level, which must not.
func TestDiff(t *testing.T) {
	cfg, err := spec.Load(filepath.Join("..", "..", "..", "cmd", "audit", "testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pairs = 6
	cfg.Train.RecordParams = true // so the comparison covers the list columns too
	trainInto := func(cfg *spec.Config, shards int) string {
		t.Helper()
		data, err := spec.Prepare(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for i := 0; i < shards; i++ {
			if _, _, err := experiment.TrainShard(context.Background(), cfg, data, runs.Shard{Index: i, Count: shards}, dir, experiment.TrainOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	one, three := trainInto(cfg, 1), trainInto(cfg, 3)
	n, err := diff(context.Background(), one, three)
	if err != nil {
		t.Fatalf("1 shard vs 3 shards: %v", err)
	}
	if want := 2 * cfg.Pairs * len(cfg.Train.Checkpoints); n != want {
		t.Errorf("compared %d rows, want %d", n, want)
	}

	other := *cfg
	other.Train.NoiseStd *= 2
	if _, err := diff(context.Background(), one, trainInto(&other, 1)); err == nil || !strings.Contains(err.Error(), "configs differ") {
		t.Errorf("different configs: err = %v, want configs differ", err)
	}

	// A missing shard must be an error, not a shorter comparison.
	if err := os.Remove(filepath.Join(three, "runs", runs.Shard{Index: 1, Count: 3}.FileName())); err != nil {
		t.Fatal(err)
	}
	if _, err := diff(context.Background(), one, three); err == nil {
		t.Error("a directory with a missing shard compared equal")
	}
}

// TestRowDiff checks that every field takes part in the comparison.
func TestRowDiff(t *testing.T) {
	base := runs.Row{RunID: 3, PairID: 1, World: 1, Seed: 9, Round: 2, TrainLoss: 0.5, TestAccuracy: -1,
		Stats: []float64{1, 2}, Params: []float32{1, 2}, Upload: []float32{3},
		CanaryIn: []bool{true, false}, CanaryStats: [][]float64{{0.5, 0.25}}}
	same := base
	if why := rowDiff(&base, &same); why != "" {
		t.Fatalf("identical rows differ: %s", why)
	}
	edits := map[string]func(r *runs.Row){
		"seed":      func(r *runs.Row) { r.Seed++ },
		"round":     func(r *runs.Row) { r.Round++ },
		"diverged":  func(r *runs.Row) { r.Diverged = true },
		"loss":      func(r *runs.Row) { r.TrainLoss = 0.5000000001 },
		"stats":     func(r *runs.Row) { r.Stats = []float64{1, 2.5} },
		"params":    func(r *runs.Row) { r.Params = []float32{1, 2.0001} },
		"upload":    func(r *runs.Row) { r.Upload = nil },
		"canary_in": func(r *runs.Row) { r.CanaryIn = []bool{true, true} },
		"canary_stats": func(r *runs.Row) {
			r.CanaryStats = [][]float64{{0.5, 0.2500001}}
		},
	}
	for name, edit := range edits {
		r := base
		r.Stats = append([]float64(nil), base.Stats...)
		r.Params = append([]float32(nil), base.Params...)
		edit(&r)
		if rowDiff(&base, &r) == "" {
			t.Errorf("%s: an edited row compared equal", name)
		}
	}
}
