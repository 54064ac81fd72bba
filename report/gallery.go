package report

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

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/fedaudit/fedaudit/findings"
)

// The gallery: the sample that differs between the worlds beside what the reconstructing
// attacks made of it, as a PNG (pixel images are what people look at first). Tiles are the
// samples enlarged by an integer factor with nearest-neighbour pixels (no smoothing that would
// flatter a reconstruction), values clipped to [0, 1]; one channel is grey, three are RGB,
// others are shown as their channel mean. Labels use a fixed 7 x 13 bitmap font, so the bytes
// depend on the data alone.

const (
	tileMin   = 84 // smallest tile side in pixels (28 x 28 images are shown 3x)
	tileGap   = 8
	lineH     = 15 // one text line
	labelColW = 56 // the row-label column, at least
)

var (
	inkColor   = color.Gray{Y: 0x20}
	frameColor = color.Gray{Y: 0xb0}
)

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

// drawText writes s with its baseline's left end at (x, y + 11) (inside a line of lineH pixels
// starting at y), cut to fit width pixels.
func drawText(img *image.RGBA, s string, x, y, width int) {
	face := basicfont.Face7x13
	if n := width / face.Advance; len(s) > n {
		s = s[:max(n, 0)]
	}
	d := font.Drawer{Dst: img, Src: &image.Uniform{inkColor}, Face: face, Dot: fixed.P(x, y+11)}
	d.DrawString(s)
}

// galleryCell is one tile of the grid with the line of text under it.
type galleryCell struct {
	pixels []float32
	text   string
}

// galleryGrid draws a grid of tiles: a line of group labels spanning columns (groups[i] over
// columns groupStart[i]..), a line of column labels, and rows each with its label on the left.
// A nil cell is left empty.
func galleryGrid(shape []int, groups []string, groupStart []int, cols, rowLabels []string, cells [][]*galleryCell) ([]byte, error) {
	scale := tileScale(shape)
	tw, th := shape[2]*scale, shape[1]*scale
	colW := max(tw, 12*basicfont.Face7x13.Advance) + tileGap
	rowH := th + lineH + tileGap
	head := lineH
	if len(groups) > 0 {
		head += lineH
	}
	labelW := labelColW
	for _, l := range rowLabels {
		labelW = max(labelW, len(l)*basicfont.Face7x13.Advance+10)
	}
	w := labelW + len(cols)*colW + tileGap
	h := head + tileGap + len(rowLabels)*rowH
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.White}, image.Point{}, draw.Src)
	y0 := 2
	for i, g := range groups {
		end := len(cols)
		if i+1 < len(groupStart) {
			end = groupStart[i+1]
		}
		x := labelW + groupStart[i]*colW
		drawText(img, g, x, y0, (end-groupStart[i])*colW-tileGap)
	}
	if len(groups) > 0 {
		y0 += lineH
	}
	for c, name := range cols {
		drawText(img, name, labelW+c*colW, y0, colW-2)
	}
	for r, label := range rowLabels {
		y := head + tileGap + r*rowH
		drawText(img, label, 4, y+th/2-lineH/2, labelW-6)
		for c, cell := range cells[r] {
			if cell == nil {
				continue
			}
			x := labelW + c*colW
			drawTile(img, shape, cell.pixels, scale, x, y)
			drawText(img, cell.text, x, y+th+1, colW-2)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, fmt.Errorf("gallery: %w", err)
	}
	return b.Bytes(), nil
}

// metricText is the line under a reconstruction: its PSNR and SSIM against the sample.
func metricText(m map[string]float64) string {
	p, okp := m["inversion_psnr"]
	s, oks := m["inversion_ssim"]
	out := ""
	if okp && !math.IsNaN(p) {
		out = strconv.FormatFloat(p, 'f', 1, 64) + "dB"
	}
	if oks && !math.IsNaN(s) {
		if out != "" {
			out += " "
		}
		out += "S" + strconv.FormatFloat(s, 'f', 2, 64)
	}
	return out
}

var worldNames = map[int8]string{0: "C", 1: "C'"}

// sampleName is how the gallery names the sample of a world: epsilon in C, epsilon' in C'.
func sampleName(world int8) string {
	if world == 1 {
		return "eps'"
	}
	return "eps"
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

// galleryPNG renders an experiment's gallery: one row per checkpoint T; for each world whose
// sample exists, a column with the sample, then one per attack with its reconstruction from
// that world's run of the pair shown (PSNR and SSIM under it). It also returns the ids of the
// pairs shown. Nil when g has nothing to show.
func galleryPNG(g *findings.Gallery) ([]byte, string, error) {
	if g == nil || len(g.Reconstructions) == 0 {
		return nil, "", nil
	}
	if err := g.Validate(); err != nil {
		return nil, "", err
	}
	attacks, rounds := galleryAttacks(g)
	var groups, cols []string
	var groupStart []int
	type col struct {
		world  int8
		attack string // "" for the sample
	}
	var layout []col
	for _, s := range g.Samples {
		groups = append(groups, "world "+worldNames[s.World])
		groupStart = append(groupStart, len(cols))
		cols = append(cols, sampleName(s.World)+" y="+strconv.Itoa(s.Label))
		layout = append(layout, col{world: s.World})
		for _, a := range attacks {
			cols = append(cols, a)
			layout = append(layout, col{world: s.World, attack: a})
		}
	}
	var labels []string
	cells := make([][]*galleryCell, len(rounds))
	var pairs []int64
	for ri, T := range rounds {
		labels = append(labels, "T="+strconv.Itoa(T))
		cells[ri] = make([]*galleryCell, len(layout))
		for ci, c := range layout {
			if c.attack == "" {
				cells[ri][ci] = &galleryCell{pixels: g.Sample(c.world).Pixels, text: "sample"}
				continue
			}
			for _, r := range g.Reconstructions {
				if r.Attack == c.attack && r.Round == T && r.World == c.world {
					cells[ri][ci] = &galleryCell{pixels: r.Pixels, text: metricText(r.Metrics)}
					if !slices.Contains(pairs, r.Pair) {
						pairs = append(pairs, r.Pair)
					}
				}
			}
		}
	}
	b, err := galleryGrid(g.Shape, groups, groupStart, cols, labels, cells)
	slices.Sort(pairs)
	ids := make([]string, len(pairs))
	for i, p := range pairs {
		ids[i] = strconv.FormatInt(p, 10)
	}
	return b, strings.Join(ids, ", "), err
}
