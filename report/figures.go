package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/theory"
)

// figure is one picture: one or more plots and a legend drawn beside them, kept as a drawing
// function so it can be rendered to SVG and PNG alike.
type figure struct {
	name    string // file stem in figures/
	title   string
	caption string
	draw    func(c draw.Canvas)
	w, h    vg.Length
	wide    bool // shown across the page's whole width
}

// svg renders the figure without fonts embedded: vgsvg then writes only the drawing
// commands, which depend on the data alone, so the bytes are reproducible.
func (f *figure) svg() ([]byte, error) {
	c := vgsvg.New(f.w, f.h)
	f.draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure %s: %w", f.name, err)
	}
	return b.Bytes(), nil
}

func (f *figure) png() ([]byte, error) {
	c := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(144),
		vgimg.UseBackgroundColor(color.White))}
	f.draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure %s: %w", f.name, err)
	}
	return b.Bytes(), nil
}

// Colours. Attacks take the Okabe-Ito palette, which stays distinguishable under the common
// colour-vision deficiencies; vermillion is kept for the claim, black and greys for the theory,
// so an attack never shares a colour with a bound.
var (
	colorClaim       = color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 255} // Okabe-Ito vermillion
	colorConvergent  = color.RGBA{A: 255}                            // black
	colorComposition = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 255}
	colorRealized    = color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 255}
	colorDiagonal    = color.RGBA{R: 0xAA, G: 0xAA, B: 0xAA, A: 255}
	colorKey         = color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 255}

	// attackColors are taken in order by the attacks of a report (attackOrder): the first five
	// are the Okabe-Ito colours that show on white (its yellow does not), orange and blue first,
	// so the attacks reports hold most often never share a hue; the six after them are darker
	// or more saturated colours away from all of these and from the claim's vermillion and the
	// theory's greys. Every two differ by a CIE76 colour difference above 25
	// (TestAttackColoursDistinct).
	attackColors = []color.Color{
		color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 255}, // orange
		color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 255}, // blue
		color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 255}, // bluish green
		color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 255}, // reddish purple
		color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 255}, // sky blue
		color.RGBA{R: 0x33, G: 0x22, B: 0x88, A: 255}, // indigo
		color.RGBA{R: 0x88, G: 0xBB, B: 0x00, A: 255}, // yellow-green
		color.RGBA{R: 0x88, G: 0x22, B: 0x55, A: 255}, // wine
		color.RGBA{R: 0x6B, G: 0x6B, B: 0x00, A: 255}, // dark olive
		color.RGBA{R: 0x8C, G: 0x56, B: 0x4B, A: 255}, // brown
		color.RGBA{R: 0x00, G: 0x5F, B: 0x5F, A: 255}, // dark teal
	}
	// attackGlyphs tell attacks apart where colours repeat (more attacks than colours) and in
	// greyscale print: filled and hollow shapes alternate.
	attackGlyphs = []draw.GlyphDrawer{
		draw.CircleGlyph{}, draw.SquareGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{},
		draw.BoxGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
	}
	dashComposition = []vg.Length{vg.Points(6), vg.Points(3)}
	dashRealized    = []vg.Length{vg.Points(2), vg.Points(2)}
	dashUploads     = []vg.Length{vg.Points(1.5), vg.Points(2)}
	dashClaim       = []vg.Length{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}
)

// threatDashes draw the threat model of a series: the same attack keeps its colour under every
// threat model and changes only its dash.
var threatDashes = map[string][]vg.Length{
	"final":        nil,
	"all-iterates": {vg.Points(5), vg.Points(2.5)},
	"uploads":      {vg.Points(1.5), vg.Points(2)},
}

// attackRanks is the order in which attacks take colours and markers: the attacks as the
// attacks package registers them (the order configs and docs list them in), then the canary
// attacks; an attack not listed comes after these, in name order.
var attackRanks = []string{
	"informed-all", "informed-last", "informed-diff", "informed-upload", "loss", "margin",
	"lira-offline", "lira-online", "grad-align", "linear", "label", "inversion", "invgrad",
	"param-lda", "param-cosine", "upload-lda",
	"canary-llr", "canary-loss", "canary-margin", "canary-cos", "canary-cos-max",
}

