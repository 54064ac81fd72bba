package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperArgsEnv makes the test binary run main with these arguments (separated by newlines)
// instead of the tests, so that a test can signal a real audit process.
const helperArgsEnv = "FEDAUDIT_TEST_MAIN_ARGS"

func init() {
	if args := os.Getenv(helperArgsEnv); args != "" {
		os.Args = append([]string{"audit"}, strings.Split(args, "\n")...)
		main() // exits
	}
}

// TestSignalsStopCleanly sends SIGTERM, SIGINT and SIGHUP (a closed terminal or ssh session) to
// a training `audit run`: each ends it as interrupted, exit status 130, with no temporary file
// left behind (issue 24, item 14: SIGHUP killed the process with status 129 and left a .tmp
// file).
func TestSignalsStopCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts audit processes")
	}
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Replace(strings.Replace(string(base), "rounds: 3", "rounds: 100000", 1), "checkpoints: [1, 3]", "checkpoints: [1, 100000]", 1)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(cfgPath, []byte(long), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperArgsEnv+"="+strings.Join([]string{"run", "--config", cfgPath, "--out", out, "--quiet"}, "\n"))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the shard's temporary run file exists: training is under way.
			runsDir := filepath.Join(out, "runs")
			deadline := time.Now().Add(60 * time.Second)
			for len(temps(runsDir)) == 0 {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("no temporary run file after 60 s; stderr:\n%s", stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var werr error
			select {
			case werr = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running 30 s after %v", sig)
			}
			var ee *exec.ExitError
			if !errors.As(werr, &ee) || ee.ExitCode() != 130 {
				t.Fatalf("after %v: %v, want exit status 130; stderr:\n%s", sig, werr, stderr.String())
			}
			if !strings.Contains(stderr.String(), "audit: interrupted") {
				t.Errorf("stderr lacks \"audit: interrupted\":\n%s", stderr.String())
			}
			if left := temps(runsDir); len(left) > 0 {
				t.Errorf("temporary files left after %v: %v", sig, left)
			}
		})
	}
}

// temps lists the temporary files in dir.
func temps(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	return m
}

// TestKilledWriterCleanedAtOnce kills a training `audit run` with SIGKILL (its writer cannot
// clean up) and reruns it at once: the rerun removes the dead writer's temporary file although
// it is only a moment old, and status then lists no stale file (issue 24, item 14: the file
// survived a rerun within five seconds of the kill).
func TestKilledWriterCleanedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts audit processes")
	}
	base, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Replace(strings.Replace(string(base), "rounds: 3", "rounds: 100000", 1), "checkpoints: [1, 3]", "checkpoints: [1, 100000]", 1)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	args := []string{"run", "--config", cfgPath, "--out", out, "--quiet"}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperArgsEnv+"="+strings.Join(args, "\n"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	runsDir := filepath.Join(out, "runs")
	deadline := time.Now().Add(60 * time.Second)
	for len(temps(runsDir)) == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("no temporary run file after 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	dead := temps(runsDir)
	if len(dead) != 1 {
		t.Fatalf("temporary files after kill -9: %v, want one", dead)
	}
	// The rerun cleans up as it starts, then trains; it is interrupted once it has begun.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if m := temps(runsDir); len(m) > 0 && m[0] != dead[0] {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var stdout, stderr bytes.Buffer
	if code := exitCode(&stderr, run(ctx, args, &stdout, &stderr)); code != 130 {
		t.Fatalf("rerun: exit %d, want 130 (interrupted); stderr:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(dead[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed writer's %s survived the rerun (%v)", dead[0], err)
	}
	stdout.Reset()
	stderr.Reset()
	exitCode(&stderr, run(context.Background(), []string{"status", out}, &stdout, &stderr))
	if strings.Contains(stdout.String(), "stale") {
		t.Errorf("status after the rerun lists a stale file:\n%s", stdout.String())
	}
}
