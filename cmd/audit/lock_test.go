package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/internal/fsutil"
)

// A second `audit run` on a directory in use fails at once (exit 1) naming the holder; a
// temporary file left by a killed writer is listed as stale, then removed by the next run.
func TestRunLockedAndStaleTemp(t *testing.T) {
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
	held, err := fsutil.LockDir(dir, "audit run")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code := runAudit("run", "--quiet", "--config", config, "--out", dir, "--shards", "2")
	if code != 1 || !strings.Contains(stderr.String(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(stderr.String(), "in use") {
		t.Fatalf("run on a locked directory: exit %d, stderr %q", code, stderr.String())
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("refusal took %s; it must not wait", time.Since(start))
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		t.Fatal("the refused run trained")
	}
	held.Unlock()

	if code := runAudit("run", "--quiet", "--config", config, "--out", dir, "--shards", "2"); code != 0 && code != 3 {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	stale := filepath.Join(dir, "runs", ".runs-00001-of-00002.arrow.tmp-99")
	if err := os.WriteFile(stale, []byte("ARROW1"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	if code := runAudit("status", dir); code != 0 || !strings.Contains(stdout.String(), "stale") || strings.Contains(stdout.String(), "writing") {
		t.Fatalf("status with a stale temporary file: exit %d\n%s", code, stdout.String())
	}
	if code := runAudit("run", "--quiet", "--config", config, "--out", dir, "--shards", "2"); code != 0 && code != 3 {
		t.Fatalf("rerun: exit %d\n%s", code, stderr.String())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temporary file still there after the rerun (%v)", err)
	}
}