// attackOrder numbers the attacks of one report in attackRanks order: attack i takes colour
// i and glyph i, so up to len(attackColors) attacks have colours of their own whichever
// attacks ran.
func attackOrder(attacks []string) map[string]int {
	rank := func(a string) int {
		if i := slices.Index(attackRanks, a); i >= 0 {
			return i
		}
		return len(attackRanks)
	}
	sorted := slices.Clone(attacks)
	slices.SortStableFunc(sorted, func(a, b string) int {
		if c := rank(a) - rank(b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	out := make(map[string]int, len(sorted))
	for _, a := range sorted {
		if _, ok := out[a]; !ok {
			out[a] = len(out)
		}
	}
	return out
}

// seriesStyle is the colour, glyph and dash of one series, the same in every figure: the
// colour and glyph come from the attack's place among the attacks of the report
// (attackOrder), the dash from the threat model.
func (m *model) seriesStyle(s series) (color.Color, draw.GlyphDrawer, []vg.Length) {
	i := m.attackIndex[s.attack]
	dash, ok := threatDashes[s.threat]
	if !ok {
		dash = []vg.Length{vg.Points(3), vg.Points(1), vg.Points(1), vg.Points(1)}
	}
	return attackColors[i%len(attackColors)], attackGlyphs[i%len(attackGlyphs)], dash
}

func newPlot() *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font.Size = vg.Points(11)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(10)
		a.Tick.Label.Font.Size = vg.Points(9)
	}
	p.Add(plotter.NewGrid())
	return p
}

func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.TextStyle.Font.Size = vg.Points(9)
	l.Left, l.Top = true, true
	l.ThumbnailWidth = vg.Points(24)
	l.Padding = vg.Points(2.5)
	return l
}

// legendSize is the width and height a legend needs.
func legendSize(l *plot.Legend) (vg.Length, vg.Length) {
	r := l.Rectangle(draw.Canvas{})
	return r.Max.X - r.Min.X, r.Max.Y - r.Min.Y
}

// textItem is a legend entry without a picture: a heading or a continued line.
type textItem struct{}

func (textItem) Thumbnail(*draw.Canvas) {}

// alphaGrid holds type I errors for drawing T_G curves: dense near 0, where the curves of
// large mu rise steeply, and even elsewhere.
func alphaGrid() []float64 {
	var g []float64
	g = append(g, 0)
	for e := -8.0; e < -2; e += 0.125 {
		g = append(g, math.Pow(10, e))
	}
	for i := 1; i <= 200; i++ {
		g = append(g, float64(i)/200)
	}
	return g
}

func gdpCurve(mu float64) plotter.XYs {
	grid := alphaGrid()
	xy := make(plotter.XYs, len(grid))
	for i, a := range grid {
		xy[i].X, xy[i].Y = a, audit.TradeoffGDP(mu, a)
	}
	return xy
}

// gdpROC is the ROC of T_G(mu) on log axes from lo: TPR = 1 - T_G(mu)(FPR) (the Gaussian
// trade-off is symmetric, so the roles of the two errors may be swapped).
func gdpROC(mu, lo float64) plotter.XYs {
	var xy plotter.XYs
	for _, x := range logGrid(lo, 1, 20) {
		y := 1 - audit.TradeoffGDP(mu, x)
		if y > 0 {
			xy = append(xy, plotter.XY{X: x, Y: y})
		}
	}
	return xy
}

// logGrid is perDecade points per decade from lo to hi, both included, computed from integer
// steps so that no rounding drifts past hi.
func logGrid(lo, hi float64, perDecade int) []float64 {
	a, b := math.Log10(lo), math.Log10(hi)
	n := int(math.Ceil((b - a) * float64(perDecade)))
	g := make([]float64, 0, n+1)
	for i := 0; i < n; i++ {
		g = append(g, math.Pow(10, a+float64(i)/float64(perDecade)))
	}
	return append(g, hi)
}

