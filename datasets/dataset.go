// Package datasets holds labelled data in memory for federated training: the Dataset type with
// its content hash, loaders for IDX (MNIST, Fashion-MNIST) and CIFAR-10 files, a synthetic
// generator, federated splits, and the adjacent dataset pairs (C, C') that an audit compares.
//
// The package knows nothing of training: it hands out float32 rows and integer labels.
package datasets

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// Dataset is a labelled sample set held in memory. Features are float32, row-major, one row of
// Dim() values per sample; Labels are class indices in [0, Classes).
type Dataset struct {
	// Name says where the data came from (a loader name or file), for reports only.
	Name string
	// Shape is the shape of one sample, e.g. [1 28 28]; its product is Dim().
	Shape []int
	// Classes is the number of label values.
	Classes int
	// Features holds Len()*Dim() values, sample i at [i*Dim(), (i+1)*Dim()).
	Features []float32
	// Labels holds one class index per sample.
	Labels []int32
}

// Dim is the number of features of one sample.
func (d *Dataset) Dim() int {
	n := 1
	for _, s := range d.Shape {
		n *= s
	}
	return n
}

// Len is the number of samples.
func (d *Dataset) Len() int { return len(d.Labels) }

// Row returns sample i's features, aliasing the dataset's storage.
func (d *Dataset) Row(i int) []float32 {
	dim := d.Dim()
	return d.Features[i*dim : (i+1)*dim]
}

// Validate checks that the sizes agree and every label is in range.
func (d *Dataset) Validate() error {
	if d.Classes <= 0 {
		return fmt.Errorf("dataset %q: %d classes, need at least 1", d.Name, d.Classes)
	}
	for _, s := range d.Shape {
		if s <= 0 {
			return fmt.Errorf("dataset %q: shape %v has a non-positive dimension", d.Name, d.Shape)
		}
	}
	if len(d.Shape) == 0 {
		return fmt.Errorf("dataset %q: empty sample shape", d.Name)
	}
	if len(d.Features) != d.Len()*d.Dim() {
		return fmt.Errorf("dataset %q: %d feature values for %d samples of dimension %d", d.Name, len(d.Features), d.Len(), d.Dim())
	}
	for i, y := range d.Labels {
		if y < 0 || int(y) >= d.Classes {
			return fmt.Errorf("dataset %q: sample %d has label %d, outside [0, %d)", d.Name, i, y, d.Classes)
		}
	}
	return nil
}

// Hash returns the hex SHA-256 of the dataset's canonical encoding: the ASCII tag
// "fedaudit-dataset-v1", then little-endian uint64 values rank, each shape dimension, class count
// and sample count, then every feature's IEEE-754 bits as little-endian uint32, then every label
// as little-endian int32. The name is not part of the hash: the same data under another name is
// the same data.
func (d *Dataset) Hash() string {
	h := sha256.New()
	h.Write([]byte("fedaudit-dataset-v1"))
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(len(d.Shape)))
	for _, s := range d.Shape {
		put(uint64(s))
	}
	put(uint64(d.Classes))
	put(uint64(d.Len()))
	buf := make([]byte, 0, 4096)
	for _, x := range d.Features {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		if len(buf) >= 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	for _, y := range d.Labels {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(y))
		if len(buf) >= 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

// Sample is one labelled input detached from any dataset: the target sample of an adjacent pair,
// a canary. A Sample with no features stands for "no sample" (the absent side of an add or
// remove adjacency).
type Sample struct {
	Features []float32
	Label    int32
}

// Present reports whether s holds a sample.
func (s Sample) Present() bool { return len(s.Features) > 0 }

// Clone returns a copy of s that shares no storage with it.
func (s Sample) Clone() Sample {
	return Sample{Features: append([]float32(nil), s.Features...), Label: s.Label}
}

// checkFor reports whether s fits dataset d: the right number of features and a label in range.
func (s Sample) checkFor(d *Dataset) error {
	if len(s.Features) != d.Dim() {
		return fmt.Errorf("sample has %d features, dataset %q has %d (shape %v)", len(s.Features), d.Name, d.Dim(), d.Shape)
	}
	if s.Label < 0 || int(s.Label) >= d.Classes {
		return fmt.Errorf("sample has label %d, outside [0, %d) of dataset %q", s.Label, d.Classes, d.Name)
	}
	return nil
}

// Sample returns a copy of sample i.
func (d *Dataset) Sample(i int) Sample {
	return Sample{Features: append([]float32(nil), d.Row(i)...), Label: d.Labels[i]}
}

// Subset returns a new dataset named name holding copies of the samples idx, in that order.
func (d *Dataset) Subset(name string, idx []int) *Dataset {
	dim := d.Dim()
	out := &Dataset{
		Name:     name,
		Shape:    append([]int(nil), d.Shape...),
		Classes:  d.Classes,
		Features: make([]float32, 0, len(idx)*dim),
		Labels:   make([]int32, 0, len(idx)),
	}
	for _, i := range idx {
		out.Features = append(out.Features, d.Row(i)...)
		out.Labels = append(out.Labels, d.Labels[i])
	}
	return out
}

// Clone returns a deep copy of d.
func (d *Dataset) Clone() *Dataset {
	return &Dataset{
		Name:     d.Name,
		Shape:    append([]int(nil), d.Shape...),
		Classes:  d.Classes,
		Features: append([]float32(nil), d.Features...),
		Labels:   append([]int32(nil), d.Labels...),
	}
}

// ClassCounts returns the number of samples of each class; labels outside [0, Classes) are not
// counted (Validate reports them).
func (d *Dataset) ClassCounts() []int {
	counts := make([]int, max(d.Classes, 0))
	for _, y := range d.Labels {
		if y >= 0 && int(y) < len(counts) {
			counts[y]++
		}
	}
	return counts
}

// Summary describes a dataset for people and reports; its JSON form is what
// `audit datasets inspect --json` prints.
type Summary struct {
	Name        string  `json:"name"`
	Samples     int     `json:"samples"`
	Shape       []int   `json:"shape"`
	Dim         int     `json:"dim"`
	Classes     int     `json:"classes"`
	ClassCounts []int   `json:"class_counts"`
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
	Mean        float64 `json:"mean"`
	SHA256      string  `json:"sha256"`
}

// Summarize computes d's summary. Min, Max and Mean are over all feature values (0 for an empty
// dataset); the mean is accumulated in float64 so that millions of values lose no precision.
func (d *Dataset) Summarize() Summary {
	s := Summary{
		Name:        d.Name,
		Samples:     d.Len(),
		Shape:       append([]int(nil), d.Shape...),
		Dim:         d.Dim(),
		Classes:     d.Classes,
		ClassCounts: d.ClassCounts(),
		SHA256:      d.Hash(),
	}
	if len(d.Features) == 0 {
		return s
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	var sum float64
	for _, x := range d.Features {
		v := float64(x)
		lo, hi = min(lo, v), max(hi, v)
		sum += v
	}
	s.Min, s.Max, s.Mean = lo, hi, sum/float64(len(d.Features))
	return s
}
