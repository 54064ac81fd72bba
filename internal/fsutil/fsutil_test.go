package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "report.html")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFile(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != content {
			t.Fatalf("read %q, want %q", got, content)
		}
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", st.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files left in the directory, want only report.html", len(entries))
	}
}

func TestAbortLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "findings.json")
	if err := WriteFile(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half of the new"))
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("while writing, %s reads %q", p, got)
	}
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("after Abort, %s reads %q", p, got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files left", len(entries))
	}
}

// A temporary file whose writer is alive (holds its lock) is in use; one nobody holds, left by a
// killed writer, is stale and removed by CleanStale.
func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	live, err := Create(filepath.Join(dir, "scores.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	stale := filepath.Join(dir, ".report.html.tmp-123")
	if err := os.WriteFile(stale, []byte("<html"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, ".hidden") // not ours
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{stale, live.Name()} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if !InUse(live.Name()) || InUse(stale) {
		t.Fatalf("InUse: live %v, stale %v", InUse(live.Name()), InUse(stale))
	}
	removed, err := CleanStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale {
		t.Fatalf("removed %v, want only %s", removed, stale)
	}
	for _, p := range []string{live.Name(), other} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if err := live.Commit(); err != nil {
		t.Fatalf("the live writer could not finish: %v", err)
	}
}

func TestLockDirExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exp")
	l, err := LockDir(dir, "audit run")
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDir(dir, "audit run")
	pid := fmt.Sprintf("pid %d", os.Getpid())
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), pid) || !strings.Contains(err.Error(), "audit run") {
		t.Fatalf("second LockDir = %v, want ErrLocked naming %s", err, pid)
	}
	if _, err := LockShard(dir, 0, 2, "audit train"); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockShard under a directory lock = %v, want ErrLocked", err)
	}
	l.Unlock()
	l2, err := LockDir(dir, "audit run")
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	l2.Unlock()
}

// Shard jobs of one directory run side by side; the same shard twice, or a whole-directory
// command beside them, is refused, naming the shard jobs.
func TestLockShardsCoexist(t *testing.T) {
	dir := t.TempDir()
	a, err := LockShard(dir, 0, 2, "audit train")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LockShard(dir, 1, 2, "audit train")
	if err != nil {
		t.Fatalf("second shard: %v", err)
	}
	if _, err := LockShard(dir, 1, 2, "audit train"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "shard 1/2") {
		t.Fatalf("shard 1/2 twice = %v", err)
	}
	_, err = LockDir(dir, "audit run")
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "shard-00000-of-00002") || !strings.Contains(err.Error(), "shard-00001-of-00002") {
		t.Fatalf("LockDir beside shard jobs = %v, want both shards named", err)
	}
	a.Unlock()
	b.Unlock()
	l, err := LockDir(dir, "audit run")
	if err != nil {
		t.Fatalf("LockDir after the shard jobs: %v", err)
	}
	l.Unlock()
}

// A writer killed a moment ago (kill -9, then a rerun within seconds) leaves a temporary file
// that is seconds old and held by nobody: it is stale at once, whatever its age (it
// used to survive the rerun for being younger than five seconds).
func TestCleanStaleFresh(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".runs-00000-of-00001.arrow.tmp-42")
	if err := os.WriteFile(stale, []byte("ARROW1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if InUse(stale) {
		t.Fatal("a fresh temporary file nobody holds counts as in use")
	}
	removed, err := CleanStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale {
		t.Fatalf("removed %v, want %s", removed, stale)
	}
}

// A cleaner that runs in the instant between a writer creating its temporary file and locking
// it removes that file; the writer notices and starts again with a new one, so its Commit
// still succeeds.
func TestCreateSurvivesCleanerRace(t *testing.T) {
	dir := t.TempDir()
	var cleaned []string
	beforeLock = func(name string) {
		if len(cleaned) > 0 {
			return // once: the second file is locked undisturbed
		}
		removed, err := CleanStale(dir)
		if err != nil {
			t.Error(err)
		}
		cleaned = append(cleaned, removed...)
	}
	defer func() { beforeLock = nil }()
	f, err := Create(filepath.Join(dir, "findings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cleaned) == 0 {
		t.Fatal("the cleaner removed nothing: the race was not exercised")
	}
	beforeLock = nil
	if _, err := f.Write([]byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatalf("commit after the cleaner removed the first temporary file: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "findings.json")); err != nil || string(got) != "{}" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// CanWrite answers for the directory of its path and leaves nothing behind.
func TestCanWrite(t *testing.T) {
	dir := t.TempDir()
	if err := CanWrite(filepath.Join(dir, "scores.arrow")); err != nil {
		t.Errorf("a temporary directory: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("CanWrite left %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "scores.arrow")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CanWrite created the file: %v", err)
	}
	if err := CanWrite(filepath.Join(dir, "missing", "scores.arrow")); err == nil {
		t.Error("a directory that does not exist can be written, says CanWrite")
	}
}
