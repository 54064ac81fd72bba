package figures

import (
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/theory"
)

// checkpointTicks puts the x ticks at the checkpoints T. Labels closer than minGap (a fraction
// of the axis) to the previous label are left off, the last checkpoint always labelled, so no
// two labels overlap; every checkpoint keeps its tick mark, up to maxCheckpointTicks of them:
// beyond, only the labelled ones (200 checkpoints' marks merged into a black bar).
type checkpointTicks struct {
	ts     []int
	log    bool
	minGap float64
	// labelled, when not empty, are the only checkpoints that may have a label (the audited
	// rounds, which the tables have rows for); the others keep an unlabelled mark. A label at
	// T = 4, a checkpoint only the uploads attacks read (w_{T-1} of T = 5), beside unlabelled
	// ticks at 10 and 20 read as an audited round.
	labelled []int
}

func (c checkpointTicks) Ticks(lo, hi float64) []plot.Tick {
	pos := func(v float64) float64 {
		if c.log {
			return (math.Log(v) - math.Log(lo)) / (math.Log(hi) - math.Log(lo))
		}
		return (v - lo) / (hi - lo)
	}
	var ticks []plot.Tick
	for _, t := range c.ts {
		v := float64(t)
		if v < lo || v > hi || (c.log && v <= 0) {
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.Itoa(t)})
	}
	// Label from the right, so the largest T (the one read most) always has its label.
	last := math.Inf(1)
	for i := len(ticks) - 1; i >= 0; i-- {
		p := pos(ticks[i].Value)
		if last-p < c.minGap || (len(c.labelled) > 0 && !slices.Contains(c.labelled, int(ticks[i].Value))) {
			ticks[i].Label = ""
			continue
		}
		last = p
	}
	if len(ticks) > maxCheckpointTicks {
		ticks = slices.DeleteFunc(ticks, func(t plot.Tick) bool { return t.Label == "" })
	}
	return ticks
}

// maxCheckpointTicks is how many checkpoints keep an unlabelled tick mark each.
const maxCheckpointTicks = 60

// muFigure draws mu against T: certified lower bounds per attack and threat model, the
// theoretical bounds, the realized mu and the claim. A wide range switches to logarithmic axes.
// muLine is one curve of the mu-against-T figure.
type muLine struct {
	label string
	// note is a line of text under the legend entry, "" for none.
	note  string
	xy    plotter.XYs
	col   color.Color
	dash  []vg.Length
	shape draw.GlyphDrawer
	width vg.Length
}

// addMuLine appends l with the points get gives at the checkpoints, when it has any.
func (m *model) addMuLine(dst *[]muLine, l muLine, get func(int) (float64, bool)) {
	for _, t := range m.Rounds {
		if v, ok := get(t); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			l.xy = append(l.xy, plotter.XY{X: float64(t), Y: v})
		}
	}
	if len(l.xy) > 0 {
		*dst = append(*dst, l)
	}
}

