package gallery

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
)

// testGallery is a 1 x 12 x 10 sample per world (uniform grey 0.5 in C, black in C') and an
// attack's reconstructions at T = 1 and 5 (values 0.25 and 1.5, shown clipped to 1).
func testGallery() *findings.Gallery {
	fill := func(v float32) []float32 {
		px := make([]float32, 120)
		for i := range px {
			px[i] = v
		}
		return px
	}
	g := &findings.Gallery{Shape: []int{1, 12, 10},
		Samples: []findings.GallerySample{{World: 0, Label: 2, Pixels: fill(0.5)}, {World: 1, Label: 9, Pixels: fill(0)}}}
	for _, T := range []int{1, 5} {
		for w := int8(0); w < 2; w++ {
			g.Reconstructions = append(g.Reconstructions, findings.Reconstruction{Attack: "invgrad", Round: T, Run: int64(w), Pair: 0, World: w,
				Pixels: fill([]float32{0.25, 1.5}[w]), Metrics: map[string]float64{"inversion_psnr": 12.04, "inversion_ssim": math.NaN()}})
		}
	}
	return g
}

// comparisonExperiments are two experiments of which only the second ("sigma = 0") has a
// gallery.
func comparisonExperiments() []Experiment {
	return []Experiment{{Label: "sigma = 0.1"}, {Label: "sigma = 0", Gallery: testGallery()}}
}

// TestPNG: the PNG holds the tiles at their places with their values (sample 0.5 -> grey 128,
// reconstruction 1.5 clipped -> 255, 0.25 -> 64) and names the one pair shown; it depends on
// the data alone (same bytes twice); nothing is drawn without reconstructions, and a gallery
// that is not valid is an error.
func TestPNG(t *testing.T) {
	raw, pairs, err := PNG(testGallery())
	if err != nil || pairs != "pair 0" {
		t.Fatalf("PNG: %q, %v", pairs, err)
	}
	page, _, err := galleryContent(testGallery())
	if err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, raw)
	// Columns: sample ε (C, 0.5 -> 128), invgrad (0.25 -> 64), sample ε' (C', 0 -> 0), invgrad
	// (1.5 clipped -> 255); rows T = 1 and 5.
	for _, tc := range []struct {
		col, row int
		want     uint32
	}{{0, 0, 128}, {1, 0, 64}, {2, 0, 0}, {3, 0, 255}, {1, 1, 64}, {3, 1, 255}} {
		if got := tileGrey(t, page, img, tc.row, tc.col); got != tc.want {
			t.Errorf("tile (%d, %d): grey %d, want %d", tc.col, tc.row, got, tc.want)
		}
	}
	if l := pageLayout(t, page); img.Bounds() != image.Rect(0, 0, l.width, l.height) {
		t.Errorf("gallery is %v, layout %d x %d", img.Bounds(), l.width, l.height)
	}
	again, _, err := PNG(testGallery())
	if err != nil || !bytes.Equal(again, raw) {
		t.Errorf("a second rendering differs (%v)", err)
	}
	if none, _, err := PNG(&findings.Gallery{}); none != nil || err != nil {
		t.Errorf("a gallery without reconstructions gave %d bytes, %v", len(none), err)
	}
	bad := testGallery()
	bad.Reconstructions[0].Pixels = bad.Reconstructions[0].Pixels[:5]
	if _, _, err := PNG(bad); err == nil {
		t.Error("a gallery with a short image was rendered")
	}
}

// TestComparison: the gallery across experiments has one row (only sigma = 0 has a gallery);
// its canary world C' is shown: black sample, reconstruction 1.5 clipped to white. Nothing is
// drawn for an attack without images.
func TestComparison(t *testing.T) {
	raw, err := Comparison(comparisonExperiments(), "invgrad")
	if err != nil || raw == nil {
		t.Fatalf("Comparison: %d bytes, %v", len(raw), err)
	}
	page, err := comparisonPage(comparisonExperiments(), "invgrad")
	if err != nil || page == nil || len(page.rowLabels) != 1 {
		t.Fatalf("comparisonPage: %v", err)
	}
	img := decodePNG(t, raw)
	// One row (sigma = 0): the sample of C' (black), then T = 1 (1.5 clipped to white).
	if s, t1 := tileGrey(t, page, img, 0, 0), tileGrey(t, page, img, 0, 1); s != 0 || t1 != 255 {
		t.Errorf("sample tile grey %d (want 0), T=1 tile %d (want 255)", s, t1)
	}
	none, err := Comparison(comparisonExperiments(), "inversion")
	if err != nil || none != nil {
		t.Errorf("inversion has no images: got %d bytes, %v", len(none), err)
	}
}

