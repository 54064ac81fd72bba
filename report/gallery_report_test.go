package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/report/gallery"
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

// TestGalleryInReport: with a gallery the report writes figures/gallery.png (gallery.PNG of its
// Gallery), shows it inline in the HTML page as a data URL and links it from the Markdown, with
// a caption naming the one pair shown and where the means are. Without one, no file and no
// section; a gallery that is not valid is an error.
func TestGalleryInReport(t *testing.T) {
	in := syntheticInput(t)
	in.Gallery = testGallery()
	_, files := writeReport(t, in, Options{})
	raw := files["figures/gallery.png"]
	if raw == nil {
		t.Fatal("no figures/gallery.png")
	}
	if want, _, err := gallery.PNG(testGallery()); err != nil || !bytes.Equal(raw, want) {
		t.Errorf("figures/gallery.png is not gallery.PNG of the input (%v)", err)
	}
	if !strings.Contains(string(files["report.html"]), `<img class="gallery" src="data:image/png;base64,`) {
		t.Error("report.html does not show the gallery inline")
	}
	if !strings.Contains(string(files["report.md"]), "](figures/gallery.png)") || !strings.Contains(string(files["report.md"]), "## Reconstructions") {
		t.Error("report.md does not link the gallery")
	}
	for _, want := range []string{"run of pair 0 only", "PSNR in dB and SSIM", "gives the means over all the pairs"} {
		if !strings.Contains(string(files["report.md"]), want) {
			t.Errorf("the gallery's caption lacks %q", want)
		}
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
