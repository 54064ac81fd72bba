package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/internal/fsutil"
)

// TestNoVerdictOfOtherSettings: a command that records other settings in a directory's
// config.json removes the findings and report judged with the old ones, so no file states a
// verdict of settings the directory no longer holds. `audit train` after `audit run
// --claim-mu 100` left findings.json and report.md of claim 100 (CONSISTENT) beside a
// config.json of the config's own claim, and `status` passed it; a run killed after recording
// its settings did the same. Recording the same settings keeps them.
func TestNoVerdictOfOtherSettings(t *testing.T) {
	cfg, dir := smallRun(t, "--claim-mu", "100")
	d := expdir.Dir(dir)
	judged := []string{d.Findings(), d.ReportHTML(), d.ReportMarkdown(), d.Tables(), d.Figures()}
	exist := func(when string, want bool) {
		t.Helper()
		for _, p := range judged {
			if _, err := os.Stat(p); (err == nil) != want {
				t.Errorf("%s: %s exists %v, want %v", when, filepath.Base(p), err == nil, want)
			}
		}
	}
	exist("after run", true)
	if _, stderr, code := runCLI("train", "--config", cfg, "--out", dir, "--quiet"); code != 0 {
		t.Fatalf("train: exit %d\n%s", code, stderr)
	}
	exist("after train with the config's settings, which dropped the command line's claim", false)
	if _, stderr, code := runCLI("report", dir, "--claim-mu", "100", "--quiet"); code != 0 {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	exist("after report", true)
	if _, stderr, code := runCLI("report", dir, "--quiet"); code != 0 {
		t.Fatalf("report again: exit %d\n%s", code, stderr)
	}
	exist("after report with the recorded settings", true)
}

// TestWritersLockTheDirectory: attack, report and check write into an experiment directory
// and hold it exclusively, as run and train do; analyze holds it shared. Each fails at once
// (exit 1, naming the holder) beside a writer: two reports of different claims at once left a
// findings.json, report.md and report.html of different verdicts, and a report beside `audit
// run` rewrote the directory under it. Analyses run side by side. A writer removes the
// temporary files a killed writer left (a killed attack's .scores.arrow.tmp-*).
func TestWritersLockTheDirectory(t *testing.T) {
	_, dir := smallRun(t)
	held, err := fsutil.LockDir(dir, "audit run (the test's)")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"report", dir},
		{"attack", "--runs", dir},
		{"check", dir},
		{"analyze", dir},
	} {
		_, stderr, code := runCLI(append(args, "--quiet")...)
		if code != 1 || !strings.Contains(stderr, "in use by") || !strings.Contains(stderr, "audit run (the test's)") {
			t.Errorf("%s beside a writer: exit %d, stderr %q; want 1 naming the holder", args[0], code, stderr)
		}
	}
	held.Unlock()

	reader, err := fsutil.LockDirReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI("analyze", dir, "--quiet"); code != 0 {
		t.Errorf("analyze beside another analysis: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runCLI("report", dir, "--quiet"); code != 1 || !strings.Contains(stderr, "in use by") {
		t.Errorf("report beside an analysis: exit %d, stderr %q; want 1", code, stderr)
	}
	reader.Unlock()

	stale := filepath.Join(dir, ".scores.arrow"+".tmp-12345")
	if err := os.WriteFile(stale, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI("report", dir, "--quiet"); code != 0 {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("report left %s, a killed writer's temporary file", stale)
	}
}

// smallRun runs testdata/run_small.yaml into a new experiment directory; it returns the
// config's absolute path and the directory.
func smallRun(t *testing.T, args ...string) (cfg, dir string) {
	t.Helper()
	cfg, err := filepath.Abs(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "exp")
	if _, stderr, code := runCLI(append([]string{"run", "--config", cfg, "--out", dir, "--quiet"}, args...)...); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	return cfg, dir
}

// TestCheckOfUnknownRunsRemoved: a check.json whose runs no config.json describes (the runs and
// config removed by hand, the directory trained again) is removed when training records its
// config: a failed check of other runs made the new runs' headline inconclusive.
func TestCheckOfUnknownRunsRemoved(t *testing.T) {
	cfg, dir := smallRun(t)
	d := expdir.Dir(dir)
	if err := os.WriteFile(d.Check(), []byte(failedCheck), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Config(), d.Runs(), d.Scores()} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := runCLI("train", "--config", cfg, "--out", dir, "--quiet"); code != 0 {
		t.Fatalf("train: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(d.Check()); err == nil {
		t.Error("check.json of runs no config.json described survived a new training")
	}
}

// TestRetrainingRemovesTheCheck: a directory retrained after its runs were removed (what
// results/regenerate.sh does, or a resubmitted array repairing a shard) kept check.json, and a
// failed check of the old runs made the new runs' headline inconclusive (exit 4).
func TestRetrainingRemovesTheCheck(t *testing.T) {
	cfg, dir := smallRun(t)
	d := expdir.Dir(dir)
	if err := os.WriteFile(d.Check(), []byte(failedCheck), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(d.Runs()); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI("run", "--config", cfg, "--out", dir, "--quiet"); code != 0 {
		t.Fatalf("run after the runs were removed: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(d.Check()); err == nil {
		t.Error("check.json of the removed runs survived their retraining")
	}
}

// failedCheck is a check.json whose one exact check failed.
const failedCheck = `{"format": "fedaudit-check/1", "passed": false, "alpha": 0.05, "pairs": 8, "rounds": 3,
 "checks": [{"name": "shared-w0", "observer": "", "statistic": 1, "p_value": 0, "exact": true, "passed": false, "n": 8, "meaning": "a test's"}]}
`
