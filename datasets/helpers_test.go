package datasets

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// encodeIDX writes an IDX file's bytes: magic, big-endian dimensions, then data as given.
func encodeIDX(t IDXType, dims []int, data []byte) []byte {
	b := []byte{0, 0, byte(t), byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, data...)
}

func gzipBytes(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func writeFile(tb testing.TB, dir, name string, b []byte) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// indexed returns a dataset of n samples of dim features whose first feature is the sample's
// index, so tests can tell which original sample a split or copy holds. Labels are i mod
// classes.
func indexed(n, dim, classes int) *Dataset {
	d := &Dataset{Name: "indexed", Shape: []int{dim}, Classes: classes, Features: make([]float32, n*dim), Labels: make([]int32, n)}
	for i := range n {
		row := d.Row(i)
		row[0] = float32(i)
		for j := 1; j < dim; j++ {
			row[j] = float32(i*dim+j) / 1000
		}
		d.Labels[i] = int32(i % classes)
	}
	return d
}

// pixels returns n*rows*cols deterministic bytes.
func pixels(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*37 + i/7)
	}
	return b
}
