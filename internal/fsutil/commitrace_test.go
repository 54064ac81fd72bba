package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// A shard job cleans the directory (CleanStale) while another one commits its file: the
// committing writer must keep its temporary file locked until it is renamed into place, or the
// cleaner takes the unlocked file for a killed writer's and removes it, and the commit fails
// after all the work. Both run in one process here: flock locks belong to open files, so the
// cleaner's descriptor conflicts with the writer's as another process's would.
func TestCommitBesideCleaner(t *testing.T) {
	dir := t.TempDir()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := CleanStale(dir); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	const commits = 400
	failed := 0
	for i := range commits {
		path := filepath.Join(dir, fmt.Sprintf("f%d", i%8))
		if err := WriteFile(path, []byte("data")); err != nil {
			failed++
			if failed == 1 {
				t.Errorf("commit %d: %v", i, err)
			}
			continue
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
			t.Fatalf("%s after commit: %q, %v", path, b, err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d commits failed beside a cleaner", failed, commits)
	}
}
