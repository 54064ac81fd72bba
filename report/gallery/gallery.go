package gallery

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"

	"github.com/fedaudit/fedaudit/findings"
)

const (
	tileMin = 112 // smallest tile side in pixels (28 x 28 images are shown 4x)
	tileGap = 12
	margin  = 10
	// textSize and titleSize are the font sizes in pixels: the body text of a web page, the
	// title a little larger.
	textSize  = 15
	titleSize = 18
	lineH     = 20 // one line of body text
	titleH    = 26 // the title's line
	labelColW = 64 // the row-label column, at least
)

var (
	inkColor   = color.Gray{Y: 0x20}
	frameColor = color.Gray{Y: 0xb0}
)

// galleryFonts are the parsed Go Regular and Go Bold fonts (parsed once; faces are made per
// drawing, since a face is not safe for concurrent use).
var galleryFonts = sync.OnceValues(func() ([2]*opentype.Font, error) {
	var out [2]*opentype.Font
	for i, ttf := range [][]byte{goregular.TTF, gobold.TTF} {
		f, err := opentype.Parse(ttf)
		if err != nil {
			return out, fmt.Errorf("gallery font: %w", err)
		}
		out[i] = f
	}
	return out, nil
})

// galleryFaces returns the body and title faces at their pixel sizes.
func galleryFaces() (text, title font.Face, err error) {
	fs, err := galleryFonts()
	if err != nil {
		return nil, nil, err
	}
	text, err = opentype.NewFace(fs[0], &opentype.FaceOptions{Size: textSize, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		return nil, nil, err
	}
	title, err = opentype.NewFace(fs[1], &opentype.FaceOptions{Size: titleSize, DPI: 72, Hinting: font.HintingFull})
	return text, title, err
}

// textWidth is the width of s in face, in whole pixels.
func textWidth(face font.Face, s string) int {
	return font.MeasureString(face, s).Ceil()
}

// tileScale is the integer enlargement that makes a side at least tileMin pixels.
func tileScale(shape []int) int {
	side := max(shape[1], shape[2])
	return max(1, (tileMin+side-1)/side)
}

// drawTile draws pixels (layout [C][H][W]) enlarged by scale with its top-left corner at (x, y).
func drawTile(img *image.RGBA, shape []int, pixels []float32, scale, x, y int) {
	C, H, W := shape[0], shape[1], shape[2]
	at := func(c, i, j int) uint8 {
		v := float64(pixels[(c*H+i)*W+j])
		return uint8(math.Round(255 * math.Min(math.Max(v, 0), 1)))
	}
	for i := 0; i < H; i++ {
		for j := 0; j < W; j++ {
			var col color.RGBA
			switch C {
			case 3:
				col = color.RGBA{at(0, i, j), at(1, i, j), at(2, i, j), 255}
			default:
				var s float64
				for c := 0; c < C; c++ {
					s += float64(at(c, i, j))
				}
				g := uint8(math.Round(s / float64(C)))
				col = color.RGBA{g, g, g, 255}
			}
			draw.Draw(img, image.Rect(x+j*scale, y+i*scale, x+(j+1)*scale, y+(i+1)*scale), &image.Uniform{col}, image.Point{}, draw.Src)
		}
	}
	// A thin frame, so that a black or white sample stays visible as a tile.
	side := image.Rect(x-1, y-1, x+W*scale+1, y+H*scale+1)
	for _, r := range []image.Rectangle{
		image.Rect(side.Min.X, side.Min.Y, side.Max.X, side.Min.Y+1), image.Rect(side.Min.X, side.Max.Y-1, side.Max.X, side.Max.Y),
		image.Rect(side.Min.X, side.Min.Y, side.Min.X+1, side.Max.Y), image.Rect(side.Max.X-1, side.Min.Y, side.Max.X, side.Max.Y),
	} {
		draw.Draw(img, r, &image.Uniform{frameColor}, image.Point{}, draw.Src)
	}
}

// drawText writes s in face inside a line of height h starting at y (baseline placed so that
// the line's ascent fits), from x, cut to fit width pixels.
func drawText(img *image.RGBA, face font.Face, s string, x, y, h, width int) {
	for s != "" && textWidth(face, s) > width {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	m := face.Metrics()
	base := y + (h+m.Ascent.Ceil()-m.Descent.Ceil())/2
	d := font.Drawer{Dst: img, Src: &image.Uniform{inkColor}, Face: face, Dot: fixed.P(x, base)}
	d.DrawString(s)
}

// galleryCell is one tile of the grid with the lines of text under it.
type galleryCell struct {
	pixels []float32
	lines  []string
}

// galleryPage is what a gallery shows, before it is drawn: a title and key lines above a grid
// of tiles with a line of group labels spanning columns (groups[i] over columns
// groupStart[i]..), a line of column labels, and rows each with its label on the left. A nil
// cell is left empty.
type galleryPage struct {
	shape      []int
	title      string
	key        []string
	groups     []string
	groupStart []int
	cols       []string
	rowLabels  []string
	cells      [][]*galleryCell
}

// galleryLayout places a page's parts in pixels.
type galleryLayout struct {
	scale, tw, th   int   // enlargement, tile width and height
	labelW          int   // the row-label column
	colX            []int // left edge of each column
	gridTop         int   // top of the first row's tiles
	rowH            int   // from one row's tile top to the next
	cellLines       int   // lines of text under a tile
	width, height   int
	groupY, headerY int
}

func (p *galleryPage) layout(text, title font.Face) galleryLayout {
	l := galleryLayout{scale: tileScale(p.shape)}
	l.tw, l.th = p.shape[2]*l.scale, p.shape[1]*l.scale
	for _, row := range p.cells {
		for _, c := range row {
			if c != nil {
				l.cellLines = max(l.cellLines, len(c.lines))
			}
		}
	}
	l.labelW = labelColW
	for _, s := range p.rowLabels {
		l.labelW = max(l.labelW, textWidth(text, s)+2*margin)
	}
	x := margin + l.labelW
	for c, name := range p.cols {
		w := max(l.tw, textWidth(text, name))
		for _, row := range p.cells {
			if c < len(row) && row[c] != nil {
				for _, s := range row[c].lines {
					w = max(w, textWidth(text, s))
				}
			}
		}
		l.colX = append(l.colX, x)
		x += w + tileGap
	}
	l.width = x - tileGap + margin
	l.width = max(l.width, textWidth(title, p.title)+2*margin)
	for _, k := range p.key {
		l.width = max(l.width, textWidth(text, k)+2*margin)
	}
	y := margin + titleH + len(p.key)*lineH + tileGap/2
	if len(p.groups) > 0 {
		l.groupY = y
		y += lineH
	}
	l.headerY = y
	y += lineH + 4
	l.gridTop = y
	l.rowH = l.th + 2 + l.cellLines*lineH + tileGap
	l.height = l.gridTop + len(p.rowLabels)*l.rowH - tileGap + margin
	return l
}

// tile is the top-left corner of the tile at row r, column c.
func (l galleryLayout) tile(r, c int) image.Point {
	return image.Pt(l.colX[c], l.gridTop+r*l.rowH)
}

// draw renders the page as a PNG.
func (p *galleryPage) draw() ([]byte, error) {
	text, title, err := galleryFaces()
	if err != nil {
		return nil, err
	}
	l := p.layout(text, title)
	img := image.NewRGBA(image.Rect(0, 0, l.width, l.height))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.White}, image.Point{}, draw.Src)
	inner := l.width - 2*margin
	drawText(img, title, p.title, margin, margin, titleH, inner)
	for i, k := range p.key {
		drawText(img, text, k, margin, margin+titleH+i*lineH, lineH, inner)
	}
	colEnd := func(c int) int {
		if c+1 < len(l.colX) {
			return l.colX[c+1] - tileGap
		}
		return l.width - margin
	}
	for i, g := range p.groups {
		end := len(p.cols) - 1
		if i+1 < len(p.groupStart) {
			end = p.groupStart[i+1] - 1
		}
		x := l.colX[p.groupStart[i]]
		drawText(img, text, g, x, l.groupY, lineH, colEnd(end)-x)
	}
	for c, name := range p.cols {
		drawText(img, text, name, l.colX[c], l.headerY, lineH, colEnd(c)-l.colX[c])
	}
	for r, label := range p.rowLabels {
		y := l.gridTop + r*l.rowH
		drawText(img, text, label, margin, y+l.th/2-lineH/2, lineH, l.labelW-margin)
		for c, cell := range p.cells[r] {
			if cell == nil {
				continue
			}
			at := l.tile(r, c)
			drawTile(img, p.shape, cell.pixels, l.scale, at.X, at.Y)
			for i, s := range cell.lines {
				drawText(img, text, s, at.X, at.Y+l.th+2+i*lineH, lineH, colEnd(c)-at.X)
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, fmt.Errorf("gallery: %w", err)
	}
	return b.Bytes(), nil
}

// metricLines are the lines under a reconstruction: its PSNR in decibels and its SSIM against
// the sample ("-" when unknown).
func metricLines(m map[string]float64) []string {
	val := func(name string, format func(float64) string) string {
		if v, ok := m[name]; ok && !math.IsNaN(v) {
			return format(v)
		}
		return "-"
	}
	return []string{
		"PSNR " + val("inversion_psnr", func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " dB" }),
		"SSIM " + val("inversion_ssim", func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }),
	}
}

