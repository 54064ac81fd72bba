package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/runs/integrity"
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
	// A writer at work on shard 1: it holds the lock of its temporary file.
	live, err := fsutil.Create(filepath.Join(rdir, "runs-00001-of-00004.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	if _, err := live.Write(raw[:100]); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Base(live.Name())
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
	// The cut file is its shard's, corrupt: one line, not a missing shard and a corrupt file of
	// no shard besides.
	if g := strings.Join(got["runs-00002-of-00004.arrow"], ","); g != "corrupt" {
		t.Errorf("cut shard: states %q, want corrupt", g)
	}
	for _, f := range rep.Files {
		if f.File == "runs-00002-of-00004.arrow" && f.Shard != "2/4" {
			t.Errorf("cut shard listed under shard %q, want 2/4", f.Shard)
		}
	}
	if !strings.Contains(stderr.String(), "2 of 4 shards complete (1 missing, 1 corrupt)") {
		t.Errorf("stderr %q does not summarize the damage", stderr.String())
	}

	// Retraining the job repairs it: the corrupt file is replaced, the missing one written.
	if err := run(ctx, []string{"train", "--quiet", "--config", filepath.Join("testdata", "run_small.yaml"), "--out", dir, "--shards", "4"}, &stdout, &stderr); err != nil {
		t.Fatalf("retrain: %v", err)
	}
	if err := live.Abort(); err != nil {
		t.Fatal(err)
	}
	if rep, code = status(); code != 0 || rep.Complete != 4 {
		t.Fatalf("after retraining: code %d, report %+v", code, rep)
	}

	// A second file of shard 3 (a copy left by hand, or a rerun under another name): the
	// stages after the check refuse the set, so the check fails too.
	first, err := os.ReadFile(filepath.Join(rdir, "runs-00003-of-00004.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rdir, "runs-00003-of-00004.copy.arrow"), first, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, code = status(); code != 1 || rep.OK || rep.Counts["duplicate"] != 1 || !strings.Contains(stderr.String(), "1 duplicate") {
		t.Fatalf("a duplicate shard: code %d, report %+v, stderr %q", code, rep, stderr.String())
	}
	if code, _, stderr := cli(t, "attack", "--runs", dir, "--quiet"); code != 1 || !strings.Contains(stderr, "duplicate shard") {
		t.Errorf("attack on the directory status refused: exit %d, %s", code, stderr)
	}
}

// TestVerifyRetrainsDamagedShard flips one byte inside a shard's data: `status` (footers only)
// still calls it complete, `status --verify` names it, reading it fails, and `audit run`
// retrains it and reproduces the findings byte for byte. A damaged score file is rescored.
func TestVerifyRetrainsDamagedShard(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	config := filepath.Join("testdata", "run_small.yaml")
	var stdout, stderr bytes.Buffer
	runAudit := func(args ...string) int {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		return exitCode(&stderr, run(ctx, args, &stdout, &stderr))
	}
	if code := runAudit("run", "--quiet", "--config", config, "--out", dir, "--shards", "4"); code != 0 && code != 3 {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	findings, err := os.ReadFile(filepath.Join(dir, "findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(path string) {
		t.Helper()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)/3] ^= 0x04 // the first third of a file is record batches, not the footer
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shard := filepath.Join(dir, "runs", "runs-00002-of-00004.arrow")
	flip(shard)
	flip(filepath.Join(dir, "scores.arrow"))

	if code := runAudit("status", dir, "--json"); code != 0 {
		t.Fatalf("status without --verify: exit %d (it reads footers only)", code)
	}
	code := runAudit("status", dir, "--verify", "--json")
	var rep statusReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("status --verify --json output: %v\n%s", err, stdout.String())
	}
	states := map[string]string{}
	for _, f := range rep.Files {
		states[f.File] = f.State
	}
	if code != 1 || rep.OK || states["runs-00002-of-00004.arrow"] != "damaged" || states["scores.arrow"] != "damaged" ||
		states["runs-00001-of-00004.arrow"] != "complete" || rep.Counts["damaged"] != 2 {
		t.Fatalf("status --verify: exit %d, report %+v", code, rep)
	}
	if !strings.Contains(stderr.String(), "(2 damaged)") {
		t.Errorf("status --verify stderr %q does not summarize the damage", stderr.String())
	}
	if code := runAudit("status", dir, "--verify"); code != 1 || !strings.Contains(stdout.String(), "damaged") ||
		!strings.Contains(stdout.String(), "runs-00002-of-00004.arrow") || !strings.Contains(stdout.String(), "checksum mismatch") {
		t.Fatalf("status --verify: exit %d, output\n%s", code, stdout.String())
	}
	tab, err := runs.Open(filepath.Join(dir, "runs"))
	if err != nil {
		t.Fatal(err)
	}
	err = tab.Scan(ctx, func(runs.Row) error { return nil })
	if !errors.Is(err, integrity.ErrDamaged) || !strings.Contains(err.Error(), shard) {
		t.Fatalf("reading the damaged directory: %v, want a damage error naming %s", err, shard)
	}

	if code := runAudit("run", "--quiet", "--config", config, "--out", dir, "--shards", "4"); code != 0 && code != 3 {
		t.Fatalf("run over the damaged directory: exit %d\n%s", code, stderr.String())
	}
	again, err := os.ReadFile(filepath.Join(dir, "findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(findings, again) {
		t.Fatalf("findings after retraining the damaged shard differ:\n%s\nwant\n%s", again, findings)
	}
	if code := runAudit("status", dir, "--verify", "--json"); code != 0 {
		t.Fatalf("status --verify after the rerun: exit %d\n%s", code, stdout.String())
	}
}

// TestStatusOnlyATemporaryFile: a first shard's writer at work leaves no complete file, so no
// count of shards is known. The human output said "0 of 0 shards complete", which reads as an
// empty experiment with nothing missing; it must say the count is unknown, and exit 1.
func TestStatusOnlyATemporaryFile(t *testing.T) {
	rdir := t.TempDir()
	live, err := fsutil.Create(filepath.Join(rdir, "runs-00000-of-00004.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	if _, err := live.Write([]byte("ARROW1")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "status", rdir)
	if code != 1 {
		t.Errorf("exit %d, want 1\n%s", code, stderr)
	}
	if strings.Contains(stdout, "0 of 0") || !strings.Contains(stdout, "number of shards is unknown") || !strings.Contains(stdout, "writing") {
		t.Errorf("stdout %q: want the count called unknown and the temporary file listed as writing", stdout)
	}
	if !strings.Contains(stderr, "no run files") {
		t.Errorf("stderr %q: want the exit-1 reason", stderr)
	}
}

// An empty directory's --json lists no files as an empty list, not null, which a consumer
// iterating over "files" would have to special-case.
func TestStatusJSONEmptyFiles(t *testing.T) {
	_, stdout, _ := cli(t, "status", t.TempDir(), "--json")
	if !strings.Contains(stdout, `"files": []`) {
		t.Errorf("status --json of an empty directory: %s", stdout)
	}
}

// TestRescoresCutScoreFiles: a score file cut short (a full disk, a killed copy), emptied or
// zeroed is scored again by the next stage that reads it, as a checksum mismatch was, and the
// findings are those of the intact file. Only the mismatch was rescored: `audit run` failed on
// the others ("truncated Arrow file") though `status --verify` called them damaged and said
// run would rescore them.
func TestRescoresCutScoreFiles(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join("testdata", "run_small.yaml")
	if code, _, stderr := cli(t, "run", "--quiet", "--config", config, "--out", dir); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	scores := filepath.Join(dir, "scores.arrow")
	intact, err := os.ReadFile(scores)
	if err != nil {
		t.Fatal(err)
	}
	findings, err := os.ReadFile(filepath.Join(dir, "findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		cmd  []string
	}{
		{"cut", intact[:len(intact)/2], []string{"run", "--quiet", "--config", config, "--out", dir}},
		{"empty", nil, []string{"report", "--quiet", dir}},
		{"zeroed", make([]byte, len(intact)), []string{"analyze", "--quiet", dir}},
	} {
		if err := os.WriteFile(scores, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := cli(t, c.cmd...); code != 0 {
			t.Errorf("%s score file: %s exit %d\n%s", c.name, c.cmd[0], code, stderr)
			continue
		}
		if c.cmd[0] != "analyze" {
			if again, err := os.ReadFile(filepath.Join(dir, "findings.json")); err != nil || !bytes.Equal(again, findings) {
				t.Errorf("%s score file: findings after %s differ (%v)", c.name, c.cmd[0], err)
			}
		}
		if again, err := os.ReadFile(scores); err != nil || !bytes.Equal(again, intact) {
			t.Errorf("%s score file: not scored again as it was (%v)", c.name, err)
		}
	}
}

// TestVerifyCanaryScores: `status --verify` checks a one-run audit's canary score file as it
// checks scores.arrow (it was not read at all), and `audit run` scores a cut one again.
func TestVerifyCanaryScores(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join("testdata", "run_onerun.yaml")
	if code, _, stderr := cli(t, "run", "--quiet", "--config", config, "--out", dir); code != 0 && code != 3 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	path := filepath.Join(dir, "canary-scores.arrow")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw[:len(raw)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := cli(t, "status", dir, "--verify"); code != 1 || !strings.Contains(stdout, "canary-scores.arrow") || !strings.Contains(stdout, "damaged") {
		t.Errorf("status --verify of a cut canary score file: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := cli(t, "run", "--quiet", "--config", config, "--out", dir); code != 0 && code != 3 {
		t.Fatalf("run over the cut canary score file: exit %d\n%s", code, stderr)
	}
	if again, err := os.ReadFile(path); err != nil || !bytes.Equal(again, raw) {
		t.Errorf("canary scores not scored again as they were (%v)", err)
	}
	if code, stdout, _ := cli(t, "status", dir, "--verify"); code != 0 {
		t.Errorf("status --verify after the rerun: exit %d\n%s", code, stdout)
	}
}
