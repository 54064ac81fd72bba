package report

import (
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// TestFiguresMarkEstimatedBounds: where the smoothness constant L is assumed or estimated, the
// convergent bound is an estimate (Finding.ClaimKind "estimate"): a certified lower bound
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
		muCaption: "the convergent bound (and the uploads bound beyond T = 1) is an estimate", muLegend: ">   an estimate: L not proven<",
		tradeoffCaption: "the convergent bound (and the uploads bound beyond T = 1) is an estimate", tradeoffLegend: "), final model, an estimate",
	})

	// With a proven L the bounds are bounds and nothing is marked.
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
