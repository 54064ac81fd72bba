package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// runCLI runs the program with args and returns its stdout, stderr and exit status.
func runCLI(args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
	return stdout.String(), stderr.String(), code
}

// TestVersionFlag: `audit --version` (and -version) print what `audit version` prints.
func TestVersionFlag(t *testing.T) {
	want, _, code := runCLI("version")
	if code != 0 || !strings.Contains(want, version) {
		t.Fatalf("audit version = %q, exit %d", want, code)
	}
	for _, arg := range []string{"--version", "-version"} {
		out, errOut, code := runCLI(arg)
		if out != want || errOut != "" || code != 0 {
			t.Errorf("audit %s = %q, stderr %q, exit %d; want %q, exit 0", arg, out, errOut, code, want)
		}
	}
}

// TestHelpHelp: help takes --help like every command, and prints its own usage.
func TestHelpHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}, {"--help", "--help"}} {
		out, errOut, code := runCLI(args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: audit help [COMMAND]") {
			t.Errorf("audit %s = %q, stderr %q, exit %d", strings.Join(args, " "), out, errOut, code)
		}
	}
}

// TestFlagListsDoubleDash: every command's flag list spells its flags as --name, as the
// usage lines, messages and docs do; none as -name.
func TestFlagListsDoubleDash(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	single := regexp.MustCompile(`(?m)^  -[a-z]`)
	double := regexp.MustCompile(`(?m)^  --quiet$`)
	for _, n := range names {
		out, _, code := runCLI(n, "--help")
		if code != 0 {
			t.Errorf("audit %s --help: exit %d", n, code)
			continue
		}
		if m := single.FindString(out); m != "" {
			t.Errorf("audit %s --help lists a flag with one dash: %q", n, m)
		}
		if !double.MatchString(out) {
			t.Errorf("audit %s --help does not list --quiet:\n%s", n, out)
		}
	}
}

// TestSeedFlagSaysWhatItSeeds: --seed of demo, run and analyze seeds the split method only,
// never training, and its description says so.
func TestSeedFlagSaysWhatItSeeds(t *testing.T) {
	for _, n := range []string{"demo", "run", "analyze"} {
		out, _, _ := runCLI(n, "--help")
		i := strings.Index(out, "  --seed")
		if i < 0 {
			t.Fatalf("audit %s --help has no --seed:\n%s", n, out)
		}
		desc := out[i:]
		if j := strings.Index(desc[2:], "\n  -"); j >= 0 {
			desc = desc[:j+2]
		}
		for _, want := range []string{"--threshold-method split", "not the training"} {
			if !strings.Contains(desc, want) {
				t.Errorf("audit %s: --seed is described as %q, which does not say %q", n, desc, want)
			}
		}
	}
}

// Like mistakes exit alike: a file named on the command line that cannot be read is a failure
// (exit 1), whatever the flag (import's --manifest exited 2 where run's --config exited 1); a
// round that is not a checkpoint, and a score file with a pair twice in one world, are the
// command line's to fix (exit 2; they exited 1).
func TestLikeMistakesExitAlike(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runCLI("train", "--quiet", "--config", "testdata/run_small.yaml", "--out", dir); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	dup := filepath.Join(t.TempDir(), "dup.csv")
	if err := os.WriteFile(dup, []byte("pair_id,world,score\n0,C,1\n0,C,2\n0,Cprime,0\n1,C,3\n1,Cprime,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"missing config", []string{"run", "--config", missing + ".yaml", "--out", t.TempDir()}, 1, "no such file"},
		{"missing manifest", []string{"import", "--manifest", missing + ".csv", "--config", "testdata/run_small.yaml", "--out", t.TempDir()}, 1, "no such file"},
		{"missing outputs", []string{"import", "--outputs", missing + ".csv", "--out", t.TempDir()}, 1, "import: --outputs " + missing + ".csv: no such file or directory"},
		{"missing score file", []string{"analyze", "--scores", missing + ".csv"}, 1, "no such file"},
		{"round not a checkpoint", []string{"attack", "--quiet", "--runs", dir, "--rounds", "7"}, 2, "round 7 is not a checkpoint of the runs"},
		{"pair twice in a world", []string{"analyze", "--scores", dup}, 2, "pair id 0 occurs twice in world C"},
		// Refused before the runs are scored, not at the rename after every attack ran.
		{"attack --out a directory", []string{"attack", "--quiet", "--runs", dir, "--out", t.TempDir()}, 2, "is a directory: give the score file to write"},
		{"run --out a file", []string{"run", "--quiet", "--config", "testdata/run_small.yaml", "--out", dup}, 2, dup + " is a file: the output is an experiment directory"},
		{"compare --out a file", []string{"compare", "../../results/demo", "--out", dup}, 2, "compare: --out " + dup + " is a file"},
	} {
		_, errOut, code := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, %q; want exit %d saying %q", tc.name, code, errOut, tc.code, tc.says)
		}
	}
}

// A usage error points at the command's --help; a mistake in an input file's contents names its
// line and does not (the help does not fix a row).
func TestHelpHintOnUsageErrorsOnly(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("world,score\n0,1\n2,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI("analyze", "--scores", bad)
	if code != 2 || !strings.Contains(errOut, "line 3: world 2") || strings.Contains(errOut, "--help") {
		t.Errorf("a bad row: exit %d, %q", code, errOut)
	}
	_, errOut, code = runCLI("run", "--config", "testdata/run_small.yaml")
	if code != 2 || !strings.HasSuffix(strings.TrimSpace(errOut), "(see 'audit run --help')") {
		t.Errorf("a missing flag: exit %d, %q", code, errOut)
	}
}