// metricsKey says what the numbers under the reconstructions are.
const metricsKey = "Under each reconstruction: PSNR in dB (higher is closer) and SSIM (1 = identical) against the sample."

var worldNames = map[int8]string{0: "C", 1: "C'"}

// sampleName is how the gallery names the sample of a world: epsilon in C, epsilon' in C'.
func sampleName(world int8) string {
	if world == 1 {
		return "ε'"
	}
	return "ε"
}

// pairsText lists pair ids: "pair 3", "pairs 0 and 2", "pairs 0, 1 and 2".
func pairsText(pairs []int64) string {
	ids := make([]string, len(pairs))
	for i, p := range pairs {
		ids[i] = strconv.FormatInt(p, 10)
	}
	switch len(ids) {
	case 0:
		return "no pair"
	case 1:
		return "pair " + ids[0]
	}
	return "pairs " + strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
}

// galleryAttacks are the attacks of g in sorted order, and its rounds.
func galleryAttacks(g *findings.Gallery) (attacks []string, rounds []int) {
	for _, r := range g.Reconstructions {
		if !slices.Contains(attacks, r.Attack) {
			attacks = append(attacks, r.Attack)
		}
		if !slices.Contains(rounds, r.Round) {
			rounds = append(rounds, r.Round)
		}
	}
	slices.Sort(attacks)
	slices.Sort(rounds)
	return attacks, rounds
}

