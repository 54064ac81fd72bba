package headline

import (
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// TestRoundUnknown: a score file without a round column (and an outputs table without one)
// gives its rows round 0, and the headline named them "score (T = 0)" and "loss (final,
// T = 0)", which reads as before training. They are "T unknown" now, in the sentence and in the
// notes; a row with a round keeps its T.
func TestRoundUnknown(t *testing.T) {
	row := func(attack, threat string, round int, mu float64) findings.Finding {
		return findings.Finding{Attack: attack, Threat: threat, Round: round, ExactMu: math.NaN(), ReversedMuLower: math.NaN(),
			Result: &audit.Result{MuLower: mu, AUC: 0.8}, Unpaired: []int64{7}}
	}
	fam := findings.Family{Confidence: 0.95, Rows: 1}
	for _, tc := range []struct {
		f          findings.Finding
		name, lost string
	}{
		{row("score", "", 0, 0.8), "score (T unknown)", "T = 0"},
		{row("loss", "final", 0, 0.5), "loss (final, T unknown)", "T = 0"},
		{row("loss", "final", 3, 0.5), "loss (final, T = 3)", "unknown"},
	} {
		h := Summarize([]findings.Finding{tc.f}, fam, nil)
		if !strings.Contains(h.Text, "strongest attack, "+tc.name+", certifies") || strings.Contains(h.Text, tc.lost) {
			t.Errorf("headline %q, want the row named %q", h.Text, tc.name)
		}
		if len(h.Notes) != 1 || !strings.HasPrefix(h.Notes[0], tc.name+": 1 coupled scores without a partner") {
			t.Errorf("notes %q, want the unpaired note on %q", h.Notes, tc.name)
		}
	}
}

// TestNoLossDeniedWhereAnEstimateRowCertifiesOne: the verdict rests on the rows judged against
// a claim; where none of them certifies a loss but a row judged against an estimate (the
// convergent bound after T = 1) does, the headline said "no attack certifies any privacy loss"
// beside a row that certified mu 1.24.
func TestNoLossDeniedWhereAnEstimateRowCertifiesOne(t *testing.T) {
	judged := func(attack string, round int, mu float64, kind string) findings.Finding {
		v := audit.Judge(&audit.Result{MuLower: mu}, audit.Claim{Mu: 10})
		return findings.Finding{Attack: attack, Threat: "final", Round: round, ExactMu: math.NaN(), ReversedMuLower: math.NaN(),
			Result: &audit.Result{MuLower: mu, AUC: 0.7}, Verdict: &v, ClaimKind: kind, ClaimSource: "convergent bound"}
	}
	fam := findings.Family{Confidence: 0.95, Rows: 2}
	h := Summarize([]findings.Finding{judged("loss", 1, 0, findings.ClaimTheory), judged("grad-align", 3, 1.24, findings.ClaimEstimate)}, fam, nil)
	if h.Status != findings.StatusConsistent || strings.Contains(h.Text, "no attack certifies any privacy loss") ||
		!strings.Contains(h.Text, "the strongest row, grad-align (final, T = 3), judged against an estimate, certifies mu >= 1.24") {
		t.Errorf("headline %q (%s)", h.Text, h.Status)
	}
	h = Summarize([]findings.Finding{judged("loss", 1, 0, findings.ClaimTheory), judged("grad-align", 3, 0, findings.ClaimEstimate)}, fam, nil)
	if !strings.Contains(h.Text, "no attack certifies any privacy loss") {
		t.Errorf("with nothing certified anywhere: %q", h.Text)
	}
}

// TestLargestBoundBesideTheNearest: the headline names the row nearest its claim, which decides
// the verdict, and called it "the strongest attack"; where a later checkpoint certified more
// against a larger bound (mu >= 3.073 at T = 300 beside 2.522, 0.82 of its bound, at T = 200),
// a reader took 2.522 for the audit's largest bound. The sentence now says which row it names
// and gives the largest too; a row judged against an estimate is not a candidate.
func TestLargestBoundBesideTheNearest(t *testing.T) {
	row := func(round int, mu, bound float64, kind string) findings.Finding {
		v := audit.Judge(&audit.Result{MuLower: mu}, audit.Claim{Mu: bound})
		return findings.Finding{Attack: "informed-all", Threat: "all-iterates", Round: round, ExactMu: math.NaN(), ReversedMuLower: math.NaN(),
			Result: &audit.Result{MuLower: mu, AUC: 0.9}, Verdict: &v, ClaimKind: kind, ClaimSource: "composition bound"}
	}
	fam := findings.Family{Confidence: 0.95, Rows: 3}
	h := Summarize([]findings.Finding{
		row(200, 2.522, 3.07, findings.ClaimTheory),
		row(300, 3.073, 3.77, findings.ClaimTheory),
		row(400, 9, 20, findings.ClaimEstimate),
	}, fam, nil)
	want := "the row nearest its claim, informed-all (all-iterates, T = 200), certifies mu >= 2.522, 0.82 of the composition bound mu = 3.07; " +
		"the largest, informed-all (all-iterates, T = 300), certifies mu >= 3.073, 0.81 of the composition bound mu = 3.77."
	if !strings.HasSuffix(h.Text, want) || h.Round != 200 {
		t.Errorf("headline %q (row %d), want it to end %q", h.Text, h.Round, want)
	}
	for _, other := range []float64{2.5, 2.52249} { // less, and more only past the printed digits
		h = Summarize([]findings.Finding{row(200, 2.522, 3.07, findings.ClaimTheory), row(300, other, 3.77, findings.ClaimTheory)}, fam, nil)
		if strings.Contains(h.Text, "largest") {
			t.Errorf("headline %q names a largest row where the nearest certifies as much", h.Text)
		}
	}
}

// TestReversedScoresInconclusive: scores written the wrong way round (a loss as the score) gave
// CONSISTENT and exit 0, "no attack certifies any privacy loss", with the direction in a note.
// The headline is inconclusive when every judged row is reversed, or when a judged row read the
// other way gives a mu above its claim; one reversed row among others below its claim, a row
// judged against an estimate, and a violated headline are left as they were.
func TestReversedScoresInconclusive(t *testing.T) {
	row := func(attack string, mu, auc, reversed float64, kind string) findings.Finding {
		v := audit.Judge(&audit.Result{MuLower: mu}, audit.Claim{Mu: 1})
		return findings.Finding{Attack: attack, Threat: "final", Round: 3, ExactMu: math.NaN(), ReversedMuLower: reversed,
			Result: &audit.Result{MuLower: mu, AUC: auc}, Verdict: &v, ClaimKind: kind, ClaimSource: "config claim"}
	}
	nan := math.NaN
	epsRow := func(attack string, auc, reversedMu, reversedEps float64) findings.Finding {
		v := audit.Verdict{Status: audit.Consistent, Confidence: 0.95, Checks: []audit.Check{{Quantity: "epsilon", Claimed: 1, Delta: 1e-5}}}
		return findings.Finding{Attack: attack, Threat: "final", Round: 3, ExactMu: math.NaN(), ReversedMuLower: reversedMu, ReversedEpsLower: reversedEps,
			Result: &audit.Result{AUC: auc}, Verdict: &v, ClaimKind: findings.ClaimDeployment, ClaimSource: "config claim"}
	}
	for _, tc := range []struct {
		name string
		rows []findings.Finding
		want string // the headline's start
	}{
		{"the only row reversed", []findings.Finding{row("loss", 0, 0.3, 0.4, findings.ClaimDeployment)},
			"INCONCLUSIVE: the only row judged against a claim, loss (final, T = 3), scores worse than guessing in its stated direction (AUC 0.300 < 0.5)"},
		{"every row reversed", []findings.Finding{row("loss", 0, 0.3, 0.4, findings.ClaimDeployment), row("margin", 0, 0.4, 0.1, findings.ClaimDeployment)},
			"INCONCLUSIVE: each of the 2 rows judged against a claim scores worse than guessing"},
		{"reversed above the claim", []findings.Finding{row("loss", 0, 0.1, 1.7, findings.ClaimDeployment), row("margin", 0.3, 0.7, nan(), findings.ClaimDeployment)},
			"INCONCLUSIVE: the scores of loss (final, T = 3) read the other way round (AUC 0.100 < 0.5) would give mu >= 1.7, above the config claim mu = 1"},
		{"one reversed below the claim", []findings.Finding{row("loss", 0, 0.3, 0.4, findings.ClaimDeployment), row("margin", 0.3, 0.7, nan(), findings.ClaimDeployment)},
			"CONSISTENT"},
		{"reversed estimate row", []findings.Finding{row("loss", 0, 0.1, 1.7, findings.ClaimEstimate), row("margin", 0.3, 0.7, nan(), findings.ClaimDeployment)},
			"CONSISTENT"},
		{"violated stays", []findings.Finding{row("loss", 0, 0.1, 1.7, findings.ClaimDeployment), row("margin", 1.3, 0.9, nan(), findings.ClaimDeployment)},
			"VIOLATED"},
		// An epsilon claim is compared with the reversed epsilon at its delta.
		{"reversed eps above the claim", []findings.Finding{epsRow("loss", 0.1, 1.7, 3.3), epsRow("margin", 0.7, nan(), 0)},
			"INCONCLUSIVE: the scores of loss (final, T = 3) read the other way round (AUC 0.100 < 0.5) would give epsilon >= 3.3 at delta = 1e-05, above the config claim epsilon = 1 at delta = 1e-05"},
		{"reversed eps below the claim", []findings.Finding{epsRow("loss", 0.3, 0.5, 0.6), epsRow("margin", 0.7, nan(), 0)},
			"CONSISTENT"},
	} {
		h := Summarize(tc.rows, findings.Family{Confidence: 0.95, Rows: len(tc.rows)}, nil)
		Reversed(&h, tc.rows)
		if !strings.HasPrefix(h.Text, tc.want) {
			t.Errorf("%s: headline %q, want it to begin %q", tc.name, h.Text, tc.want)
		}
		inconclusive := strings.HasPrefix(tc.want, "INCONCLUSIVE")
		if inconclusive != (h.Status == findings.StatusInconclusive) || inconclusive && (h.Tightness != nil || !strings.HasPrefix(h.Notes[0], "what the rows say in the stated direction: CONSISTENT")) {
			t.Errorf("%s: status %s, tightness %v, notes %q", tc.name, h.Status, h.Tightness, h.Notes)
		}
	}
}

// TestCeilingNote: a headline row whose scores tell every run apart certifies the most its runs
// can (audit.MuCeiling), which a reader takes for a measurement of the deployment unless told;
// the note says so and counts the other rows at their ceilings. Overlapping scores give no note.
func TestCeilingNote(t *testing.T) {
	row := func(attack string, round int, gap float64, n0, n1 int) findings.Finding {
		c, cPrime := make([]float64, n0), make([]float64, n1)
		for i := range c {
			c[i] = gap + float64(i%7)
		}
		for i := range cPrime {
			cPrime[i] = float64(i % 5)
		}
		r, err := audit.Analyze(c, cPrime, audit.Options{Method: audit.DKWBand, Delta: 1e-5})
		if err != nil {
			t.Fatal(err)
		}
		return findings.Finding{Attack: attack, Threat: "final", Round: round, ExactMu: math.NaN(), ReversedMuLower: math.NaN(), Result: r}
	}
	fam := findings.Family{Confidence: 0.95, Rows: 3}
	oneError := row("loss", 5, 10, 300, 300)
	{
		c, cPrime := make([]float64, 300), make([]float64, 300)
		for i := range c {
			c[i], cPrime[i] = 10+float64(i%7), float64(i%5)
		}
		c[0] = 0
		r, err := audit.Analyze(c, cPrime, audit.Options{Method: audit.DKWBand, Delta: 1e-5})
		if err != nil {
			t.Fatal(err)
		}
		ceiling, _ := audit.MuCeiling(300, 300, audit.Options{Method: audit.DKWBand, Delta: 1e-5})
		if !(r.MuLower > 0.8*ceiling && r.MuLower < ceiling) {
			t.Fatalf("one error certifies %v against the ceiling %v: the case shows nothing", r.MuLower, ceiling)
		}
		oneError.Result = r
	}
	for _, tc := range []struct {
		name string
		fs   []findings.Finding
		want string // "" for no note
	}{
		{"separated", []findings.Finding{row("loss", 5, 10, 100, 100), row("margin", 5, 10, 100, 100), row("lira", 5, 10, 100, 100)},
			"loss (final, T = 5) certifies the most that 100 runs of each world can at its confidence (mu >= "},
		{"one other", []findings.Finding{row("loss", 5, 10, 100, 100), row("margin", 5, 2, 100, 100), row("lira", 5, 10, 100, 100)},
			"; so does 1 other row. Such a bound measures the number of runs"},
		{"unequal", []findings.Finding{row("loss", 5, 10, 40, 100), row("margin", 5, 2, 40, 100)},
			"certifies the most that 40 runs of world C and 100 of world C' can at its confidence"},
		{"overlapping", []findings.Finding{row("loss", 5, 2, 100, 100), row("margin", 5, 1, 100, 100)}, ""},
		// One run of C among those of C': close below the ceiling, not at it.
		{"one error", []findings.Finding{oneError}, ""},
	} {
		h := Summarize(tc.fs, fam, nil)
		var note string
		for _, n := range h.Notes {
			if strings.Contains(n, "certifies the most") {
				note = n
			}
		}
		if (tc.want == "") != (note == "") || !strings.Contains(note, tc.want) {
			t.Errorf("%s: ceiling note %q, want one containing %q", tc.name, note, tc.want)
		}
	}
}

// TestExactMuInTheHeadline: where the headline's row knows the mechanism's exact mu (the
// quadratic instance), the headline says what share of it the audit certified; "0.01 of the
// composition bound mu = 404" alone hid that the audit reached 0.92 of the truth.
func TestExactMuInTheHeadline(t *testing.T) {
	v := audit.Judge(&audit.Result{MuLower: 4.6031}, audit.Claim{Mu: 404})
	f := findings.Finding{Attack: "informed-all", Threat: "all-iterates", Round: 300, ExactMu: 4.9994, ReversedMuLower: math.NaN(),
		Result: &audit.Result{MuLower: 4.6031, AUC: 0.99}, Verdict: &v, ClaimKind: findings.ClaimTheory, ClaimSource: "composition bound"}
	h := Summarize([]findings.Finding{f}, findings.Family{Confidence: 0.95, Rows: 1}, nil)
	if want := "; that row's mu >= 4.603 is 0.92 of its exact mu = 4.999."; !strings.HasSuffix(h.Text, want) {
		t.Errorf("headline %q, want it to end %q", h.Text, want)
	}
	f.ExactMu = math.NaN()
	if h := Summarize([]findings.Finding{f}, findings.Family{Confidence: 0.95, Rows: 1}, nil); strings.Contains(h.Text, "exact") {
		t.Errorf("without an exact mu: %q", h.Text)
	}
}

// TestPowerNote: where no row judged against the deployment's claim could certify more than the
// claim with its runs (its ceiling), CONSISTENT is vacuous: one run of each world gave
// "CONSISTENT ... no attack certifies any privacy loss", exit 0, and a CI gate passed. The note
// says so, for mu and epsilon claims; rows judged against the theory, or with the power to
// exceed the claim, give none.
func TestPowerNote(t *testing.T) {
	row := func(n int, claim audit.Claim, kind string) findings.Finding {
		c, cPrime := make([]float64, n), make([]float64, n)
		for i := range c {
			c[i], cPrime[i] = float64(i%3), float64(i%3) // nothing to tell apart
		}
		r, err := audit.Analyze(c, cPrime, audit.Options{Method: audit.DKWBand, Delta: 1e-5})
		if err != nil {
			t.Fatal(err)
		}
		v := audit.Judge(r, claim)
		return findings.Finding{Attack: "score", Threat: "final", Round: 3, ExactMu: math.NaN(), ReversedMuLower: math.NaN(),
			Result: r, Verdict: &v, ClaimKind: kind}
	}
	fam := findings.Family{Confidence: 0.95, Rows: 1}
	for _, tc := range []struct {
		name string
		f    findings.Finding
		want string // "" for no note
	}{
		{"one run a world", row(1, audit.Claim{Mu: 1}, findings.ClaimDeployment), "could have certified more than mu = 0 with its runs"},
		{"200 runs, claim mu 10", row(200, audit.Claim{Mu: 10}, findings.ClaimDeployment), "not above the claim mu = 10: whatever the deployment"},
		{"epsilon", row(50, audit.Claim{Epsilon: 40, Delta: 1e-5}, ""), "more than epsilon = "},
		{"power enough", row(200, audit.Claim{Mu: 1}, findings.ClaimDeployment), ""},
		{"theory", row(200, audit.Claim{Mu: 10}, findings.ClaimTheory), ""},
	} {
		h := Summarize([]findings.Finding{tc.f}, fam, nil)
		var note string
		for _, n := range h.Notes {
			if strings.Contains(n, "could not have found the claim violated") {
				note = n
			}
		}
		if h.Status != findings.StatusConsistent || (tc.want == "") != (note == "") || !strings.Contains(note, tc.want) {
			t.Errorf("%s: %s, note %q, want one containing %q", tc.name, h.Status, note, tc.want)
		}
	}
}
