package figures

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/theory"
)

// lab converts an sRGB colour to CIE L*a*b* (D65 white).
func lab(c color.Color) [3]float64 {
	r, g, b, _ := c.RGBA()
	lin := func(v uint32) float64 {
		x := float64(v) / 0xffff
		if x <= 0.04045 {
			return x / 12.92
		}
		return math.Pow((x+0.055)/1.055, 2.4)
	}
	R, G, B := lin(r), lin(g), lin(b)
	X := (0.4124*R + 0.3576*G + 0.1805*B) / 0.95047
	Y := 0.2126*R + 0.7152*G + 0.0722*B
	Z := (0.0193*R + 0.1192*G + 0.9505*B) / 1.08883
	f := func(t float64) float64 {
		if t > math.Pow(6.0/29, 3) {
			return math.Cbrt(t)
		}
		return t/(3*(6.0/29)*(6.0/29)) + 4.0/29
	}
	fx, fy, fz := f(X), f(Y), f(Z)
	return [3]float64{116*fy - 16, 500 * (fx - fy), 200 * (fy - fz)}
}

// deltaE is the CIE76 colour difference: about 2 is just noticeable, above 20 two colours
// read as different colours, not shades of one.
func deltaE(a, b color.Color) float64 {
	x, y := lab(a), lab(b)
	return math.Sqrt((x[0]-y[0])*(x[0]-y[0]) + (x[1]-y[1])*(x[1]-y[1]) + (x[2]-y[2])*(x[2]-y[2]))
}

// modelOf is the model of a report whose findings are the given (attack, threat) series.
func modelOf(ser ...Series) *model {
	in := &Input{Rounds: []int{1}, Findings: map[Series]map[int]*findings.Finding{}}
	for _, s := range ser {
		in.Series = append(in.Series, s)
		in.Findings[s] = map[int]*findings.Finding{1: {Attack: s.Attack, Threat: s.Threat, Round: 1}}
	}
	return newModel(in)
}

// TestAttackColoursDistinct: within one figure, two series of different attacks have colours
// at least 25 apart (CIE76 in L*a*b*) and differ from the claim's vermillion and the theory's
// black and greys by more than 20; two series of one attack differ in their dash; and the
// first eight attacks have markers of their own. Checked on the demo's seven attacks (where
// the sorted-name assignment gave margin informed-all's orange and loss an olive beside it),
// the usual short list, and the first len(attackColors) attacks of the registry.
func TestAttackColoursDistinct(t *testing.T) {
	demo := []Series{{"informed-all", "all-iterates"}, {"informed-last", "all-iterates"}, {"informed-upload", "uploads"},
		{"lira-offline", "final"}, {"lira-online", "final"}, {"loss", "final"}, {"margin", "final"}}
	usual := []Series{{"informed-all", "all-iterates"}, {"informed-last", "all-iterates"}, {"loss", "final"}, {"margin", "final"},
		{"lira-offline", "final"}, {"lira-online", "final"}, {"loss", "uploads"}}
	var many []Series
	for _, a := range attackRanks[:len(attackColors)] {
		many = append(many, Series{a, "final"}, Series{a, "all-iterates"})
	}
	reserved := map[string]color.Color{"claim": colorClaim, "convergent": colorConvergent, "composition": colorComposition,
		"realized": colorRealized, "diagonal": colorDiagonal}
	for name, set := range map[string][]Series{"demo": demo, "usual": usual, "registry": many} {
		m := modelOf(set...)
		for i, a := range m.Series {
			ca, ga, da := m.seriesStyle(a)
			for rn, rc := range reserved {
				if d := deltaE(ca, rc); d <= 20 {
					t.Errorf("%s: %v's colour is %.1f from the %s colour", name, a, d, rn)
				}
			}
			for _, b := range m.Series[:i] {
				cb, gb, db := m.seriesStyle(b)
				if a.Attack == b.Attack {
					if slices.Equal(da, db) {
						t.Errorf("%s: %v and %v share colour and dash", name, a, b)
					}
					continue
				}
				if d := deltaE(ca, cb); d <= 25 {
					t.Errorf("%s: %v and %v have colours %.1f apart (CIE76), want > 25", name, a, b, d)
				}
				if m.attackIndex[a.Attack] < len(attackGlyphs) && m.attackIndex[b.Attack] < len(attackGlyphs) && ga == gb {
					t.Errorf("%s: %v and %v share the marker %T", name, a, b, ga)
				}
			}
		}
	}
	m := modelOf(demo...)
	if got := m.attackIndex["informed-all"]; got != 0 {
		t.Errorf("informed-all takes colour %d, want the first", got)
	}
	if m.attackIndex["loss"] >= m.attackIndex["lira-offline"] {
		t.Error("loss comes after lira-offline in the colour order")
	}
}