// decadeTicks labels the powers of ten of a logarithmic axis (formatted exactly, 0.001 rather
// than 0.0009999) and marks 2..9 times each without labels.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		for j := 1; j <= 9; j++ {
			v := float64(j) * math.Pow10(k)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if j == 1 {
				t.Label = strconv.FormatFloat(math.Pow10(k), 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// gdpLog is T_G(mu) sampled evenly in log alpha from lo, for the log-log trade-off panel;
// points with beta below lo/10 are left off (the line is clipped at the axis anyway).
func gdpLog(mu, lo float64) plotter.XYs {
	var xy plotter.XYs
	for _, a := range logGrid(lo, 1, 50) {
		if b := audit.TradeoffGDP(mu, a); b >= lo/10 {
			xy = append(xy, plotter.XY{X: a, Y: b})
		}
	}
	return xy
}

// certifiedBars draws a certified test: the observed error rates with bars reaching the
// upper confidence bounds, in the coordinates of one panel.
type certifiedBars struct {
	plotter.XYs
	xlo, xhi, ylo, yhi []float64
}

func (c certifiedBars) XError(i int) (float64, float64) { return c.xlo[i], c.xhi[i] }
func (c certifiedBars) YError(i int) (float64, float64) { return c.ylo[i], c.yhi[i] }

// panel is one plot of a trade-off figure: a coordinate system the series are mapped into.
type panel struct {
	p *plot.Plot
	// xy maps a (type I, type II) pair into the panel's coordinates; ok is false where the
	// point cannot be drawn (0 on a logarithmic axis, or outside a zoomed range).
	xy                     func(alpha, beta float64) (x, y float64, ok bool)
	xmin, xmax, ymin, ymax float64
}

func (pn *panel) inside(x, y float64) bool {
	const tol = 1e-12
	return x >= pn.xmin-tol && x <= pn.xmax+tol && y >= pn.ymin-tol && y <= pn.ymax+tol
}

// line adds a trade-off curve given as (alpha, beta) pairs; the ROC panel's theory curves are
// computed directly (roc != nil) so that they stay smooth on log axes.
func (pn *panel) line(pts plotter.XYs, roc plotter.XYs, col color.Color, dash []vg.Length, width vg.Length) (*plotter.Line, error) {
	xy := roc
	if xy == nil {
		for _, pt := range pts {
			if x, y, ok := pn.xy(pt.X, pt.Y); ok {
				xy = append(xy, plotter.XY{X: x, Y: y})
			}
		}
	}
	if len(xy) < 2 {
		return nil, nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	l.Color, l.Dashes, l.Width = col, dash, width
	pn.p.Add(l)
	return l, nil
}

// logFloor is the lower end of the logarithmic ROC axes: a decade below the smallest error
// rate the samples can resolve (1/n), at least 1e-6.
func (m *model) logFloor(t int) float64 {
	n := 0
	for _, s := range m.series {
		if f := m.findings[s][t]; f != nil {
			n = max(n, f.Result.N0, f.Result.N1)
		}
	}
	if n == 0 {
		return 1e-3
	}
	return math.Max(1e-6, math.Pow(10, math.Floor(math.Log10(0.5/float64(n)))))
}

// tradeoffPanels are the three views of the trade-off figure at T = ts: the whole square, the
// corner near the axes on log scales, and the ROC on log-log axes, the last two from lo.
func tradeoffPanels(ts string, lo float64) (full, zoom, roc *panel) {
	full = &panel{p: newPlot(), xmin: 0, xmax: 1, ymin: 0, ymax: 1,
		xy: func(a, b float64) (float64, float64, bool) { return a, b, true }}
	full.p.Title.Text = "Trade-off, T = " + ts
	full.p.X.Label.Text = "type I error α = P(say C' | C)"
	full.p.Y.Label.Text = "type II error β = P(say C | C')"

	// The zoom: both errors on logarithmic axes, which pulls the curves of large mu and the
	// envelopes of strong attacks off the axes they hug on the linear square.
	zoom = &panel{p: newPlot(), xmin: lo, xmax: 1, ymin: lo, ymax: 1}
	zoom.xy = func(a, b float64) (float64, float64, bool) { return a, b, a > 0 && b > 0 && zoom.inside(a, b) }
	zoom.p.Title.Text = "Near the axes: α and β on log scales"
	zoom.p.X.Label.Text = "type I error α (log)"
	zoom.p.Y.Label.Text = "type II error β (log)"

	roc = &panel{p: newPlot(), xmin: lo, xmax: 1, ymin: lo, ymax: 1}
	roc.xy = func(a, b float64) (float64, float64, bool) {
		x, y := b, 1-a // FPR = beta, TPR = 1 - alpha (world C positive)
		return x, y, x > 0 && y > 0 && roc.inside(x, y)
	}
	roc.p.Title.Text = "ROC, log-log (low FPR)"
	roc.p.X.Label.Text = "FPR = β"
	roc.p.Y.Label.Text = "TPR = 1 - α"
	for _, a := range []*plot.Axis{&roc.p.X, &roc.p.Y, &zoom.p.X, &zoom.p.Y} {
		a.Scale, a.Tick.Marker = plot.LogScale{}, decadeTicks{}
	}

	return full, zoom, roc
}

// addGuessing draws random guessing in every panel (beta = 1 - alpha; on the ROC, TPR = FPR)
// and returns a line for the legend.
func addGuessing(full, zoom, roc *panel, lo float64) (*plotter.Line, error) {
	var guess *plotter.Line
	for _, pn := range []*panel{full, zoom, roc} {
		pts := plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 0}}
		var rocPts plotter.XYs
		if pn == roc {
			rocPts = plotter.XYs{{X: lo, Y: lo}, {X: 1, Y: 1}}
		} else if pn == zoom {
			// Up to alpha = 1/2 only: beyond it 1 - alpha leaves the panel through the bottom.
			for _, a := range logGrid(lo, 0.5, 20) {
				rocPts = append(rocPts, plotter.XY{X: a, Y: 1 - a})
			}
		}
		l, err := pn.line(pts, rocPts, colorDiagonal, dashRealized, vg.Points(1))
		if err != nil {
			return nil, err
		}
		if l != nil {
			guess = l
		}
	}
	return guess, nil
}

// addGDPCurves draws the Gaussian trade-off curves of the claim and of the theory's bounds at
// T in every panel, with their legend entries.
func (m *model) addGDPCurves(leg *plot.Legend, full, zoom, roc *panel, t int, lo float64) error {
	panels := []*panel{full, zoom, roc}
	type curve struct {
		mu    float64
		label string
		col   color.Color
		dash  []vg.Length
	}
	var curves []curve
	if m.in.ClaimMu > 0 {
		curves = append(curves, curve{m.in.ClaimMu, "T_G(claim μ = " + num(m.in.ClaimMu) + ")", colorClaim, dashClaim})
	}
	if b := m.theory[t]; b != nil {
		curves = append(curves,
			curve{b.Mu, "T_G(convergent μ = " + num(b.Mu) + "), final model", colorConvergent, nil},
			curve{b.MuComposition, "T_G(composition μ = " + num(b.MuComposition) + "), every iterate", colorComposition, dashComposition})
		if m.hasThreat("uploads") && b.MuUploads > 0 {
			curves = append(curves, curve{b.MuUploads, "T_G(uploads μ = " + num(b.MuUploads) + "), single upload", colorConvergent, dashUploads})
		}
	}
	for _, c := range curves {
		if math.IsNaN(c.mu) || math.IsInf(c.mu, 0) || c.mu < 0 {
			continue
		}
		var shown *plotter.Line
		for _, pn := range panels {
			var rocPts plotter.XYs
			switch pn {
			case roc:
				rocPts = gdpROC(c.mu, lo)
			case zoom:
				rocPts = gdpLog(c.mu, lo)
			}
			l, err := pn.line(gdpCurve(c.mu), rocPts, c.col, c.dash, vg.Points(1.5))
			if err != nil {
				return err
			}
			if l != nil {
				shown = l
			}
		}
		if len(gdpLog(c.mu, lo)) < 2 {
			// Even on log axes the curve stays below lo: it lies on the axes in every view.
			c.label += ", on the axes"
		}
		if shown != nil {
			leg.Add(c.label, shown)
		}
	}
	return nil
}

// addAttackEnvelopes draws each attack's ROC envelope at T and its certified error pair in
// every panel, with their legend entries.
func (m *model) addAttackEnvelopes(leg *plot.Legend, full, zoom, roc *panel, t int) error {
	panels := []*panel{full, zoom, roc}
	for _, s := range m.series {
		f := m.findings[s][t]
		if f == nil || f.Result.ROC == nil {
			continue
		}
		col, glyph, dash := m.seriesStyle(s)
		env := f.Result.ROC.Envelope.Points
		envXY := make(plotter.XYs, len(env))
		for j, pt := range env {
			envXY[j].X, envXY[j].Y = pt.Alpha, pt.Beta
		}
		var thumb *plotter.Line
		for _, pn := range panels {
			l, err := pn.line(envXY, nil, col, dash, vg.Points(1.3))
			if err != nil {
				return err
			}
			if l != nil {
				thumb = l
			}
		}
		cp := f.Result.MuPoint
		var mark *plotter.Scatter
		if cp.AlphaUpper > 0 || cp.BetaUpper > 0 {
			for _, pn := range panels {
				sc, err := certifiedMark(pn, cp, col, glyph)
				if err != nil {
					return err
				}
				if sc != nil {
					mark = sc
				}
			}
		}
		if thumb == nil {
			continue
		}
		if mark != nil {
			leg.Add(s.String(), thumb, mark)
		} else {
			leg.Add(s.String(), thumb)
		}
	}
	return nil
}

// addTradeoffKey explains the markers and the dashes at the end of the legend.
func (m *model) addTradeoffKey(leg *plot.Legend) error {
	key, err := plotter.NewScatter(plotter.XYs{{}})
	if err != nil {
		return err
	}
	key.Color, key.Shape, key.Radius = colorKey, draw.BoxGlyph{}, vg.Points(3)
	leg.Add("", textItem{})
	leg.Add("marker: certified error pair (α, β) ≤ (α_up, β_up),", key)
	leg.Add("   at "+m.levelText()+";", textItem{})
	leg.Add("   bars from the observed rates (α̂, β̂)", textItem{})
	leg.Add("line dash: threat model (solid final,", textItem{})
	leg.Add("   dashed all-iterates, dotted uploads)", textItem{})

	return nil
}

// tradeoffFigure draws, for one T, three views of each attack's empirical envelope and
// certified error pair beside the Gaussian trade-off curves of the claim and the theory: the
// whole square, a zoom on the corner near the origin where strong attacks and the curves of
// large mu lie, and the ROC on log-log axes (the low-FPR view). The legend is drawn beside the
// panels, outside every plotting area.
func (m *model) tradeoffFigure(t int) (*figure, error) {
	ts := strconv.Itoa(t)
	lo := m.logFloor(t)
	full, zoom, roc := tradeoffPanels(ts, lo)
	panels := []*panel{full, zoom, roc}

	leg := newLegend()
	guess, err := addGuessing(full, zoom, roc, lo)
	if err != nil {
		return nil, err
	}
	if err := m.addGDPCurves(&leg, full, zoom, roc, t, lo); err != nil {
		return nil, err
	}
	if guess != nil {
		leg.Add("guessing (β = 1 - α)", guess)
	}

	leg.Add("", textItem{})
	leg.Add("ROC envelope and certified error pair:", textItem{})
	if err := m.addAttackEnvelopes(&leg, full, zoom, roc, t); err != nil {
		return nil, err
	}
	if err := m.addTradeoffKey(&leg); err != nil {
		return nil, err
	}

	lw, lh := legendSize(&leg)
	lw += vg.Points(12)
	tile := 9 * vg.Centimeter
	w := 2*tile + lw
	h := 2 * tile
	if lh+tile+vg.Points(20) > h {
		h = lh + tile + vg.Points(20)
	}
	drawFn := func(c draw.Canvas) {
		// Adding data widens the axes; every panel shows exactly its own range.
		for _, pn := range panels {
			pn.p.X.Min, pn.p.X.Max, pn.p.Y.Min, pn.p.Y.Max = pn.xmin, pn.xmax, pn.ymin, pn.ymax
		}
		// Left: full and zoom on top, ROC below; right of the ROC the legend.
		grid := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: c.Min, Max: vg.Point{X: c.Min.X + 2*tile, Y: c.Max.Y}}}
		tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(14), PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
		// Plain tiles rather than plot.Align: Align lines up the plotting areas but then sets
		// the titles of one row at different heights.
		full.p.Draw(tiles.At(grid, 0, 0))
		zoom.p.Draw(tiles.At(grid, 1, 0))
		roc.p.Draw(tiles.At(grid, 0, 1))
		lc := tiles.At(grid, 1, 1)
		lc.Max.X = c.Max.X - vg.Points(4)
		lc.Min.X += vg.Points(8)
		leg.Draw(lc)
	}
	return &figure{
		name:  "tradeoff_T" + ts,
		title: "Trade-off curves at T = " + ts,
		caption: "Type I against type II error at T = " + ts + ", three views of the same data: the whole square; the corner near the axes with both errors on logarithmic axes from " + num(lo) +
			", where strong attacks and the trade-off curves of large μ lie (a curve marked \"on the axes\" stays below " + num(lo) + " even there); and the ROC (TPR = 1 - α against FPR = β, world C positive) on logarithmic axes from " + num(lo) +
			", the low-FPR view. Coloured lines: each attack's empirical ROC envelope (colour and marker: attack; dash: threat model). Markers: each attack's certified error pair: with the stated confidence its true error rates are at most (α_up, β_up), so the mechanism's trade-off curve passes on or below the marker; the bars start at the observed rates. A marker below a T_G curve contradicts that curve's μ (for the claim and the bound of the attack's own threat model). Grey dotted: random guessing.",
		draw: drawFn, w: w, h: h, wide: true,
	}, nil
}