func decodePNG(t *testing.T, raw []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func pageLayout(t *testing.T, p *galleryPage) galleryLayout {
	t.Helper()
	text, title, err := galleryFaces()
	if err != nil {
		t.Fatal(err)
	}
	return p.layout(text, title)
}

// tileGrey is the grey level (red channel) at the centre of the tile at row r, column c.
func tileGrey(t *testing.T, p *galleryPage, img image.Image, r, c int) uint32 {
	t.Helper()
	l := pageLayout(t, p)
	at := l.tile(r, c)
	red, _, _, _ := img.At(at.X+l.tw/2, at.Y+l.th/2).RGBA()
	return red >> 8
}

// inkRows counts the rows of pixels between y0 and y1 that hold text ink (a dark pixel):
// the height of the text set there.
func inkRows(img image.Image, y0, y1 int) int {
	n := 0
	for y := y0; y < y1; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if r, _, _, _ := img.At(x, y).RGBA(); r>>8 < 0x80 {
				n++
				break
			}
		}
	}
	return n
}

// TestGalleryLabels: the gallery says what it shows. A title naming the pair shown; a key
// saying that the numbers are PSNR in dB and SSIM, that one pair is shown and that the tables
// give the means; samples named ε and ε' with "label" spelled out (not "eps' y=0"); every
// reconstruction's numbers with their units, "-" when unknown. The text is set at 15 px, the
// title at 18 px (the 7 x 13 bitmap font before: letters 9 px tall): the title line's ink is
// at least 15 px tall and a body line's at least 12 px. The comparison gallery across
// experiments has its own title and the same key.
func TestGalleryLabels(t *testing.T) {
	page, _, err := galleryContent(testGallery())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.title, "pair 0") {
		t.Errorf("title %q does not name the pair", page.title)
	}
	key := strings.Join(page.key, "\n")
	for _, want := range []string{"PSNR in dB", "SSIM (1 = identical)", "One pair only (pair 0", "means over all pairs", "ε in C, ε' in C'"} {
		if !strings.Contains(key, want) {
			t.Errorf("key lacks %q:\n%s", want, key)
		}
	}
	if !slices.Equal(page.cols, []string{"sample ε", "invgrad", "sample ε'", "invgrad"}) {
		t.Errorf("columns %q", page.cols)
	}
	if got := page.cells[0][2].lines; !slices.Equal(got, []string{"label 9"}) {
		t.Errorf("under the sample of C': %q", got)
	}
	if got := page.cells[1][1].lines; !slices.Equal(got, []string{"PSNR 12.0 dB", "SSIM -"}) {
		t.Errorf("under a reconstruction: %q", got)
	}
	raw, _, err := PNG(testGallery())
	if err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, raw)
	if h := inkRows(img, margin, margin+titleH); h < 15 {
		t.Errorf("title ink is %d px tall, want at least 15", h)
	}
	if h := inkRows(img, margin+titleH, margin+titleH+lineH); h < 12 {
		t.Errorf("key line ink is %d px tall, want at least 12", h)
	}
	cmp, err := comparisonPage(comparisonExperiments(), "invgrad")
	if err != nil || cmp == nil {
		t.Fatalf("comparisonPage: %v", err)
	}
	if !strings.Contains(cmp.title, "invgrad") || !strings.Contains(strings.Join(cmp.key, " "), "One pair per experiment (pair 0") ||
		!slices.Contains(cmp.key, metricsKey) {
		t.Errorf("comparison gallery title %q, key %q", cmp.title, cmp.key)
	}
}
