package fsutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// liveWriterEnv names the directory in which the test binary, run again as a helper process,
// plays a shard job at work: it holds shard 0 of 2 and writes scores.arrow through a temporary
// file, prints that file's name, and commits once its standard input closes.
const liveWriterEnv = "FSUTIL_TEST_LIVE_WRITER"

func init() {
	dir := os.Getenv(liveWriterEnv)
	if dir == "" {
		return
	}
	os.Exit(liveWriter(dir))
}

func liveWriter(dir string) int {
	lock, err := LockShard(dir, 0, 2, "live writer")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer lock.Unlock()
	f, err := Create(filepath.Join(dir, "scores.arrow"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Abort()
	if _, err := f.WriteString("live"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(f.Name())
	io.Copy(io.Discard, os.Stdin)
	if err := f.Commit(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Another process holds the directory's lock (a shard job) and writes through a temporary
// file. A whole-directory command is refused the lock, so it cleans nothing; a second shard job
// takes its shard and cleans the directory as lockExperiment does: the stale temporary file a
// killed writer left goes, the live writer's stays, and the live writer still commits.
func TestCleanStaleBesideLiveWriter(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), liveWriterEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the live writer did not start: %v (%s)", err, stderr.String())
	}
	live := strings.TrimSpace(line)
	if !IsTemp(filepath.Base(live)) || !InUse(live) {
		t.Fatalf("the live writer's file %s: temporary %v, in use %v", live, IsTemp(filepath.Base(live)), InUse(live))
	}

	if _, err := LockDir(dir, "audit run"); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockDir beside the live writer's shard job = %v, want ErrLocked", err)
	}

	lock, err := LockShard(dir, 1, 2, "audit train")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	stale := filepath.Join(dir, ".report.html.tmp-99")
	if err := os.WriteFile(stale, []byte("<html"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := CleanStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale {
		t.Fatalf("removed %v, want only the stale %s", removed, stale)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the live writer's temporary file: %v", err)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the live writer failed: %v (%s)", err, stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(dir, "scores.arrow"))
	if err != nil || string(got) != "live" {
		t.Fatalf("the live writer's committed file: %q, %v", got, err)
	}
}
