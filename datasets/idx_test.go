package datasets

import (
	"bytes"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestReadIDXRoundTrip(t *testing.T) {
	cases := []struct {
		typ  IDXType
		dims []int
	}{
		{IDXUint8, []int{5, 3, 2}},
		{IDXInt8, []int{7}},
		{IDXInt16, []int{2, 3}},
		{IDXInt32, []int{4, 1, 1, 2}},
		{IDXFloat32, []int{3, 3}},
		{IDXFloat64, []int{2}},
		{IDXUint8, []int{0, 28, 28}},
	}
	for _, c := range cases {
		n := c.typ.Size()
		for _, d := range c.dims {
			n *= d
		}
		data := pixels(n)
		file := encodeIDX(c.typ, c.dims, data)
		for _, compressed := range []bool{false, true} {
			in := file
			if compressed {
				in = gzipBytes(t, file)
			}
			x, err := ReadIDX(bytes.NewReader(in), 1<<20)
			if err != nil {
				t.Errorf("%s %v gzip=%v: %v", c.typ, c.dims, compressed, err)
				continue
			}
			if x.Type != c.typ || !slices.Equal(x.Dims, c.dims) || !bytes.Equal(x.Data, data) {
				t.Errorf("%s %v gzip=%v: read back type %s dims %v, %d bytes", c.typ, c.dims, compressed, x.Type, x.Dims, len(x.Data))
			}
		}
	}
}

func TestReadIDXErrors(t *testing.T) {
	good := encodeIDX(IDXUint8, []int{2, 2, 2}, pixels(8))
	huge := encodeIDX(IDXFloat64, []int{1 << 30, 1 << 30, 1 << 30}, nil) // overflows uint64
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated header: 0 of 4 bytes"},
		{"truncated magic", good[:3], "truncated header: 3 of 4 bytes"},
		{"truncated dimensions", good[:9], "truncated header (dimension sizes): 5 of 12 bytes"},
		{"wrong magic", append([]byte{0x50, 0x4b}, good[2:]...), "bad magic 50 4b 08 03"},
		{"wrong dtype", append([]byte{0, 0, 0x07}, good[3:]...), "unknown IDX data type 0x07"},
		{"no dimensions", []byte{0, 0, 8, 0}, "0 dimensions"},
		{"too many dimensions", []byte{0, 0, 8, 9}, "9 dimensions"},
		{"truncated data", good[:len(good)-1], "truncated data: 7 of 8 declared bytes"},
		{"trailing data", append(append([]byte(nil), good...), 1), "size mismatch: data continues"},
		{"over the limit", encodeIDX(IDXUint8, []int{1025}, nil), "more than the limit of 1024 bytes"},
		{"size overflow", huge, "more than the limit"},
		{"corrupt gzip", gzipBytes(t, good)[:20], "truncated"},
		{"bad gzip header", []byte{0x1f, 0x8b, 0, 0}, "gzip stream"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadIDX(bytes.NewReader(c.in), 1024)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestReadIDXLyingHeader checks that a header declaring a gigabyte over a few bytes of data
// allocates about what is there, not what is declared.
func TestReadIDXLyingHeader(t *testing.T) {
	in := encodeIDX(IDXUint8, []int{1 << 30}, pixels(100))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadIDX(bytes.NewReader(in), DefaultMaxBytes)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "truncated data: 100 of 1073741824") {
		t.Fatalf("error %v, want truncated data", err)
	}
	// The reader's first chunk is 1 MiB; allow 4 MiB for everything else the runtime does.
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 4<<20 {
		t.Errorf("reading a lying header allocated %d bytes", grown)
	}
}

// oneByteReader hands out data a byte at a time, as a slow pipe would.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

func TestReadIDXShortReads(t *testing.T) {
	data := pixels(3 << 20) // crosses the chunk growth several times
	x, err := ReadIDX(oneByteReader{bytes.NewReader(encodeIDX(IDXUint8, []int{3 << 20}, data))}, DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x.Data, data) {
		t.Error("data read through one-byte reads differs")
	}
}

// TestLoadIDXCorrupt checks that every corruption of an MNIST-style pair is an error naming
// the file at fault and what is wrong.
func TestLoadIDXCorrupt(t *testing.T) {
	images := encodeIDX(IDXUint8, []int{3, 2, 2}, pixels(12))
	labels := encodeIDX(IDXUint8, []int{3}, []byte{0, 9, 4})
	cases := []struct {
		name           string
		images, labels []byte
		fault          string // "images", "labels" or "both": which file the error names
		want           string
	}{
		{"truncated header", images[:6], labels, "images", "truncated header (dimension sizes)"},
		{"truncated data", images[:len(images)-2], labels, "images", "truncated data: 10 of 12"},
		{"wrong magic", append([]byte{1, 0}, images[2:]...), labels, "images", "bad magic"},
		{"wrong dtype images", encodeIDX(IDXFloat32, []int{3, 2, 2}, make([]byte, 48)), labels, "images", "images are float32, want uint8"},
		{"wrong dtype labels", images, encodeIDX(IDXInt16, []int{3}, make([]byte, 6)), "labels", "labels are int16, want uint8"},
		{"images of rank 2", encodeIDX(IDXUint8, []int{3, 4}, pixels(12)), labels, "images", "want 3 (count, rows, cols)"},
		{"labels of rank 2", images, encodeIDX(IDXUint8, []int{3, 1}, []byte{0, 1, 2}), "labels", "want 1 (count)"},
		{"no samples", encodeIDX(IDXUint8, []int{0, 2, 2}, nil), encodeIDX(IDXUint8, []int{0}, nil), "images", "no samples"},
		{"mismatched counts", images, encodeIDX(IDXUint8, []int{4}, []byte{0, 1, 2, 3}), "both", "size mismatch: 3 images but 4 labels"},
		{"label 11", images, encodeIDX(IDXUint8, []int{3}, []byte{0, 11, 2}), "labels", "label 11 of sample 1 is outside [0, 10)"},
		{"label 10", images, encodeIDX(IDXUint8, []int{3}, []byte{0, 1, 10}), "labels", "label 10 of sample 2"},
		{"gzip'd truncated", gzipBytes(t, images)[:25], labels, "images", "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ip := writeFile(t, dir, "x-images-idx3-ubyte", c.images)
			lp := writeFile(t, dir, "x-labels-idx1-ubyte", c.labels)
			_, err := LoadIDX(ip, lp)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
			namesImages, namesLabels := strings.Contains(msg, ip), strings.Contains(msg, lp)
			switch {
			case c.fault == "images" && (!namesImages || namesLabels),
				c.fault == "labels" && (namesImages || !namesLabels),
				c.fault == "both" && !(namesImages && namesLabels):
				t.Errorf("error %q should name the %s file", msg, c.fault)
			}
		})
	}
}

func TestLoadIDX(t *testing.T) {
	dir := t.TempDir()
	img := pixels(2 * 3 * 4)
	// Gzip the images only: each file is recognised by its own magic bytes, and the .gz-less
	// name shows that names play no part.
	ip := writeFile(t, dir, "images", gzipBytes(t, encodeIDX(IDXUint8, []int{2, 3, 4}, img)))
	lp := writeFile(t, dir, "labels.gz", encodeIDX(IDXUint8, []int{2}, []byte{7, 2}))
	d, err := LoadIDX(ip, lp)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Shape, []int{1, 3, 4}) || d.Classes != 10 || d.Len() != 2 || d.Labels[0] != 7 || d.Labels[1] != 2 {
		t.Fatalf("got shape %v classes %d labels %v", d.Shape, d.Classes, d.Labels)
	}
	for i, b := range img {
		// float32(b)/255 is one correctly rounded division: exact comparison is right.
		if d.Features[i] != float32(b)/255 {
			t.Fatalf("feature %d = %v, want %v", i, d.Features[i], float32(b)/255)
		}
	}
}