// TestAttackRanksCoverRegistry: every attack the attacks package registers, and the canary
// attacks, has its place in the colour order.
func TestAttackRanksCoverRegistry(t *testing.T) {
	names := []string{attacks.CanaryLLR, attacks.CanaryLoss, attacks.CanaryMargin, attacks.CanaryCos, attacks.CanaryCosMax}
	for _, info := range attacks.Names() {
		names = append(names, info.Name)
	}
	for _, n := range names {
		if !slices.Contains(attackRanks, n) {
			t.Errorf("attack %q has no place in attackRanks", n)
		}
	}
}

// TestRoundsAxis: the T axis of mu-vs-T and of the sensitivity figure is logarithmic when the
// positive checkpoints span more than a factor of 10, T = 0 (the initial model, recorded by
// many configs) included or not, and linear otherwise; the captions say so. Checkpoints
// 0, 1, 2, ..., 300 (results/convergence-quadratic) were drawn on a linear axis, with the
// first six crammed into its left edge.
func TestRoundsAxis(t *testing.T) {
	for _, tc := range []struct {
		ts     []int
		log    bool
		lo, hi float64
	}{
		{[]int{0, 1, 2, 5, 10, 20, 50, 100, 200, 300}, true, 1, 300},
		{[]int{1, 2, 5, 10, 20}, true, 1, 20},
		{[]int{1, 2, 5, 10}, false, 1, 10},
		{[]int{0, 1, 2, 4}, false, 0, 4},
		{[]int{20, 50, 100}, false, 20, 100},
		{[]int{8}, false, 8, 8},
	} {
		log, lo, hi := roundsAxis(tc.ts)
		if log != tc.log || lo != tc.lo || hi != tc.hi {
			t.Errorf("roundsAxis(%v) = %v, %v, %v; want %v, %v, %v", tc.ts, log, lo, hi, tc.log, tc.lo, tc.hi)
		}
	}
	in := &Input{ClaimMu: 1, Theory: map[int]*theory.Bound{}, Stats: map[int]*findings.RoundSummary{}}
	for _, T := range []int{0, 1, 2, 5, 10, 20, 50, 100, 200, 300} {
		in.Rounds = append(in.Rounds, T)
		in.Theory[T] = &theory.Bound{T: T, Mu: 0.01 * float64(T), MuComposition: 0.02 * float64(T)}
		in.Stats[T] = &findings.RoundSummary{Round: T, Sensitivity: 0.1 * float64(T), RealizedMu: 0.01 * float64(T)}
	}
	m := newModel(in)
	mu, ok, err := m.muFigure()
	if err != nil || !ok {
		t.Fatalf("muFigure: %v, %v", ok, err)
	}
	sens, ok, err := m.sensitivityFigure()
	if err != nil || !ok {
		t.Fatalf("sensitivityFigure: %v, %v", ok, err)
	}
	for _, f := range []*Figure{mu, sens} {
		if !strings.Contains(f.Caption, "The T axis is logarithmic") || !strings.Contains(f.Caption, "T = 0, the initial model, is not drawn") {
			t.Errorf("%s: caption does not say the T axis is logarithmic: %s", f.Name, f.Caption)
		}
		if _, err := f.SVG(); err != nil {
			t.Errorf("%s: %v", f.Name, err)
		}
	}
	short := newModel(&Input{Rounds: []int{1, 10}, Theory: map[int]*theory.Bound{1: {T: 1, Mu: 1}, 10: {T: 10, Mu: 2}}})
	if f, _, _ := short.muFigure(); strings.Contains(f.Caption, "logarithmic") {
		t.Errorf("checkpoints 1..10 on a logarithmic axis: %s", f.Caption)
	}
}

