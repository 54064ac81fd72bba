package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/fedaudit/fedaudit/audit"
)

// figure is one plot, kept as a *plot.Plot so it can be rendered to SVG and PNG alike.
type figure struct {
	name    string // file stem in figures/
	title   string
	caption string
	plot    *plot.Plot
	w, h    vg.Length
}

// svg renders the figure without fonts embedded: vgsvg then writes only the drawing
// commands, which depend on the data alone, so the bytes are reproducible.
func (f *figure) svg() ([]byte, error) {
	c := vgsvg.New(f.w, f.h)
	f.plot.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure %s: %w", f.name, err)
	}
	return b.Bytes(), nil
}

func (f *figure) png() ([]byte, error) {
	c := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(144),
		vgimg.UseBackgroundColor(color.White))}
	f.plot.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure %s: %w", f.name, err)
	}
	return b.Bytes(), nil
}

var (
	colorConvergent  = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	colorComposition = color.RGBA{R: 120, G: 40, B: 160, A: 255}
	colorRealized    = color.RGBA{R: 30, G: 30, B: 30, A: 255}
	colorDiagonal    = color.RGBA{R: 150, G: 150, B: 150, A: 255}
)

// alphaGrid holds type I errors for drawing T_G curves: dense near 0, where the curves of
// large mu rise steeply, and even elsewhere.
func alphaGrid() []float64 {
	var g []float64
	g = append(g, 0)
	for e := -6.0; e < -2; e += 0.25 {
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

// certifiedBars draws a certified test: the observed error rates with bars reaching the
// upper confidence bounds (both bars extend only upward: the bounds are one-sided).
type certifiedBars struct {
	plotter.XYs
	up []audit.CertifiedPoint
}

func (c certifiedBars) XError(i int) (float64, float64) {
	return 0, c.up[i].AlphaUpper - c.up[i].AlphaHat
}

func (c certifiedBars) YError(i int) (float64, float64) {
	return 0, c.up[i].BetaUpper - c.up[i].BetaHat
}

// tradeoffFigure draws, for one T, each attack's empirical envelope, its certified point,
// the theoretical Gaussian trade-off curves and the diagonal of random guessing.
func (m *model) tradeoffFigure(t int) (*figure, error) {
	p := plot.New()
	p.Title.Text = "Trade-off curves at T = " + strconv.Itoa(t)
	p.X.Label.Text = "type I error α = P(say C' | C)"
	p.Y.Label.Text = "type II error β = P(say C | C')"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())

	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 0}})
	if err != nil {
		return nil, err
	}
	diag.Color, diag.Dashes = colorDiagonal, []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(diag)
	p.Legend.Add("β = 1 - α (guessing)", diag)

	if b := m.theory[t]; b != nil {
		for _, c := range []struct {
			mu    float64
			label string
			col   color.Color
			dash  []vg.Length
		}{
			{b.Mu, "T_G(convergent μ = " + num(b.Mu) + "): final", colorConvergent, nil},
			{b.MuComposition, "T_G(composition μ = " + num(b.MuComposition) + "): iterates", colorComposition, []vg.Length{vg.Points(6), vg.Points(3)}},
		} {
			if math.IsNaN(c.mu) || math.IsInf(c.mu, 0) {
				continue
			}
			l, err := plotter.NewLine(gdpCurve(c.mu))
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes, l.Width = c.col, c.dash, vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(c.label, l)
		}
	}

	for i, s := range m.series {
		f := m.findings[s][t]
		if f == nil || f.Result.ROC == nil {
			continue
		}
		col := plotutil.Color(i)
		env := f.Result.ROC.Envelope.Points
		xy := make(plotter.XYs, len(env))
		for j, pt := range env {
			xy[j].X, xy[j].Y = pt.Alpha, pt.Beta
		}
		if len(xy) > 0 {
			l, sc, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.Color, sc.Color = col, col
			sc.Shape, sc.Radius = draw.CircleGlyph{}, vg.Points(1.5)
			p.Add(l, sc)
			p.Legend.Add("envelope: "+s.String(), l, sc)
		}
		cp := f.Result.MuPoint
		if cp.AlphaUpper == 0 && cp.BetaUpper == 0 {
			continue
		}
		bars := certifiedBars{XYs: plotter.XYs{{X: cp.AlphaHat, Y: cp.BetaHat}}, up: []audit.CertifiedPoint{cp}}
		xb, err := plotter.NewXErrorBars(bars)
		if err != nil {
			return nil, err
		}
		yb, err := plotter.NewYErrorBars(bars)
		if err != nil {
			return nil, err
		}
		xb.Color, yb.Color = col, col
		corner, err := plotter.NewScatter(plotter.XYs{{X: cp.AlphaUpper, Y: cp.BetaUpper}})
		if err != nil {
			return nil, err
		}
		corner.Color, corner.Shape, corner.Radius = col, draw.BoxGlyph{}, vg.Points(3)
		p.Add(xb, yb, corner)
		p.Legend.Add("certified (upper bounds): "+s.String(), corner)
	}
	return &figure{
		name:  "tradeoff_T" + strconv.Itoa(t),
		title: "Trade-off curves at T = " + strconv.Itoa(t),
		caption: "Type I against type II error at T = " + strconv.Itoa(t) +
			". Lines with dots: each attack's empirical ROC envelope (threat model in brackets). Squares: the certified test's upper confidence bounds (alpha_up, beta_up), with bars from the observed error rates; the mechanism's trade-off curve passes below them at confidence " +
			m.confidenceText() + ". Red: Gaussian trade-off of the convergent bound (final model); purple dashed: of the composition bound (every iterate); grey dashed: random guessing. A certified square below the red curve would contradict the convergent bound.",
		plot: p, w: 13 * vg.Centimeter, h: 12 * vg.Centimeter,
	}, nil
}

