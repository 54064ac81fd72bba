package runs

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// A run file's params and upload hold as many values in every row (docs/runfiles.md), which
// Writer enforces; a file without checksums (format version 1) is not protected by them, so the
// reader checks it: a row with fewer or no parameters must not reach the attacks, which would
// score a shorter vector (or a missing one, Row.Params nil in a file that declares params).
func TestVectorLengthsDiffer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		params  [][]float32 // per row; nil: no params column
		upload  [][]float32
		batches int // the rows split into this many batches
	}{
		{name: "params shorter", params: [][]float32{{1, 2, 3}, {1, 2}}, batches: 1},
		{name: "params empty", params: [][]float32{{1, 2, 3}, {}}, batches: 1},
		{name: "params all empty", params: [][]float32{{}, {}}, batches: 1},
		{name: "params shorter in a later batch", params: [][]float32{{1, 2, 3}, {1, 2}}, batches: 2},
		{name: "upload longer", params: [][]float32{{1}, {2}}, upload: [][]float32{{1, 2}, {1, 2, 3}}, batches: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMeta(nil, tc.params != nil, tc.upload != nil)
			sc := editSchema(t, m, func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
				for i := range k {
					if k[i] == KeyFormatVersion {
						v[i] = legacyFormatVersion
					}
				}
				return f, k, v
			})
			path := filepath.Join(t.TempDir(), "old.arrow")
			per := len(tc.params) / tc.batches
			writeUncheckedBatches(t, path, sc, tc.batches, func(batch int, b *array.RecordBuilder) {
				for k := batch * per; k < (batch+1)*per; k++ {
					b.Field(0).(*array.Int64Builder).Append(int64(k))
					b.Field(1).(*array.Int64Builder).Append(int64(k / 2))
					b.Field(2).(*array.Int8Builder).Append(int8(k % 2))
					b.Field(3).(*array.Uint64Builder).Append(1)
					b.Field(4).(*array.Int32Builder).Append(0)
					b.Field(5).(*array.BooleanBuilder).Append(false)
					b.Field(6).(*array.Float64Builder).Append(1)
					b.Field(7).(*array.Float64Builder).Append(0.5)
					col := 8
					for _, vs := range [][][]float32{tc.params, tc.upload} {
						if vs == nil {
							continue
						}
						lb := b.Field(col).(*array.ListBuilder)
						lb.Append(true)
						lb.ValueBuilder().(*array.Float32Builder).AppendValues(vs[k], nil)
						col++
					}
				}
			})
			tab, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			var lens []string
			err = tab.Scan(context.Background(), func(r Row) error {
				lens = append(lens, fmt.Sprintf("%d/%d", len(r.Params), len(r.Upload)))
				return nil
			})
			if err == nil {
				t.Fatalf("Scan accepted rows of params/upload lengths %s", strings.Join(lens, ", "))
			}
			t.Log(err)
		})
	}
}
