package experiment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/model"
)

// A sequential run whose shards hold fewer than 5 pairs each analyzes, at every look, the pairs
// of all the shards it has seen: a score file of an earlier look does not cover a later look's
// shards, however small they are.
func TestSequentialLooksSmallShards(t *testing.T) {
	ctx := context.Background()
	cfg := leakyConfig()
	cfg.Pairs = 40
	cfg.Audit.ClaimMu = 50 // met: the run looks at every planned look
	a, err := Run(ctx, cfg, t.TempDir(), RunOptions{Shards: 16, Sequential: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range a.Findings {
		if n := f.Result.N0; n != 40 {
			t.Errorf("%s T=%d: the last look scored %d pairs of world C, want 40: a stale score file of an earlier look", f.Attack, f.Round, n)
		}
	}
}

// A score file written from the first shards (--allow-partial) is stale once the other shards
// are trained, even when they hold fewer than 5 pairs each. The partial analysis says in its
// headline that it is partial; the whole one does not.
func TestScoresCoverSmallShards(t *testing.T) {
	ctx := context.Background()
	cfg := leakyConfig()
	cfg.Pairs = 24
	dir := t.TempDir()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SetUpDirectory(cfg, dir, 8); err != nil {
		t.Fatal(err)
	}
	shards := AllShards(8)
	if err := TrainShards(ctx, cfg, data, dir, shards[:4], TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	partial, err := AnalyzeDir(ctx, dir, AnalyzeOptions{}, AttackOptions{AllowPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasNote(partial.Headline, "partial analysis (--allow-partial): 4 of 8 shards, 12 of the config's 24 pairs") {
		t.Errorf("the analysis of 4 of 8 shards does not say so: %q", partial.Headline.Notes)
	}
	if err := TrainShards(ctx, cfg, data, dir, shards, TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	a, err := AnalyzeDir(ctx, dir, AnalyzeOptions{}, AttackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasNote(a.Headline, "partial analysis") {
		t.Errorf("the analysis of every shard says it is partial: %q", a.Headline.Notes)
	}
	for _, f := range a.Findings {
		if n := f.Result.N0; n != 24 {
			t.Errorf("%s T=%d: analyzed %d pairs of world C, want 24: the score file of the first 4 shards was reused", f.Attack, f.Round, n)
		}
	}
}

// More shards than pairs leave some shards without a pair: the directory check refuses that as
// a config error before anything is trained, not the empty shard's task after the others
// trained for hours.
func TestMoreShardsThanPairsRefused(t *testing.T) {
	cfg := leakyConfig()
	cfg.Pairs = 10
	_, err := CheckDirectory(cfg, t.TempDir(), 11)
	var ce *spec.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("11 shards of 10 pairs: %v, want a config error", err)
	}
	if _, err := CheckDirectory(cfg, t.TempDir(), 10); err != nil {
		t.Fatalf("10 shards of 10 pairs: %v", err)
	}
}

// invgrad capped to the first pairs scores none of the later shards' pairs; its score file
// still answers the sharded directory, which is not scored again by every later stage.
func TestCappedInvgradNotRescored(t *testing.T) {
	ctx := context.Background()
	cfg := leakyConfig()
	cfg.Pairs = 15
	cfg.Train.Model = model.Config{Kind: "mlp", Hidden: []int{4}, Activation: "tanh"}
	cfg.Train.Checkpoints = []int{0, 2, 3}
	cfg.Train.RecordParams, cfg.Train.RecordUpload = true, true
	cfg.Audit = spec.AuditConfig{Attacks: []string{"invgrad"}, Rounds: []int{3}, InvgradPairs: 2, InvgradIterations: 5}
	cfg.FillDefaults()
	dir := t.TempDir()
	if _, err := Run(ctx, cfg, dir, RunOptions{Shards: 3}); err != nil {
		t.Fatal(err)
	}
	var stale []string
	logf := func(format string, args ...any) {
		if line := fmt.Sprintf(format, args...); strings.Contains(line, "stale") {
			stale = append(stale, line)
		}
	}
	if _, err := AnalyzeDir(ctx, dir, AnalyzeOptions{}, AttackOptions{Logf: logf}); err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Errorf("the score file of the run was scored again: %v", stale)
	}
}

// A score file left in a directory whose runs were removed and trained again with other
// settings scores the old runs: it is scored again, not judged as the new runs' scores.
func TestScoresOfOtherTrainingRescored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Run(ctx, leakyConfig(), dir, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{expdir.Dir(dir).Runs(), expdir.Dir(dir).Config()} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	other := leakyConfig()
	other.Train.NoiseStd = 1
	got, err := Run(ctx, other, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Run(ctx, other, t.TempDir(), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range want.Findings {
		if g := got.Findings[i]; g.Result.AUC != f.Result.AUC || g.Result.MuLower != f.Result.MuLower {
			t.Errorf("%s T=%d: AUC %v, mu >= %v; a fresh directory gives AUC %v, mu >= %v: the old runs' scores were judged",
				f.Attack, f.Round, g.Result.AUC, g.Result.MuLower, f.Result.AUC, f.Result.MuLower)
		}
	}
}

// A shard trained by another version of the tool beside the shards already there would make a
// set that runs.Open refuses (tool versions differ) while every rerun skips both as complete:
// training it is refused up front, naming the versions. A complete set of another version is
// still analyzed without training.
func TestShardOfAnotherToolVersionRefused(t *testing.T) {
	ctx := context.Background()
	cfg := leakyConfig()
	dir := t.TempDir()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shards := AllShards(2)
	if err := TrainShards(ctx, cfg, data, dir, shards[:1], TrainOptions{ToolVersion: "0.1"}, nil); err != nil {
		t.Fatal(err)
	}
	err = TrainShards(ctx, cfg, data, dir, shards[1:], TrainOptions{ToolVersion: "0.2"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"0.1"`) {
		t.Fatalf("shard 1/2 by version 0.2 beside shard 0/2 by 0.1: %v, want a refusal naming the versions", err)
	}
	if err := TrainShards(ctx, cfg, data, dir, shards, TrainOptions{ToolVersion: "0.1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := TrainShards(ctx, cfg, data, dir, shards, TrainOptions{ToolVersion: "0.2"}, nil); err != nil {
		t.Fatalf("a complete set of another version: %v", err)
	}
}

// A score file that must be scored again in a directory that cannot be written is refused
// before any attack runs (scoring can take hours), naming why it is scored and what to do: the
// run-level scores and the one-run canary scores alike.
func TestUnwritableDirectoryRefusedBeforeScoring(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cfg  *spec.Config
		file func(expdir.Dir) string
	}{
		{"scores", leakyConfig(), expdir.Dir.Scores},
		{"canary scores", directionConfig(20, 4), expdir.Dir.CanaryScores},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Run(ctx, c.cfg, dir, RunOptions{}); err != nil {
				t.Fatal(err)
			}
			path := c.file(expdir.Dir(dir))
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			readOnly := errors.New("read-only file system")
			canWrite = func(string) error { return readOnly }
			defer func() { canWrite = fsutil.CanWrite }()
			var scored []string
			logf := func(format string, args ...any) {
				if line := fmt.Sprintf(format, args...); strings.Contains(line, "scor") {
					scored = append(scored, line)
				}
			}
			_, err := AnalyzeDir(ctx, dir, AnalyzeOptions{}, AttackOptions{Logf: logf})
			if !errors.Is(err, readOnly) || !strings.Contains(err.Error(), "it is missing") || !strings.Contains(err.Error(), "writable copy of "+dir) {
				t.Errorf("analysis of an unwritable directory without %s: %v", path, err)
			}
			if len(scored) > 0 {
				t.Errorf("the runs were scored before the directory was found unwritable: %q", scored)
			}
		})
	}
}

// The shard jobs of two arrays of other training, started side by side on one directory: one
// array's config is recorded and the other's jobs are refused, never both recorded in turn
// (each job checked the directory, found no config, and wrote its own).
func TestSetUpDirectoryOneTrainingAtOnce(t *testing.T) {
	a, b := leakyConfig(), leakyConfig()
	b.Train.NoiseStd = 0.5
	for try := range 20 {
		dir := t.TempDir()
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for job := range 8 {
			cfg := a
			if job%2 == 1 {
				cfg = b
			}
			wg.Go(func() {
				_, err := SetUpDirectory(cfg, dir, 4)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		refused := 0
		for err := range errs {
			var ce *spec.ConfigError
			if errors.As(err, &ce) && strings.Contains(err.Error(), "trained with other settings") {
				refused++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if refused != 4 {
			t.Fatalf("try %d: %d of 8 jobs refused, want the 4 of the array whose config came second", try, refused)
		}
	}
}

// trainFirstShards sets dir up for cfg in count shards and trains the first n of them, as the
// first tasks of an array would.
func trainFirstShards(t *testing.T, cfg *spec.Config, dir string, n, count int) *spec.Data {
	t.Helper()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SetUpDirectory(cfg, dir, count); err != nil {
		t.Fatal(err)
	}
	if err := TrainShards(context.Background(), cfg, data, dir, AllShards(count)[:n], TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	return data
}

// An analysis of a directory with shards missing says what to do: train them, or
// --allow-partial.
func TestMissingShardsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	trainFirstShards(t, leakyConfig(), dir, 1, 4)
	_, err := AnalyzeDir(context.Background(), dir, AnalyzeOptions{}, AttackOptions{})
	if !errors.Is(err, runs.ErrShardsMissing) || !strings.Contains(err.Error(), "3 of 4 shards missing (1/4, 2/4, 3/4): train them (audit status "+dir+" lists every shard), or give --allow-partial") {
		t.Errorf("analysis of 1 of 4 shards: %v", err)
	}
}