// FuzzIDX checks that ReadIDX never panics and that what it accepts is self-consistent.
func FuzzIDX(f *testing.F) {
	f.Add(encodeIDX(IDXUint8, []int{2, 2, 2}, pixels(8)))
	f.Add(encodeIDX(IDXUint8, []int{3}, []byte{1, 2, 3}))
	f.Add(encodeIDX(IDXFloat64, []int{1, 2}, pixels(16)))
	f.Add(gzipBytes(f, encodeIDX(IDXInt16, []int{2, 1}, pixels(4))))
	f.Add(encodeIDX(IDXUint8, []int{1 << 20, 1 << 20}, nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		x, err := ReadIDX(bytes.NewReader(in), 1<<16)
		if err != nil {
			if x != nil {
				t.Error("non-nil result with an error")
			}
			return
		}
		n := x.Type.Size()
		for _, d := range x.Dims {
			n *= d
		}
		if n != len(x.Data) {
			t.Errorf("%s %v with %d bytes of data", x.Type, x.Dims, len(x.Data))
		}
		// A rank-3 uint8 array paired with zero labels must load or fail cleanly too. An
		// array of empty images may claim 2^31 of them in 16 bytes: labels for so many are
		// the test's own allocation (a fuzzing worker died of it beside other work), not the
		// reader's, so they are made only for what a real file could hold.
		if x.Type == IDXUint8 && len(x.Dims) == 3 && x.Dims[0] <= 1<<20 {
			labels := &IDX{Type: IDXUint8, Dims: []int{x.Dims[0]}, Data: make([]byte, x.Dims[0])}
			if d, err := FromIDX(x, labels, 10); err == nil {
				if err := d.Validate(); err != nil {
					t.Errorf("FromIDX gave an invalid dataset: %v", err)
				}
			}
		}
	})
}
