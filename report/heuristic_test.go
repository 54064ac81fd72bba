package report

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/theory"
)

// The heuristic cells: a Noisy-FedAvg final-model row shows the heuristic's mu and the
// certified mu over it; a DP-FedAvg row, whose heuristic is an epsilon, shows "eps X" and the
// compared eps lower over it; a row without a heuristic shows "-" in both.
func TestHeuristicCells(t *testing.T) {
	muRow := findings.Finding{Threat: runs.ThreatFinal, Result: &audit.Result{MuLower: 0.5, EpsLower: 1},
		Theory: &theory.Bound{MuHeuristic: 2, Mu: math.NaN()}}
	epsRow := findings.Finding{Threat: runs.ThreatFinal, Result: &audit.Result{MuLower: 0.5, EpsLower: 1}, EpsHeuristic: 4}
	none := findings.Finding{Threat: runs.ThreatAllIterates, Result: &audit.Result{MuLower: 0.5, EpsLower: 1}}
	for _, c := range []struct {
		name        string
		f           findings.Finding
		cell, ratio string
	}{
		{"mu", muRow, "2", "0.25"},
		{"eps", epsRow, "eps 4", "0.25"},
		{"none", none, "-", "-"},
	} {
		if got := heuristicCell(&c.f, num); got != c.cell {
			t.Errorf("%s: heuristic cell %q, want %q", c.name, got, c.cell)
		}
		if got := ofHeuristic(&c.f); got != c.ratio {
			t.Errorf("%s: lower / heuristic %q, want %q", c.name, got, c.ratio)
		}
	}
}
