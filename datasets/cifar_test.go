package datasets

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cifarRecords encodes n CIFAR-10 records with the given labels and deterministic pixels.
func cifarRecords(labels ...byte) []byte {
	var b []byte
	px := pixels(len(labels) * cifarPixels)
	for i, y := range labels {
		b = append(b, y)
		b = append(b, px[i*cifarPixels:(i+1)*cifarPixels]...)
	}
	return b
}

func TestReadCIFAR10(t *testing.T) {
	raw := cifarRecords(3, 0, 9)
	for _, compressed := range []bool{false, true} {
		in := raw
		if compressed {
			in = gzipBytes(t, raw)
		}
		d, err := ReadCIFAR10(bytes.NewReader(in), 1<<20)
		if err != nil {
			t.Fatalf("gzip=%v: %v", compressed, err)
		}
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d.Shape, []int{3, 32, 32}) || d.Classes != 10 || !slices.Equal(d.Labels, []int32{3, 0, 9}) {
			t.Fatalf("shape %v classes %d labels %v", d.Shape, d.Classes, d.Labels)
		}
		// Record i's pixel j (CHW order, as stored) is byte 1+j of the record.
		for _, at := range [][2]int{{0, 0}, {1, 1024}, {2, cifarPixels - 1}} {
			i, j := at[0], at[1]
			if got, want := d.Row(i)[j], float32(raw[i*cifarRecord+1+j])/255; got != want {
				t.Errorf("sample %d feature %d = %v, want %v", i, j, got, want)
			}
		}
	}
}

func TestCIFAR10Errors(t *testing.T) {
	good := cifarRecords(1, 2)
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty: no records"},
		{"truncated record", good[:len(good)-1], "1 whole 3073-byte records and a truncated one of 3072 bytes"},
		{"trailing byte", append(append([]byte(nil), good...), 0), "2 whole 3073-byte records and a truncated one of 1 bytes"},
		{"label 10", cifarRecords(1, 10), "record 1 has label 10, outside [0, 10)"},
		{"label 255", cifarRecords(255), "record 0 has label 255"},
		{"over the limit", cifarRecords(0, 1, 2, 3), "more than the limit of 10000 bytes"},
		{"corrupt gzip", gzipBytes(t, good)[:30], "read data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadCIFAR10(bytes.NewReader(c.in), 10000)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestLoadCIFAR10(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "data_batch_1.bin", cifarRecords(1, 2))
	b := writeFile(t, dir, "data_batch_2.bin", gzipBytes(t, cifarRecords(7)))
	d, err := LoadCIFAR10(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.Len() != 3 || !slices.Equal(d.Labels, []int32{1, 2, 7}) || d.Name != "cifar10" {
		t.Errorf("concatenation: %d samples, labels %v, name %q", d.Len(), d.Labels, d.Name)
	}
	bad := writeFile(t, dir, "data_batch_3.bin", cifarRecords(12))
	_, err = LoadCIFAR10(a, bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "label 12") {
		t.Errorf("error %v should name %s and the bad label", err, bad)
	}
	_, err = LoadCIFAR10(filepath.Join(dir, "missing.bin"))
	if err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Errorf("error %v should name the missing file", err)
	}
	if _, err := LoadCIFAR10(); err == nil {
		t.Error("no error for no files")
	}
}

// FuzzCIFAR checks that ReadCIFAR10 never panics and that what it accepts is a valid dataset
// of whole records.
func FuzzCIFAR(f *testing.F) {
	f.Add(cifarRecords(0))
	f.Add(cifarRecords(9, 3))
	f.Add(cifarRecords(10))
	f.Add(gzipBytes(f, cifarRecords(4)))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := ReadCIFAR10(bytes.NewReader(in), 1<<16)
		if err != nil {
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted an invalid dataset: %v", err)
		}
		if d.Len() == 0 || !slices.Equal(d.Shape, []int{3, 32, 32}) {
			t.Fatalf("accepted %d samples of shape %v", d.Len(), d.Shape)
		}
		if in[0] != 0x1f && d.Len()*cifarRecord != len(in) {
			t.Fatalf("%d records from %d raw bytes", d.Len(), len(in))
		}
	})
}
