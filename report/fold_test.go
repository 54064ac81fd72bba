package report

import (
	"bytes"
	"encoding/xml"
	"slices"
	"testing"
)

// foldedIDs parses the page as XML and returns, for every element with an id, whether it lies
// inside a <details> element (folded: closed until a reader opens it).
func foldedIDs(t *testing.T, page []byte) map[string]bool {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	out := map[string]bool{}
	var stack []string
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("report.html is not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			stack = append(stack, e.Name.Local)
			for _, a := range e.Attr {
				if a.Name.Local == "id" {
					out[a.Value] = slices.Contains(stack[:len(stack)-1], "details")
				}
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
}

// TestHTMLFolds: the page shows one table of certified bounds, the verdicts; the tables that
// repeat them (mu_lower, attacks) are folded in <details> elements, closed, as are the
// trade-off figures at all but the last checkpoint. What the page shows first stays shown:
// the headline, the mu figure, the last trade-off figure, AUC and TPR, the rounds table.
// report.md keeps every table and figure in place.
func TestHTMLFolds(t *testing.T) {
	_, files := writeReport(t, syntheticInput(t), Options{})
	page := files["report.html"]
	folded := foldedIDs(t, page)
	for id, want := range map[string]bool{
		"tab-verdicts": false, "tab-mu_lower": true, "tab-attacks": true,
		"tab-auc": false, "tab-tpr_at_1pct_fpr": false, "tab-rounds": false, "tab-attack_metrics": false,
		"fig-mu_vs_T": false, "fig-tradeoff_T100": false, "fig-tradeoff_T1": true, "fig-tradeoff_T10": true,
		"fig-sensitivity_vs_T": false, "headline": false,
	} {
		got, ok := folded[id]
		if !ok {
			t.Errorf("page lacks #%s", id)
			continue
		}
		if got != want {
			t.Errorf("#%s folded = %v, want %v", id, got, want)
		}
	}
	if bytes.Contains(page, []byte("<details open")) {
		t.Error("a folded part is open")
	}
	for _, s := range []string{`<summary>Trade-off curves at T = 1, 10</summary>`, `<details class="more" id="more-mu">`, `<details class="more" id="more-attacks">`} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("page lacks %s", s)
		}
	}
	md := files["report.md"]
	for _, s := range []string{"**Certified mu lower bounds.**", "**Attack success per attack and T.**", "(figures/tradeoff_T1.svg)", "<details"} {
		if got := bytes.Contains(md, []byte(s)); got != (s != "<details") {
			t.Errorf("report.md contains %q: %v", s, got)
		}
	}
}
