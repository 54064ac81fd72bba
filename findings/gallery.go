package findings

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Gallery is what the report shows of the attacks that reconstruct the sample that differs
// between the worlds (analytic inversion, invgrad): the samples themselves and, per attack and
// checkpoint T, the reconstructions from both runs of one pair. It exists only for samples that
// are images. Its JSON form is reconstructions.json (format "fedaudit-gallery/1").
type Gallery struct {
	// Shape is one sample's [channels, height, width]; pixels are in that order, values in
	// [0, 1].
	Shape []int
	// Samples are the samples that differ: world C's epsilon and world C''s epsilon' (a world
	// whose dataset lacks the sample has none).
	Samples []GallerySample
	// Reconstructions are ordered by attack, round, then world.
	Reconstructions []Reconstruction
}

// GallerySample is the sample of one world.
type GallerySample struct {
	World  int8      `json:"world"`
	Label  int       `json:"label"`
	Pixels []float32 `json:"pixels"`
}

// Reconstruction is an attack's reconstruction from one run at round T, with its metrics
// against the sample of the run's world (NaN, null in JSON, when unknown).
type Reconstruction struct {
	Attack  string             `json:"attack"`
	Round   int                `json:"round"`
	Run     int64              `json:"run"`
	Pair    int64              `json:"pair"`
	World   int8               `json:"world"`
	Pixels  []float32          `json:"pixels"`
	Metrics map[string]float64 `json:"-"`
}

// GalleryFormat names the JSON form of a Gallery.
const GalleryFormat = "fedaudit-gallery/1"

type galleryJSON struct {
	Format          string               `json:"format"`
	Shape           []int                `json:"shape"`
	Samples         []GallerySample      `json:"samples"`
	Reconstructions []reconstructionJSON `json:"reconstructions"`
}

type reconstructionJSON struct {
	Reconstruction
	Metrics map[string]*float64 `json:"metrics"`
}

// Sample returns the sample of a world, or nil.
func (g *Gallery) Sample(world int8) *GallerySample {
	for i := range g.Samples {
		if g.Samples[i].World == world {
			return &g.Samples[i]
		}
	}
	return nil
}

// Validate checks that every image has the shape's number of pixels, each finite.
func (g *Gallery) Validate() error {
	if len(g.Shape) != 3 || g.Shape[0] < 1 || g.Shape[1] < 1 || g.Shape[2] < 1 || g.Shape[0] > 4 || g.Shape[1] > 1<<12 || g.Shape[2] > 1<<12 {
		return fmt.Errorf("gallery: shape %v is not [channels (1 to 4), height, width]", g.Shape)
	}
	n := g.Shape[0] * g.Shape[1] * g.Shape[2]
	check := func(what string, px []float32) error {
		if len(px) != n {
			return fmt.Errorf("gallery: %s has %d pixels, shape %v has %d", what, len(px), g.Shape, n)
		}
		for _, v := range px {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("gallery: %s has a non-finite pixel", what)
			}
		}
		return nil
	}
	for _, s := range g.Samples {
		if err := check(fmt.Sprintf("the sample of world %d", s.World), s.Pixels); err != nil {
			return err
		}
	}
	for _, r := range g.Reconstructions {
		if r.Attack == "" {
			return errors.New("gallery: a reconstruction has no attack name")
		}
		if err := check(fmt.Sprintf("%s's reconstruction at T=%d, world %d", r.Attack, r.Round, r.World), r.Pixels); err != nil {
			return err
		}
	}
	return nil
}

// MarshalGallery encodes g as reconstructions.json holds it.
func MarshalGallery(g *Gallery) ([]byte, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	j := galleryJSON{Format: GalleryFormat, Shape: g.Shape, Samples: g.Samples}
	for _, r := range g.Reconstructions {
		m := make(map[string]*float64, len(r.Metrics))
		for k, v := range r.Metrics {
			m[k] = finite(v)
		}
		j.Reconstructions = append(j.Reconstructions, reconstructionJSON{Reconstruction: r, Metrics: m})
	}
	return json.Marshal(j)
}

// UnmarshalGallery decodes and validates reconstructions.json.
func UnmarshalGallery(raw []byte) (*Gallery, error) {
	var j galleryJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("gallery: %w", err)
	}
	if j.Format != GalleryFormat {
		return nil, fmt.Errorf("gallery: format %q, want %q", j.Format, GalleryFormat)
	}
	g := &Gallery{Shape: j.Shape, Samples: j.Samples}
	for _, r := range j.Reconstructions {
		rec := r.Reconstruction
		rec.Metrics = make(map[string]float64, len(r.Metrics))
		for k, v := range r.Metrics {
			rec.Metrics[k] = orNaN(v)
		}
		g.Reconstructions = append(g.Reconstructions, rec)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}