// muLines are the theory's curves (bounds and the realized mu) and one curve per attack
// series (its certified lower bounds).
func (m *model) muLines() (theoryLines, attacks []muLine) {
	estimate := ""
	if m.BoundsEstimated {
		estimate = "   an estimate beyond T = 1"
	}
	m.addMuLine(&theoryLines, muLine{label: "convergent bound (final model)", note: estimate, col: colorConvergent, shape: draw.CircleGlyph{}, width: vg.Points(1.5)},
		func(t int) (float64, bool) {
			return valueOf(m.Theory[t], func(b *theory.Bound) float64 { return b.Mu })
		})
	m.addMuLine(&theoryLines, muLine{label: "composition bound (every iterate)", col: colorComposition, dash: dashComposition, shape: draw.TriangleGlyph{}, width: vg.Points(1.5)},
		func(t int) (float64, bool) {
			return valueOf(m.Theory[t], func(b *theory.Bound) float64 { return b.MuComposition })
		})
	if m.hasThreat("uploads") {
		m.addMuLine(&theoryLines, muLine{label: "uploads bound (single upload)", note: estimate, col: colorConvergent, dash: dashUploads, shape: draw.SquareGlyph{}, width: vg.Points(1.2)},
			func(t int) (float64, bool) {
				v, ok := valueOf(m.Theory[t], func(b *theory.Bound) float64 { return b.MuUploads })
				return v, ok && v > 0 // 0: a theory computed before the uploads bound existed
			})
	}
	m.addMuLine(&theoryLines, muLine{label: "realized μ in training", col: colorRealized, dash: dashRealized, shape: draw.CrossGlyph{}, width: vg.Points(1.2)},
		func(t int) (float64, bool) {
			st := m.Stats[t]
			if st == nil {
				return 0, false
			}
			return st.RealizedMu, true
		})
	// The exact mu where it is known (the quadratic instance, canaries of known privacy): what
	// a claim about convergence is read against, more than the bounds above it.
	for _, e := range []struct{ threat, label string }{
		{"final", "exact μ (final model)"}, {"all-iterates", "exact μ (every iterate)"}, {"uploads", "exact μ (single upload)"},
	} {
		m.addMuLine(&theoryLines, muLine{label: e.label, col: colorConvergent, dash: threatDashes[e.threat], shape: draw.RingGlyph{}, width: vg.Points(2.5)},
			func(t int) (float64, bool) { return m.exactMu(e.threat, t) })
	}
	for _, s := range m.Series {
		col, glyph, dash := m.seriesStyle(s)
		m.addMuLine(&attacks, muLine{label: s.String(), col: col, dash: dash, shape: glyph, width: vg.Points(1.5)},
			func(t int) (float64, bool) {
				f := m.Findings[s][t]
				if f == nil {
					return 0, false
				}
				return f.Result.MuLower, true
			})
	}
	return theoryLines, attacks
}

// exactMu is the exact mu of the rows of threat at T, where they know it and agree on it (the
// rows of one threat model and T audit one mechanism; one-run rows audit their canaries', which
// may differ, and are taken only where no pair row knows it).
func (m *model) exactMu(threat string, t int) (float64, bool) {
	for _, oneRun := range []bool{false, true} {
		v, found := math.NaN(), false
		for _, s := range m.Series {
			f := m.Findings[s][t]
			if s.Threat != threat || f == nil || f.OneRun() != oneRun || math.IsNaN(f.ExactMu) {
				continue
			}
			if found && f.ExactMu != v {
				return 0, false
			}
			v, found = f.ExactMu, true
		}
		if found {
			return v, true
		}
	}
	return 0, false
}

// logRoundsRatio is the span of the checkpoints beyond which the T axis is logarithmic:
// checkpoints 1, 2, 5, ..., 300 on a linear axis crowd all but the last few into its left edge.
const logRoundsRatio = 10

// roundsAxis decides the T axis of a figure over the checkpoints ts: logarithmic when the
// positive checkpoints span more than a factor of logRoundsRatio, linear otherwise. It returns
// the range drawn: on a logarithmic axis the positive checkpoints only (T = 0, the initial
// model, has no place on it and is left off).
func roundsAxis(ts []int) (logX bool, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	pLo, pHi := math.Inf(1), math.Inf(-1)
	for _, t := range ts {
		v := float64(t)
		lo, hi = math.Min(lo, v), math.Max(hi, v)
		if t > 0 {
			pLo, pHi = math.Min(pLo, v), math.Max(pHi, v)
		}
	}
	if pHi > 0 && pHi/pLo > logRoundsRatio {
		return true, pLo, pHi
	}
	return false, lo, hi
}