// muFigure draws mu against T: certified lower bounds per attack and threat model, the
// theoretical bounds and the realized mu. A wide range switches to logarithmic axes.
func (m *model) muFigure() (*figure, bool, error) {
	type line struct {
		label string
		xy    plotter.XYs
		col   color.Color
		dash  []vg.Length
		shape draw.GlyphDrawer
	}
	var lines []line
	add := func(l line, get func(int) (float64, bool)) {
		for _, t := range m.rounds {
			if v, ok := get(t); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				l.xy = append(l.xy, plotter.XY{X: float64(t), Y: v})
			}
		}
		if len(l.xy) > 0 {
			lines = append(lines, l)
		}
	}
	add(line{label: "convergent bound (final model)", col: colorConvergent, shape: draw.CircleGlyph{}},
		func(t int) (float64, bool) {
			b := m.theory[t]
			return valueOf(b, func(b *audit.Bound) float64 { return b.Mu })
		})
	add(line{label: "composition bound (all iterates)", col: colorComposition, dash: []vg.Length{vg.Points(6), vg.Points(3)}, shape: draw.TriangleGlyph{}},
		func(t int) (float64, bool) {
			b := m.theory[t]
			return valueOf(b, func(b *audit.Bound) float64 { return b.MuComposition })
		})
	add(line{label: "realized μ in training", col: colorRealized, dash: []vg.Length{vg.Points(2), vg.Points(2)}, shape: draw.CrossGlyph{}},
		func(t int) (float64, bool) {
			st := m.stats[t]
			if st == nil {
				return 0, false
			}
			return st.RealizedMu, true
		})
	for i, s := range m.series {
		add(line{label: "certified lower bound: " + s.String(), col: plotutil.Color(i), shape: draw.BoxGlyph{}},
			func(t int) (float64, bool) {
				f := m.findings[s][t]
				if f == nil {
					return 0, false
				}
				return f.Result.MuLower, true
			})
	}
	if len(lines) == 0 {
		return nil, false, nil
	}

	// Logarithmic y when the positive values span more than two decades; zero lower bounds
	// (no evidence) cannot be drawn there and are left out, which the caption says.
	lo, hi := math.Inf(1), 0.0
	for _, l := range lines {
		for _, pt := range l.xy {
			if pt.Y > 0 {
				lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
			}
		}
	}
	logY := hi > 0 && hi/lo > 100
	tLo, tHi := math.Inf(1), 0.0
	for _, t := range m.rounds {
		tLo, tHi = math.Min(tLo, float64(t)), math.Max(tHi, float64(t))
	}
	logX := tLo >= 1 && tHi/tLo > 50

	p := plot.New()
	p.Title.Text = "μ against the number of rounds T"
	p.X.Label.Text = "number of rounds T"
	p.Y.Label.Text = "μ (Gaussian DP)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
	}
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	for _, l := range lines {
		xy := l.xy
		if logY {
			xy = xy[:0:0]
			for _, pt := range l.xy {
				if pt.Y > 0 {
					xy = append(xy, pt)
				}
			}
			if len(xy) == 0 {
				continue
			}
		}
		ln, sc, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, false, err
		}
		ln.Color, ln.Dashes, ln.Width = l.col, l.dash, vg.Points(1.2)
		sc.Color, sc.Shape, sc.Radius = l.col, l.shape, vg.Points(2.5)
		p.Add(ln, sc)
		p.Legend.Add(l.label, ln, sc)
	}
	caption := "Certified lower bounds on μ (confidence " + m.confidenceText() +
		") per attack and threat model, beside the convergent bound (valid for the final model only), the composition bound (valid for an observer of every iterate) and the realized μ of the trained runs. A certified lower bound above the bound of its threat model contradicts that bound."
	if logY {
		caption += " The μ axis is logarithmic; lower bounds of 0 (no evidence) are not drawn."
	}
	return &figure{name: "mu_vs_T", title: "μ against T", caption: caption, plot: p,
		w: 18 * vg.Centimeter, h: 12 * vg.Centimeter}, true, nil
}

func valueOf(b *audit.Bound, get func(*audit.Bound) float64) (float64, bool) {
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
	p := plot.New()
	p.Title.Text = "Measured sensitivity against T"
	p.X.Label.Text = "number of rounds T"
	p.Y.Label.Text = "mean ||w_T - w'_T|| over coupled pairs"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	ln, sc, err := plotter.NewLinePoints(xy)
	if err != nil {
		return nil, false, err
	}
	ln.Color, sc.Color = colorRealized, colorRealized
	p.Add(ln, sc)
	return &figure{name: "sensitivity_vs_T", title: "Measured sensitivity against T",
		caption: "Mean distance between the final models of the coupled pairs of runs (trained on C and on C'), per T. The convergent bound assumes this stays bounded as T grows.",
		plot:    p, w: 14 * vg.Centimeter, h: 9 * vg.Centimeter}, true, nil
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
