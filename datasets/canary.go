package datasets

import (
	"fmt"
	"slices"
)

// CanaryKind names a way to choose the target sample epsilon' of an audit.
type CanaryKind string

// The canary kinds.
const (
	// CanaryHeldOut is a random sample of a pool the clients never see (e.g. the test split):
	// an in-distribution sample, the weakest canary.
	CanaryHeldOut CanaryKind = "heldout"
	// CanaryRelabel is the target sample with its label changed to another class: the model
	// must memorise it to fit it.
	CanaryRelabel CanaryKind = "relabel"
	// CanaryDirac is an out-of-distribution input: all features zero except a few set to 1
	// (saturated pixels), with a random label. Its gradient stands out from every real sample.
	CanaryDirac CanaryKind = "dirac"
	// CanaryCustom is the target sample as given.
	CanaryCustom CanaryKind = "custom"
	// CanaryPattern is an out-of-distribution image: a black-and-white checkerboard (squares
	// of about a seventh of the image side) in every channel, with a random label. It needs
	// an image shape [channels, height, width].
	CanaryPattern CanaryKind = "pattern"
	// CanaryBlank is an all-black image (all features 0) with a rare label: the least frequent
	// class of Pool, or the last class without a pool.
	CanaryBlank CanaryKind = "blank"
)

// DefaultDiracPixels is the number of saturated features of a Dirac canary when the spec
// leaves it zero.
const DefaultDiracPixels = 5

// CanarySpec says how to build a canary. Shape and Classes describe the data the canary must
// fit; which other fields matter depends on Kind.
type CanarySpec struct {
	Kind    CanaryKind
	Shape   []int
	Classes int
	// Pool is where CanaryHeldOut draws from; it must have Shape and Classes.
	Pool *Dataset
	// Target is the sample CanaryRelabel relabels and CanaryCustom returns.
	Target Sample
	// Pixels is the number of saturated features of CanaryDirac (DefaultDiracPixels if 0).
	Pixels int
	// Seed determines every random choice.
	Seed uint64
}

// BuildCanary builds the canary spec describes. The result shares no storage with the pool or
// the target.
func BuildCanary(spec CanarySpec) (Sample, error) {
	ref := &Dataset{Name: "canary", Shape: spec.Shape, Classes: spec.Classes}
	if err := ref.Validate(); err != nil {
		return Sample{}, fmt.Errorf("canary %s: %w", spec.Kind, err)
	}
	r := newRNG(spec.Seed, "canary-"+string(spec.Kind))
	var s Sample
	switch spec.Kind {
	case CanaryHeldOut:
		if spec.Pool == nil || spec.Pool.Len() == 0 {
			return Sample{}, fmt.Errorf("canary %s: no pool of held-out samples", spec.Kind)
		}
		if !slices.Equal(spec.Pool.Shape, spec.Shape) || spec.Pool.Classes != spec.Classes {
			return Sample{}, fmt.Errorf("canary %s: pool %q has shape %v and %d classes, the data has shape %v and %d classes",
				spec.Kind, spec.Pool.Name, spec.Pool.Shape, spec.Pool.Classes, spec.Shape, spec.Classes)
		}
		s = spec.Pool.Sample(r.intn(spec.Pool.Len()))
	case CanaryRelabel:
		if err := spec.Target.checkFor(ref); err != nil {
			return Sample{}, fmt.Errorf("canary %s: target: %w", spec.Kind, err)
		}
		if spec.Classes < 2 {
			return Sample{}, fmt.Errorf("canary %s: %d class, no other label to give", spec.Kind, spec.Classes)
		}
		s = spec.Target.Clone()
		// A uniform shift in 1..Classes-1 gives every other class the same chance.
		s.Label = int32((int(s.Label) + 1 + r.intn(spec.Classes-1)) % spec.Classes)
	case CanaryDirac:
		dim := ref.Dim()
		k := spec.Pixels
		if k == 0 {
			k = DefaultDiracPixels
		}
		if k < 0 || k > dim {
			return Sample{}, fmt.Errorf("canary %s: %d saturated pixels, need 1 to %d", spec.Kind, k, dim)
		}
		s.Features = make([]float32, dim)
		// The first k of a random permutation are k distinct positions.
		for _, j := range r.perm(dim)[:k] {
			s.Features[j] = 1
		}
		s.Label = int32(r.intn(spec.Classes))
	case CanaryPattern:
		if len(spec.Shape) != 3 {
			return Sample{}, fmt.Errorf("canary %s: needs an image shape [channels height width], the data has shape %v", spec.Kind, spec.Shape)
		}
		ch, h, w := spec.Shape[0], spec.Shape[1], spec.Shape[2]
		side := max(1, max(h, w)/7)
		s.Features = make([]float32, ch*h*w)
		for c := 0; c < ch; c++ {
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					if (y/side+x/side)%2 == 0 {
						s.Features[(c*h+y)*w+x] = 1
					}
				}
			}
		}
		s.Label = int32(r.intn(spec.Classes))
	case CanaryBlank:
		s.Features = make([]float32, ref.Dim())
		s.Label = int32(spec.Classes - 1)
		if spec.Pool != nil && spec.Pool.Len() > 0 {
			if spec.Pool.Classes != spec.Classes {
				return Sample{}, fmt.Errorf("canary %s: pool %q has %d classes, the data %d", spec.Kind, spec.Pool.Name, spec.Pool.Classes, spec.Classes)
			}
			counts := spec.Pool.ClassCounts()
			rare := 0
			for c := range counts {
				if counts[c] < counts[rare] {
					rare = c
				}
			}
			s.Label = int32(rare)
		}
	case CanaryCustom:
		if err := spec.Target.checkFor(ref); err != nil {
			return Sample{}, fmt.Errorf("canary %s: %w", spec.Kind, err)
		}
		s = spec.Target.Clone()
	default:
		return Sample{}, fmt.Errorf("unknown canary kind %q (want %s, %s, %s, %s, %s or %s)",
			spec.Kind, CanaryHeldOut, CanaryRelabel, CanaryDirac, CanaryPattern, CanaryBlank, CanaryCustom)
	}
	return s, nil
}