// onAxis drops the points a logarithmic T axis cannot show (T <= 0).
func onAxis(xy plotter.XYs, logX bool) plotter.XYs {
	if !logX {
		return xy
	}
	out := xy[:0:0]
	for _, pt := range xy {
		if pt.X > 0 {
			out = append(out, pt)
		}
	}
	return out
}

// muAxes decides the scales: logarithmic y when the positive values (and the claim) span more
// than a factor of logMuRatio, the T axis by roundsAxis; it returns the range of T drawn too.
func (m *model) muAxes(lines []muLine, claim float64) (logX, logY bool, tLo, tHi float64) {
	logX, tLo, tHi = roundsAxis(m.Rounds)
	lo, hi := math.Inf(1), 0.0
	for _, l := range lines {
		for _, pt := range onAxis(l.xy, logX) {
			if pt.Y > 0 {
				lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
			}
		}
	}
	if claim > 0 {
		lo, hi = math.Min(lo, claim), math.Max(hi, claim)
	}
	logY = hi > 0 && hi/lo > logMuRatio
	return logX, logY, tLo, tHi
}

// logMuRatio is the spread of the positive mu values beyond which the mu axis is logarithmic:
// on a linear axis the smallest would lie in its bottom 5%, flat on zero (certified bounds of
// 4.6 under a composition bound of 404 were drawn so, at two decades).
const logMuRatio = 20

// muMargin widens a logarithmic mu axis by this factor at each end (and a linear one by half as
// much at the top).
const muMargin = 1.12

// addClaimLine draws the claim as a horizontal line over [tLo, tHi] with a legend entry and
// its own label at the end of the line where the other curves are farthest from it, on the
// side of the line away from them.
func (m *model) addClaimLine(p *plot.Plot, leg *plot.Legend, lines []muLine, claim, tLo, tHi float64, logY bool) error {
	return m.addClaimLineOf("μ", p, leg, lines, claim, tLo, tHi, logY)
}

// addClaimLineOf is addClaimLine for a claim on the quantity named symbol (μ, or ε at the
// claim's delta).
func (m *model) addClaimLineOf(symbol string, p *plot.Plot, leg *plot.Legend, lines []muLine, claim, tLo, tHi float64, logY bool) error {
	x0, x1 := tLo, tHi
	if x0 == x1 {
		x0, x1 = x0-0.5, x1+0.5
	}
	cl, err := plotter.NewLine(plotter.XYs{{X: x0, Y: claim}, {X: x1, Y: claim}})
	if err != nil {
		return err
	}
	cl.Color, cl.Dashes, cl.Width = colorClaim, dashClaim, vg.Points(2)
	p.Add(cl)
	label := "claim " + symbol + " = " + num(claim)
	var about []string
	if m.ClaimLabel != "" {
		about = append(about, m.ClaimLabel)
	}
	if scope := m.claimScope(); scope != "" {
		about = append(about, "on "+scope+" rows only")
	}
	var more []string
	if len(about) > 0 {
		whole := label + " (" + strings.Join(about, "; ") + ")"
		if utf8.RuneCountInString(whole) <= legendLineChars+8 {
			label = whole
		} else {
			// An accountant's label runs to a hundred characters: on lines of its own under
			// the entry, not one line past the figure's right edge.
			more = wrapWords("("+strings.Join(about, "; ")+")", legendLineChars)
		}
	}
	leg.Add(label, cl)
	for _, line := range more {
		leg.Add("   "+line, textItem{})
	}
	nearest := func(x float64) (gap float64, above bool) {
		gap, above = math.Inf(1), true
		for _, l := range lines {
			for _, pt := range l.xy {
				if pt.X != x || (logY && pt.Y <= 0) {
					continue
				}
				d := pt.Y - claim
				if logY {
					d = math.Log(pt.Y) - math.Log(claim)
				}
				if math.Abs(d) < gap {
					gap, above = math.Abs(d), d > 0
				}
			}
		}
		return gap, above
	}
	gl, al := nearest(x0)
	gr, ar := nearest(x1)
	at, curveAbove, align := x1, ar, draw.XRight
	if gl > gr {
		at, curveAbove, align = x0, al, draw.XLeft
	}
	lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: at, Y: claim}}, Labels: []string{"claim " + symbol + " = " + num(claim)}})
	if err != nil {
		return err
	}
	lbl.TextStyle[0].Color = colorClaim
	lbl.TextStyle[0].Font.Size = vg.Points(9)
	lbl.TextStyle[0].XAlign = align
	lbl.TextStyle[0].YAlign = draw.YBottom
	lbl.Offset = vg.Point{X: 0, Y: vg.Points(3)}
	if curveAbove {
		lbl.TextStyle[0].YAlign = draw.YTop
		lbl.Offset.Y = -vg.Points(3)
	}
	p.Add(lbl)
	return nil
}

