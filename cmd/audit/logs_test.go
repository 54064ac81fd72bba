package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAttackLogsOnlyAskedFor: the attack stage names attacks it skips only when they were asked
// for. run_small.yaml lists its attacks: none of the others is mentioned. Without a list (the
// default set), the attacks its run files cannot support get one line together.
func TestAttackLogsOnlyAskedFor(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "run_small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	listed := string(raw)
	i := strings.Index(listed, "\naudit:")
	if i < 0 {
		t.Fatal("run_small.yaml has no audit section")
	}
	unlisted := listed[:i+1]
	for _, tc := range []struct {
		name, config string
		notRun       int // lines naming attacks not run
	}{
		{"listed", listed, 0},
		{"default", unlisted, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "c.yaml")
			if err := os.WriteFile(cfg, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			// stderr is a buffer, no terminal: the log lines are still written.
			_, stderr, code := runCLI("run", "--config", cfg, "--out", filepath.Join(dir, "out"))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, "attacks: scoring [") {
				t.Errorf("no log lines on a non-terminal stderr:\n%s", stderr)
			}
			// The long stages say how far they are: each attack as it completes, the analysis
			// how many rows it certifies.
			if !strings.Contains(stderr, " done: ") || !strings.Contains(stderr, "rows of the audit (attack, threat model, round) to certify") {
				t.Errorf("no progress of the attack stage and the analysis:\n%s", stderr)
			}
			if n := strings.Count(stderr, "attacks: skipped"); n != 0 {
				t.Errorf("%d 'attacks: skipped' lines for attacks nobody asked for:\n%s", n, stderr)
			}
			if n := strings.Count(stderr, "attacks: not run"); n != tc.notRun {
				t.Errorf("%d 'attacks: not run' lines, want %d:\n%s", n, tc.notRun, stderr)
			}
		})
	}
}

// TestQuietSilencesLogsOnly: --quiet silences the log lines and progress of stderr; the
// command's output, the verdict headline first, stays on stdout. The flag's description and
// the README say exactly that.
func TestQuietSilencesLogsOnly(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, code := runCLI("run", "--quiet", "--config", filepath.Join("testdata", "run_small.yaml"), "--out", out)
	if code != 0 || stderr != "" {
		t.Fatalf("run --quiet: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "CONSISTENT: ") {
		t.Errorf("run --quiet printed no headline on stdout:\n%s", stdout)
	}
	help, _, _ := runCLI("run", "--help")
	m := regexp.MustCompile(`(?m)^  --quiet\n\s+(.*)$`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("run --help lists no --quiet:\n%s", help)
	}
	usage := m[1]
	for _, want := range []string{"log lines", "progress", "stdout"} {
		if !strings.Contains(usage, want) {
			t.Errorf("--quiet is described as %q, which does not mention %q", usage, want)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(readme)), " ")
	if !strings.Contains(flat, usage) {
		t.Errorf("README does not say what --quiet silences in the flag's words: %q", usage)
	}
	// Logs reach pipes and files (batch jobs keep them); only progress bars need a terminal.
	if strings.Contains(flat, "quiet when stderr is not a terminal") {
		t.Error("README says the logs are quiet when stderr is not a terminal; only the progress bars are")
	}
	// The first `go run` compiles everything first, for minutes on a small machine.
	if !strings.Contains(flat, "5 min 48 s") {
		t.Error("README's quickstart does not say how long the first build takes")
	}
}
