package fsutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStagingDirRemovesOnlyStaleOnes: a staging directory left by a killed writer (no live lock
// holder, older than a minute) is removed when the next writer of the same output starts; one
// whose writer still holds it, one too young to have been locked yet, and the directories of
// other outputs are kept. A killed import's staging directory stayed forever.
func TestStagingDirRemovesOnlyStaleOnes(t *testing.T) {
	parent := t.TempDir()
	old := time.Now().Add(-time.Hour)
	mk := func(name string, age time.Time) string {
		t.Helper()
		d := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(d, "runs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, age, age); err != nil {
			t.Fatal(err)
		}
		return d
	}
	killed := mk(".out.import-111", old) // its writer died: its lock file is free
	if err := os.WriteFile(filepath.Join(killed, ".lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(killed, old, old); err != nil {
		t.Fatal(err)
	}
	unlocked := mk(".out.import-222", old) // a writer of a version without the lock
	live := mk(".out.import-333", old)
	held, err := LockDir(live, "a live import")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	if err := os.Chtimes(live, old, old); err != nil {
		t.Fatal(err)
	}
	young := mk(".out.import-444", time.Now())
	other := mk(".other.import-555", old)

	dir, lock, removed, err := StagingDir(parent, ".out.import-", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	want := map[string]bool{killed: false, unlocked: false, live: true, young: true, other: true, dir: true}
	for d, kept := range want {
		if _, err := os.Stat(d); (err == nil) != kept {
			t.Errorf("%s: exists %v, want %v", filepath.Base(d), err == nil, kept)
		}
	}
	if len(removed) != 2 {
		t.Errorf("removed %v, want the killed writer's and the unlocked one", removed)
	}
	// The new directory is held: a second writer's clean-up would not take it, however old.
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	if gone, err := CleanStaleDirs(parent, ".out.import-", time.Minute); err != nil || len(gone) != 0 {
		t.Errorf("a second clean-up removed %v (%v), want nothing", gone, err)
	}
}
