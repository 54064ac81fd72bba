package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	rec, err := experiment.SequentialSettled(dir)
	if err != nil || rec == nil || len(rec.Looks) != 1 || rec.Looks[0].Pairs != 25 {
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
	// the joint level the tasks left in config.json: the look was chosen by its data.
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
