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

	"github.com/fedaudit/fedaudit/internal/numfmt"
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
	MuHeuristic   *float64 `json:"mu_heuristic"`
	// ReversedMuLower is what a row whose scores point the wrong way certifies read the other
	// way round (the report judges nothing from it).
	ReversedMuLower *float64 `json:"reversed_mu_lower"`
	Verdict         *string  `json:"verdict"`
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
//
// The rounding is the reports' (see checkRow): the certified lower bound ("mu lower") is rounded
// down at the printed digit (numfmt.LowerF), so that the README never states more than was
// certified; the other columns are rounded to nearest.
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
		same := func(what, cell string, v *float64, format func(float64, string) string) {
			got := "-"
			if v != nil {
				got = format(*v, cell)
			}
			if got != cell {
				t.Errorf("%s %s %s T=%d: README says %s = %s, the report has %s", c[0], c[1], c[2], T, what, cell, got)
			}
		}
		// AUC is a point statistic and mu exact a computed value: to nearest. The certified
		// lower bound rounds down (a README "0.810" for 0.80996 states more than was certified).
		same("AUC", c[4], &f.AUC, nearest)
		same("mu lower", c[5], &f.MuLower, lower)
		same("mu exact", c[6], f.MuExact, nearest)
		bound := f.MuComposition
		switch f.Threat {
		case "final":
			bound = f.MuConvergent
		case "uploads":
			bound = f.MuUploads
		}
		// The theory's bound (convergent, composition, uploads) is a computed value, an estimate
		// after T = 1: to nearest, as the reports print it.
		same("bound", c[7], bound, nearest)
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
	return fmt.Sprintf("%%.%df", decimals(cell))
}

// decimals is the number of digits cell prints after its decimal point.
func decimals(cell string) int {
	if i := strings.IndexByte(cell, '.'); i >= 0 {
		return len(cell) - i - 1
	}
	return 0
}

// nearest prints v as cell prints its number, rounded to nearest: for point statistics (AUC,
// accuracy), exact and realized values, estimates, the theory's bounds and the accountants'
// claims, which the reports print that way too.
func nearest(v float64, cell string) string {
	return fmt.Sprintf(decimalsOf(cell), v)
}

// lower prints v as cell prints its number, rounded toward minus infinity (numfmt.LowerF, as
// the reports print certified bounds): for certified lower bounds (mu lower, eps lower) and
// their ratios to an exact or estimated mu, so that the README never quotes more than the
// audit certified.
func lower(v float64, cell string) string {
	return numfmt.LowerF(v, decimals(cell))
}

// costSim is results/cost/sim-*.json (audit cost --mu X --json).
type costSim struct {
	Mu   float64 `json:"mu"`
	Rows []struct {
		Method    string  `json:"method"`
		Trainings int     `json:"trainings"`
		Canaries  int     `json:"canaries"`
		Reached   bool    `json:"reached"`
		Median    float64 `json:"median"`
	} `json:"rows"`
}

// costMeasured is results/cost/<experiment>.json (audit cost --config F --json).
type costMeasured struct {
	Measurements []struct {
		Canaries int `json:"canaries"`
		Seeds    int `json:"seeds"`
		Rows     []struct {
			Attack    string   `json:"attack"`
			Round     int      `json:"round"`
			MuLower   float64  `json:"mu_lower"`
			Truth     *float64 `json:"truth"`
			TruthKind string   `json:"truth_kind"`
		} `json:"rows"`
	} `json:"measurements"`
}

// TestReadmeCostNumbers checks the cost table of README.md (between the cost-numbers markers)
// against results/cost/*.json: a simulated row (file sim-*) by its method, a measured row
// ("ATTACK, T = N") by its canary count.
//
//	| cost file | method | canaries/run | trainings | certified mu (median) | truth |
func TestReadmeCostNumbers(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.Contains(line, "cost-numbers:begin"):
			in = true
			continue
		case strings.Contains(line, "cost-numbers:end"):
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| cost file") {
			continue
		}
		c := strings.Split(strings.Trim(line, "|"), "|")
		for i := range c {
			c[i] = strings.TrimSpace(c[i])
		}
		if len(c) != 6 {
			t.Fatalf("README cost row %q: %d cells, want 6", line, len(c))
		}
		rows++
		file, err := os.ReadFile(filepath.Join("cost", c[0]+".json"))
		if err != nil {
			t.Errorf("%s: %v (regenerate with results/regenerate.sh)", c[0], err)
			continue
		}
		if strings.HasPrefix(c[0], "sim-") {
			checkCostSim(t, c, file)
		} else {
			checkCostMeasured(t, c, file)
		}
	}
	if rows == 0 {
		t.Fatal("no cost-numbers rows in README.md")
	}
}

func checkCostSim(t *testing.T, c []string, raw []byte) {
	t.Helper()
	var sim costSim
	if err := json.Unmarshal(raw, &sim); err != nil {
		t.Fatalf("%s: %v", c[0], err)
	}
	for _, r := range sim.Rows {
		if r.Method != c[1] {
			continue
		}
		canaries, trainings := "-", strconv.Itoa(r.Trainings)
		if r.Canaries > 0 {
			canaries = strconv.Itoa(r.Canaries)
		}
		if !r.Reached {
			trainings = "not reached"
		}
		// The median over simulated audits (an odd number of them) is one audit's certified
		// bound: rounded down. The truth is the Gaussian mechanism's mu: to nearest.
		got := []string{canaries, trainings, lower(r.Median, c[4]), nearest(sim.Mu, c[5])}
		for i, g := range got {
			if g != c[2+i] {
				t.Errorf("%s %s: README has %v, the cost table %v", c[0], c[1], c[2:], got)
				break
			}
		}
		return
	}
	t.Errorf("%s: no method %q", c[0], c[1])
}

func checkCostMeasured(t *testing.T, c []string, raw []byte) {
	t.Helper()
	var m costMeasured
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", c[0], err)
	}
	var attack string
	var round int
	if _, err := fmt.Sscanf(strings.Replace(c[1], ",", " ", 1), "%s T = %d", &attack, &round); err != nil {
		t.Fatalf("%s: method %q is not \"ATTACK, T = N\"", c[0], c[1])
	}
	k, err := strconv.Atoi(c[2])
	if err != nil {
		t.Fatalf("%s: canaries %q", c[0], c[2])
	}
	if c[3] != "1" {
		t.Errorf("%s: a one-run audit costs 1 training per audit, README says %s", c[0], c[3])
	}
	for _, ms := range m.Measurements {
		if ms.Canaries != k {
			continue
		}
		for _, r := range ms.Rows {
			if r.Attack != attack || r.Round != round {
				continue
			}
			// The truth (exact or realized mu) to nearest; the median certified bound (one
			// training's, over an odd number of them) rounded down.
			truth := "-"
			if r.Truth != nil {
				truth = nearest(*r.Truth, strings.Fields(c[5])[0]) + " " + r.TruthKind
			}
			if got := lower(r.MuLower, c[4]); got != c[4] || truth != c[5] {
				t.Errorf("%s %s with %d canaries: README says %s (truth %s), the measurement %s (truth %s)", c[0], c[1], k, c[4], c[5], got, truth)
			}
			return
		}
	}
	t.Errorf("%s: no measurement of %s at T = %d with %d canaries", c[0], attack, round, k)
}
