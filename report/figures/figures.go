package figures

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is one picture: one or more plots and a legend drawn beside them, kept as a drawing
// function so it can be rendered to SVG and PNG alike.
type Figure struct {
	Name    string // file stem in figures/
	Title   string
	Caption string
	Wide    bool // shown across the page's whole width
	draw    func(c draw.Canvas)
	w, h    vg.Length
}

// SVG renders the figure without fonts embedded: vgsvg then writes only the drawing
// commands, which depend on the data alone, so the bytes are reproducible.
func (f *Figure) SVG() ([]byte, error) {
	c := vgsvg.New(f.w, f.h)
	f.draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure %s: %w", f.Name, err)
	}
	return b.Bytes(), nil
}

// PNG renders the figure as a PNG at 144 dots per inch on white.
func (f *Figure) PNG() ([]byte, error) {
	c := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(144),
		vgimg.UseBackgroundColor(color.White))}
	f.draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure %s: %w", f.Name, err)
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
	"lira-offline", "lira-online", "grad-align", "linear", "grad-canary", "label", "inversion", "invgrad",
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
func (m *model) seriesStyle(s Series) (color.Color, draw.GlyphDrawer, []vg.Length) {
	i := m.attackIndex[s.Attack]
	dash, ok := threatDashes[s.Threat]
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

// Build draws the figures of a report, in the order the report shows them: mu against T
// (when there is a curve to draw), the trade-off figure of every T with a finding, and the
// measured sensitivity against T (when any was recorded).
func Build(in *Input) ([]*Figure, error) {
	m := newModel(in)
	var figs []*Figure
	for _, build := range []func() (*Figure, bool, error){m.muFigure, m.epsFigure} {
		if f, ok, err := build(); err != nil {
			return nil, err
		} else if ok {
			figs = append(figs, f)
		}
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
	for _, s := range m.Series {
		if s.Threat == threat {
			return true
		}
	}
	return false
}