// clipAbove is how far above the highest certified lower bound and the claim the mu axis
// reaches when a theory curve (a bound or the realized mu) runs more than clipBeyond times the
// larger of the two: it is cut at the top of the axis, since a composition bound of 1e5 beside
// certified bounds of 0.5 would otherwise squash every bound an attack found into the bottom
// of a seven-decade axis. Two decades, as for the logarithmic axis. A curve that reaches less
// than three decades above is drawn whole: cutting a bound of 404 at 388 hid 4% of it to gain
// nothing.
const (
	clipAbove  = 100
	clipBeyond = 1000
)

// muCeiling is the top of the mu axis, clipAbove times the highest positive certified lower
// bound and the claim drawn, when a theory curve runs above clipBeyond times them; 0 (the axis
// covers every curve) otherwise, and when there is no positive lower bound and no claim.
func muCeiling(theoryLines, attacks []muLine, claim float64, logX bool) float64 {
	hi := 0.0
	if claim > 0 {
		hi = claim
	}
	for _, l := range attacks {
		for _, pt := range onAxis(l.xy, logX) {
			hi = math.Max(hi, pt.Y)
		}
	}
	if hi <= 0 {
		return 0
	}
	for _, l := range theoryLines {
		for _, pt := range onAxis(l.xy, logX) {
			if pt.Y > clipBeyond*hi {
				return clipAbove * hi
			}
		}
	}
	return 0
}

// offTop are the checkpoints where a theory curve lies above the top of the mu axis: an
// upward arrow in the curve's colour at the axis's top edge over each. The arrows of the n
// curves cut at one checkpoint stand side by side, this curve's k-th from the left, the group
// centred on the checkpoint and moved inside the plotting area at its edges.
type offTop struct {
	xs   []float64
	col  color.Color
	k, n int
}

// arrowGap is the distance between the arrows of two curves cut at one checkpoint.
const arrowGap = 7

func (a offTop) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	span := vg.Points(arrowGap) * vg.Length(a.n-1)
	for _, x := range a.xs {
		left := trX(x) - span/2
		left = min(max(left, c.Min.X+vg.Points(3)), c.Max.X-vg.Points(3)-span)
		upArrow(&c, vg.Point{X: left + vg.Points(arrowGap)*vg.Length(a.k), Y: c.Max.Y}, a.col)
	}
}

// upArrow draws an arrow pointing up with its tip at tip.
func upArrow(c *draw.Canvas, tip vg.Point, col color.Color) {
	c.StrokeLine2(draw.LineStyle{Color: col, Width: vg.Points(1.2)}, tip.X, tip.Y-vg.Points(10), tip.X, tip.Y-vg.Points(4))
	c.FillPolygon(col, []vg.Point{tip, {X: tip.X - vg.Points(3), Y: tip.Y - vg.Points(5)}, {X: tip.X + vg.Points(3), Y: tip.Y - vg.Points(5)}})
}

// arrowItem is the legend entry of a curve cut at the top of the axis: the arrow that marks it.
type arrowItem struct{ col color.Color }

