package report

import (
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// TestClaimScopeInFigures: a claim about the global models is judged on the final and
// all-iterates rows only; the uploads rows keep the uploads bound (docs/statistics.md). The mu
// figure drew the claim with the caption "a certified lower bound above it violates the claim",
// so an uploads row above the claim read as a violation while the verdicts table says
// consistent (audit demo --claim-mu 0.45: informed-upload certifies 0.497 and 0.581 at T = 1
// and 2). The figures name the rows the claim is judged on when it is not all of them.
func TestClaimScopeInFigures(t *testing.T) {
	in := syntheticInput(t)
	for i := range in.Findings {
		f := &in.Findings[i]
		if f.Threat != "final" {
			continue // uploads rows: judged against the theory's bound
		}
		v := audit.Judge(f.Result, audit.Claim{Mu: in.ClaimMu})
		f.Verdict, f.ClaimSource, f.ClaimKind = &v, "test claim", findings.ClaimDeployment
	}
	// The uploads row at T = 100 certifies more than the claim and is consistent with its bound.
	above := false
	for _, f := range in.Findings {
		if f.Threat == "uploads" && f.Result.MuLower > in.ClaimMu && f.Verdict.Status == audit.Consistent {
			above = true
		}
	}
	if !above {
		t.Fatal("no uploads row above the claim: the test shows nothing")
	}
	r, err := build(&in)
	if err != nil {
		t.Fatal(err)
	}
	wantInFigures(t, r, figureTexts{
		muCaption: "claim, judged on the final rows only", muLegend: "claim μ = 2 (test claim; on final rows only)",
		tradeoffCaption: "The claim is judged on the final rows only", tradeoffLegend: "T_G(claim μ = 2), final rows only",
	})

	// A claim judged on every threat model of the report names none.
	all := syntheticInput(t)
	for i := range all.Findings {
		f := &all.Findings[i]
		v := audit.Judge(f.Result, audit.Claim{Mu: all.ClaimMu})
		f.Verdict, f.ClaimSource, f.ClaimKind = &v, "test claim", findings.ClaimDeployment
	}
	r, err = build(&all)
	if err != nil {
		t.Fatal(err)
	}
	wantNowhereInFigures(t, r, "rows only")
}

// figureTexts are what the mu figure and every trade-off figure must say, in their captions
// and in their SVG (the legends).
type figureTexts struct{ muCaption, muLegend, tradeoffCaption, tradeoffLegend string }

func wantInFigures(t *testing.T, r *rendered, want figureTexts) {
	t.Helper()
	for _, f := range r.figs {
		caption, legend := want.tradeoffCaption, want.tradeoffLegend
		switch {
		case f.Name == "mu_vs_T":
			caption, legend = want.muCaption, want.muLegend
		case !strings.HasPrefix(f.Name, "tradeoff_"):
			continue
		}
		if !strings.Contains(f.Caption, caption) {
			t.Errorf("%s: caption lacks %q: %s", f.Name, caption, f.Caption)
		}
		if !strings.Contains(string(r.svgs[f]), legend) {
			t.Errorf("%s: legend lacks %q", f.Name, legend)
		}
	}
}

// wantNowhereInFigures checks that no figure's caption or SVG holds text.
func wantNowhereInFigures(t *testing.T, r *rendered, text string) {
	t.Helper()
	for _, f := range r.figs {
		if strings.Contains(f.Caption, text) || strings.Contains(string(r.svgs[f]), text) {
			t.Errorf("%s says %q: %s", f.Name, text, f.Caption)
		}
	}
}