// certifiedMark draws a certified error pair in one panel: a marker at the certified corner
// (alpha_up, beta_up) and bars back to the observed rates; nil when the corner is outside the
// panel.
func certifiedMark(pn *panel, cp audit.CertifiedPoint, col color.Color, glyph draw.GlyphDrawer) (*plotter.Scatter, error) {
	x, y, ok := pn.xy(cp.AlphaUpper, cp.BetaUpper)
	if !ok {
		return nil, nil
	}
	hx, hy, okHat := pn.xy(cp.AlphaHat, cp.BetaHat)
	if okHat {
		// Bars from the corner back towards the observed rates, in panel coordinates.
		bars := certifiedBars{XYs: plotter.XYs{{X: x, Y: y}},
			xlo: []float64{math.Max(0, x-hx)}, xhi: []float64{math.Max(0, hx-x)},
			ylo: []float64{math.Max(0, y-hy)}, yhi: []float64{math.Max(0, hy-y)}}
		xb, err := plotter.NewXErrorBars(bars)
		if err != nil {
			return nil, err
		}
		yb, err := plotter.NewYErrorBars(bars)
		if err != nil {
			return nil, err
		}
		xb.Color, yb.Color = col, col
		xb.CapWidth, yb.CapWidth = vg.Points(4), vg.Points(4)
		pn.p.Add(xb, yb)
	}
	sc, err := plotter.NewScatter(plotter.XYs{{X: x, Y: y}})
	if err != nil {
		return nil, err
	}
	sc.Color, sc.Shape, sc.Radius = col, glyph, vg.Points(3.5)
	pn.p.Add(sc)
	return sc, nil
}

