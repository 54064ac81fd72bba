package figures

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/theory"
)

// TestTradeoffLegendInside: a trade-off figure of many attacks (an import with uploads scores
// 15) grows to hold its legend, and every line of text lies inside the figure. The figure grew,
// but the legend was drawn in the bottom half of it, so its last lines fell off the page.
func TestTradeoffLegendInside(t *testing.T) {
	in := &Input{Rounds: []int{1}, Findings: map[Series]map[int]*findings.Finding{}, ClaimMu: 1,
		Theory: map[int]*theory.Bound{1: {T: 1, Mu: 2, MuComposition: 3, MuUploads: 4}}, BoundsEstimated: true}
	names := attacks.Names()
	if len(names) < 15 {
		t.Fatalf("only %d attacks registered", len(names))
	}
	for _, info := range names[:15] {
		a := info.Name
		s := Series{Attack: a, Threat: "final"}
		in.Series = append(in.Series, s)
		env := audit.Curve{Points: []audit.Point{{Alpha: 0, Beta: 1}, {Alpha: 0.3, Beta: 0.4}, {Alpha: 1, Beta: 0}}}
		in.Findings[s] = map[int]*findings.Finding{1: {Attack: a, Threat: "final", Round: 1,
			Result: &audit.Result{N0: 500, N1: 500, ROC: &audit.ROC{Envelope: env}}}}
	}
	f, err := newModel(in).tradeoffFigure(1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.SVG()
	if err != nil {
		t.Fatal(err)
	}
	size := regexp.MustCompile(`<svg[^>]* width="([0-9.]+)pt" height="([0-9.]+)pt"`).FindSubmatch(b)
	if size == nil {
		t.Fatalf("no size in %.300s", b)
	}
	h, _ := strconv.ParseFloat(string(size[2]), 64)
	// The axis labels drawn turned (in a rotate group) have coordinates of their own.
	b = regexp.MustCompile(`<g transform="rotate\([^)]*\)">\s*<text[^<]*</text>`).ReplaceAll(b, nil)
	texts := regexp.MustCompile(`<text x="([-0-9.]+)" y="([-0-9.]+)" transform="scale\(1, -1\)"\s+style="[^"]*">([^<]*)<`).FindAllSubmatch(b, -1)
	if len(texts) < 40 {
		t.Fatalf("%d texts in the figure: the pattern misses them", len(texts))
	}
	// The canvas is drawn flipped (scale(1, -1) translate(0, -h)) and each text flipped back
	// (scale(1, -1)), so a text's baseline lies h + y below the figure's top edge.
	for _, m := range texts {
		y, _ := strconv.ParseFloat(string(m[2]), 64)
		if top := h + y; top < 0 || top > h {
			t.Errorf("text %q at %.1f pt below the top, outside the figure's height %g", m[3], top, h)
		}
	}
}
