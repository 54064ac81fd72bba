package figures

import (
	"cmp"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fedaudit/fedaudit/audit"
)

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

// approxCurve is the trade-off curve of (eps, delta)-DP as (alpha, beta) pairs for every panel:
// its three corners, and points dense on log scales down to lo/10 near both axes (the curve is
// its own inverse, so the points near the beta axis are the mirror images of those near the
// alpha axis), so that the zoom and the ROC draw it as the straight pieces it is.
func approxCurve(eps, delta, lo float64) plotter.XYs {
	f := func(a float64) float64 { return audit.TradeoffApprox(eps, delta, a) }
	kink := (1 - delta) / (1 + math.Exp(eps))
	pts := plotter.XYs{{X: 0, Y: 1 - delta}, {X: kink, Y: f(kink)}, {X: 1 - delta, Y: 0}, {X: 1, Y: 0}}
	for _, a := range append(alphaGrid(), logGrid(lo/10, 1, 50)...) {
		pts = append(pts, plotter.XY{X: a, Y: f(a)}, plotter.XY{X: f(a), Y: a})
	}
	slices.SortFunc(pts, func(p, q plotter.XY) int { return cmp.Or(cmp.Compare(p.X, q.X), cmp.Compare(q.Y, p.Y)) })
	return slices.CompactFunc(pts, func(p, q plotter.XY) bool { return p == q })
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
// than 0.0009999) and marks 2..9 times each, without labels unless twoFive.
type decadeTicks struct {
	// twoFive labels 2 and 5 times each power of ten too, where the axis spans at most
	// three decades: a mu axis from 1 to 100 labelled at 1, 10 and 100 alone left bounds of 1.2
	// and 2.5 against its bottom edge with nothing to read them by.
	twoFive bool
}

func (d decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	twoFive := d.twoFive && hi <= 1000*lo
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		for j := 1; j <= 9; j++ {
			v := float64(j) * math.Pow10(k)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if j == 1 || (twoFive && (j == 2 || j == 5)) {
				t.Label = strconv.FormatFloat(float64(j)*math.Pow10(k), 'g', 6, 64)
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
	for _, s := range m.Series {
		if f := m.Findings[s][t]; f != nil {
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
	if m.ClaimMu > 0 {
		label := "T_G(claim μ = " + num(m.ClaimMu) + ")"
		if scope := m.claimScope(); scope != "" {
			label += ", " + scope + " rows only"
		}
		curves = append(curves, curve{m.ClaimMu, label, colorClaim, dashClaim})
	}
	if b := m.Theory[t]; b != nil {
		convergent, uploads := "", ""
		if m.BoundsEstimated && t != 1 { // at T = 1 both are one Gaussian mechanism from the public w_0
			convergent = ", an estimate"
			uploads = convergent
		}
		curves = append(curves,
			curve{b.Mu, "T_G(convergent μ = " + num(b.Mu) + "), final model" + convergent, colorConvergent, nil},
			curve{b.MuComposition, "T_G(composition μ = " + num(b.MuComposition) + "), every iterate", colorComposition, dashComposition})
		if m.hasThreat("uploads") && b.MuUploads > 0 {
			curves = append(curves, curve{b.MuUploads, "T_G(uploads μ = " + num(b.MuUploads) + "), single upload" + uploads, colorConvergent, dashUploads})
		}
	}
	if m.ClaimEps > 0 {
		// The claim first, as a claimed mu is: an accountant's (epsilon, delta) bounds no
		// single mu, and its own curve is what a certified marker contradicts.
		label := "f(claim ε = " + num(m.ClaimEps) + ", δ = " + num(m.ClaimDelta) + ")"
		if scope := m.claimScope(); scope != "" {
			label += ", " + scope + " rows only"
		}
		shown, err := inPanels(panels, approxCurve(m.ClaimEps, m.ClaimDelta, lo), nil, colorClaim, dashClaim, vg.Points(1.5))
		if err != nil {
			return err
		}
		if shown != nil {
			leg.Add(label, shown)
		}
	}
	for _, c := range curves {
		if math.IsNaN(c.mu) || math.IsInf(c.mu, 0) || c.mu < 0 {
			continue
		}
		shown, err := inPanels(panels, gdpCurve(c.mu), func(pn *panel) plotter.XYs {
			switch pn {
			case roc:
				return gdpROC(c.mu, lo)
			case zoom:
				return gdpLog(c.mu, lo)
			}
			return nil
		}, c.col, c.dash, vg.Points(1.5))
		if err != nil {
			return err
		}
		if audit.TradeoffGDP(c.mu, lo) < lo {
			// Even on log axes the curve stays below lo (T_G is largest at the panel's smallest
			// alpha, lo): it lies on the axes in every view. gdpLog keeps points down to lo/10 so
			// that the line reaches the axis; those are clipped and do not make it visible.
			c.label += ", on the axes"
		}
		if shown != nil {
			leg.Add(c.label, shown)
		}
	}
	return nil
}

// inPanels draws a curve of (alpha, beta) pairs in every panel (each panel's own points where
// own gives them: see panel.line) and returns a line for the legend, nil when no panel shows it.
func inPanels(panels []*panel, pts plotter.XYs, own func(*panel) plotter.XYs, col color.Color, dash []vg.Length, width vg.Length) (*plotter.Line, error) {
	var shown *plotter.Line
	for _, pn := range panels {
		var xy plotter.XYs
		if own != nil {
			xy = own(pn)
		}
		l, err := pn.line(pts, xy, col, dash, width)
		if err != nil {
			return nil, err
		}
		if l != nil {
			shown = l
		}
	}
	return shown, nil
}

// addAttackEnvelopes draws each attack's ROC envelope at T and its certified error pair in
// every panel, with their legend entries.
func (m *model) addAttackEnvelopes(leg *plot.Legend, full, zoom, roc *panel, t int) error {
	panels := []*panel{full, zoom, roc}
	for _, s := range m.Series {
		f := m.Findings[s][t]
		if f == nil || f.Result.ROC == nil {
			continue
		}
		col, glyph, dash := m.seriesStyle(s)
		env := f.Result.ROC.Envelope.Points
		envXY := make(plotter.XYs, len(env))
		for j, pt := range env {
			envXY[j].X, envXY[j].Y = pt.Alpha, pt.Beta
		}
		thumb, err := inPanels(panels, envXY, nil, col, dash, vg.Points(1.3))
		if err != nil {
			return err
		}
		cp := f.Result.MuPoint
		var mark *plotter.Scatter
		// A certified pair on or above the diagonal (alpha_up + beta_up >= 1) shows nothing a
		// guess would not: no marker, where it only cluttered the corner of (1, 1).
		if (cp.AlphaUpper > 0 || cp.BetaUpper > 0) && cp.AlphaUpper+cp.BetaUpper < 1 {
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
	leg.Add("   at "+m.Level+";", textItem{})
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
func (m *model) tradeoffFigure(t int) (*Figure, error) {
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
	// A legend taller than the panel beside it (many attacks: an import with uploads has 15)
	// runs on below the panels, the figure growing to hold it.
	h := 2 * tile
	if lh+tile+vg.Points(20) > h {
		h = lh + tile + vg.Points(20)
	}
	drawFn := func(c draw.Canvas) {
		// Adding data widens the axes; every panel shows exactly its own range.
		for _, pn := range panels {
			pn.p.X.Min, pn.p.X.Max, pn.p.Y.Min, pn.p.Y.Max = pn.xmin, pn.xmax, pn.ymin, pn.ymax
		}
		// Left: full and zoom on top, ROC below; right of the ROC the legend, down to the
		// figure's bottom. The panels keep their size in the top 2 tiles; the grid spanned the
		// whole height, so a grown figure gave the legend half of it and cut it off.
		grid := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: c.Min.X, Y: c.Max.Y - 2*tile}, Max: vg.Point{X: c.Min.X + 2*tile, Y: c.Max.Y}}}
		tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(14), PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
		// Plain tiles rather than plot.Align: Align lines up the plotting areas but then sets
		// the titles of one row at different heights.
		full.p.Draw(tiles.At(grid, 0, 0))
		zoom.p.Draw(tiles.At(grid, 1, 0))
		roc.p.Draw(tiles.At(grid, 0, 1))
		lc := tiles.At(grid, 1, 1)
		lc.Max.X = c.Max.X - vg.Points(4)
		lc.Min.X += vg.Points(8)
		lc.Min.Y = c.Min.Y + tiles.PadBottom
		leg.Draw(lc)
	}
	return &Figure{
		Name:  "tradeoff_T" + ts,
		Title: "Trade-off curves at T = " + ts,
		Caption: "Type I against type II error at T = " + ts + ", three views of the same data: the whole square; the corner near the axes with both errors on logarithmic axes from " + num(lo) +
			", where strong attacks and the trade-off curves of large μ lie (a curve marked \"on the axes\" stays below " + num(lo) + " even there); and the ROC (TPR = 1 - α against FPR = β, world C positive) on logarithmic axes from " + num(lo) +
			", the low-FPR view. Coloured lines: each attack's empirical ROC envelope (colour and marker: attack; dash: threat model). Markers: each attack's certified error pair: with the stated confidence its true error rates are at most (α_up, β_up), so the mechanism's trade-off curve passes on or below the marker; the bars start at the observed rates. A marker below a T_G curve contradicts that curve's μ (for the claim and the bound of the attack's own threat model)." + m.approxClaimNote() + claimScopeNote(m.claimScope()) + m.estimateNote() + " Grey dotted: random guessing.",
		draw: drawFn, w: w, h: h, Wide: true,
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

// approxClaimNote is what the trade-off caption says of a claim in epsilon, or "".
func (m *model) approxClaimNote() string {
	if m.ClaimEps <= 0 {
		return ""
	}
	return " The vermillion dash-dotted line is the claim's (ε, δ)-DP trade-off curve f(α) = max(0, 1 - δ - e^ε α, e^-ε (1 - δ - α)): a mechanism meets the claim only if its trade-off curve lies on or above it, so a certified marker below it contradicts the claim (the marker is the test of the best certified μ; the verdict takes the test of the best certified ε at the claim's δ, which the verdicts table gives)."
}

// claimScopeNote is what a trade-off caption adds when the claim is judged on some threat
// models only (model.claimScope), or "".
func claimScopeNote(scope string) string {
	if scope == "" {
		return ""
	}
	return " The claim is judged on the " + scope + " rows only; the other rows are judged against the bound of their threat model."
}
