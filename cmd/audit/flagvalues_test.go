package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadFlagValuesRefused: flag values that cannot be honoured exit with status 2 and say
// why, before any work: an attack or metric no one has (they printed nothing and exited 0, or
// failed with 1), --threshold-method bonferroni on the coupled pairs of an experiment (refused
// by the analysis with status 1 only after training and scoring), and plan values it ignored
// (--mu -1 printed "no mu known"; --calibrate-time -1s "not calibrated"). compare wrote its
// attack-success table with a misspelt --mi-attack as rows without values.
func TestBadFlagValuesRefused(t *testing.T) {
	// One analyzed experiment directory for the commands that read one.
	cfg, dir := smallRun(t)
	unpaired, err := filepath.Abs(filepath.Join("testdata", "analyze_unpaired.csv"))
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() string { return filepath.Join(t.TempDir(), "new") }
	cases := []struct {
		name string
		args []string
		want string // in stderr
		// untouched: a directory the command must not create.
		untouched string
	}{
		{"attack unknown", []string{"attack", "--runs", dir, "--attacks", "informed-all,lossy"}, `unknown attack "lossy"`, ""},
		{"compare unknown metric", []string{"compare", dir, "--metrics", "mu_lowr"}, `"mu_lowr"`, ""},
		{"compare no metric", []string{"compare", dir, "--metrics", ","}, "--metrics", ""},
		// An empty item inside a list was dropped: --rounds 1,,20 reported two rounds.
		{"bound empty round", []string{"bound", "--algo", "fedavg", "--eta", "0.1", "--L", "1", "--K", "2", "--m", "5", "--sigma", "1", "--clip", "1", "--rounds", "1,,20"}, `--rounds: "" is not`, ""},
		{"attack empty round", []string{"attack", "--runs", dir, "--rounds", "1,"}, `--rounds: "" is not`, ""},
		{"attack empty name", []string{"attack", "--runs", dir, "--attacks", "informed-all,,loss"}, `unknown attack ""`, ""},
		{"selftest empty mu", []string{"selftest", "--mus", "0.5,,1"}, `--mus: "" is not`, ""},
		{"compare unknown mi-attack", []string{"compare", dir, "--out", "$NEW", "--mi-attack", "los"}, `unknown attack "los"`, "$NEW"},
		{"compare unknown inversion-attack", []string{"compare", dir, "--out", "$NEW", "--inversion-attack", "invgrd"}, `unknown attack "invgrd"`, "$NEW"},
		{"run bonferroni", []string{"run", "--config", cfg, "--out", "$NEW", "--threshold-method", "bonferroni"}, "bonferroni", "$NEW"},
		{"demo bonferroni", []string{"demo", "--pairs", "20", "--out", "$NEW", "--threshold-method", "bonferroni"}, "bonferroni", "$NEW"},
		{"analyze dir bonferroni", []string{"analyze", dir, "--threshold-method", "bonferroni"}, "bonferroni", ""},
		{"report bonferroni", []string{"report", dir, "--threshold-method", "bonferroni"}, "bonferroni", ""},
		{"analyze coupled csv bonferroni", []string{"analyze", "--scores", unpaired, "--threshold-method", "bonferroni"}, "bonferroni", ""},
		{"plan negative mu", []string{"plan", "--config", cfg, "--no-calibrate", "--mu", "-1"}, "--mu", ""},
		{"plan NaN mu", []string{"plan", "--config", cfg, "--no-calibrate", "--mu", "NaN"}, "--mu", ""},
		{"plan infinite mu", []string{"plan", "--config", cfg, "--no-calibrate", "--mu", "Inf"}, "--mu", ""},
		{"plan negative calibrate-time", []string{"plan", "--config", cfg, "--calibrate-time", "-1s"}, "--calibrate-time", ""},
		{"plan zero calibrate-time", []string{"plan", "--config", cfg, "--calibrate-time", "0s"}, "--calibrate-time", ""},
		{"cost infinite mu", []string{"cost", "--mu", "Inf"}, "--mu must be a positive finite number", ""},
		// A confidence whose rows' Bonferroni confidence rounds to 1 failed the analysis
		// ("confidence 1 outside (0, 1)", status 1) after training and scoring.
		{"run confidence rounding to 1", []string{"run", "--config", cfg, "--out", "$NEW", "--confidence", "0.9999999999999999"}, "--confidence: need 1 - confidence >= 1e-09", "$NEW"},
		{"analyze dir confidence rounding to 1", []string{"analyze", dir, "--confidence", "0.9999999999999999"}, "--confidence: need 1 - confidence >= 1e-09", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string(nil), c.args...)
			untouched := c.untouched
			if untouched == "$NEW" {
				untouched = fresh()
			}
			for i, a := range args {
				if a == "$NEW" {
					args[i] = untouched
				}
			}
			stdout, stderr, code := runCLI(args...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (usage error); stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout of a refused command:\n%s", stdout)
			}
			if untouched != "" {
				if _, err := os.Stat(untouched); err == nil {
					t.Errorf("%s was created: the refusal came after the work", untouched)
				}
			}
		})
	}
	// The refusals are for what cannot work only: the methods valid for coupled pairs, the
	// attacks and metrics that exist, canary attacks included, still run.
	for _, args := range [][]string{
		{"analyze", dir, "--threshold-method", "dkw", "--quiet"},
		{"analyze", "--scores", unpaired, "--threshold-method", "band", "--quiet"},
		{"compare", dir, "--metrics", "auc,test_accuracy"},
		{"compare", dir, "--out", filepath.Join(t.TempDir(), "cmp"), "--mi-attack", "margin", "--inversion-attack", "inversion", "--quiet"},
		{"attack", "--runs", dir, "--attacks", "informed-all,canary-loss", "--quiet"},
		{"plan", "--config", cfg, "--no-calibrate", "--no-cost", "--mu", "0.5"},
	} {
		if _, stderr, code := runCLI(args...); code != 0 {
			t.Errorf("audit %s: exit %d, want 0; stderr:\n%s", strings.Join(args, " "), code, stderr)
		}
	}
}

