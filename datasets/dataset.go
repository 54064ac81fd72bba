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