// PNG renders an experiment's gallery: one row per checkpoint T; for each world whose
// sample exists, a column with the sample, then one per attack with its reconstruction from
// that world's run of the pair shown (PSNR and SSIM under it). It also returns the pairs
// shown ("pair 0"). Nil when g has nothing to show; an error when g is not valid.
func PNG(g *findings.Gallery) ([]byte, string, error) {
	p, pairs, err := galleryContent(g)
	if p == nil || err != nil {
		return nil, "", err
	}
	b, err := p.draw()
	return b, pairs, err
}

// galleryContent is the page PNG draws, and the pairs it shows; nil when g has nothing
// to show.
func galleryContent(g *findings.Gallery) (*galleryPage, string, error) {
	if g == nil || len(g.Reconstructions) == 0 {
		return nil, "", nil
	}
	if err := g.Validate(); err != nil {
		return nil, "", err
	}
	attacks, rounds := galleryAttacks(g)
	p := &galleryPage{shape: g.Shape}
	type col struct {
		world  int8
		attack string // "" for the sample
	}
	var layout []col
	for _, s := range g.Samples {
		p.groups = append(p.groups, "world "+worldNames[s.World])
		p.groupStart = append(p.groupStart, len(p.cols))
		p.cols = append(p.cols, "sample "+sampleName(s.World))
		layout = append(layout, col{world: s.World})
		for _, a := range attacks {
			p.cols = append(p.cols, a)
			layout = append(layout, col{world: s.World, attack: a})
		}
	}
	p.cells = make([][]*galleryCell, len(rounds))
	var pairs []int64
	for ri, T := range rounds {
		p.rowLabels = append(p.rowLabels, "T = "+strconv.Itoa(T))
		p.cells[ri] = make([]*galleryCell, len(layout))
		for ci, c := range layout {
			if c.attack == "" {
				s := g.Sample(c.world)
				p.cells[ri][ci] = &galleryCell{pixels: s.Pixels, lines: []string{"label " + strconv.Itoa(s.Label)}}
				continue
			}
			for _, r := range g.Reconstructions {
				if r.Attack == c.attack && r.Round == T && r.World == c.world {
					p.cells[ri][ci] = &galleryCell{pixels: r.Pixels, lines: metricLines(r.Metrics)}
					if !slices.Contains(pairs, r.Pair) {
						pairs = append(pairs, r.Pair)
					}
				}
			}
		}
	}
	slices.Sort(pairs)
	shown := pairsText(pairs)
	p.title = "Reconstructions of the sample that differs, from the runs of " + shown
	p.key = []string{
		"Rows: checkpoint T. Per world: its sample (ε in C, ε' in C'; label = its class), then each attack's reconstruction from that world's run.",
		metricsKey,
		"One pair only (" + shown + ": the first the attack scored, not the best); the attack-success tables give the means over all pairs.",
	}
	return p, shown, nil
}
