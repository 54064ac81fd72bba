package findings

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/theory"
)

// sample is an analysis with every kind of row findings.json can hold: judged and unjudged,
// an estimate kept and one exceeded, reversed scores, the split method's seed, unpaired scores, an uploads row with
// only the composition bound, exact mu, metrics, and text that HTML escaping would mangle.
func sample() *Analysis {
	nan := math.NaN()
	res := func(method audit.ThresholdMethod, mu float64) *audit.Result {
		return &audit.Result{N0: 40, N1: 40, AUC: 0.75, TPRAt1e3: 0.025, TPRAt1e2: 0.1, BestBalancedAccuracy: 0.7,
			MuLower: mu, EpsLower: 0.5, MuEstimate: 1.25, Delta: 1e-5, Confidence: 0.99, Method: method, Paired: true}
	}
	bound := &theory.Bound{T: 3, Mu: 0.5, MuComposition: 2, MuUploads: nan, MuUploadsComposition: 2.5, MuHeuristic: 1.75}
	violated := audit.Verdict{Status: audit.Violated, Tightness: 1.5}
	consistent := audit.Verdict{Status: audit.Consistent, Tightness: nan}
	tight := 0.75
	return &Analysis{
		Family: Family{Confidence: 0.95, Rows: 3, RowConfidence: 1 - 0.05/3, Correction: "bonferroni over rows"},
		Headline: Headline{Status: StatusViolated, Text: "VIOLATED: loss (final, T = 3) certifies mu >= 0.75 & more", Attack: "loss",
			Threat: "final", Round: 3, MuLower: 0.75, EpsLower: 0.5, Claim: "config claim mu = 0.5", Tightness: &tight,
			Confidence: 0.95, Rows: 3, Notes: []string{"a <note>"}},
		Findings: []Finding{
			{Attack: "loss", Threat: "final", Round: 3, Result: res(audit.Bonferroni, 0.75), Theory: bound,
				ClaimSource: "config claim", ClaimKind: ClaimDeployment, Verdict: &violated, ExactMu: 0.625,
				Metrics: map[string]float64{"psnr": 12.5}, ReversedMuLower: nan},
			{Attack: "informed-all", Threat: "uploads", Round: 3, Result: res(audit.Split, 0.25), Theory: bound,
				ClaimSource: "convergent bound with estimated L", ClaimKind: ClaimEstimate, Verdict: &consistent,
				ExactMu: nan, ReversedMuLower: 0.125, Unpaired: []int64{-1, -1}, Seed: 42},
			{Attack: "margin", Threat: "final", Round: 1, Result: res(audit.DKW, 0), ExactMu: nan, ReversedMuLower: nan},
			{Attack: "grad-canary", Threat: "final", Round: 3, Result: res(audit.DKW, 0.75), Theory: bound,
				ClaimSource: "convergent bound with given L", ClaimKind: ClaimEstimate, Verdict: &violated,
				ExactMu: nan, ReversedMuLower: nan},
		},
	}
}

func encode(t *testing.T, a *Analysis) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := a.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// findings.json is pinned byte for byte: its layout is a public format ("fedaudit-findings/3")
// that other tools read. Regenerate with FINDINGS_GOLDEN=1 only for a deliberate format change.
func TestAnalysisGolden(t *testing.T) {
	got := encode(t, sample())
	const golden = "testdata/findings.json"
	if os.Getenv("FINDINGS_GOLDEN") != "" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("findings.json changed:\n%s\nwant\n%s", got, want)
	}
	for _, s := range []string{`"mu_exact": null`, `"tightness": null`, `"split_seed": 42`, `"unpaired": 2`,
		`"mu_uploads": 2.5`, `"mu_heuristic": 1.75`, `"reversed_mu_lower": 0.125`, `& more`, `a <note>`,
		`"verdict": "exceeds estimate"`} {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("findings.json lacks %s", s)
		}
	}
}

// Decoding findings.json and writing it again gives the same bytes: the one type holds
// everything the file says.
func TestRoundTrip(t *testing.T) {
	first := encode(t, sample())
	dec, err := Decode(first)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Headline == nil || dec.Family == nil || len(dec.Findings) != 4 {
		t.Fatalf("decoded %+v", dec)
	}
	f := dec.Findings[0]
	if f.ExactMu != 0.625 || f.Theory == nil || f.Theory.Mu != 0.5 || f.Verdict.Status != audit.Violated || f.ClaimKind != ClaimDeployment {
		t.Errorf("first row decoded as %+v", f)
	}
	if g := dec.Findings[2]; !math.IsNaN(g.ExactMu) || g.Theory != nil || g.Verdict != nil || g.Reversed() {
		t.Errorf("unjudged row decoded as %+v", g)
	}
	if e := dec.Findings[3]; e.Verdict == nil || e.Verdict.Status != audit.Violated || e.ClaimKind != ClaimEstimate {
		t.Errorf("row above an estimate decoded as %+v", e)
	}
	again := encode(t, &Analysis{Findings: dec.Findings, Family: *dec.Family, Headline: *dec.Headline})
	if !bytes.Equal(first, again) {
		t.Fatalf("round trip changed the file:\n%s\nwant\n%s", again, first)
	}
}

