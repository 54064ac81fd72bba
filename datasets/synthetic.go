package datasets

import (
	"fmt"
	"math"
)

// SyntheticConfig describes a class-conditional Gaussian dataset.
type SyntheticConfig struct {
	// Name names the dataset; "synthetic" when empty.
	Name string
	// N is the number of samples. Labels are balanced: class c gets N/Classes samples, the
	// first N mod Classes classes one more, in shuffled order.
	N int
	// Shape is the shape of one sample; [Dim] for flat vectors.
	Shape []int
	// Classes is the number of classes.
	Classes int
	// Separation is the expected Euclidean norm of a class mean: each mean has independent
	// N(0, Separation²/dim) coordinates, so two means lie about Separation·√2 apart.
	Separation float64
	// Noise is the standard deviation of every feature around its class mean.
	Noise float64
	// Seed determines every value: the same config gives the same bytes on every platform.
	Seed uint64
}

// DefaultSyntheticConfig is the dataset `synthetic` opens: 1000 samples of 32 features in 10
// classes, means of norm 4 with unit noise, seed 1.
func DefaultSyntheticConfig() SyntheticConfig {
	return SyntheticConfig{Name: "synthetic", N: 1000, Shape: []int{32}, Classes: 10, Separation: 4, Noise: 1, Seed: 1}
}

// maxSyntheticValues bounds N·dim (1 GiB of float32) so that a mistyped size fails fast.
const maxSyntheticValues = 1 << 28

// Synthetic generates the dataset cfg describes. The class means are drawn first (class 0's
// coordinates, then class 1's, ...), then the shuffled labels, then each sample's noise in
// order, all from one generator seeded by cfg.Seed (see rng for why the result does not depend
// on the platform).
func Synthetic(cfg SyntheticConfig) (*Dataset, error) {
	if cfg.N <= 0 {
		return nil, fmt.Errorf("synthetic dataset: N = %d, need at least 1 sample", cfg.N)
	}
	if cfg.Classes <= 0 {
		return nil, fmt.Errorf("synthetic dataset: %d classes, need at least 1", cfg.Classes)
	}
	if len(cfg.Shape) == 0 {
		return nil, fmt.Errorf("synthetic dataset: empty sample shape")
	}
	dim := 1
	for _, s := range cfg.Shape {
		if s <= 0 {
			return nil, fmt.Errorf("synthetic dataset: shape %v has a non-positive dimension", cfg.Shape)
		}
		if dim > maxSyntheticValues/s {
			return nil, fmt.Errorf("synthetic dataset: shape %v is too large", cfg.Shape)
		}
		dim *= s
	}
	if cfg.N > maxSyntheticValues/dim {
		return nil, fmt.Errorf("synthetic dataset: %d samples of %d features exceed the limit of %d values", cfg.N, dim, maxSyntheticValues)
	}
	if !(cfg.Separation >= 0) || math.IsInf(cfg.Separation, 0) {
		return nil, fmt.Errorf("synthetic dataset: separation %v, need a finite value >= 0", cfg.Separation)
	}
	if !(cfg.Noise >= 0) || math.IsInf(cfg.Noise, 0) {
		return nil, fmt.Errorf("synthetic dataset: noise %v, need a finite value >= 0", cfg.Noise)
	}
	name := cfg.Name
	if name == "" {
		name = "synthetic"
	}
	r := newRNG(cfg.Seed, "synthetic")
	scale := cfg.Separation / math.Sqrt(float64(dim))
	means := make([]float64, cfg.Classes*dim)
	for i := range means {
		means[i] = float64(scale * r.normal())
	}
	noise := cfg.Noise
	return drawAroundMeans(r, name, cfg.Shape, cfg.Classes, cfg.N, means, func(mean, z float64) float32 {
		return float32(mean + float64(noise*z))
	}), nil
}

// drawAroundMeans makes n samples with balanced labels in shuffled order (class c gets
// n/classes samples, the first n mod classes one more), feature j of a sample of class y being
// feature(means[y*dim+j], z) with z a fresh standard normal: the labels' shuffle first, then the
// normals sample by sample, from r.
func drawAroundMeans(r *rng, name string, shape []int, classes, n int, means []float64, feature func(mean, z float64) float32) *Dataset {
	dim := len(means) / classes
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i % classes
	}
	r.shuffle(labels)
	d := &Dataset{
		Name:     name,
		Shape:    append([]int(nil), shape...),
		Classes:  classes,
		Features: make([]float32, n*dim),
		Labels:   make([]int32, n),
	}
	for i, y := range labels {
		d.Labels[i] = int32(y)
		mean := means[y*dim : (y+1)*dim]
		row := d.Features[i*dim : (i+1)*dim]
		for j := range row {
			row[j] = feature(mean[j], r.normal())
		}
	}
	return d
}