// TestCostInterrupted: an interrupted `audit cost --mu` exits with status 130 as every other
// command does; it reported the cancelled context as a usage error (status 2).
func TestCostInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as the signal handler does on SIGINT
	var stdout, stderr bytes.Buffer
	if code := exitCode(&stderr, run(ctx, []string{"cost", "--mu", "1", "--quiet"}, &stdout, &stderr)); code != 130 {
		t.Fatalf("exit %d, want 130 (interrupted); stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "audit: interrupted") {
		t.Errorf("stderr lacks \"audit: interrupted\":\n%s", stderr.String())
	}
}

// TestExperimentDirArguments: a path given where an experiment directory belongs that is none
// (a run or score file, the run files' folder, an empty or missing directory) is a usage error
// naming what to give instead. The stages failed with status 1 on an error about a file inside
// the path ("open X.arrow/outputs.json: not a directory", "open X/runs/runs: no such file").
// `runs inspect` of an experiment directory reads its run files.
func TestExperimentDirArguments(t *testing.T) {
	_, dir := smallRun(t)
	shard := filepath.Join(dir, "runs", "runs-00000-of-00001.arrow")
	empty := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"analyze", shard}, "is a file, not an experiment directory; give the experiment directory that holds it (" + dir + "), or --scores FILE"},
		{[]string{"analyze", filepath.Join(dir, "runs")}, "is the run files' folder of an experiment: give the experiment directory, " + dir},
		{[]string{"analyze", empty}, "is not an experiment directory: it holds no runs/"},
		{[]string{"report", filepath.Join(dir, "runs")}, "the run files' folder"},
		{[]string{"attack", "--runs", filepath.Join(dir, "scores.arrow")}, "is a file, not an experiment directory; give the experiment directory that holds it (" + dir + ")"},
		{[]string{"check", filepath.Join(dir, "runs")}, "the run files' folder"},
		{[]string{"export", "--out", filepath.Join(empty, "x"), filepath.Join(dir, "runs")}, "the run files' folder"},
	}
	for _, c := range cases {
		_, stderr, code := runCLI(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if _, stderr, code := runCLI("analyze", filepath.Join(empty, "nope")); code != 1 || !strings.Contains(stderr, "nope: no such directory") {
		t.Errorf("analyze of a missing directory: exit %d, stderr %q; want 1", code, stderr)
	}
	stdout, stderr, code := runCLI("runs", "inspect", dir)
	if code != 0 || !strings.Contains(stdout, filepath.Join(dir, "runs")) {
		t.Errorf("runs inspect of the experiment directory: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
