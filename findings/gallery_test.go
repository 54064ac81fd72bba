package findings

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func sampleGallery() *Gallery {
	px := func(v float32) []float32 { return []float32{v, v, v, v, v, v} }
	return &Gallery{Shape: []int{1, 2, 3},
		Samples: []GallerySample{{World: 0, Label: 3, Pixels: px(0.5)}, {World: 1, Label: 7, Pixels: px(0)}},
		Reconstructions: []Reconstruction{
			{Attack: "invgrad", Round: 5, Run: 0, Pair: 0, World: 0, Pixels: px(0.25), Metrics: map[string]float64{"inversion_psnr": 12.5, "inversion_ssim": math.NaN()}},
			{Attack: "invgrad", Round: 5, Run: 1, Pair: 0, World: 1, Pixels: px(1), Metrics: map[string]float64{"inversion_psnr": 9}},
		}}
}

// TestGalleryRoundTrip: reconstructions.json reads back to the same gallery (NaN as null), and
// Sample finds each world's sample.
func TestGalleryRoundTrip(t *testing.T) {
	g := sampleGallery()
	raw, err := MarshalGallery(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"inversion_ssim":null`) || !strings.Contains(string(raw), `"format":"fedaudit-gallery/1"`) {
		t.Errorf("JSON lacks the null metric or the format: %s", raw)
	}
	back, err := UnmarshalGallery(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back.Reconstructions[0].Metrics["inversion_ssim"]) {
		t.Errorf("null metric read as %v", back.Reconstructions[0].Metrics["inversion_ssim"])
	}
	back.Reconstructions[0].Metrics["inversion_ssim"] = 0
	g.Reconstructions[0].Metrics["inversion_ssim"] = 0
	if !reflect.DeepEqual(back, g) {
		t.Errorf("round trip changed the gallery:\n%+v\n%+v", back, g)
	}
	if s := back.Sample(1); s == nil || s.Label != 7 {
		t.Errorf("Sample(1) = %+v", s)
	}
	if back.Sample(3) != nil {
		t.Error("Sample(3) found a sample")
	}
}

// TestGalleryRefused: wrong pixel counts, non-finite pixels, bad shapes, a missing attack name
// and another format are errors, on writing and on reading.
func TestGalleryRefused(t *testing.T) {
	for name, edit := range map[string]func(*Gallery){
		"short sample":   func(g *Gallery) { g.Samples[0].Pixels = g.Samples[0].Pixels[:5] },
		"long recon":     func(g *Gallery) { g.Reconstructions[1].Pixels = append(g.Reconstructions[1].Pixels, 0) },
		"nan pixel":      func(g *Gallery) { g.Reconstructions[0].Pixels[2] = float32(math.NaN()) },
		"shape":          func(g *Gallery) { g.Shape = []int{6} },
		"no attack":      func(g *Gallery) { g.Reconstructions[0].Attack = "" },
		"five channels":  func(g *Gallery) { g.Shape = []int{5, 1, 1} },
		"negative shape": func(g *Gallery) { g.Shape = []int{1, -2, -3} },
	} {
		g := sampleGallery()
		edit(g)
		if _, err := MarshalGallery(g); err == nil {
			t.Errorf("%s: marshalled", name)
		}
	}
	if _, err := UnmarshalGallery([]byte(`{"format":"other","shape":[1,1,1]}`)); err == nil {
		t.Error("another format was read")
	}
}

func FuzzUnmarshalGallery(f *testing.F) {
	raw, err := MarshalGallery(sampleGallery())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(`{"format":"fedaudit-gallery/1","shape":[1,4096,4096],"samples":[{"pixels":[1]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := UnmarshalGallery(b)
		if err != nil {
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("a read gallery does not validate: %v", err)
		}
		if _, err := MarshalGallery(g); err != nil {
			t.Fatalf("a read gallery does not marshal: %v", err)
		}
	})
}
