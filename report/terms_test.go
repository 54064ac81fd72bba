package report

import (
	stdhtml "html"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
)

// TestTermsDefined: a report read without the source had no definition of the methods, bounds
// and notions its headline and tables name ("dkw+band", "Balle conversion", "realized μ"). Both
// pages carry the glossary, and it names every threshold method a row can state.
func TestTermsDefined(t *testing.T) {
	in := syntheticInput(t)
	_, files := writeReport(t, in, Options{})
	html, md := string(files["report.html"]), string(files["report.md"])
	if i, j := strings.Index(html, `<details id="terms">`), strings.Index(html, `<details id="configuration">`); i < 0 || j < i {
		t.Errorf("report.html: the terms at %d, the configuration at %d", i, j)
	}
	if !strings.Contains(md, "## Terms used in this report") {
		t.Error("report.md has no terms")
	}
	text := stdhtml.UnescapeString(html) // the page escapes quotes and "+"
	var methods string
	for _, tm := range terms {
		if !strings.Contains(text, "<dt>"+tm.Name+"</dt><dd>"+tm.Meaning+"</dd>") ||
			!strings.Contains(md, "- **"+tm.Name+"**: "+tm.Meaning+"\n") {
			t.Errorf("term %q missing from a page", tm.Name)
		}
		if tm.Name == "threshold methods" {
			methods = tm.Meaning
		}
	}
	for _, m := range []audit.ThresholdMethod{audit.Bonferroni, audit.Split, audit.DKW, audit.RankBand, audit.DKWBand} {
		if !strings.Contains(methods, string(m)+" (") {
			t.Errorf("threshold method %s is not defined", m)
		}
	}
}