func (a arrowItem) Thumbnail(c *draw.Canvas) {
	mid := c.Center()
	upArrow(c, vg.Point{X: mid.X, Y: mid.Y + vg.Points(5)}, a.col)
}

// maxMarks is how many markers a line of the mu figure carries at most: at 200 checkpoints a
// marker at each merged the lines into bands as wide as the markers.
const maxMarks = 30

// thinMarks keeps every k-th point of xy and its last, at most maxMarks of them; the line still
// passes through every point.
func thinMarks(xy plotter.XYs) plotter.XYs {
	if len(xy) <= maxMarks {
		return xy
	}
	k := (len(xy) + maxMarks - 2) / (maxMarks - 1)
	var out plotter.XYs
	for i := 0; i < len(xy)-1; i += k {
		out = append(out, xy[i])
	}
	return append(out, xy[len(xy)-1])
}

// drawMuLines adds lines and their legend entries; on a log y axis the zero lower bounds (no
// evidence) are left out, on a log T axis the checkpoint T = 0. With top > 0 a line's points
// above top are not marked: the line runs off the top of the axis, an arrow at its top edge
// marks each such checkpoint, and the legend gives the line's largest value.
func drawMuLines(p *plot.Plot, leg *plot.Legend, ls []muLine, logX, logY bool, top float64) error {
	above := func(xy plotter.XYs) (in plotter.XYs, out []float64, peak plotter.XY) {
		for _, pt := range xy {
			if top > 0 && pt.Y > top {
				out = append(out, pt.X)
				if pt.Y > peak.Y {
					peak = pt
				}
				continue
			}
			in = append(in, pt)
		}
		return in, out, peak
	}
	cut := 0
	for _, l := range ls {
		if _, out, _ := above(onAxis(l.xy, logX)); len(out) > 0 {
			cut++
		}
	}
	k := 0
	for _, l := range ls {
		xy := onAxis(l.xy, logX)
		if len(xy) == 0 {
			continue
		}
		if logY {
			pos := xy[:0:0]
			for _, pt := range xy {
				if pt.Y > 0 {
					pos = append(pos, pt)
				}
			}
			if len(pos) == 0 {
				// Nothing to draw on a log axis, but the attack was run: it keeps its entry.
				leg.Add(l.label+": no bound above 0", textItem{})
				continue
			}
			xy = pos
		}
		in, out, peak := above(xy)
		ln, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		ln.Color, ln.Dashes, ln.Width = l.col, l.dash, l.width
		sc := &plotter.Scatter{XYs: thinMarks(in), GlyphStyle: draw.GlyphStyle{Color: l.col, Shape: l.shape, Radius: vg.Points(3)}}
		p.Add(ln)
		if len(in) > 0 {
			p.Add(sc)
		}
		leg.Add(l.label, ln, sc)
		if l.note != "" {
			leg.Add(l.note, textItem{})
		}
		if len(out) > 0 {
			p.Add(offTop{xs: out, col: l.col, k: k, n: cut})
			k++
			leg.Add("off the top, up to "+num(peak.Y)+" at T = "+strconv.Itoa(int(peak.X)), arrowItem{col: l.col})
		}
	}
	return nil
}