// TestCheckpointTicks: a tick at every checkpoint, labels never closer than the gap, the last
// checkpoint always labelled.
func TestCheckpointTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ts     []int
		log    bool
		lo, hi float64
	}{
		{"linear spread", []int{1, 5, 10, 20, 50}, false, 1, 50},
		{"linear crowded", []int{0, 1, 2, 3, 5, 10, 20, 50, 100, 200}, false, 0, 200},
		{"log", []int{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}, true, 1, 1000},
		{"one", []int{7}, false, 6.5, 7.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const gap = 0.045
			ticks := checkpointTicks{ts: tc.ts, log: tc.log, minGap: gap}.Ticks(tc.lo, tc.hi)
			if len(ticks) != len(tc.ts) {
				t.Fatalf("%d ticks for %d checkpoints", len(ticks), len(tc.ts))
			}
			pos := func(v float64) float64 {
				if tc.log {
					return math.Log(v/tc.lo) / math.Log(tc.hi/tc.lo)
				}
				return (v - tc.lo) / (tc.hi - tc.lo)
			}
			prev := math.Inf(-1)
			for i, tk := range ticks {
				if tk.Value != float64(tc.ts[i]) {
					t.Errorf("tick %d at %v, want %d", i, tk.Value, tc.ts[i])
				}
				if tk.Label == "" {
					continue
				}
				if tk.Label != strconv.Itoa(tc.ts[i]) {
					t.Errorf("tick %d labelled %q", i, tk.Label)
				}
				if p := pos(tk.Value); p-prev < gap-1e-12 {
					t.Errorf("labels %v and %s closer than %v of the axis", prev, tk.Label, gap)
				} else {
					prev = p
				}
			}
			if ticks[len(ticks)-1].Label == "" {
				t.Error("last checkpoint unlabelled")
			}
		})
	}
}

// TestFigureStyle: an attack keeps its colour and marker under every threat model and in every
// figure; different attacks differ; no attack takes the claim's colour.
func TestFigureStyle(t *testing.T) {
	// The series of report's synthetic input, with gradient under a second threat model.
	m := modelOf(Series{"gradient", "final"}, Series{"gradient", "uploads"}, Series{"loss", "final"})
	seen := map[string]string{}
	for _, s := range m.Series {
		col, glyph, _ := m.seriesStyle(s)
		key := colorHex(col) + " " + typeName(glyph)
		if prev, ok := seen[s.Attack]; ok && prev != key {
			t.Errorf("attack %s drawn as %s and as %s", s.Attack, prev, key)
		}
		seen[s.Attack] = key
		if colorHex(col) == colorHex(colorClaim) {
			t.Errorf("attack %s takes the claim's colour", s.Attack)
		}
	}
	if seen["gradient"] == seen["loss"] {
		t.Errorf("two attacks share colour and marker %s", seen["loss"])
	}
	for i, a := range attackColors {
		for _, b := range attackColors[i+1:] {
			if colorHex(a) == colorHex(b) {
				t.Errorf("palette repeats %s", colorHex(a))
			}
		}
	}
}

