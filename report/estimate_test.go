package report

import (
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// TestFiguresMarkEstimatedBounds: after T = 1 the convergent bound is an estimate whatever L
// (Finding.ClaimKind "estimate"; docs/theory.md): a certified lower bound
// above it "exceeds estimate" in the verdicts table and the headline counts it as no
// violation. The figures called it "convergent bound" and said a certified lower bound above
// it "contradicts that bound" (results/gradcanary/mlp-sigma0.4: grad-canary above the
// convergent curve at T = 20, "exceeds estimate" in its table). The figures say it is an
// estimate.
func TestFiguresMarkEstimatedBounds(t *testing.T) {
	in := syntheticInput(t) // its loss rows are judged against the convergent bound with estimated L
	estimated := false
	for _, f := range in.Findings {
		estimated = estimated || f.ClaimKind == findings.ClaimEstimate
	}
	if !estimated {
		t.Fatal("the input has no row judged against an estimate: the test shows nothing")
	}
	r, err := build(&in)
	if err != nil {
		t.Fatal(err)
	}
	wantInFigures(t, r, figureTexts{
		muCaption: "convergent bound (and the uploads bound beyond T = 1) is an estimate", muLegend: ">   an estimate beyond T = 1<",
		tradeoffCaption: "convergent bound (and the uploads bound beyond T = 1) is an estimate", tradeoffLegend: "T_G(convergent μ",
	})
	// At T = 1 the convergent bound is one Gaussian mechanism from the public w_0, whatever L:
	// proven, and its legend says nothing of an estimate; later rounds' legends do.
	for _, f := range r.figs {
		marked := strings.Contains(string(r.svgs[f]), "), final model, an estimate")
		switch f.Name {
		case "tradeoff_T1":
			if marked {
				t.Errorf("%s: the convergent bound at T = 1 is marked an estimate", f.Name)
			}
		case "tradeoff_T10", "tradeoff_T100":
			if !marked {
				t.Errorf("%s: legend does not mark the convergent bound an estimate", f.Name)
			}
		}
	}

	// Rows judged against proven bounds only: nothing is marked.
	proven := syntheticInput(t)
	for i := range proven.Findings {
		if f := &proven.Findings[i]; f.ClaimKind == findings.ClaimEstimate {
			f.ClaimKind, f.ClaimSource = findings.ClaimTheory, "convergent bound"
		}
	}
	r, err = build(&proven)
	if err != nil {
		t.Fatal(err)
	}
	wantNowhereInFigures(t, r, "an estimate")
}
