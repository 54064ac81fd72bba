package experiment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
)

// With a relabel canary, epsilon and epsilon' have the same features, so the inversion attacks'
// scores (distances of the reconstruction to each) are 0 in every run: the default selection
// leaves them out and says why, and an attack asked for by name is still scored, with a note.
func TestDefaultLeavesOutConstantScores(t *testing.T) {
	cfg := smallConfig()
	cfg.Train.RecordParams, cfg.Train.RecordUpload = true, true
	cfg.Adjacency.Canary = string(datasets.CanaryRelabel)
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(data.Pair.Sample.Features, data.Pair.SamplePrime.Features) || data.Pair.Sample.Label == data.Pair.SamplePrime.Label {
		t.Fatal("the relabel canary should keep the features and change the label")
	}
	dir := t.TempDir()
	if _, _, err := TrainShard(context.Background(), cfg, data, runs.Shard{Index: 0, Count: 1}, dir, TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := openPrepared(dir, false, 0, cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	byDefault, _ := e.scoring(AttackOptions{})
	if slices.Contains(byDefault, "inversion") || slices.Contains(byDefault, "invgrad") || !slices.Contains(byDefault, "label") || !slices.Contains(byDefault, "loss") {
		t.Errorf("default selection %v: want label and loss, neither inversion nor invgrad", byDefault)
	}
	var lines []string
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	logAttackChoice(logf, byDefault, nil, cfg, e.tab.Meta(), data)
	if said := strings.Join(lines, "\n"); !strings.Contains(said, "attacks: skipped invgrad: its score compares the reconstruction with epsilon and epsilon', which have the same features") {
		t.Errorf("the log does not say why invgrad is left out:\n%s", said)
	}
	named, _ := e.scoring(AttackOptions{Attacks: []string{"invgrad", "loss"}})
	if !slices.Equal(named, []string{"invgrad", "loss"}) {
		t.Errorf("asked for invgrad and loss, scoring %v", named)
	}
	lines = nil
	logAttackChoice(logf, named, []string{"invgrad", "loss"}, cfg, e.tab.Meta(), data)
	if said := strings.Join(lines, "\n"); !strings.Contains(said, "attacks: note: invgrad scores 0 in every run here") {
		t.Errorf("the log does not note invgrad's constant score:\n%s", said)
	}
}
