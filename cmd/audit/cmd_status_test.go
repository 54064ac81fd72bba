package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusShards trains a real 4-shard directory and damages it the ways a batch job can:
// a shard never ran, a shard's file was cut short, a writer died leaving its temporary file.
// status must name every file, say which state it is in, and exit 1 until the set is whole.
func TestStatusShards(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"train", "--quiet", "--config", filepath.Join("testdata", "run_small.yaml"), "--out", dir, "--shards", "4"}, &stdout, &stderr); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr.String())
	}
	status := func(args ...string) (statusReport, int) {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		code := exitCode(&stderr, run(ctx, append([]string{"status", dir, "--json"}, args...), &stdout, &stderr))
		var rep statusReport
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("status --json output: %v\n%s", err, stdout.String())
		}
		return rep, code
	}
	rep, code := status()
	if code != 0 || !rep.OK || rep.Complete != 4 || rep.Shards != 4 || len(rep.Files) != 4 {
		t.Fatalf("complete directory: code %d, report %+v", code, rep)
	}

	rdir := filepath.Join(dir, "runs")
	if err := os.Remove(filepath.Join(rdir, "runs-00001-of-00004.arrow")); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(rdir, "runs-00002-of-00004.arrow")
	raw, err := os.ReadFile(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, raw[:len(raw)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := ".runs-00001-of-00004.arrow.tmp-42"
	if err := os.WriteFile(filepath.Join(rdir, tmp), raw[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	rep, code = status()
	if code != 1 || rep.OK || rep.Complete != 2 {
		t.Fatalf("damaged directory: code %d, report %+v", code, rep)
	}
	want := map[string]string{ // file -> state, for the lines that name a state other than complete
		"runs-00001-of-00004.arrow": "missing",
		tmp:                         "writing",
	}
	got := map[string][]string{}
	for _, f := range rep.Files {
		got[f.File] = append(got[f.File], f.State)
	}
	for file, state := range want {
		if len(got[file]) != 1 || got[file][0] != state {
			t.Errorf("%s: states %v, want [%s]", file, got[file], state)
		}
	}
	// The cut file's index has no readable file (missing) and the file itself is corrupt.
	if g := strings.Join(got["runs-00002-of-00004.arrow"], ","); g != "missing,corrupt" {
		t.Errorf("cut shard: states %q, want missing,corrupt", g)
	}
	if !strings.Contains(stderr.String(), "2 of 4 shards complete (2 missing, 1 corrupt)") {
		t.Errorf("stderr %q does not summarize the damage", stderr.String())
	}

	// Retraining the job repairs it: the corrupt file is replaced, the missing one written.
	if err := run(ctx, []string{"train", "--quiet", "--config", filepath.Join("testdata", "run_small.yaml"), "--out", dir, "--shards", "4"}, &stdout, &stderr); err != nil {
		t.Fatalf("retrain: %v", err)
	}
	if err := os.Remove(filepath.Join(rdir, tmp)); err != nil {
		t.Fatal(err)
	}
	if rep, code = status(); code != 0 || rep.Complete != 4 {
		t.Fatalf("after retraining: code %d, report %+v", code, rep)
	}
}