// checkpointTicks puts the x ticks at the checkpoints T. Labels closer than minGap (a fraction
// of the axis) to the previous label are left off, the last checkpoint always labelled, so no
// two labels overlap; every checkpoint keeps its tick mark.
type checkpointTicks struct {
	ts     []int
	log    bool
	minGap float64
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
		if last-p < c.minGap {
			ticks[i].Label = ""
			continue
		}
		last = p
	}
	return ticks
}

// muFigure draws mu against T: certified lower bounds per attack and threat model, the
// theoretical bounds, the realized mu and the claim. A wide range switches to logarithmic axes.
// muLine is one curve of the mu-against-T figure.
type muLine struct {
	label string
	xy    plotter.XYs
	col   color.Color
	dash  []vg.Length
	shape draw.GlyphDrawer
	width vg.Length
}

// addMuLine appends l with the points get gives at the checkpoints, when it has any.
func (m *model) addMuLine(dst *[]muLine, l muLine, get func(int) (float64, bool)) {
	for _, t := range m.rounds {
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
	m.addMuLine(&theoryLines, muLine{label: "convergent bound (final model)", col: colorConvergent, shape: draw.CircleGlyph{}, width: vg.Points(1.5)},
		func(t int) (float64, bool) {
			return valueOf(m.theory[t], func(b *theory.Bound) float64 { return b.Mu })
		})
	m.addMuLine(&theoryLines, muLine{label: "composition bound (every iterate)", col: colorComposition, dash: dashComposition, shape: draw.TriangleGlyph{}, width: vg.Points(1.5)},
		func(t int) (float64, bool) {
			return valueOf(m.theory[t], func(b *theory.Bound) float64 { return b.MuComposition })
		})
	if m.hasThreat("uploads") {
		m.addMuLine(&theoryLines, muLine{label: "uploads bound (single upload)", col: colorConvergent, dash: dashUploads, shape: draw.SquareGlyph{}, width: vg.Points(1.2)},
			func(t int) (float64, bool) {
				v, ok := valueOf(m.theory[t], func(b *theory.Bound) float64 { return b.MuUploads })
				return v, ok && v > 0 // 0: a theory computed before the uploads bound existed
			})
	}
	m.addMuLine(&theoryLines, muLine{label: "realized μ in training", col: colorRealized, dash: dashRealized, shape: draw.CrossGlyph{}, width: vg.Points(1.2)},
		func(t int) (float64, bool) {
			st := m.stats[t]
			if st == nil {
				return 0, false
			}
			return st.RealizedMu, true
		})
	for _, s := range m.series {
		col, glyph, dash := m.seriesStyle(s)
		m.addMuLine(&attacks, muLine{label: s.String(), col: col, dash: dash, shape: glyph, width: vg.Points(1.5)},
			func(t int) (float64, bool) {
				f := m.findings[s][t]
				if f == nil {
					return 0, false
				}
				return f.Result.MuLower, true
			})
	}
	return theoryLines, attacks
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
// than two decades, the T axis by roundsAxis; it returns the range of T drawn too.
func (m *model) muAxes(lines []muLine, claim float64) (logX, logY bool, tLo, tHi float64) {
	logX, tLo, tHi = roundsAxis(m.rounds)
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
	logY = hi > 0 && hi/lo > 100
	return logX, logY, tLo, tHi
}

// addClaimLine draws the claim as a horizontal line over [tLo, tHi] with a legend entry and
// its own label at the end of the line where the other curves are farthest from it, on the
// side of the line away from them.
func (m *model) addClaimLine(p *plot.Plot, leg *plot.Legend, lines []muLine, claim, tLo, tHi float64, logY bool) error {
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
	label := "claim μ = " + num(claim)
	if m.in.ClaimLabel != "" {
		label += " (" + m.in.ClaimLabel + ")"
	}
	leg.Add(label, cl)
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
	lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: at, Y: claim}}, Labels: []string{"claim μ = " + num(claim)}})
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

