package report

import (
	"bytes"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
)

// TestHeadlineFirst wants the headline as the page's first section, coloured by its status,
// with the family-wise statement and the notes, and the raw configuration folded away in a
// <details> after every result section.
func TestHeadlineFirst(t *testing.T) {
	for _, tc := range []struct {
		status, class, badge, family string
	}{
		{findings.StatusViolated, "headline violated", "VIOLATED", "The verdicts hold jointly at 95% confidence over 6 rows"},
		{findings.StatusConsistent, "headline consistent", "CONSISTENT", "The verdicts hold jointly at 95% confidence over 6 rows"},
		{findings.StatusNoClaim, "headline noclaim", "NO CLAIM", "the certified bounds hold jointly at 95% confidence over 6 rows"},
	} {
		t.Run(tc.status, func(t *testing.T) {
			in := syntheticInput(t)
			in.Headline.Status = tc.status
			in.Headline.Text = tc.badge + ": the sentence."
			_, files := writeReport(t, in, Options{})
			page := files["report.html"]
			els := htmlElements(t, page)
			var sections []string
			for _, e := range els {
				if strings.HasPrefix(e, "section#") {
					sections = append(sections, strings.TrimPrefix(e, "section#"))
				}
			}
			if len(sections) == 0 || sections[0] != "headline" {
				t.Fatalf("sections %v: the headline must come first", sections)
			}
			for _, s := range []string{`class="` + tc.class + `"`, `<span class="badge">` + tc.badge + `</span> the sentence.`,
				tc.family, "an estimate, not a claim of the deployment"} {
				if !bytes.Contains(page, []byte(s)) {
					t.Errorf("page lacks %q", s)
				}
			}
			det := slices.Index(els, "details#configuration")
			cfg := slices.Index(els, "pre#config")
			last := slices.Index(els, "section#"+sections[len(sections)-1])
			if det < 0 || cfg < det || det < last {
				t.Errorf("configuration not folded at the end: details at %d, pre at %d, last section at %d", det, cfg, last)
			}
			md := string(files["report.md"])
			if !strings.HasPrefix(md, "# Synthetic audit | test\n\n**"+tc.badge+"**: the sentence.") {
				t.Errorf("report.md does not start with the headline:\n%.300s", md)
			}
			if i, j := strings.Index(md, "## Configuration"), strings.Index(md, "## Theory, sensitivity"); i < j {
				t.Errorf("report.md: configuration (%d) before the last result section (%d)", i, j)
			}
		})
	}
}

// TestNoHeadline: without a headline (a report of foreign findings) the page has none and
// still states the rows' own level.
func TestNoHeadline(t *testing.T) {
	in := syntheticInput(t)
	in.Headline = nil
	_, files := writeReport(t, in, Options{})
	if bytes.Contains(files["report.html"], []byte(`id="headline"`)) {
		t.Error("headline section without a headline")
	}
	if !bytes.Contains(files["report.md"], []byte("**Confidence level**: 95%\n")) {
		t.Error("confidence level without a headline is not the rows' own")
	}
}

