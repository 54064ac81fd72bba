package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadTiny(t *testing.T) *Dataset {
	t.Helper()
	d, err := LoadIDX(filepath.Join("testdata", "tiny-images-idx3-ubyte"), filepath.Join("testdata", "tiny-labels-idx1-ubyte"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// canonicalHash recomputes the documented encoding by a second route (binary.Write of whole
// slices) so that a slip in Hash's buffering cannot go unnoticed.
func canonicalHash(t *testing.T, d *Dataset) string {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("fedaudit-dataset-v1")
	head := []uint64{uint64(len(d.Shape))}
	for _, s := range d.Shape {
		head = append(head, uint64(s))
	}
	head = append(head, uint64(d.Classes), uint64(d.Len()))
	for _, v := range []any{head, d.Features, d.Labels} {
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

func TestHashGolden(t *testing.T) {
	d := loadTiny(t)
	golden, err := os.ReadFile(filepath.Join("testdata", "tiny.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Hash(), strings.TrimSpace(string(golden)); got != want {
		t.Errorf("hash of testdata/tiny = %s, golden %s", got, want)
	}
	if got, want := d.Hash(), canonicalHash(t, d); got != want {
		t.Errorf("Hash = %s, documented encoding gives %s", got, want)
	}
	// Large enough to cross Hash's 4096-byte buffer several times, with a tail.
	big := indexed(1000, 7, 3)
	if got, want := big.Hash(), canonicalHash(t, big); got != want {
		t.Errorf("Hash of 1000x7 = %s, documented encoding gives %s", got, want)
	}
}

func TestHashSensitivity(t *testing.T) {
	base := loadTiny(t)
	h0 := base.Hash()
	renamed := base.Clone()
	renamed.Name = "another name"
	if renamed.Hash() != h0 {
		t.Error("renaming the dataset changed its hash")
	}
	cases := []struct {
		name   string
		change func(d *Dataset)
	}{
		{"one feature", func(d *Dataset) { d.Features[5] += 1.0 / 255 }},
		{"last feature", func(d *Dataset) { d.Features[len(d.Features)-1] = 0.5 }},
		{"negative zero", func(d *Dataset) { d.Features[0] = float32(math.Copysign(0, -1)) }},
		{"one label", func(d *Dataset) { d.Labels[2] = 8 }},
		{"swap two samples", func(d *Dataset) {
			a, b := d.Sample(0), d.Sample(1)
			copy(d.Row(0), b.Features)
			copy(d.Row(1), a.Features)
			d.Labels[0], d.Labels[1] = b.Label, a.Label
		}},
		{"shape, same dim", func(d *Dataset) { d.Shape = []int{1, 3, 2} }},
		{"rank, same dim", func(d *Dataset) { d.Shape = []int{6} }},
		{"classes", func(d *Dataset) { d.Classes = 11 }},
		{"drop a sample", func(d *Dataset) { d.Features, d.Labels = d.Features[:18], d.Labels[:3] }},
	}
	seen := map[string]string{h0: "base"}
	for _, c := range cases {
		d := base.Clone()
		c.change(d)
		h := d.Hash()
		if prev, dup := seen[h]; dup {
			t.Errorf("%s: hash equals that of %s", c.name, prev)
		}
		seen[h] = c.name
	}
}

func TestValidate(t *testing.T) {
	good := func() *Dataset { return indexed(4, 3, 2) }
	cases := []struct {
		name   string
		change func(d *Dataset)
		want   string // substring of the error; empty for valid
	}{
		{"valid", func(d *Dataset) {}, ""},
		{"empty dataset", func(d *Dataset) { d.Features, d.Labels = nil, nil }, ""},
		{"no classes", func(d *Dataset) { d.Classes = 0 }, "0 classes"},
		{"no shape", func(d *Dataset) { d.Shape = nil }, "empty sample shape"},
		{"zero dimension", func(d *Dataset) { d.Shape = []int{3, 0} }, "non-positive"},
		{"negative dimension", func(d *Dataset) { d.Shape = []int{-3} }, "non-positive"},
		{"too few features", func(d *Dataset) { d.Features = d.Features[1:] }, "11 feature values for 4 samples"},
		{"label too large", func(d *Dataset) { d.Labels[3] = 2 }, "sample 3 has label 2"},
		{"negative label", func(d *Dataset) { d.Labels[0] = -1 }, "sample 0 has label -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := good()
			c.change(d)
			err := d.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestSubsetCloneSummary(t *testing.T) {
	d := loadTiny(t)
	s := d.Subset("sub", []int{3, 0})
	if s.Len() != 2 || s.Labels[0] != 1 || s.Labels[1] != 0 || s.Row(0)[1] != 77.0/255 {
		t.Errorf("Subset([3 0]) = labels %v row0 %v", s.Labels, s.Row(0))
	}
	s.Row(0)[0] = 42
	s.Shape[0] = 9
	if d.Row(3)[0] == 42 || d.Shape[0] == 9 {
		t.Error("Subset shares storage with its source")
	}
	c := d.Clone()
	c.Features[0], c.Labels[0] = 9, 9
	if d.Features[0] == 9 || d.Labels[0] == 9 {
		t.Error("Clone shares storage with its source")
	}
	smp := d.Sample(1)
	smp.Features[0] = 9
	if d.Row(1)[0] == 9 {
		t.Error("Sample shares storage with the dataset")
	}

	sum := d.Summarize()
	if sum.Samples != 4 || sum.Dim != 6 || sum.Classes != 10 || sum.SHA256 != d.Hash() {
		t.Errorf("summary %+v", sum)
	}
	wantCounts := []int{1, 1, 0, 1, 0, 0, 0, 0, 0, 1}
	for k, n := range wantCounts {
		if sum.ClassCounts[k] != n {
			t.Errorf("class %d: count %d, want %d", k, sum.ClassCounts[k], n)
		}
	}
	// The tiny images' bytes sum to 1975 over 24 pixels; scaling by 1/255 rounds each value
	// to float32, so the mean agrees to about 1e-7 relative.
	if math.Abs(sum.Mean-1975.0/255/24) > 1e-6 || sum.Min != 0 || sum.Max != 1 {
		t.Errorf("min/max/mean = %v/%v/%v, want 0/1/%v", sum.Min, sum.Max, sum.Mean, 1975.0/255/24)
	}
}