func (m *model) muFigure() (*Figure, bool, error) {
	theoryLines, attacks := m.muLines()
	if len(theoryLines)+len(attacks) == 0 {
		return nil, false, nil
	}
	all := append(append([]muLine(nil), theoryLines...), attacks...)
	claim := m.ClaimMu
	logX, logY, tLo, tHi := m.muAxes(all, claim)

	p := m.roundsPlot("μ against the number of rounds T", "μ (Gaussian DP)", logX, logY)
	leg := newLegend()
	if claim > 0 && tHi >= tLo {
		if err := m.addClaimLine(p, &leg, all, claim, tLo, tHi, logY); err != nil {
			return nil, false, err
		}
	}
	top := 0.0
	if logY {
		top = muCeiling(theoryLines, attacks, claim, logX)
	}
	if err := drawMuLines(p, &leg, theoryLines, logX, logY, top); err != nil {
		return nil, false, err
	}
	if m.ClaimEps > 0 {
		// An (epsilon, delta) claim bounds no single mu: it has no line here.
		leg.Add("claim ε = "+num(m.ClaimEps)+" at δ = "+num(m.ClaimDelta)+":", textItem{})
		leg.Add("   no μ line (see the ε figure)", textItem{})
	}
	if len(attacks) > 0 {
		leg.Add("", textItem{})
		leg.Add("certified lower bounds", textItem{})
		leg.Add("("+m.LevelShort+"):", textItem{})
	}
	if err := drawMuLines(p, &leg, attacks, logX, logY, 0); err != nil {
		return nil, false, err
	}
	widen(p, top, logY)

	drawFn, w, h := plotBesideLegend(p, &leg)
	caption := "Certified lower bounds on μ (" + m.Level +
		") per attack (colour and marker) and threat model (dash: solid final, dashed all-iterates, dotted uploads), beside the convergent bound (valid for the final model only), the composition bound (valid for an observer of every iterate) and the realized μ of the trained runs. A certified lower bound above the bound of its threat model contradicts that bound."
	if claim > 0 {
		if scope := m.claimScope(); scope != "" {
			caption += " The vermillion dash-dotted line is the claim, judged on the " + scope + " rows only: a certified lower bound of those rows above it violates the claim; the other rows are judged against the bound of their threat model."
		} else {
			caption += " The vermillion dash-dotted line is the claim: a certified lower bound above it violates the claim."
		}
	}
	for _, l := range theoryLines {
		if strings.HasPrefix(l.label, "exact μ") {
			caption += " The thick black lines with rings are the exact μ of the mechanism audited, where it is known (dash: threat model): what the certified bounds approach from below and the theory's bounds stay above."
			break
		}
	}
	if m.ClaimEps > 0 {
		caption += " The claim, ε = " + num(m.ClaimEps) + " at δ = " + num(m.ClaimDelta) + ", is not a μ and has no line here: the ε against T figure draws it beside the certified ε, the trade-off figures as its own curve, and the verdicts judge the certified ε at its δ."
	}
	if logY {
		caption += " The μ axis is logarithmic; lower bounds of 0 (no evidence) are not drawn."
	}
	if top > 0 {
		caption += " It stops at " + num(top) + ", " + strconv.Itoa(clipAbove) + " times the larger of the highest certified lower bound and the claim: the curves of the theory that run above it are cut at its top edge, an arrow there marks each checkpoint where one does, and the legend gives its largest value (the theory table gives every value)."
	}
	caption += m.estimateNote()
	caption += roundsAxisNote(m.Rounds)
	return &Figure{Name: "mu_vs_T", Title: "μ against T", Caption: caption, draw: drawFn,
		w: w, h: h, Wide: true}, true, nil
}

// legendLineChars is the most characters of a wrapped legend line.
const legendLineChars = 44

// wrapWords breaks s at spaces into lines of at most width characters (a longer word stands
// alone on its line).
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// roundsPlot is a plot of a quantity against the number of rounds T (the mu and epsilon
// figures): its scales, and tick marks at the checkpoints labelled at the audited rounds.
func (m *model) roundsPlot(title, yLabel string, logX, logY bool) *plot.Plot {
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = "number of rounds T (ticks at the checkpoints)"
	p.Y.Label.Text = yLabel
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, decadeTicks{twoFive: true}
	} else {
		p.Y.Min = 0
	}
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = checkpointTicks{ts: m.Rounds, log: logX, minGap: 0.045, labelled: m.findingRounds()}
	return p
}

