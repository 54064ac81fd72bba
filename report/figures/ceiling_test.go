package figures

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/theory"
)

// muInput is a report of one final-model attack with the given certified lower bounds, the
// theory's bounds (convergent, composition) and the claim at each T.
func muInput(claim float64, rounds []int, lower, conv, comp []float64) *Input {
	s := Series{Attack: "canary-cos", Threat: "final"}
	in := &Input{Rounds: rounds, Series: []Series{s}, ClaimMu: claim,
		Findings: map[Series]map[int]*findings.Finding{s: {}},
		Theory:   map[int]*theory.Bound{}, Stats: map[int]*findings.RoundSummary{},
		Level: "95%", LevelShort: "95%"}
	for i, T := range rounds {
		in.Findings[s][T] = &findings.Finding{Attack: s.Attack, Threat: s.Threat, Round: T,
			Result: &audit.Result{MuLower: lower[i], N0: 150, N1: 150}}
		in.Theory[T] = &theory.Bound{T: T, Mu: conv[i], MuComposition: comp[i]}
	}
	return in
}

// svgTexts are the texts of an SVG figure.
// FEDAUDIT_FIGURES=DIR keeps the figure as DIR/NAME.svg.
func svgTexts(t *testing.T, name string, f *Figure) []string {
	t.Helper()
	b, err := f.SVG()
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("FEDAUDIT_FIGURES"); dir != "" {
		_ = os.WriteFile(dir+"/"+name+".svg", b, 0o644)
	}
	var out []string
	for _, m := range regexp.MustCompile(`>([^<>]*)</text>`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestMuAxisCoversTheData: a composition bound of 8.66e4 beside certified lower bounds of
// 0.2 to 0.6 and a claim of 1 stretched the mu axis from 0.1 to 1e5 and squashed the bounds
// the attacks found into its bottom decade. The axis now stops two decades above the larger
// of the highest certified bound and the claim (no tick label above 100 here); the theory's
// curves above that are cut at the top, marked by arrows, and the legend and caption say so.
// A curve below the top keeps its points: here the convergent bound at T = 1.
func TestMuAxisCoversTheData(t *testing.T) {
	rounds := []int{1, 3, 6}
	in := muInput(1, rounds, []float64{0.18, 0.23, 0.62}, []float64{2, 4.4e4, 5e4}, []float64{2, 5e4, 8.66e4})
	f, ok, err := newModel(in).muFigure()
	if err != nil || !ok {
		t.Fatalf("muFigure: %v, %v", ok, err)
	}
	texts := svgTexts(t, "mu_clipped", f)
	for _, s := range texts {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 100 {
			t.Errorf("the mu axis is labelled %s: it reaches far above the certified bounds (at most 0.62) and the claim (1)", s)
		}
	}
	joined := strings.Join(texts, "\n")
	for _, want := range []string{"off the top, up to 8.66e+04 at T = 6", "off the top, up to 5e+04 at T = 6", "100"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the figure lacks the text %q; texts:\n%s", want, joined)
		}
	}
	if !strings.Contains(f.Caption, "It stops at 100, 100 times the larger of the highest certified lower bound and the claim") {
		t.Errorf("the caption does not say where the axis stops: %s", f.Caption)
	}

	// Without a claim the highest certified bound sets the top.
	in = muInput(0, rounds, []float64{0.18, 0.23, 0.62}, []float64{2, 4.4e4, 5e4}, []float64{2, 5e4, 8.66e4})
	f, _, _ = newModel(in).muFigure()
	if !strings.Contains(f.Caption, "It stops at 62,") {
		t.Errorf("without a claim the axis should stop at 100 x 0.62: %s", f.Caption)
	}
}

// TestMuAxisKeepsNearbyTheory: theory curves within two decades of the certified bounds and
// the claim (the demo's composition bound of 16 beside bounds up to 1.2) are drawn whole, as
// are curves when nothing was certified and nothing claimed (there is no data to make room
// for).
func TestMuAxisKeepsNearbyTheory(t *testing.T) {
	rounds := []int{1, 2, 5, 10, 20}
	for name, in := range map[string]*Input{
		"demo":     muInput(0, rounds, []float64{0, 0.2, 0.53, 0.81, 1.19}, []float64{3.6, 5, 7.7, 10, 11.4}, []float64{3.6, 5.1, 8, 11.3, 16}),
		"no data":  muInput(0, rounds, []float64{0, 0, 0, 0, 0}, []float64{3.6, 50, 770, 1e4, 1.1e5}, []float64{3.6, 51, 800, 1.1e4, 1.6e5}),
		"in range": muInput(0.5, rounds, []float64{0.1, 0.2, 0.3, 0.4, 0.5}, []float64{3, 5, 10, 20, 40}, []float64{3, 5, 10, 30, 50}),
		// Within three decades (results/band-quadratic: a composition bound of 404 beside
		// 3.88 was cut at 388, hiding 4% of it).
		"three decades": muInput(0, rounds, []float64{1, 2, 3, 3.5, 3.88}, []float64{10, 20, 40, 80, 105}, []float64{40, 80, 160, 300, 404}),
	} {
		f, ok, err := newModel(in).muFigure()
		if err != nil || !ok {
			t.Fatalf("%s: muFigure: %v, %v", name, ok, err)
		}
		if strings.Contains(strings.Join(svgTexts(t, "mu_"+strings.ReplaceAll(name, " ", "_"), f), "\n"), "off the top") || strings.Contains(f.Caption, "It stops at") {
			t.Errorf("%s: a curve is cut at the top: %s", name, f.Caption)
		}
	}
}
