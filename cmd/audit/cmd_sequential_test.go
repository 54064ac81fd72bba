package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
)

// A sequential run on a cluster array: the task of shard 0 evaluates the first look after
// training and records the stop; a later task trains nothing; the finish job (audit run
// --sequential) writes the analysis of the 25 pairs of the first look and exits 3. The tasks'
// flag outside an array is a usage error.
func TestSequentialArray(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join("testdata", "sequential_leaky.yaml")
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	task := func(shard string) {
		t.Helper()
		stderr.Reset()
		if err := run(ctx, []string{"train", "--config", cfg, "--out", dir, "--shard", shard, "--sequential"}, &stdout, &stderr); err != nil {
			t.Fatalf("train --shard %s: %v\n%s", shard, err, stderr.String())
		}
	}
	task("0/8")
	rec, err := experiment.ReadSequential(dir)
	if err != nil || rec == nil || !rec.Stopped || len(rec.Looks) != 1 || rec.Looks[0].Pairs != 25 {
		t.Fatalf("after shard 0: record %+v (%v), want a stop at the first look\n%s", rec, err, stderr.String())
	}
	task("5/8")
	if !strings.Contains(stderr.String(), "shard 5/8 is not needed") {
		t.Errorf("task 5 after the stop:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(expdir.Dir(dir).Runs(), "runs-00005-of-00008.arrow")); err == nil {
		t.Error("task 5 trained its shard after the run stopped")
	}
	// An analysis before the finish job judges the stopped look at its own confidence, not at
	// the last look's level the tasks left in config.json: the look was chosen by its data.
	stdout.Reset()
	stderr.Reset()
	if code := exitCode(&stderr, run(ctx, []string{"analyze", dir, "--json", "--quiet"}, &stdout, &stderr)); code != 3 {
		t.Fatalf("analyze before the finish job: exit %d\n%s", code, stderr.String())
	}
	var early struct {
		Headline struct {
			Confidence float64 `json:"confidence"`
		} `json:"headline"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &early); err != nil {
		t.Fatal(err)
	}
	if got, want := early.Headline.Confidence, rec.Looks[0].Confidence; got != want {
		t.Errorf("analyze before the finish job: confidence %g, want the stopped look's %g", got, want)
	}
	stdout.Reset()
	stderr.Reset()
	code := exitCode(&stderr, run(ctx, []string{"run", "--config", cfg, "--out", dir, "--shards", "8", "--sequential", "--quiet"}, &stdout, &stderr))
	if code != 3 || !strings.Contains(stdout.String(), "25 of 200 pairs") {
		t.Fatalf("finish job: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	// Every later path that prints a verdict judges the look the run stopped at.
	for _, args := range [][]string{{"analyze", dir}, {"report", dir}} {
		stdout.Reset()
		stderr.Reset()
		code := exitCode(&stderr, run(ctx, append(args, "--quiet"), &stdout, &stderr))
		if code != 3 || !strings.Contains(stdout.String(), "25 of 200 pairs") {
			t.Errorf("audit %s after the stop: exit %d\n%s\n%s", args[0], code, stdout.String(), stderr.String())
		}
	}
	files, _ := os.ReadDir(expdir.Dir(dir).Runs())
	if len(files) != 1 {
		t.Errorf("the finish job trained %d shards, want only the first", len(files))
	}
	if code := exitCode(&stderr, run(ctx, []string{"train", "--config", cfg, "--out", t.TempDir(), "--sequential"}, &stdout, &stderr)); code != 2 {
		t.Errorf("train --sequential without a shard: exit %d, want 2", code)
	}
	stderr.Reset()
	if code := exitCode(&stderr, run(ctx, []string{"run", "--config", cfg, "--out", t.TempDir(), "--sequential", "--shards", "1"}, &stdout, &stderr)); code != 2 || !strings.Contains(stderr.String(), "needs at least 2 (--shards 1)") {
		t.Errorf("run --sequential --shards 1: exit %d, want 2\n%s", code, stderr.String())
	}
}

// The record of a sequential run's stop belongs to that run. A task of a new sequential array of
// other settings (another claim) trains its shard instead of reading the old stop as its own, and
// removes the record; a run of fixed size (`audit train` of every shard) removes it too, so that
// `audit analyze` judges every pair trained. Before, the new array's tasks trained nothing, and
// the fixed run's analysis judged the 25 pairs of the old stop, calling the 175 others "never
// trained".
func TestSequentialRecordOfAnotherRun(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "sequential_leaky.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	cfg, other := filepath.Join("testdata", "sequential_leaky.yaml"), filepath.Join(work, "claim.yaml")
	if err := os.WriteFile(other, []byte(strings.Replace(string(raw), "claim_mu: 0.3", "claim_mu: 0.35", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	do := func(args ...string) int {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		return exitCode(&stderr, run(ctx, args, &stdout, &stderr))
	}

	dir := filepath.Join(work, "array")
	if code := do("train", "--config", cfg, "--out", dir, "--shard", "0/8", "--sequential"); code != 0 {
		t.Fatalf("task 0: exit %d\n%s", code, stderr.String())
	}
	if rec, err := experiment.ReadSequential(dir); err != nil || rec == nil || !rec.Stopped {
		t.Fatalf("after task 0: record %+v (%v), want a stop", rec, err)
	}
	if code := do("train", "--config", other, "--out", dir, "--shard", "5/8", "--sequential"); code != 0 {
		t.Fatalf("task 5 of the other claim: exit %d\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "is not needed") || !strings.Contains(stderr.String(), "other settings (removed)") {
		t.Errorf("task 5 of the other claim read the old stop as its own:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(expdir.Dir(dir).Runs(), "runs-00005-of-00008.arrow")); err != nil {
		t.Errorf("task 5 of the other claim did not train its shard: %v", err)
	}

	fixed := filepath.Join(work, "fixed")
	if code := do("run", "--config", cfg, "--out", fixed, "--shards", "8", "--sequential", "--quiet"); code != 3 {
		t.Fatalf("sequential run: exit %d\n%s", code, stderr.String())
	}
	if code := do("train", "--config", cfg, "--out", fixed, "--shards", "8"); code != 0 {
		t.Fatalf("fixed training of every shard: exit %d\n%s", code, stderr.String())
	}
	if rec, err := experiment.ReadSequential(fixed); err != nil || rec != nil {
		t.Errorf("after a fixed training: record %+v (%v), want none", rec, err)
	}
	do("analyze", fixed, "--quiet")
	if out := stdout.String(); strings.Contains(out, "sequential run") || !strings.Contains(out, " 200  200 ") {
		t.Errorf("analysis after a fixed training of every shard judged the old stop:\n%s", out)
	}
}

// A task of a sequential array whose first look is too small to fit a learned attack is refused
// as a configuration error (exit 2) before it trains, as `audit run --sequential` is; it used to
// train its shard and fail when it evaluated the first look (exit 1), task after task.
func TestSequentialArrayFirstLookRefused(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "sequential_leaky.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// 40 pairs in 16 shards: 2 pairs at the first look, lira-online needs 10.
	text := strings.NewReplacer("pairs: 200", "pairs: 40", "attacks: [informed-all, loss]", "attacks: [lira-online, loss]").Replace(string(raw))
	work := t.TempDir()
	cfg := filepath.Join(work, "audit.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, args := range [][]string{
		{"train", "--shard", "0/16", "--sequential"},
		{"run", "--shards", "16", "--sequential"},
	} {
		t.Run(args[0], func(t *testing.T) {
			dir := filepath.Join(work, args[0])
			var stdout, stderr bytes.Buffer
			code := exitCode(&stderr, run(ctx, append(args, "--config", cfg, "--out", dir, "--quiet"), &stdout, &stderr))
			if code != 2 || !strings.Contains(stderr.String(), "lira-online") {
				t.Errorf("audit %s: exit %d, want 2 naming lira-online\n%s", strings.Join(args, " "), code, stderr.String())
			}
			if _, err := os.Stat(expdir.Dir(dir).Runs()); err == nil {
				t.Errorf("audit %s trained before it was refused", args[0])
			}
		})
	}
}

// A sequential array whose looks certify no violation records no stop; the tasks have still
// evaluated every look but the last, so an analysis of the directory before the finish job
// must judge at the last look's share of the error, as the finish job and a one-process
// `audit run --sequential` (which records that level in config.json before it trains) do, not
// at the joint level: the earlier looks' error would otherwise be spent twice.
func TestSequentialArrayNoStopAnalyzedAtLastLook(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "sequential_leaky.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	cfg := filepath.Join(work, "audit.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(raw), "claim_mu: 0.3", "claim_mu: 50", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "out")
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	for i := range 8 {
		if err := run(ctx, []string{"train", "--config", cfg, "--out", dir, "--shard", fmt.Sprintf("%d/8", i), "--sequential", "--quiet"}, &stdout, &stderr); err != nil {
			t.Fatalf("task %d: %v\n%s", i, err, stderr.String())
		}
	}
	if rec, err := experiment.ReadSequential(dir); err != nil || rec != nil {
		t.Fatalf("record %+v (%v): no look stops", rec, err)
	}
	type headline struct {
		Headline struct {
			Status     string  `json:"status"`
			Confidence float64 `json:"confidence"`
			MuLower    float64 `json:"mu_lower"`
		} `json:"headline"`
	}
	analyze := func(when string) headline {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		if code := exitCode(&stderr, run(ctx, []string{"analyze", dir, "--json", "--quiet"}, &stdout, &stderr)); code != 0 {
			t.Fatalf("analyze %s: exit %d\n%s", when, code, stderr.String())
		}
		var h headline
		if err := json.Unmarshal(stdout.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	early := analyze("before the finish job")
	last := 1 - 0.05*8/15 // looks at 1, 2, 4 and 8 shards: the last spends 8/15 of the error
	if math.Abs(early.Headline.Confidence-last) > 1e-12 {
		t.Errorf("analyze before the finish job judged at confidence %v, want the last look's %v", early.Headline.Confidence, last)
	}
	stdout.Reset()
	stderr.Reset()
	if code := exitCode(&stderr, run(ctx, []string{"run", "--config", cfg, "--out", dir, "--shards", "8", "--sequential", "--quiet"}, &stdout, &stderr)); code != 0 {
		t.Fatalf("finish job: exit %d\n%s", code, stderr.String())
	}
	if after := analyze("after the finish job"); after.Headline != early.Headline {
		t.Errorf("analyze before the finish job %+v, after it %+v", early.Headline, after.Headline)
	}
}
