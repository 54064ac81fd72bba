package datasets

import (
	"math"
	"testing"
)

// The default image dataset: shape, range, balance, and a fixed content hash (the generator is
// platform independent, so a change of these bytes is a change of the dataset every seeded
// experiment on it depends on).
func TestSyntheticImagesDefault(t *testing.T) {
	d, err := Open("synthetic-images", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := d.Shape; len(got) != 3 || got[0] != 1 || got[1] != 28 || got[2] != 28 || d.Len() != 1000 || d.Classes != 10 {
		t.Fatalf("shape %v, %d samples, %d classes", d.Shape, d.Len(), d.Classes)
	}
	for i, v := range d.Features {
		if !(v >= 0 && v <= 1) {
			t.Fatalf("feature %d = %v outside [0, 1]", i, v)
		}
	}
	for c, n := range d.ClassCounts() {
		if n != 100 {
			t.Errorf("class %d has %d samples, want 100", c, n)
		}
	}
	again, err := SyntheticImages(DefaultSyntheticImageConfig())
	if err != nil {
		t.Fatal(err)
	}
	if d.Hash() != again.Hash() {
		t.Error("two generations differ")
	}
	const want = "f1e2e669d5dde56d2da427f154d4ec0810cb8805bd655d998a3b80202265580b"
	if got := d.Hash(); got != want {
		t.Errorf("content hash %s, want %s", got, want)
	}
}

// Classes are images, not noise: the nearest class mean (estimated from the first half)
// classifies the second half almost perfectly at the default noise, and at chance when the
// noise swamps the prototypes.
func TestSyntheticImagesAreSeparable(t *testing.T) {
	acc := func(noise float64) float64 {
		cfg := DefaultSyntheticImageConfig()
		cfg.Noise = noise
		d, err := SyntheticImages(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dim := d.Dim()
		means := make([]float64, d.Classes*dim)
		counts := make([]int, d.Classes)
		half := d.Len() / 2
		for i := 0; i < half; i++ {
			y := int(d.Labels[i])
			counts[y]++
			for j, v := range d.Row(i) {
				means[y*dim+j] += float64(v)
			}
		}
		for c := range counts {
			for j := 0; j < dim; j++ {
				means[c*dim+j] /= float64(max(counts[c], 1))
			}
		}
		right := 0
		for i := half; i < d.Len(); i++ {
			best, bestD := -1, math.Inf(1)
			for c := 0; c < d.Classes; c++ {
				dist := 0.0
				for j, v := range d.Row(i) {
					e := float64(v) - means[c*dim+j]
					dist += e * e
				}
				if dist < bestD {
					best, bestD = c, dist
				}
			}
			if best == int(d.Labels[i]) {
				right++
			}
		}
		return float64(right) / float64(d.Len()-half)
	}
	if a := acc(0.1); a < 0.95 {
		t.Errorf("noise 0.1: nearest-mean accuracy %v, want >= 0.95", a)
	}
	if a := acc(50); a > 0.3 {
		t.Errorf("noise 50: nearest-mean accuracy %v, want near chance (0.1)", a)
	}
}

func TestSyntheticImagesRefuseBadConfig(t *testing.T) {
	for name, mod := range map[string]func(*SyntheticImageConfig){
		"no samples":    func(c *SyntheticImageConfig) { c.N = 0 },
		"no classes":    func(c *SyntheticImageConfig) { c.Classes = 0 },
		"zero width":    func(c *SyntheticImageConfig) { c.Width = 0 },
		"huge":          func(c *SyntheticImageConfig) { c.Height, c.Width = 1024, 1024; c.N = 1 << 20 },
		"NaN noise":     func(c *SyntheticImageConfig) { c.Noise = math.NaN() },
		"negative blob": func(c *SyntheticImageConfig) { c.Blobs = -1 },
	} {
		cfg := DefaultSyntheticImageConfig()
		mod(&cfg)
		if _, err := SyntheticImages(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Open("synthetic-images:train", ""); err == nil {
		t.Error("synthetic-images:train: no error")
	}
}

func TestImageCanaries(t *testing.T) {
	shape := []int{3, 14, 14}
	p, err := BuildCanary(CanarySpec{Kind: CanaryPattern, Shape: shape, Classes: 10, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	ones := 0
	for _, v := range p.Features {
		switch v {
		case 1:
			ones++
		case 0:
		default:
			t.Fatalf("pattern value %v, want 0 or 1", v)
		}
	}
	if n := len(p.Features); ones == 0 || ones == n || math.Abs(float64(ones)/float64(n)-0.5) > 0.1 {
		t.Errorf("pattern has %d of %d pixels white, want about half", ones, n)
	}
	if _, err := BuildCanary(CanarySpec{Kind: CanaryPattern, Shape: []int{32}, Classes: 10}); err == nil {
		t.Error("pattern canary on flat data: no error")
	}

	pool := &Dataset{Name: "pool", Shape: []int{1, 2, 2}, Classes: 3, Features: make([]float32, 5*4), Labels: []int32{0, 0, 2, 2, 1}}
	b, err := BuildCanary(CanarySpec{Kind: CanaryBlank, Shape: []int{1, 2, 2}, Classes: 3, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if b.Label != 1 {
		t.Errorf("blank canary label %d, want the rarest class 1", b.Label)
	}
	for _, v := range b.Features {
		if v != 0 {
			t.Fatalf("blank canary has a non-zero pixel %v", v)
		}
	}
	if b, _ := BuildCanary(CanarySpec{Kind: CanaryBlank, Shape: []int{1, 2, 2}, Classes: 3}); b.Label != 2 {
		t.Errorf("blank canary without a pool: label %d, want the last class 2", b.Label)
	}
}
