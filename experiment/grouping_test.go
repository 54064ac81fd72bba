package experiment

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
)

// Training a shard in groups of pairs is invisible in the results: findings.json is byte for
// byte the same for groups of 1, 7 and all pairs, the group size is not part of the training
// identity, and a directory trained with one group size is reused by another.
func TestGroupingIsInvisible(t *testing.T) {
	var ref []byte
	var refFindings []findings.Finding
	for _, g := range []int{0, 1, 7} {
		cfg := smallConfig()
		cfg.Pairs = 15
		cfg.Train.GroupPairs = g
		dir := t.TempDir()
		a, err := Run(context.Background(), cfg, dir, RunOptions{Shards: 1})
		if err != nil {
			t.Fatalf("groups of %d: %v", g, err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "findings.json"))
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref, refFindings = raw, a.Findings
			continue
		}
		// (Findings hold NaNs, which reflect.DeepEqual never finds equal: compare the JSON.)
		if len(a.Findings) != len(refFindings) || len(a.Findings) == 0 {
			t.Errorf("groups of %d: %d findings, one group %d", g, len(a.Findings), len(refFindings))
		}
		if !bytes.Equal(raw, ref) {
			t.Errorf("groups of %d: findings.json differs from one group's", g)
		}
		// Another group size (or memory budget) asks for the same runs: nothing is retrained.
		other := smallConfig()
		other.Pairs = 15
		other.Train.GroupMemory = 1 << 20
		if !spec.SameTraining(cfg, other) {
			t.Errorf("groups of %d: group size is part of the training identity: %v", g, spec.ConfigDiff(cfg, other, true))
		}
		path := filepath.Join(expdir.Dir(dir).Runs(), runs.Shard{Index: 0, Count: 1}.FileName())
		before, _ := os.Stat(path)
		if _, err := Run(context.Background(), other, dir, RunOptions{Shards: 1}); err != nil {
			t.Fatal(err)
		}
		after, _ := os.Stat(path)
		if !after.ModTime().Equal(before.ModTime()) {
			t.Errorf("groups of %d: a run with another group budget retrained the shard", g)
		}
	}
}
