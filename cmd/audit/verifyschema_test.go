package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestVerifySchemaCopyFlip flips one byte of the schema and config copy at the start of a shard
// and of the score file (offsets the issue found unnoticed): `status --verify` reports both
// damaged and exits 1, and `audit run` retrains and rescores them, reproducing the findings
// (issue 24, item 13).
func TestVerifySchemaCopyFlip(t *testing.T) {
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
	if code := runAudit("run", "--quiet", "--config", config, "--out", dir, "--shards", "2"); code != 0 && code != 3 {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	findings, err := os.ReadFile(filepath.Join(dir, "findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(dir, "runs", "runs-00001-of-00002.arrow")
	for path, at := range map[string]func([]byte) int{
		// A byte of the config in the schema copy at the start of the shard.
		shard: func(raw []byte) int { return bytes.Index(raw, []byte(`"pairs":40`)) + 8 },
		// The schema message's length field.
		filepath.Join(dir, "scores.arrow"): func([]byte) int { return 10 },
	} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		off := at(raw)
		if off < 8 || off > len(raw)/2 {
			t.Fatalf("%s: offset %d is not in the schema copy", path, off)
		}
		raw[off] ^= 0x01
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code := runAudit("status", dir, "--verify", "--json")
	var rep statusReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("status --verify --json: %v\n%s", err, stdout.String())
	}
	states := map[string]string{}
	for _, f := range rep.Files {
		states[f.File] = f.State
	}
	if code != 1 || states["runs-00001-of-00002.arrow"] != "damaged" || states["scores.arrow"] != "damaged" || states["runs-00000-of-00002.arrow"] != "complete" {
		t.Fatalf("status --verify: exit %d, report %+v", code, rep)
	}
	if code := runAudit("run", "--quiet", "--config", config, "--out", dir, "--shards", "2"); code != 0 && code != 3 {
		t.Fatalf("rerun: exit %d\n%s", code, stderr.String())
	}
	if code := runAudit("status", dir, "--verify"); code != 0 {
		t.Fatalf("status --verify after the rerun: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	again, err := os.ReadFile(filepath.Join(dir, "findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, findings) {
		t.Errorf("findings after the repair differ from the undamaged directory's")
	}
}