// widen sets the y axis's range after every Add (which widens it to the data): top where the
// theory is cut (top > 0), else a margin, so that the frame does not cut the markers of the
// extreme values in half.
func widen(p *plot.Plot, top float64, logY bool) {
	switch {
	case top > 0:
		p.Y.Max = top
	case logY:
		p.Y.Max *= muMargin
	default:
		p.Y.Max *= 1 + (muMargin-1)/2
	}
	if logY {
		p.Y.Min /= muMargin
	}
}

// plotBesideLegend lays out a plot 15 cm wide with its legend to the right, level with the top
// of the plotting area: the drawing function and the figure's size.
func plotBesideLegend(p *plot.Plot, leg *plot.Legend) (drawFn func(draw.Canvas), w, h vg.Length) {
	lw, lh := legendSize(leg)
	lw += vg.Points(16)
	pw := 15 * vg.Centimeter
	h = 11 * vg.Centimeter
	if lh+vg.Points(24) > h {
		h = lh + vg.Points(24)
	}
	drawFn = func(c draw.Canvas) {
		pc := c
		pc.Max.X = c.Min.X + pw
		p.Draw(pc)
		lc := c
		lc.Min.X = c.Min.X + pw + vg.Points(12)
		lc.Max.Y -= vg.Points(20) // level with the top of the plotting area, below the title
		leg.Draw(lc)
	}
	return drawFn, pw + lw + vg.Points(12), h
}

// epsFigure draws epsilon against T where the claim is an epsilon (the DP-FedAvg family's
// accountants): each attack's certified lower bound on epsilon at the claim's delta, the claim
// as a line and, on final-model rows, the last-iterate heuristic's epsilon. The mu figure has
// no line for such a claim, so a violation showed in no figure.
func (m *model) epsFigure() (*Figure, bool, error) {
	claim := m.ClaimEps
	if !(claim > 0) {
		return nil, false, nil
	}
	var heuristic, attacks []muLine
	m.addMuLine(&heuristic, muLine{label: "last-iterate heuristic (final model)", note: "   a heuristic, not a bound", col: colorComposition, dash: dashComposition, shape: draw.TriangleGlyph{}, width: vg.Points(1.2)},
		func(t int) (float64, bool) {
			for _, s := range m.Series {
				if f := m.Findings[s][t]; f != nil && s.Threat == "final" && f.EpsHeuristic > 0 {
					return f.EpsHeuristic, true
				}
			}
			return 0, false
		})
	for _, s := range m.Series {
		col, glyph, dash := m.seriesStyle(s)
		m.addMuLine(&attacks, muLine{label: s.String(), col: col, dash: dash, shape: glyph, width: vg.Points(1.5)},
			func(t int) (float64, bool) { return m.epsAtClaim(m.Findings[s][t]) })
	}
	if len(attacks) == 0 {
		return nil, false, nil
	}
	all := append(append([]muLine(nil), heuristic...), attacks...)
	logX, logY, tLo, tHi := m.muAxes(all, claim)
	delta := "δ = " + num(m.ClaimDelta)
	p := m.roundsPlot("ε at "+delta+" against the number of rounds T", "ε at "+delta, logX, logY)
	leg := newLegend()
	if err := m.addClaimLineOf("ε", p, &leg, all, claim, tLo, tHi, logY); err != nil {
		return nil, false, err
	}
	if err := drawMuLines(p, &leg, heuristic, logX, logY, 0); err != nil {
		return nil, false, err
	}
	leg.Add("", textItem{})
	leg.Add("certified lower bounds", textItem{})
	leg.Add("("+m.LevelShort+"):", textItem{})
	if err := drawMuLines(p, &leg, attacks, logX, logY, 0); err != nil {
		return nil, false, err
	}
	widen(p, 0, logY)
	drawFn, w, h := plotBesideLegend(p, &leg)
	caption := "Certified lower bounds on ε at the claim's " + delta + " (" + m.Level +
		") per attack (colour and marker) and threat model (dash: solid final, dashed all-iterates, dotted uploads), beside the claim (the vermillion dash-dotted line"
	if m.ClaimLabel != "" {
		caption += ", " + m.ClaimLabel
	}
	caption += "): a certified lower bound above it violates the claim."
	if len(heuristic) > 0 {
		caption += " The grey dashed line is the last-iterate heuristic's ε (Steinke et al., 2025: the final model's exact ε if the losses were linear; a heuristic, not a bound): what a final-model attack can be expected to reach."
	}
	if logY {
		caption += " The ε axis is logarithmic; lower bounds of 0 (no evidence) are not drawn."
	}
	caption += roundsAxisNote(m.Rounds)
	return &Figure{Name: "eps_vs_T", Title: "ε against T", Caption: caption, draw: drawFn, w: w, h: h, Wide: true}, true, nil
}