func TestVerdictStatus(t *testing.T) {
	res := &audit.Result{MuLower: 1}
	violated := audit.Judge(res, audit.Claim{Mu: 0.5})
	consistent := audit.Judge(res, audit.Claim{Mu: 2})
	for _, tc := range []struct {
		name string
		f    findings.Finding
		want string
	}{
		{"no verdict", findings.Finding{}, "not judged"},
		{"claim violated", findings.Finding{Verdict: &violated, ClaimKind: findings.ClaimDeployment, ClaimSource: "config claim"}, "violated"},
		{"bound violated", findings.Finding{Verdict: &violated, ClaimKind: findings.ClaimTheory, ClaimSource: "composition bound"}, "violated"},
		{"kind unset", findings.Finding{Verdict: &violated, ClaimSource: "--claim-mu"}, "violated"},
		{"estimate exceeded", findings.Finding{Verdict: &violated, ClaimKind: findings.ClaimEstimate, ClaimSource: "convergent bound with estimated L"},
			"exceeds estimate (of the convergent bound with estimated L)"},
		{"estimate not exceeded", findings.Finding{Verdict: &consistent, ClaimKind: findings.ClaimEstimate, ClaimSource: "convergent bound with given L"},
			"consistent (of the convergent bound with given L)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdictStatus(&tc.f); got != tc.want {
				t.Errorf("verdictStatus = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateHeadlineAndClaim(t *testing.T) {
	res := &audit.Result{}
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{"status", Input{Headline: &findings.Headline{Status: "fine"}}, "headline status"},
		{"confidence", Input{Headline: &findings.Headline{Status: findings.StatusViolated, Confidence: 1}}, "headline confidence"},
		{"rows", Input{Headline: &findings.Headline{Status: findings.StatusViolated, Confidence: 0.95, Rows: -1}}, "headline confidence"},
		{"claim NaN", Input{ClaimMu: math.NaN()}, "claimed mu"},
		{"claim negative", Input{ClaimMu: -1}, "claimed mu"},
		{"claim kind", Input{Findings: []findings.Finding{{Attack: "a", Threat: "final", Round: 1, Result: res, ClaimKind: "guess"}}}, "claim kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(t.TempDir(), tc.in, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestFigureContent checks what a reader of the figures is told: the claim is drawn and
// labelled on the mu figure and on every trade-off figure, the certified points are named as
// the certified error pair at the family-wise level (never "upper bounds"), the trade-off
// figure has its log-log views, and the x ticks sit at the checkpoints.
func TestFigureContent(t *testing.T) {
	_, files := writeReport(t, syntheticInput(t), Options{})
	mu := string(files["figures/mu_vs_T.svg"])
	for _, s := range []string{"claim μ = 2 (test claim)", "claim μ = 2<", "(95% jointly over 6 rows):", ">100<", ">10<",
		"uploads bound (single upload)"} {
		if !strings.Contains(mu, s) {
			t.Errorf("mu_vs_T.svg lacks %q", s)
		}
	}
	for _, T := range []string{"1", "10", "100"} {
		svg := string(files["figures/tradeoff_T"+T+".svg"])
		for _, s := range []string{"T_G(claim μ = 2)", "certified error pair (α, β) ≤ (α_up, β_up),",
			"at 95% jointly over 6 rows (each row at 99.1666%);", "ROC, log-log (low FPR)", "Near the axes: α and β on log scales",
			"FPR = β", "TPR = 1 - α", ">0.001<", "T_G(uploads μ = "} {
			if !strings.Contains(svg, s) {
				t.Errorf("tradeoff_T%s.svg lacks %q", T, s)
			}
		}
		if strings.Contains(strings.ToLower(svg), "upper bounds") {
			t.Errorf("tradeoff_T%s.svg still calls the certified points upper bounds", T)
		}
	}
	// Legends outside the plotting area: every legend text lies right of the rightmost
	// x tick label of the mu figure ("100" at the end of the axis).
	if x, ok := textX(mu, "100"); !ok {
		t.Error("no x tick label 100")
	} else if lx, ok := textX(mu, "convergent bound (final model)"); !ok || lx <= x {
		t.Errorf("legend text at x = %v is not right of the plotting area (last tick at %v)", lx, x)
	}
}

var svgText = regexp.MustCompile(`<text x="([-0-9.]+)" y="[-0-9.]+"[^>]*>([^<]*)</text>`)

// textX is the x coordinate of the first SVG text element with exactly this content.
func textX(svg, content string) (float64, bool) {
	for _, m := range svgText.FindAllStringSubmatch(svg, -1) {
		if m[2] == content {
			x, err := strconv.ParseFloat(m[1], 64)
			return x, err == nil
		}
	}
	return 0, false
}
