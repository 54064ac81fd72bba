package figures

import (
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
)

// TestEpsFigure: a claim in epsilon (DP-FedAvg's accountant) has no line in the mu figure, so a
// violated claim showed in no figure (results/dp-fedavg-miscalibrated). The epsilon figure
// draws each row's certified epsilon at the claim's delta (the verdict's, where it judged one)
// beside the claim, its long label wrapped under the legend entry; without an epsilon claim there
// is no such figure.
func TestEpsFigure(t *testing.T) {
	rounds := []int{1, 2, 5}
	in := muInput(0, rounds, []float64{0.1, 0.3, 0.9}, []float64{1, 2, 3}, []float64{1, 2, 3})
	in.ClaimEps, in.ClaimDelta = 0.5, 1e-5
	in.ClaimLabel = "accountant: dp-fedavg, sampled Gaussian RDP (q = 0.02, z = 1.5, T = 10, Balle conversion)"
	s := in.Series[0]
	for i, T := range rounds {
		eps := []float64{0.15, 0.31, 0.93}[i]
		v := audit.Verdict{Status: audit.Consistent, Checks: []audit.Check{{Quantity: "epsilon", Lower: eps, Claimed: 0.5, Delta: 1e-5}}}
		f := in.Findings[s][T]
		f.Result.Delta, f.Verdict = 1e-3, &v // the analysis's delta differs: the verdict's value is drawn
	}
	m := newModel(in)
	f, ok, err := m.epsFigure()
	if err != nil || !ok {
		t.Fatalf("epsFigure: %v, %v", ok, err)
	}
	texts := svgTexts(t, "eps", f)
	for _, want := range []string{"claim ε = 0.5", "ε at δ = 1e-05", "canary-cos (final)"} {
		if !slices.Contains(texts, want) {
			t.Errorf("figure lacks the text %q: %q", want, texts)
		}
	}
	for _, line := range texts {
		if strings.Contains(line, "Balle") && len([]rune(strings.TrimSpace(line))) > legendLineChars {
			t.Errorf("the claim's label is not wrapped: %q", line)
		}
	}
	xy := m.epsLines(t)
	if want := []float64{0.15, 0.31, 0.93}; len(xy) != 3 || xy[0] != want[0] || xy[2] != want[2] {
		t.Errorf("drawn %v, want the verdicts' %v", xy, want)
	}
	if !strings.Contains(f.Caption, "violates the claim") {
		t.Errorf("caption: %s", f.Caption)
	}
	in.ClaimEps, in.ClaimMu = 0, 1
	if _, ok, _ := newModel(in).epsFigure(); ok {
		t.Error("an epsilon figure without an epsilon claim")
	}
}

// epsLines is what epsFigure draws for the input's one series, in round order.
func (m *model) epsLines(t *testing.T) []float64 {
	t.Helper()
	var out []float64
	for _, T := range m.Rounds {
		if v, ok := m.epsAtClaim(m.Findings[m.Series[0]][T]); ok {
			out = append(out, v)
		}
	}
	return out
}