func colorHex(c interface{ RGBA() (r, g, b, a uint32) }) string {
	r, g, b, _ := c.RGBA()
	return strconv.FormatUint(uint64(r>>8)<<16|uint64(g>>8)<<8|uint64(b>>8), 16)
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// The legend notes an estimated convergent bound and uploads bound once each: the uploads
// line's note was the convergent line's with "beyond T = 1" added a second time.
func TestEstimatedBoundsNotedOnce(t *testing.T) {
	s := Series{Attack: "upload-lda", Threat: "uploads"}
	in := &Input{
		Rounds:          []int{1, 5},
		Series:          []Series{s},
		Findings:        map[Series]map[int]*findings.Finding{s: {}},
		Theory:          map[int]*theory.Bound{1: {T: 1, Mu: 1, MuComposition: 1, MuUploads: 1}, 5: {T: 5, Mu: 2, MuComposition: 3, MuUploads: 2.5}},
		Stats:           map[int]*findings.RoundSummary{},
		BoundsEstimated: true,
	}
	theoryLines, _ := newModel(in).muLines()
	notes := map[string]string{}
	for _, l := range theoryLines {
		notes[l.label] = l.note
	}
	for _, label := range []string{"convergent bound (final model)", "uploads bound (single upload)"} {
		if got := notes[label]; strings.TrimSpace(got) != "an estimate beyond T = 1" {
			t.Errorf("%s: note %q, want \"an estimate beyond T = 1\"", label, got)
		}
	}
}

// 200 checkpoints' tick marks merged into a black bar under the mu-against-T figure: beyond
// maxCheckpointTicks only the labelled ones stay, the last among them.
func TestCheckpointTicksOfManyCheckpoints(t *testing.T) {
	ts := make([]int, 200)
	for i := range ts {
		ts[i] = i + 1
	}
	ticks := checkpointTicks{ts: ts, minGap: 0.045}.Ticks(1, 200)
	if len(ticks) > maxCheckpointTicks || len(ticks) < 5 {
		t.Fatalf("%d ticks for 200 checkpoints", len(ticks))
	}
	for _, tk := range ticks {
		if tk.Label == "" {
			t.Errorf("an unlabelled tick at %v among many", tk.Value)
		}
	}
	if ticks[len(ticks)-1].Value != 200 {
		t.Errorf("the last checkpoint has no tick: %v", ticks[len(ticks)-1])
	}
}

// TestExactMuDrawn: where the rows know the exact mu (the quadratic instance), the mu figure
// draws it per threat model, so that a claim of convergence to it can be seen (the figure drew
// only the bounds, 80 times above it); rows that disagree on it at a T draw nothing there, and
// a one-run row's (its canaries') is taken only where no pair row knows one.
func TestExactMuDrawn(t *testing.T) {
	fin, all, can := Series{"loss", "final"}, Series{"informed-all", "all-iterates"}, Series{"canary-cos", "final"}
	row := func(s Series, round int, exact float64, oneRun bool) *findings.Finding {
		f := &findings.Finding{Attack: s.Attack, Threat: s.Threat, Round: round, ExactMu: exact, Result: &audit.Result{MuLower: 0.1}}
		if oneRun {
			f.Result.Method = audit.OneRunMethod
		}
		return f
	}
	nan := math.NaN()
	in := &Input{
		Rounds: []int{1, 2, 3},
		Series: []Series{fin, all, can},
		Findings: map[Series]map[int]*findings.Finding{
			fin: {1: row(fin, 1, 0.5, false), 2: row(fin, 2, 0.7, false), 3: row(fin, 3, nan, false)},
			all: {1: row(all, 1, 0.5, false), 2: row(all, 2, 1.1, false), 3: row(all, 3, 1.4, false)},
			can: {1: row(can, 1, 0.9, true), 2: row(can, 2, 0.9, true), 3: row(can, 3, 0.6, true)},
		},
		Stats: map[int]*findings.RoundSummary{},
	}
	theoryLines, _ := newModel(in).muLines()
	got := map[string]plotter.XYs{}
	for _, l := range theoryLines {
		got[l.label] = l.xy
	}
	want := map[string]plotter.XYs{
		"exact μ (final model)":   {{X: 1, Y: 0.5}, {X: 2, Y: 0.7}, {X: 3, Y: 0.6}},
		"exact μ (every iterate)": {{X: 1, Y: 0.5}, {X: 2, Y: 1.1}, {X: 3, Y: 1.4}},
	}
	for label, xy := range want {
		if !slices.Equal(got[label], xy) {
			t.Errorf("%s: %v, want %v", label, got[label], xy)
		}
	}
	if _, ok := got["exact μ (single upload)"]; ok {
		t.Error("an exact mu line for a threat model without rows")
	}
}

// TestThinMarks: a line of up to maxMarks points keeps a marker at each; a longer one at most
// maxMarks, evenly, its first and last included.
func TestThinMarks(t *testing.T) {
	for _, n := range []int{1, 5, maxMarks, maxMarks + 1, 60, 200, 201} {
		xy := make(plotter.XYs, n)
		for i := range xy {
			xy[i].X = float64(i)
		}
		got := thinMarks(xy)
		if len(got) > maxMarks || got[0] != xy[0] || got[len(got)-1] != xy[n-1] || (n <= maxMarks && len(got) != n) {
			t.Errorf("%d points: %d marks, first %v, last %v", n, len(got), got[0].X, got[len(got)-1].X)
		}
		if n > maxMarks && len(got) < maxMarks/2 {
			t.Errorf("%d points: only %d marks", n, len(got))
		}
	}
}

// TestCheckpointTicksLabelTheAuditedRounds: the checkpoints only the uploads attacks read
// (w_{T-1} of each audited T) keep a mark without a label; a lone "4" beside 5, 10 and 20 read
// as an audited round that no table has.
func TestCheckpointTicksLabelTheAuditedRounds(t *testing.T) {
	ticks := checkpointTicks{ts: []int{4, 5, 9, 10, 19, 20}, minGap: 0.045, labelled: []int{5, 10, 20}}.Ticks(0, 20)
	var got []string
	for _, tk := range ticks {
		got = append(got, tk.Label)
	}
	if want := []string{"", "5", "", "10", "", "20"}; !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
}
