package outputs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
)

// corpusInput reads a seed of testdata/fuzz (go test fuzz v1, one []byte).
func corpusInput(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(strings.TrimPrefix(string(raw), "go test fuzz v1\n"))
	s = strings.TrimSuffix(strings.TrimPrefix(s, "[]byte("), ")")
	v, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(v)
}

// Corrupt Parquet files the fuzzer found: a column chunk of negative length made the reader
// panic on a goroutine of its own (a crash no recover catches), and pages that hold fewer values
// than their chunk declares made it decode stale bytes as page headers forever, and a schema
// group declaring 2^31 children made it allocate 32 GiB (a fatal out of memory). Each must be an
// input error, promptly.
func TestParquetCorruptChunks(t *testing.T) {
	for _, name := range []string{"negative-column-chunk-length", "pages-short-of-values", "schema-huge-children"} {
		data := corpusInput(t, filepath.Join("testdata", "fuzz", "FuzzReadParquet", name))
		done := make(chan error, 1)
		go func() {
			_, err := ReadParquet(context.Background(), data)
			done <- err
		}()
		select {
		case err := <-done:
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Errorf("%s: %v, want an input error", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the Parquet reader has not returned after 20 s", name)
		}
	}
}

// The checks of the chunks and the footer refuse no valid file: compressed or not, data pages
// v1 or v2, dictionary-encoded or plain, several row groups and pages.
func TestParquetChecksAcceptValidFiles(t *testing.T) {
	rec := record(simulate(6, 2, 1, 3), false)
	defer rec.Release()
	for _, codec := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd} {
		for _, v2 := range []bool{false, true} {
			for _, dict := range []bool{false, true} {
				version := parquet.V1_0
				if v2 {
					version = parquet.V2_LATEST
				}
				props := parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithDataPageVersion(map[bool]parquet.DataPageVersion{false: parquet.DataPageV1, true: parquet.DataPageV2}[v2]),
					parquet.WithVersion(version), parquet.WithDictionaryDefault(dict), parquet.WithDataPageSize(64), parquet.WithMaxRowGroupLength(7))
				var buf bytes.Buffer
				w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.DefaultWriterProps())
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Write(rec); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				tab, err := ReadParquet(context.Background(), buf.Bytes())
				if err != nil {
					t.Fatalf("codec %v, v2 %v, dictionary %v: %v", codec, v2, dict, err)
				}
				if len(tab.Records) != int(rec.NumRows()) {
					t.Errorf("codec %v, v2 %v, dictionary %v: %d rows, want %d", codec, v2, dict, len(tab.Records), rec.NumRows())
				}
			}
		}
	}
}