// epsAtClaim is the certified lower bound on epsilon a row's verdict compared with the claimed
// epsilon (at the claim's delta), or the row's own where its analysis used the claim's delta;
// no value for a row of another delta.
func (m *model) epsAtClaim(f *findings.Finding) (float64, bool) {
	if f == nil {
		return 0, false
	}
	if c, ok := f.EpsilonCheck(); ok {
		return c.Lower, true
	}
	return f.Result.EpsLower, f.Result.Delta == m.ClaimDelta
}

// roundsAxisNote is what a caption says about a logarithmic T axis, or "".
func roundsAxisNote(ts []int) string {
	logX, _, _ := roundsAxis(ts)
	if !logX {
		return ""
	}
	note := " The T axis is logarithmic (the checkpoints span more than a factor of " + strconv.Itoa(logRoundsRatio) + ")"
	if slices.Contains(ts, 0) {
		note += "; T = 0, the initial model, is not drawn"
	}
	return note + "."
}

func valueOf(b *theory.Bound, get func(*theory.Bound) float64) (float64, bool) {
	if b == nil {
		return 0, false
	}
	return get(b), true
}

// sensitivityFigure draws the measured ||w_T - w'_T|| against T, when any was recorded.
func (m *model) sensitivityFigure() (*Figure, bool, error) {
	var xy plotter.XYs
	for _, t := range m.Rounds {
		if st := m.Stats[t]; st != nil && !math.IsNaN(st.Sensitivity) && !math.IsInf(st.Sensitivity, 0) {
			xy = append(xy, plotter.XY{X: float64(t), Y: st.Sensitivity})
		}
	}
	if len(xy) == 0 {
		return nil, false, nil
	}
	p := newPlot()
	p.Title.Text = "Measured sensitivity against T"
	p.X.Label.Text = "number of rounds T"
	p.Y.Label.Text = "mean ||w_T - w'_T|| over coupled pairs"
	p.Y.Min = 0
	var ts []int
	for _, pt := range xy {
		ts = append(ts, int(pt.X))
	}
	logX, _, _ := roundsAxis(ts)
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = checkpointTicks{ts: m.Rounds, log: logX, minGap: 0.06, labelled: m.findingRounds()}
	if xy = onAxis(xy, logX); len(xy) == 0 {
		return nil, false, nil
	}
	ln, sc, err := plotter.NewLinePoints(xy)
	if err != nil {
		return nil, false, err
	}
	ln.Color, sc.Color = colorConvergent, colorConvergent
	ln.Width = vg.Points(1.5)
	p.Add(ln, sc)
	return &Figure{Name: "sensitivity_vs_T", Title: "Measured sensitivity against T",
		Caption: "Mean distance between the final models of the coupled pairs of runs (trained on C and on C'), per T. The convergent bound assumes this stays bounded as T grows." + roundsAxisNote(ts),
		draw:    func(c draw.Canvas) { p.Draw(c) }, w: 14 * vg.Centimeter, h: 9 * vg.Centimeter}, true, nil
}
