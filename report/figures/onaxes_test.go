package figures

import (
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/theory"
)

// TestOnTheAxesMark: a T_G curve that stays below the floor lo of the log views at every
// alpha they show is invisible there (its line is clipped at the axis), and the legend marks it
// "on the axes", as the caption promises ("a curve marked "on the axes" stays below lo even
// there"). The mark was given only below lo/10, so a convergent bound of mu = 6.5 at 500 pairs
// (T_G(6.5)(0.001) = 3.2e-4 < 0.001) was listed as a curve the zoom shows, and drawn nowhere in it.
func TestOnTheAxesMark(t *testing.T) {
	s := Series{Attack: "loss", Threat: "final"}
	in := &Input{Rounds: []int{1}, Series: []Series{s},
		Findings: map[Series]map[int]*findings.Finding{s: {1: {Attack: "loss", Threat: "final", Round: 1,
			Result: &audit.Result{N0: 500, N1: 500}}}},
		Theory: map[int]*theory.Bound{1: {T: 1, Mu: 6.5, MuComposition: 1}}}
	m := newModel(in)
	lo := m.logFloor(1)
	if lo != 1e-3 {
		t.Fatalf("log floor %v at 500 pairs, want 0.001", lo)
	}
	for _, a := range logGrid(lo, 1, 50) {
		if b := audit.TradeoffGDP(6.5, a); b >= lo {
			t.Fatalf("T_G(6.5)(%v) = %v is inside the zoom: the test shows nothing", a, b)
		}
	}
	f, err := m.tradeoffFigure(1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.SVG()
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	if !strings.Contains(svg, "T_G(convergent μ = 6.5), final model, on the axes") {
		t.Error("T_G(6.5) stays below the zoom's floor but is not marked \"on the axes\"")
	}
	if !strings.Contains(svg, "T_G(composition μ = 1), every iterate<") {
		t.Error("T_G(1), inside the zoom, is not listed as an ordinary curve")
	}
}