// Older versions wrote the bare array of rows; it still reads, without headline or family.
// Format 2 wrote "violated" for a row above an estimate: it reads as format 3's "exceeds
// estimate". A file of another format is refused with the names.
func TestDecodeVersions(t *testing.T) {
	old := `[{"attack": "loss", "threat": "final", "round": 2, "n0": 5, "n1": 5, "auc": 0.5, "mu_lower": 0,
		"method": "bonferroni", "mu_exact": null, "mu_convergent": 1.5, "mu_composition": null, "verdict": null}]`
	dec, err := Decode([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if dec.Headline != nil || dec.Family != nil || len(dec.Findings) != 1 || dec.Findings[0].Theory.Mu != 1.5 ||
		!math.IsNaN(dec.Findings[0].Theory.MuComposition) {
		t.Fatalf("old array decoded as %+v", dec)
	}
	v2 := `{"format": "fedaudit-findings/2", "findings": [{"attack": "grad-canary", "threat": "final", "round": 3,
		"mu_lower": 0.75, "method": "dkw", "mu_convergent": 0.5, "verdict": "violated", "claim_source": "convergent bound with given L",
		"claim_kind": "estimate", "tightness": 1.5}]}`
	dec, err = Decode([]byte(v2))
	if err != nil {
		t.Fatal(err)
	}
	if e := dec.Findings[0]; e.Verdict == nil || e.Verdict.Status != audit.Violated || e.ClaimKind != ClaimEstimate {
		t.Fatalf("format 2's row above an estimate decoded as %+v", e)
	}
	if raw, err := json.Marshal(dec.Findings[0]); err != nil || !bytes.Contains(raw, []byte(`"verdict":"exceeds estimate"`)) {
		t.Errorf("format 2's row above an estimate written again as %s (%v)", raw, err)
	}
	for _, tc := range []struct{ name, raw, want string }{
		{"future format", `{"format": "fedaudit-findings/4", "findings": []}`, `"fedaudit-findings/4"`},
		{"not json", `{"format": `, "unexpected end"},
		{"bad row", `[{"round": "two"}]`, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode([]byte(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// rounds.json writes NaN as null and reads null back as NaN.
func TestRoundsJSON(t *testing.T) {
	nan := math.NaN()
	sums := []RoundSummary{
		{Round: 1, Runs: 4, TrainLoss: 0.5, TestAccuracy: nan, RealizedMu: 1.25, Sensitivity: nan, MaxSensitivity: nan},
		{Round: 3, Runs: 4, Diverged: 1, TrainLoss: 0.25, TestAccuracy: 0.75, RealizedMu: nan, Sensitivity: 0.5, MaxSensitivity: 0.75},
	}
	raw, err := MarshalRounds(sums)
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "round": 1,
    "runs": 4,
    "diverged": 0,
    "train_loss": 0.5,
    "test_accuracy": null,
    "realized_mu": 1.25,
    "sensitivity": null,
    "max_sensitivity": null
  },
  {
    "round": 3,
    "runs": 4,
    "diverged": 1,
    "train_loss": 0.25,
    "test_accuracy": 0.75,
    "realized_mu": null,
    "sensitivity": 0.5,
    "max_sensitivity": 0.75
  }
]`
	if string(raw) != want {
		t.Fatalf("rounds.json:\n%s\nwant\n%s", raw, want)
	}
	back, err := UnmarshalRounds(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || !math.IsNaN(back[0].TestAccuracy) || back[1].Diverged != 1 || back[1].MaxSensitivity != 0.75 {
		t.Fatalf("decoded %+v", back)
	}
	if empty, _ := MarshalRounds(nil); string(empty) != "[]" {
		t.Errorf("no rounds: %s", empty)
	}
}

// Decode reads files from anywhere: it must never panic, and what it accepts must encode.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	if err := sample().WriteJSON(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`[{"attack": "a", "unpaired": 3, "verdict": "violated"}]`))
	f.Add([]byte(`{"format": "fedaudit-findings/2", "findings": null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		dec, err := Decode(raw)
		if err != nil {
			return
		}
		if _, err := json.Marshal(dec.Findings); err != nil {
			t.Fatalf("decoded findings do not encode: %v", err)
		}
	})
}

// FuzzUnmarshalCheck: DIR/check.json is read back from disk, where it may be damaged or edited;
// decoding it never panics, and what decodes encodes again.
func FuzzUnmarshalCheck(f *testing.F) {
	good, err := MarshalCheck(&CheckReport{Format: CheckFormat, Alpha: 0.05, Family: 1, Threshold: 0.05, Pairs: 2, Rounds: 3,
		Checks:  []CheckResult{{Name: "noise-scale", Observer: "upload", Tensor: "layer 1 bias", Statistic: math.Inf(1), PValue: 0.5, Passed: true}},
		Skipped: []CheckSkipped{{Check: "participation", Why: "no records"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":"fedaudit-check/1","checks":[{"statistic":null}]}`))
	f.Add([]byte(`{"format":"other"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := UnmarshalCheck(raw)
		if err != nil {
			return
		}
		if _, err := MarshalCheck(r); err != nil {
			t.Fatalf("a decoded report does not encode: %v", err)
		}
		_ = r.HeadlineNote()
		_ = r.Failed()
	})
}
