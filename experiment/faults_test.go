package experiment

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
)

// The faults a batch job meets: a task killed while writing, a file cut short or overwritten by a
// broken file system, and two jobs pointed at one directory. None may leave a directory that
// reads as complete but is not, and rerunning the job must finish it with every row exactly once.

const faultShards = 3

// faultJob trains the fault tests' experiment, all shards, into a fresh directory and returns
// the directory with its rows, the reference every repaired directory must match.
func faultJob(t *testing.T) (*spec.Config, *spec.Data, []runs.Row) {
	t.Helper()
	cfg := smallConfig()
	cfg.Train.RecordParams = true // larger files, so truncation cuts through record batches
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	trainShards(t, cfg, data, dir)
	return cfg, data, readRows(t, expdir.Dir(dir).Runs())
}

func trainShards(t *testing.T, cfg *spec.Config, data *spec.Data, dir string) {
	t.Helper()
	for i := 0; i < faultShards; i++ {
		if _, _, err := TrainShard(context.Background(), cfg, data, runs.Shard{Index: i, Count: faultShards}, dir, TrainOptions{}); err != nil {
			t.Fatalf("train shard %d: %v", i, err)
		}
	}
}

// checkRepaired checks that dir is complete and holds want's rows, each exactly once.
func checkRepaired(t *testing.T, cfg *spec.Config, dir string, want []runs.Row) {
	t.Helper()
	infos, err := runs.ShardStatus(expdir.Dir(dir).Runs(), faultShards)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.State != runs.ShardComplete && in.State != runs.ShardWriting {
			t.Errorf("after the rerun: %s %s is %s (%v)", in.Shard, in.Path, in.State, in.Err)
		}
	}
	got := readRows(t, expdir.Dir(dir).Runs())
	seen := map[[2]int64]bool{}
	for _, r := range got {
		k := [2]int64{r.RunID, int64(r.Round)}
		if seen[k] {
			t.Fatalf("run %d round %d appears twice", r.RunID, r.Round)
		}
		seen[k] = true
	}
	if n := 2 * cfg.Pairs * len(cfg.Train.Checkpoints); len(got) != n {
		t.Fatalf("%d rows, want %d", len(got), n)
	}
	order := func(a, b runs.Row) int {
		if a.RunID != b.RunID {
			return int(a.RunID - b.RunID)
		}
		return int(a.Round - b.Round)
	}
	slices.SortFunc(got, order)
	want = slices.Clone(want)
	slices.SortFunc(want, order)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("rows after the rerun differ from an undisturbed job's")
	}
}

