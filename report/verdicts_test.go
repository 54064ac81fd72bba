package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// TestVerdictTableShowsComparedEpsilon: issue 24 item 4. An epsilon claim is judged on the
// certified eps lower bound at the claim's delta, which the verdicts table did not show (it had
// mu lower beside "Claimed eps"). Every row of an epsilon check shows the number it compared.
func TestVerdictTableShowsComparedEpsilon(t *testing.T) {
	in := syntheticInput(t)
	var verdicts *table
	for _, tb := range newModel(&in).tables() {
		if tb.name == "verdicts" {
			verdicts = tb
		}
	}
	if verdicts == nil {
		t.Fatal("no verdicts table")
	}
	col := slices.Index(verdicts.header, "eps lower")
	if col < 0 {
		t.Fatalf("verdicts header %q has no eps lower column", verdicts.header)
	}
	checked := 0
	for _, f := range in.Findings {
		if f.Verdict == nil {
			continue
		}
		for _, c := range f.Verdict.Checks {
			if c.Quantity != "epsilon" {
				continue
			}
			checked++
			if !slices.ContainsFunc(verdicts.rows, func(r []string) bool {
				return r[0] == f.Attack && r[1] == f.Threat && r[2] == strconv.Itoa(f.Round) && r[col] == num(c.Lower)
			}) {
				t.Errorf("%s (%s, T = %d): no row shows the compared eps lower %s", f.Attack, f.Threat, f.Round, num(c.Lower))
			}
		}
	}
	if checked == 0 {
		t.Fatal("the input has no epsilon check: the test shows nothing")
	}
}

// TestCarriedBoundsShowTheirOwn: an all-iterates row's bound carried from an earlier checkpoint
// (0.5431 at T = 2 and 4, where their own scores certify 0.516 and 0.529) was shown without a
// mark; the attacks table gives each row's own bound beside the one it states.
func TestCarriedBoundsShowTheirOwn(t *testing.T) {
	in := syntheticInput(t)
	f := &in.Findings[len(in.Findings)-1]
	carried := *f.Result
	carried.MuLower = f.Result.MuLower + 1
	f.AtT = &findings.Bounds{MuLower: f.Result.MuLower, EpsLower: f.Result.EpsLower}
	f.Result = &carried
	var attacks *table
	for _, tb := range newModel(&in).tables() {
		if tb.name == "attacks" {
			attacks = tb
		}
	}
	stated, own := slices.Index(attacks.header, "mu lower"), slices.Index(attacks.header, "mu lower (T alone)")
	if stated < 0 || own < 0 {
		t.Fatalf("attacks header %q", attacks.header)
	}
	for _, r := range attacks.rows {
		carriedRow := r[0] == f.Attack && r[1] == f.Threat && r[2] == strconv.Itoa(f.Round)
		switch {
		case carriedRow && (r[stated] != lower(carried.MuLower) || r[own] != lower(f.AtT.MuLower)):
			t.Errorf("carried row: mu lower %s, T alone %s; want %s and %s", r[stated], r[own], lower(carried.MuLower), lower(f.AtT.MuLower))
		case !carriedRow && r[stated] != r[own]:
			t.Errorf("row %v: its own bound differs from the one it states", r[:3])
		}
	}
}

// TestManyVerdictsFolded: 200 checkpoints gave a verdicts table of 400 rows before any figure;
// beyond maxOpenVerdictRows rows it is folded under a summary that counts the statuses, and a
// short table stays open.
func TestManyVerdictsFolded(t *testing.T) {
	in := syntheticInput(t)
	if _, files := writeReport(t, in, Options{}); strings.Contains(string(files["report.html"]), `id="more-verdicts"`) {
		t.Error("a verdicts table of 6 rows is folded")
	}
	res := analyze(t, 50, 0.5)
	for T := 1000; T < 1000+maxOpenVerdictRows; T++ {
		v := audit.Judge(res, audit.Claim{Mu: 5})
		in.Findings = append(in.Findings, findings.Finding{Attack: "margin", Threat: "final", Round: T, Result: res,
			ExactMu: math.NaN(), ReversedMuLower: math.NaN(), Verdict: &v, ClaimSource: "config claim", ClaimKind: findings.ClaimDeployment})
	}
	_, files := writeReport(t, in, Options{})
	page := string(files["report.html"])
	i, j := strings.Index(page, `<section id="verdicts">`), strings.Index(page, `id="more-verdicts"`)
	if i < 0 || j < i {
		t.Fatalf("the verdicts table of %d rows is not folded in its section", len(in.Findings))
	}
	// The synthetic rows: 4 consistent, 1 above an estimate, 1 not judged.
	if !strings.Contains(page, fmt.Sprintf("the verdicts of all %d rows (consistent %d, exceeds estimate 1, not judged 1)", len(in.Findings), maxOpenVerdictRows+4)) {
		t.Errorf("the fold's summary does not count the statuses: %s", page[j:min(len(page), j+400)])
	}
}
