package datasets

import (
	"fmt"
	"math"
)

// SyntheticImageConfig describes a dataset of small images for tests and demonstrations of
// the image attacks: each class has a smooth prototype (a few Gaussian blobs per channel) and
// a sample is its prototype plus pixel noise, clipped to [0, 1] like real image data.
type SyntheticImageConfig struct {
	// Name names the dataset; "synthetic-images" when empty.
	Name string
	// N samples, balanced over Classes as in Synthetic.
	N       int
	Classes int
	// Channels, Height and Width give the sample shape [Channels, Height, Width].
	Channels, Height, Width int
	// Blobs per channel of each prototype (default 3).
	Blobs int
	// Noise is the standard deviation of the pixel noise before clipping.
	Noise float64
	Seed  uint64
}

// DefaultSyntheticImageConfig is the dataset `synthetic-images` opens: 1000 grey 28x28 images
// in 10 classes (the shape of MNIST), pixel noise 0.1, seed 1.
func DefaultSyntheticImageConfig() SyntheticImageConfig {
	return SyntheticImageConfig{Name: "synthetic-images", N: 1000, Classes: 10, Channels: 1, Height: 28, Width: 28, Blobs: 3, Noise: 0.1, Seed: 1}
}

// SyntheticImages generates the dataset cfg describes: prototypes first (class by class,
// channel by channel, blob by blob), then the shuffled labels, then each sample's noise, from
// one platform-independent generator, so the same config gives the same bytes everywhere.
func SyntheticImages(cfg SyntheticImageConfig) (*Dataset, error) {
	if cfg.N <= 0 || cfg.Classes <= 0 {
		return nil, fmt.Errorf("synthetic images: %d samples in %d classes, need at least 1 of each", cfg.N, cfg.Classes)
	}
	if cfg.Channels <= 0 || cfg.Height <= 0 || cfg.Width <= 0 {
		return nil, fmt.Errorf("synthetic images: shape [%d %d %d] has a non-positive dimension", cfg.Channels, cfg.Height, cfg.Width)
	}
	if cfg.Channels > 64 || cfg.Height > 1024 || cfg.Width > 1024 {
		return nil, fmt.Errorf("synthetic images: shape [%d %d %d] is too large (at most 64 channels of 1024x1024)", cfg.Channels, cfg.Height, cfg.Width)
	}
	dim := cfg.Channels * cfg.Height * cfg.Width
	if cfg.N > maxSyntheticValues/dim {
		return nil, fmt.Errorf("synthetic images: %d images of %d values exceed the limit of %d values", cfg.N, dim, maxSyntheticValues)
	}
	if !(cfg.Noise >= 0) || math.IsInf(cfg.Noise, 0) {
		return nil, fmt.Errorf("synthetic images: noise %v, need a finite value >= 0", cfg.Noise)
	}
	blobs := cfg.Blobs
	if blobs == 0 {
		blobs = 3
	}
	if blobs < 0 || blobs > 100 {
		return nil, fmt.Errorf("synthetic images: %d blobs per channel, need 1 to 100", blobs)
	}
	name := cfg.Name
	if name == "" {
		name = "synthetic-images"
	}
	r := newRNG(cfg.Seed, "synthetic-images")
	plane := cfg.Height * cfg.Width
	protos := make([]float64, cfg.Classes*dim)
	for c := 0; c < cfg.Classes; c++ {
		for ch := 0; ch < cfg.Channels; ch++ {
			img := protos[c*dim+ch*plane : c*dim+(ch+1)*plane]
			for b := 0; b < blobs; b++ {
				cy, cx := r.float64()*float64(cfg.Height), r.float64()*float64(cfg.Width)
				// Widths from a tenth to a third of the image; amplitudes of either sign so
				// that classes differ in dark as well as bright regions.
				w := (0.1 + float64(0.23*r.float64())) * float64(max(cfg.Height, cfg.Width))
				amp := float64(2*r.float64()) - 1
				for y := 0; y < cfg.Height; y++ {
					for x := 0; x < cfg.Width; x++ {
						d2 := (float64((float64(y)-cy)*(float64(y)-cy)) + float64((float64(x)-cx)*(float64(x)-cx))) / (2 * w * w)
						img[y*cfg.Width+x] += float64(amp * detExp(-d2))
					}
				}
			}
			// Map each prototype plane onto [0.15, 0.85], leaving room for the noise.
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, v := range img {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			for i, v := range img {
				if hi > lo {
					img[i] = 0.15 + 0.7*(v-lo)/(hi-lo)
				} else {
					img[i] = 0.5
				}
			}
		}
	}
	noise := cfg.Noise
	return drawAroundMeans(r, name, []int{cfg.Channels, cfg.Height, cfg.Width}, cfg.Classes, cfg.N, protos, func(mean, z float64) float32 {
		return float32(min(1, max(0, mean+float64(noise*z))))
	}), nil
}
