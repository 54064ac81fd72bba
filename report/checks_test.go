package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// The grey-box checks get their own section, after the verdicts, with a table of every check
// (also as CSV); a failed check adds a note under the headline, once, whether or not the
// analysis already carried it; without checks there is no section.
func TestCheckSection(t *testing.T) {
	checks := &findings.CheckReport{Format: findings.CheckFormat, Alpha: 0.05, Family: 2, Threshold: 0.025, Pairs: 2, Rounds: 5,
		Checks: []findings.CheckResult{
			{Name: "shared-w0", Exact: true, Passed: true, PValue: 1, Meaning: "one w_0"},
			{Name: "noise-scale", Observer: "upload", Tensor: "layer 2 bias", Statistic: 0.04, PValue: 1e-9, Meaning: "variance ratio 0.04"},
			{Name: "noise-mean", Observer: "upload", Tensor: "layer 2 bias", Statistic: 0.1, PValue: 0.9, Passed: true, Meaning: "z"},
		},
		Skipped: []findings.CheckSkipped{{Check: "participation", Why: "no participation records"}}}
	note := checks.HeadlineNote()
	if !strings.Contains(note, "noise-scale (upload, layer 2 bias)") {
		t.Fatalf("note %q does not name the failed check", note)
	}
	for _, carried := range []bool{false, true} {
		in := syntheticInput(t)
		in.Check = checks
		if carried {
			in.Headline.Notes = append([]string{note}, in.Headline.Notes...)
		}
		_, files := writeReport(t, in, Options{})
		page := files["report.html"]
		for _, s := range []string{`<section id="checks">`, `<table id="tab-checks">`, "1 check(s) FAILED", "Not checked: participation (no participation records)", "layer 2 bias"} {
			if !bytes.Contains(page, []byte(s)) {
				t.Errorf("page lacks %q", s)
			}
		}
		if n := bytes.Count(page, []byte("The grey-box checks (audit check) FAILED 1 of 3")); n != 1 {
			t.Errorf("headline note shown %d times (carried by the analysis: %v)", n, carried)
		}
		if !bytes.Contains(page, []byte(`<p class="warning"><strong>Warning:</strong> The grey-box checks`)) {
			t.Errorf("the failed checks are not the headline's warning")
		}
		if v, c := bytes.Index(page, []byte(`<section id="verdicts">`)), bytes.Index(page, []byte(`<section id="checks">`)); v < 0 || c < v {
			t.Errorf("checks section at %d, verdicts at %d: the checks come after the verdicts", c, v)
		}
		if !bytes.Contains(files["tables/checks.csv"], []byte("noise-scale,upload,layer 2 bias")) {
			t.Errorf("tables/checks.csv:\n%s", files["tables/checks.csv"])
		}
		if md := string(files["report.md"]); !strings.Contains(md, "## Grey-box checks") || !strings.Contains(md, "**Warning**: The grey-box checks") {
			t.Errorf("report.md has no checks section or no warning")
		}
	}
	_, files := writeReport(t, syntheticInput(t), Options{})
	if bytes.Contains(files["report.html"], []byte(`id="checks"`)) {
		t.Errorf("a report without checks shows a checks section")
	}
}

// The terminal's header names the statistical tests' threshold only when there are some: with
// exact checks alone it says so instead of "each at p >= 0".
func TestWriteCheckHeader(t *testing.T) {
	exact := findings.CheckResult{Name: "shared-w0", Exact: true, Passed: true, PValue: 1, Meaning: "one w_0"}
	stat := findings.CheckResult{Name: "noise-mean", Observer: "upload", Tensor: "all", Statistic: 0.1, PValue: 0.9, Passed: true, Meaning: "z"}
	for _, c := range []struct {
		name string
		rep  findings.CheckReport
		want string
	}{
		{"statistical and exact", findings.CheckReport{Alpha: 0.05, Family: 1, Threshold: 0.05, Pairs: 4, Rounds: 3, Checks: []findings.CheckResult{exact, stat}},
			"Grey-box checks of 4 pair(s), rounds 0..3: 1 statistical tests at family-wise level 0.05 (each at p >= 0.05), 1 exact checks.\n"},
		{"exact only", findings.CheckReport{Alpha: 0.05, Pairs: 4, Rounds: 3, Checks: []findings.CheckResult{exact}},
			"Grey-box checks of 4 pair(s), rounds 0..3: no statistical test, 1 exact checks.\n"},
	} {
		var b strings.Builder
		if err := WriteCheck(&b, &c.rep); err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(b.String(), "\n"); first+"\n" != c.want {
			t.Errorf("%s: header %q, want %q", c.name, first, strings.TrimSuffix(c.want, "\n"))
		}
	}
}
