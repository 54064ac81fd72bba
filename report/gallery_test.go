package report

import (
	"bytes"
	"image/png"
	"math"
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

// TestGalleryInReport: with a gallery the report writes figures/gallery.png, shows it inline in
// the HTML page as a data URL and links it from the Markdown; the PNG holds the tiles at their
// places with their values (sample 0.5 -> grey 128, reconstruction 1.5 clipped -> 255, 0.25 ->
// 64); the figure depends on the data alone (same bytes twice). Without one, no file and no
// section.
func TestGalleryInReport(t *testing.T) {
	in := syntheticInput(t)
	in.Gallery = testGallery()
	_, files := writeReport(t, in, Options{})
	raw := files["figures/gallery.png"]
	if raw == nil {
		t.Fatal("no figures/gallery.png")
	}
	if !strings.Contains(string(files["report.html"]), `<img class="gallery" src="data:image/png;base64,`) {
		t.Error("report.html does not show the gallery inline")
	}
	if !strings.Contains(string(files["report.md"]), "](figures/gallery.png)") || !strings.Contains(string(files["report.md"]), "## Reconstructions") {
		t.Error("report.md does not link the gallery")
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	// Layout: scale 7 (84 / 12), tiles 70 wide and 84 high, columns of max(70, 84) + 8 = 92
	// pixels after the 56-pixel label column; two header lines (30) and a gap (8) above row 0.
	scale, colW, top := 7, 92, 38
	grey := func(col, row, dx, dy int) uint32 {
		r, _, _, _ := img.At(56+col*colW+dx, top+row*(12*scale+15+8)+dy).RGBA()
		return r >> 8
	}
	for _, tc := range []struct {
		col, row int
		want     uint32
	}{{0, 0, 128}, {1, 0, 64}, {2, 0, 0}, {3, 0, 255}, {1, 1, 64}, {3, 1, 255}} {
		if got := grey(tc.col, tc.row, 30, 40); got != tc.want {
			t.Errorf("tile (%d, %d): grey %d, want %d", tc.col, tc.row, got, tc.want)
		}
	}
	if b := img.Bounds(); b.Dx() != 56+4*colW+8 || b.Dy() != top+2*(12*scale+15+8) {
		t.Errorf("gallery is %v", b)
	}
	again, _, err := galleryPNG(testGallery())
	if err != nil || !bytes.Equal(again, raw) {
		t.Errorf("a second rendering differs (%v)", err)
	}
	_, plain := writeReport(t, syntheticInput(t), Options{})
	if plain["figures/gallery.png"] != nil || strings.Contains(string(plain["report.md"]), "Reconstructions") {
		t.Error("a report without a gallery shows one")
	}
	bad := testGallery()
	bad.Reconstructions[0].Pixels = bad.Reconstructions[0].Pixels[:5]
	in.Gallery = bad
	if err := Write(t.TempDir(), in, Options{}); err == nil {
		t.Error("a gallery with a short image was rendered")
	}
}
