package experiment

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// TestReportShowsHeadline: the report of a directory opens with the headline of its analysis
// (red for the config's violated claim, green for a claim it does not contradict), draws the
// claimed mu, and states the family-wise confidence the analysis computed.
func TestReportShowsHeadline(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Run(ctx, leakyConfig(), dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	page := read("report.html")
	for _, s := range []string{`<section id="headline" class="headline violated">`, `<span class="badge">VIOLATED</span>`,
		"The verdicts hold jointly at 95% confidence over " + strconv.Itoa(a.Family.Rows) + " rows", "μ = 0.3 (config claim)"} {
		if !strings.Contains(page, s) {
			t.Errorf("report.html lacks %q", s)
		}
	}
	if i, j := strings.Index(page, `id="headline"`), strings.Index(page, `id="setup"`); i < 0 || i > j {
		t.Error("headline is not the report's first section")
	}
	if !strings.Contains(read("figures/mu_vs_T.svg"), "claim μ = 0.3 (config claim)") {
		t.Error("mu_vs_T.svg does not draw the config claim")
	}

	over, err := AnalyzeDir(ctx, dir, AnalyzeOptions{Claim: audit.Claim{Mu: 50}, ClaimSource: "--claim-mu claim"}, AttackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Report(ctx, dir, over, ReportOptions{}, false); err != nil {
		t.Fatal(err)
	}
	page = read("report.html")
	for _, s := range []string{`class="headline consistent"`, "μ = 50 (--claim-mu claim)", "replaces the configuration&#39;s claim_mu 0.3"} {
		if !strings.Contains(page, s) {
			t.Errorf("report.html after the override lacks %q", s)
		}
	}
}

func TestClaimed(t *testing.T) {
	judged := func(mu float64, kind, source string) findings.Finding {
		v := audit.Judge(&audit.Result{MuLower: 0.1}, audit.Claim{Mu: mu})
		return findings.Finding{Verdict: &v, ClaimKind: kind, ClaimSource: source}
	}
	eps := audit.Judge(&audit.Result{EpsLower: 0.1}, audit.Claim{Epsilon: 2, Delta: 1e-5})
	epsAt := func(delta float64) findings.Finding {
		v := audit.Judge(&audit.Result{EpsLower: 0.1}, audit.Claim{Epsilon: 2, Delta: delta})
		return findings.Finding{Verdict: &v, ClaimKind: findings.ClaimDeployment, ClaimSource: "accountant: rdp"}
	}
	for _, tc := range []struct {
		name              string
		fs                []findings.Finding
		mu, eps, delta    float64
		source, epsSource string
	}{
		{"none", nil, 0, 0, 0, "", ""},
		{"config claim", []findings.Finding{judged(0.3, findings.ClaimDeployment, "config claim"), judged(0.3, findings.ClaimDeployment, "config claim")}, 0.3, 0, 0, "config claim", ""},
		{"theory is no claim", []findings.Finding{judged(2, findings.ClaimTheory, "composition bound"), judged(1, findings.ClaimEstimate, "convergent bound with given L")}, 0, 0, 0, "", ""},
		{"claim beside theory", []findings.Finding{judged(2, findings.ClaimTheory, "composition bound"), judged(0.5, findings.ClaimDeployment, "--claim-mu claim")}, 0.5, 0, 0, "--claim-mu claim", ""},
		{"per-T accountant", []findings.Finding{judged(0.5, findings.ClaimDeployment, "accountant: rdp"), judged(0.9, findings.ClaimDeployment, "accountant: rdp")}, 0, 0, 0, "", ""},
		{"epsilon claim", []findings.Finding{{Verdict: &eps, ClaimKind: findings.ClaimDeployment, ClaimSource: "config claim"}}, 0, 2, 1e-5, "", "config claim"},
		{"epsilon at two deltas", []findings.Finding{epsAt(1e-5), epsAt(1e-6)}, 0, 0, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu, _, source := claimed(tc.fs, "mu")
			if mu != tc.mu || source != tc.source {
				t.Errorf("claimed mu = %v %q, want %v %q", mu, source, tc.mu, tc.source)
			}
			eps, delta, source := claimed(tc.fs, "epsilon")
			if eps != tc.eps || delta != tc.delta || source != tc.epsSource {
				t.Errorf("claimed epsilon = %v at %v %q, want %v at %v %q", eps, delta, source, tc.eps, tc.delta, tc.epsSource)
			}
		})
	}
}