// TestFaultKilledMidWrite cancels a shard after its first checkpoints were written: the shard
// must leave no file that passes as complete, and the rerun must finish the job.
func TestFaultKilledMidWrite(t *testing.T) {
	cfg, data, want := faultJob(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	victim := runs.Shard{Index: 1, Count: faultShards}
	// Rounds 0 and 1 are checkpoints: after round 2 the writer holds rows, mid-file.
	writing := false
	_, _, err := TrainShard(ctx, cfg, data, victim, dir, TrainOptions{Progress: func(done, total int) {
		if done == 2 {
			tmps, _ := filepath.Glob(filepath.Join(expdir.Dir(dir).Runs(), ".*.tmp-*"))
			writing = len(tmps) == 1
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled shard: err = %v, want context.Canceled", err)
	}
	if !writing {
		t.Fatal("no temporary file was being written when the shard was cancelled: the test cancels too early")
	}
	path := filepath.Join(expdir.Dir(dir).Runs(), victim.FileName())
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cancelled shard left %s (stat: %v)", path, err)
	}
	infos, err := runs.ShardStatus(expdir.Dir(dir).Runs(), faultShards)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		// A cancelled writer removes its temporary file; only a killed one leaves it (see
		// TestFaultLeftovers).
		if in.State == runs.ShardComplete || in.State == runs.ShardWriting {
			t.Errorf("shard %s %s is %s after only a cancelled run", in.Shard, in.Path, in.State)
		}
	}
	// The directory refuses to open as a job until the rerun.
	if _, err := runs.Open(expdir.Dir(dir).Runs()); err == nil {
		t.Error("a directory with only a cancelled shard opened")
	}
	trainShards(t, cfg, data, dir)
	checkRepaired(t, cfg, dir, want)
}

// TestFaultLeftovers leaves what a killed writer and a broken copy leave: a truncated temporary
// file and a truncated or zeroed run file. Status and Open name the bad file; the rerun replaces
// it.
func TestFaultLeftovers(t *testing.T) {
	cfg, data, want := faultJob(t)
	damage := map[string]func(raw []byte) []byte{
		"truncated":    func(raw []byte) []byte { return raw[:len(raw)/2] },
		"footer cut":   func(raw []byte) []byte { return raw[:len(raw)-10] },
		"zeroed":       func(raw []byte) []byte { return make([]byte, len(raw)) },
		"empty":        func([]byte) []byte { return nil },
		"garbage tail": func(raw []byte) []byte { return append(raw[:len(raw)-16:len(raw)-16], []byte("not arrow footer")...) },
	}
	for name, cut := range damage {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			trainShards(t, cfg, data, dir)
			bad := runs.Shard{Index: 2, Count: faultShards}
			path := filepath.Join(expdir.Dir(dir).Runs(), bad.FileName())
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, cut(raw), 0o644); err != nil {
				t.Fatal(err)
			}
			// A killed writer's temporary file for another shard.
			tmp := filepath.Join(expdir.Dir(dir).Runs(), "."+runs.Shard{Index: 0, Count: faultShards}.FileName()+".tmp-1234")
			if err := os.WriteFile(tmp, raw[:len(raw)/3], 0o644); err != nil {
				t.Fatal(err)
			}

			infos, err := runs.ShardStatus(expdir.Dir(dir).Runs(), faultShards)
			if err != nil {
				t.Fatal(err)
			}
			states := map[string]runs.ShardState{}
			for _, in := range infos {
				if in.Path != "" {
					states[in.Path] = in.State
				}
			}
			// Nobody holds the temporary file: it is stale at once, however young.
			if states[path] != runs.ShardCorrupt || states[tmp] != runs.ShardStale {
				t.Errorf("status: %s is %v, %s is %v; want corrupt, stale", path, states[path], tmp, states[tmp])
			}
			if _, err := runs.Open(expdir.Dir(dir).Runs()); err == nil || !strings.Contains(err.Error(), bad.FileName()) {
				t.Errorf("Open: err = %v, want one naming %s", err, bad.FileName())
			}

			p, skipped, err := TrainShard(context.Background(), cfg, data, bad, dir, TrainOptions{})
			if err != nil || skipped || p != path {
				t.Fatalf("rerun of the damaged shard: path %s skipped %v err %v", p, skipped, err)
			}
			// The intact shards are kept: their rerun is a skip.
			for _, i := range []int{0, 1} {
				if _, skipped, err := TrainShard(context.Background(), cfg, data, runs.Shard{Index: i, Count: faultShards}, dir, TrainOptions{}); err != nil || !skipped {
					t.Errorf("rerun of intact shard %d: skipped %v err %v", i, skipped, err)
				}
			}
			// The next run or train command removes the stale file once it holds the directory.
			if removed, err := fsutil.CleanStale(expdir.Dir(dir).Runs()); err != nil || len(removed) != 1 || removed[0] != tmp {
				t.Errorf("CleanStale removed %v (%v), want %s", removed, err, tmp)
			}
			checkRepaired(t, cfg, dir, want)
		})
	}
}

// TestFaultMixedConfigs points two experiments at one directory: a shard of each. The trainer
// must not overwrite the other's shard, and Open and status must refuse the mixture.
func TestFaultMixedConfigs(t *testing.T) {
	cfg := smallConfig()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := smallConfig()
	other.Train.NoiseStd *= 2
	otherData, err := spec.Prepare(other)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	if _, _, err := TrainShard(ctx, cfg, data, runs.Shard{Index: 0, Count: 2}, dir, TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := TrainShard(ctx, other, otherData, runs.Shard{Index: 1, Count: 2}, dir, TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(expdir.Dir(dir).Runs(), runs.Shard{Index: 0, Count: 2}.FileName())
	before, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := TrainShard(ctx, other, otherData, runs.Shard{Index: 0, Count: 2}, dir, TrainOptions{}); err == nil {
		t.Error("training over another experiment's shard succeeded")
	}
	if after, _ := os.ReadFile(first); !slices.Equal(before, after) {
		t.Error("another experiment's shard was overwritten")
	}
	if _, err := runs.Open(expdir.Dir(dir).Runs()); err == nil || !strings.Contains(err.Error(), "not of one experiment") {
		t.Errorf("Open of a mixed directory: err = %v, want a refusal", err)
	}
	if _, err := runs.Open(expdir.Dir(dir).Runs(), runs.AllowPartial()); err == nil {
		t.Error("Open with AllowPartial accepted a mixed directory")
	}
	infos, err := runs.ShardStatus(expdir.Dir(dir).Runs(), 2)
	if err != nil {
		t.Fatal(err)
	}
	var mismatched int
	for _, in := range infos {
		if in.State == runs.ShardMismatch {
			mismatched++
		}
	}
	if mismatched != 1 {
		t.Errorf("status reports %d mismatched files, want 1: %+v", mismatched, infos)
	}
}
