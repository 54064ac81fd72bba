// Package results holds the reference experiments: configs, their generated reports, and a
// test that the numbers quoted in README.md are the ones the reports show.
package results

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type finding struct {
	Attack        string   `json:"attack"`
	Threat        string   `json:"threat"`
	Round         int      `json:"round"`
	MuLower       float64  `json:"mu_lower"`
	EpsLower      float64  `json:"eps_lower"`
	AUC           float64  `json:"auc"`
	MuExact       *float64 `json:"mu_exact"`
	MuConvergent  *float64 `json:"mu_convergent"`
	MuComposition *float64 `json:"mu_composition"`
	MuUploads     *float64 `json:"mu_uploads"`
	Verdict       *string  `json:"verdict"`
}

// findingsFile is findings.json: the current object form, or the bare array of older files.
type findingsFile struct {
	Format   string    `json:"format"`
	Findings []finding `json:"findings"`
}

func decodeFindings(raw []byte) ([]finding, error) {
	var fs []finding
	if json.Unmarshal(raw, &fs) == nil {
		return fs, nil
	}
	var file findingsFile
	if err := json.Unmarshal(raw, &file); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(file.Format, "fedaudit-findings/") {
		return nil, fmt.Errorf("not a findings file (format %q)", file.Format)
	}
	return file.Findings, nil
}

// TestReadmeNumbersMatchReports reads the key-numbers table of README.md (between the
// key-numbers markers) and checks every cell against the experiment's findings.json, at the
// precision the README prints. A regenerated experiment whose numbers moved fails here until
// the README is updated.
func TestReadmeNumbersMatchReports(t *testing.T) {
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.Contains(line, "key-numbers:begin"):
			in = true
			continue
		case strings.Contains(line, "key-numbers:end"):
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| experiment") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) != 9 {
			t.Fatalf("README row %q: %d cells, want 9", line, len(cells))
		}
		rows++
		checkRow(t, cells)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows == 0 {
		t.Fatal("no key-numbers rows in README.md")
	}
}

// checkRow checks: experiment | attack | threat | T | AUC | mu lower | mu exact | bound | verdict.
func checkRow(t *testing.T, c []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.FromSlash(c[0]), "findings.json"))
	if err != nil {
		t.Errorf("%s: %v (regenerate with results/regenerate.sh)", c[0], err)
		return
	}
	fs, err := decodeFindings(raw)
	if err != nil {
		t.Fatalf("%s: %v", c[0], err)
	}
	T, err := strconv.Atoi(c[3])
	if err != nil {
		t.Fatalf("row %v: T %q", c, c[3])
	}
	for _, f := range fs {
		if f.Attack != c[1] || f.Threat != c[2] || f.Round != T {
			continue
		}
		same := func(what, cell string, v *float64) {
			got := "-"
			if v != nil {
				got = fmt.Sprintf(decimalsOf(cell), *v)
			}
			if got != cell {
				t.Errorf("%s %s %s T=%d: README says %s = %s, the report has %s", c[0], c[1], c[2], T, what, cell, got)
			}
		}
		same("AUC", c[4], &f.AUC)
		same("mu lower", c[5], &f.MuLower)
		same("mu exact", c[6], f.MuExact)
		bound := f.MuComposition
		switch f.Threat {
		case "final":
			bound = f.MuConvergent
		case "uploads":
			bound = f.MuUploads
		}
		same("bound", c[7], bound)
		verdict := "-"
		if f.Verdict != nil {
			verdict = *f.Verdict
		}
		if verdict != c[8] {
			t.Errorf("%s %s T=%d: README verdict %s, report %s", c[0], c[1], T, c[8], verdict)
		}
		return
	}
	t.Errorf("%s: no finding for %s (%s) at T=%d", c[0], c[1], c[2], T)
}

// decimalsOf returns the format that prints a number with as many decimals as cell has.
func decimalsOf(cell string) string {
	if i := strings.IndexByte(cell, '.'); i >= 0 {
		return fmt.Sprintf("%%.%df", len(cell)-i-1)
	}
	return "%.0f"
}