// drawMuLines adds lines and their legend entries; on a log y axis the zero lower bounds (no
// evidence) are left out, on a log T axis the checkpoint T = 0.
func drawMuLines(p *plot.Plot, leg *plot.Legend, ls []muLine, logX, logY bool) error {
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
				continue
			}
			xy = pos
		}
		ln, sc, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		ln.Color, ln.Dashes, ln.Width = l.col, l.dash, l.width
		sc.Color, sc.Shape, sc.Radius = l.col, l.shape, vg.Points(3)
		p.Add(ln, sc)
		leg.Add(l.label, ln, sc)
	}
	return nil
}

func (m *model) muFigure() (*figure, bool, error) {
	theoryLines, attacks := m.muLines()
	if len(theoryLines)+len(attacks) == 0 {
		return nil, false, nil
	}
	all := append(append([]muLine(nil), theoryLines...), attacks...)
	claim := m.in.ClaimMu
	logX, logY, tLo, tHi := m.muAxes(all, claim)

	p := newPlot()
	p.Title.Text = "μ against the number of rounds T"
	p.X.Label.Text = "number of rounds T (ticks at the checkpoints)"
	p.Y.Label.Text = "μ (Gaussian DP)"
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, decadeTicks{}
	} else {
		p.Y.Min = 0
	}
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = checkpointTicks{ts: m.rounds, log: logX, minGap: 0.045}

	leg := newLegend()
	if claim > 0 && tHi >= tLo {
		if err := m.addClaimLine(p, &leg, all, claim, tLo, tHi, logY); err != nil {
			return nil, false, err
		}
	}
	if err := drawMuLines(p, &leg, theoryLines, logX, logY); err != nil {
		return nil, false, err
	}
	if len(attacks) > 0 {
		leg.Add("", textItem{})
		leg.Add("certified lower bounds", textItem{})
		leg.Add("("+m.levelShort()+"):", textItem{})
	}
	if err := drawMuLines(p, &leg, attacks, logX, logY); err != nil {
		return nil, false, err
	}

	lw, lh := legendSize(&leg)
	lw += vg.Points(16)
	pw, h := 15*vg.Centimeter, 11*vg.Centimeter
	if lh+vg.Points(24) > h {
		h = lh + vg.Points(24)
	}
	drawFn := func(c draw.Canvas) {
		pc := c
		pc.Max.X = c.Min.X + pw
		p.Draw(pc)
		lc := c
		lc.Min.X = c.Min.X + pw + vg.Points(12)
		lc.Max.Y -= vg.Points(20) // level with the top of the plotting area, below the title
		leg.Draw(lc)
	}
	caption := "Certified lower bounds on μ (" + m.levelText() +
		") per attack (colour and marker) and threat model (dash: solid final, dashed all-iterates, dotted uploads), beside the convergent bound (valid for the final model only), the composition bound (valid for an observer of every iterate) and the realized μ of the trained runs. A certified lower bound above the bound of its threat model contradicts that bound."
	if claim > 0 {
		caption += " The vermillion dash-dotted line is the claim: a certified lower bound above it violates the claim."
	}
	if logY {
		caption += " The μ axis is logarithmic; lower bounds of 0 (no evidence) are not drawn."
	}
	caption += roundsAxisNote(m.rounds)
	return &figure{name: "mu_vs_T", title: "μ against T", caption: caption, draw: drawFn,
		w: pw + lw + vg.Points(12), h: h, wide: true}, true, nil
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
func (m *model) sensitivityFigure() (*figure, bool, error) {
	var xy plotter.XYs
	for _, t := range m.rounds {
		if st := m.stats[t]; st != nil && !math.IsNaN(st.Sensitivity) && !math.IsInf(st.Sensitivity, 0) {
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
	p.X.Tick.Marker = checkpointTicks{ts: m.rounds, log: logX, minGap: 0.06}
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
	return &figure{name: "sensitivity_vs_T", title: "Measured sensitivity against T",
		caption: "Mean distance between the final models of the coupled pairs of runs (trained on C and on C'), per T. The convergent bound assumes this stays bounded as T grows." + roundsAxisNote(ts),
		draw:    func(c draw.Canvas) { p.Draw(c) }, w: 14 * vg.Centimeter, h: 9 * vg.Centimeter}, true, nil
}

func (m *model) figures() ([]*figure, error) {
	var figs []*figure
	if f, ok, err := m.muFigure(); err != nil {
		return nil, err
	} else if ok {
		figs = append(figs, f)
	}
	for _, t := range m.findingRounds() {
		f, err := m.tradeoffFigure(t)
		if err != nil {
			return nil, err
		}
		figs = append(figs, f)
	}
	if f, ok, err := m.sensitivityFigure(); err != nil {
		return nil, err
	} else if ok {
		figs = append(figs, f)
	}
	return figs, nil
}

// hasThreat reports whether some attack row is under the given threat model: the uploads bound
// is drawn only then, since no other observer is held to it.
func (m *model) hasThreat(threat string) bool {
	for _, s := range m.series {
		if s.threat == threat {
			return true
		}
	}
	return false
}
