package main

import (
	"bytes"
	"context"
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
