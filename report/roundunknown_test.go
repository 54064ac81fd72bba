package report

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// TestRoundUnknownInTables: the terminal tables of `audit analyze` showed T = 0 for the rows of
// a score file without a round column (and of an outputs table without one), which reads as
// before training. Their T is "-" now, with a line saying the scores give no round; rows with a
// round keep it, and a table without unknown rounds has no such line.
func TestRoundUnknownInTables(t *testing.T) {
	res := analyze(t, 200, 1)
	for _, tc := range []struct {
		name  string
		round int
		cell  string
		line  bool
	}{{"no round", 0, "-", true}, {"round 5", 5, "5", false}} {
		t.Run(tc.name, func(t *testing.T) {
			a := &findings.Analysis{Findings: []findings.Finding{{Attack: "score", Round: tc.round, Result: res, ExactMu: math.NaN(), ReversedMuLower: math.NaN()}},
				Family: findings.Family{Confidence: 0.95, Rows: 1, RowConfidence: 0.95}}
			var b strings.Builder
			if err := WriteAnalysis(&b, a); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			var fields []string
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 2 && f[0] == "score" {
					fields = f
				}
			}
			if len(fields) < 2 || fields[1] != tc.cell {
				t.Errorf("the row's T is %q, want %q:\n%s", fields, tc.cell, out)
			}
			if got := strings.Contains(out, "T -: the scores give no round"); got != tc.line {
				t.Errorf("line on the unknown round: %v, want %v:\n%s", got, tc.line, out)
			}
		})
	}
}

// TestRoundUnknownInComparisons: `audit compare` headed the column of rows without a round
// "T=0" in its attack tables and in the attack-success table, which reads as the model before
// training; it is "T unknown" there now. A training metric's round 0 is the model before
// training and keeps "T=0".
func TestRoundUnknownInComparisons(t *testing.T) {
	exps := successExperiments()
	for i := range exps {
		exps[i].Findings = append(exps[i].Findings, findings.Finding{Attack: "loss", Threat: "final", Round: 0,
			Result: exps[i].Findings[0].Result, ExactMu: math.NaN(), ReversedMuLower: math.NaN()})
		exps[i].Rounds = []findings.RoundSummary{{Round: 0, TestAccuracy: 0.1}, {Round: 5, TestAccuracy: 0.8}}
	}
	var b strings.Builder
	if err := WriteComparison(&b, exps, []string{"auc", "test_accuracy"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	attackTable := out[strings.Index(out, "**loss** (final threat)"):]
	if !strings.Contains(attackTable, "| experiment | T unknown | T=1 | T=5 |") {
		t.Errorf("the attack table's head does not name the unknown round:\n%s", out)
	}
	trainingTable := out[strings.Index(out, "**training**"):strings.Index(out, "**loss**")]
	if !strings.Contains(trainingTable, "| experiment | T=0 | T=5 |") {
		t.Errorf("the training table's head lost T=0:\n%s", out)
	}
	success := attackSuccessTable(exps, SuccessAttacks{})
	if !slices.Contains(success.header, "T unknown") || slices.Contains(success.header, "T=0") {
		t.Errorf("the attack-success table's head: %q", success.header)
	}
}
