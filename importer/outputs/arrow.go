package outputs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
)

// maxArrowRows bounds the rows of an Arrow or Parquet table.
const maxArrowRows = 1 << 24

// ReadArrow reads an outputs table from an Arrow IPC file or stream. Logits may be a list,
// large list or fixed-size list column named logits, or columns logit_0, logit_1, ...; numbers
// of any integer or floating type; world a string (C, C') or a number (0, 1).
func ReadArrow(data []byte) (*Table, error) {
	var recs []arrow.Record
	err := decodeSafely(func() error {
		var err error
		recs, err = readIPC(data)
		return err
	})
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if err != nil {
		return nil, inputErrorf("arrow: %v", err)
	}
	return fromRecords(recs, "arrow")
}

func readIPC(data []byte) ([]arrow.Record, error) {
	// A file is "ARROW1", padding, a stream and a footer: reading the stream reads the file,
	// with one reader and one check (the stream ends at its end-of-stream marker).
	if bytes.HasPrefix(data, []byte("ARROW1")) {
		// The footer (a copy of the schema and the batches' positions) is not needed: the
		// stream is what lies between the 8-byte header and the footer, its int32 length and
		// the closing magic.
		n := len(data)
		if n < 8+10 || !bytes.HasSuffix(data, []byte("ARROW1")) {
			return nil, errors.New("truncated Arrow file (no closing magic)")
		}
		footer := int(int32(binary.LittleEndian.Uint32(data[n-10:])))
		if footer < 0 || footer > n-18 {
			return nil, fmt.Errorf("Arrow file footer of %d bytes in a file of %d", footer, n)
		}
		data = data[8 : n-10-footer]
	}
	if err := checkStream(data); err != nil {
		return nil, err
	}
	mem := &cappedAllocator{mem: memory.NewGoAllocator(), limit: 1<<20 + 64*len(data)}
	var recs []arrow.Record
	var rows int64
	keep := func(r arrow.Record) error {
		rows += r.NumRows()
		if rows > maxArrowRows {
			return fmt.Errorf("more than %d rows", maxArrowRows)
		}
		r.Retain()
		recs = append(recs, r)
		return nil
	}
	sr, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(mem))
	if err != nil {
		return nil, err
	}
	defer sr.Release()
	for sr.Next() {
		if err := keep(sr.Record()); err != nil {
			return recs, err
		}
	}
	if err := sr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return recs, err
	}
	return recs, nil
}

// ReadParquet reads an outputs table from Parquet (as pandas, polars or pyarrow write it), with
// the columns of ReadArrow. Columns are decoded one by one on this goroutine (pqarrow.ReadTable
// decodes on goroutines of its own, where a decoder's panic on a corrupt file could not be
// recovered), with buffers capped by the file's size.
func ReadParquet(ctx context.Context, data []byte) (*Table, error) {
	var t *Table
	err := decodeSafely(func() error {
		mem := &cappedAllocator{mem: memory.NewGoAllocator(), limit: 64<<20 + 64*len(data)}
		if err := checkFooter(data); err != nil {
			return err
		}
		pf, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
		if err != nil {
			return err
		}
		defer pf.Close()
		rows := pf.NumRows()
		if rows < 0 || rows > maxArrowRows {
			return fmt.Errorf("%d rows, want 0 to %d", rows, maxArrowRows)
		}
		if err := checkChunks(pf, data); err != nil {
			return err
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			return err
		}
		leaves := map[int]bool{}
		for i := range pf.MetaData().Schema.NumColumns() {
			leaves[i] = true
		}
		groups := make([]int, pf.NumRowGroups())
		for i := range groups {
			groups[i] = i
		}
		cols := make([]column, len(fr.Manifest.Fields))
		for j := range fr.Manifest.Fields {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := fr.Manifest.Fields[j].Field.Name
			// pqarrow reads a struct's children on goroutines of its own (so does
			// GetFieldReaders for several fields): a field at a time, and no structs.
			if hasStruct(fr.Manifest.Fields[j].Field.Type) {
				return fmt.Errorf("column %s: type %s holds a struct or map, which the outputs format has not", name, fr.Manifest.Fields[j].Field.Type)
			}
			rdr, err := fr.GetFieldReader(ctx, j, leaves, groups)
			if err != nil {
				return fmt.Errorf("column %s: %w", name, err)
			}
			if rdr == nil {
				return fmt.Errorf("column %s: no data", name)
			}
			chunked, err := fr.ReadColumn(groups, rdr)
			if err != nil {
				return fmt.Errorf("column %s: %w", name, err)
			}
			var cells cellsOf
			for _, a := range chunked.Chunks() {
				if err := cells.appendArray(a); err != nil {
					chunked.Release()
					return fmt.Errorf("column %s: %w", name, err)
				}
			}
			chunked.Release()
			if int64(len(cells.valid)) != rows {
				return fmt.Errorf("column %s: %d values in a table of %d rows", name, len(cells.valid), rows)
			}
			cols[j] = cells.column(name)
		}
		t, err = build(cols, int(rows), "parquet")
		return err
	})
	var ie *InputError
	if errors.As(err, &ie) {
		return nil, err
	}
	if err != nil {
		return nil, inputErrorf("parquet: %v", err)
	}
	return t, nil
}

// hasStruct says whether a type is or holds a struct (a map holds one).
func hasStruct(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.StructType, *arrow.MapType:
		return true
	case arrow.ListLikeType:
		return hasStruct(t.Elem())
	}
	return false
}

// cappedAllocator refuses buffers larger than the file could describe (compression aside, by a
// wide margin): a corrupt body length must be an error, not an attempt to allocate it.
type cappedAllocator struct {
	mem   memory.Allocator
	limit int
}

type allocTooLarge struct{ size, limit int }

func (a *cappedAllocator) Allocate(size int) []byte {
	if size < 0 || size > a.limit {
		panic(allocTooLarge{size, a.limit})
	}
	return a.mem.Allocate(size)
}

func (a *cappedAllocator) Reallocate(size int, b []byte) []byte {
	if size < 0 || size > a.limit {
		panic(allocTooLarge{size, a.limit})
	}
	return a.mem.Reallocate(size, b)
}

func (a *cappedAllocator) Free(b []byte) { a.mem.Free(b) }

// decodeSafely turns a panic of the Arrow or Parquet decoders on malformed input into an error:
// the files come from outside, and a bad file must never crash the import.
func decodeSafely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if big, ok := r.(allocTooLarge); ok {
				err = fmt.Errorf("corrupt file: a buffer of %d bytes, more than the file can hold (%d)", big.size, big.limit)
				return
			}
			err = fmt.Errorf("corrupt file: %v", r)
		}
	}()
	return f()
}

// fromRecords copies the record batches' cells into columns; everything is copied, so the
// records can be released afterwards.
func fromRecords(recs []arrow.Record, format string) (*Table, error) {
	if len(recs) == 0 {
		return nil, inputErrorf("%s: no record batches", format)
	}
	schema := recs[0].Schema()
	rows := 0
	for _, r := range recs {
		if !r.Schema().Equal(schema) {
			return nil, inputErrorf("%s: record batches with different schemas", format)
		}
		rows += int(r.NumRows())
	}
	cols := make([]column, schema.NumFields())
	for j, f := range schema.Fields() {
		var cells cellsOf
		err := decodeSafely(func() error {
			for _, r := range recs {
				if n := r.Column(j).Len(); int64(n) != r.NumRows() {
					return fmt.Errorf("%d values in a batch of %d rows", n, r.NumRows())
				}
				if err := cells.appendArray(r.Column(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, inputErrorf("%s: column %s: %v", format, f.Name, err)
		}
		cols[j] = cells.column(f.Name)
	}
	return build(cols, rows, format)
}

// cellsOf holds one column's cells: numbers (with their text), strings, or lists.
type cellsOf struct {
	isList, isString bool
	num              []float64
	str              []string
	list             [][]float64
	valid            []bool
}

func (c *cellsOf) column(name string) column {
	col := column{name: name}
	col.num = func(i int) (float64, bool, error) {
		switch {
		case !c.valid[i]:
			return 0, false, nil
		case c.isList:
			return 0, true, errors.New("a list, want a number")
		case c.isString:
			v, err := strconv.ParseFloat(c.str[i], 64)
			if err != nil {
				return 0, true, fmt.Errorf("%q is not a number", c.str[i])
			}
			return v, true, nil
		}
		return c.num[i], true, nil
	}
	col.str = func(i int) (string, bool, error) {
		switch {
		case !c.valid[i]:
			return "", false, nil
		case c.isList:
			return "", true, errors.New("a list, want a value")
		case c.isString:
			return c.str[i], true, nil
		}
		return strconv.FormatFloat(c.num[i], 'g', -1, 64), true, nil
	}
	if c.isList {
		col.list = func(i int) ([]float64, bool, error) { return c.list[i], c.valid[i], nil }
	}
	return col
}

func (c *cellsOf) appendArray(a arrow.Array) error {
	n := a.Len()
	switch a := a.(type) {
	case *array.String:
		c.isString = true
		for i := 0; i < n; i++ {
			c.valid = append(c.valid, a.IsValid(i))
			c.str = append(c.str, a.Value(i))
		}
		return nil
	case *array.LargeString:
		c.isString = true
		for i := 0; i < n; i++ {
			c.valid = append(c.valid, a.IsValid(i))
			c.str = append(c.str, a.Value(i))
		}
		return nil
	case *array.ListView, *array.LargeListView:
		// A list view gives each row an offset and a size of its own, so every row may name
		// the same values: a file of kilobytes would be copied out into gigabytes, one row at a
		// time. No writer of outputs needs them.
		return fmt.Errorf("type %s: list views are not read (write a list or fixed-size list)", a.DataType())
	case array.ListLike:
		c.isList = true
		values := a.ListValues()
		// The rows' lists follow one another in the values, as a list's offsets make them, so
		// the values copied are at most the values array's: a corrupt file whose null rows
		// step the offsets back would otherwise have every valid row copy the same values.
		var end int64
		for i := 0; i < n; i++ {
			c.valid = append(c.valid, a.IsValid(i))
			if !a.IsValid(i) {
				c.list = append(c.list, nil)
				continue
			}
			lo, hi := a.ValueOffsets(i)
			if lo < 0 || hi < lo || hi > int64(values.Len()) {
				return fmt.Errorf("row %d: list offsets [%d, %d) outside the %d values", len(c.valid), lo, hi, values.Len())
			}
			if lo < end {
				return fmt.Errorf("row %d: list offsets [%d, %d) overlap the list before it, which ends at %d (corrupt file)", len(c.valid), lo, hi, end)
			}
			end = hi
			if hi-lo > maxLogits {
				return fmt.Errorf("row %d: %d values in a list, more than %d", len(c.valid), hi-lo, maxLogits)
			}
			v := make([]float64, 0, hi-lo)
			for k := lo; k < hi; k++ {
				x, ok, err := numberAt(values, int(k))
				if err != nil {
					return fmt.Errorf("row %d: %w", len(c.valid), err)
				}
				if !ok {
					return fmt.Errorf("row %d: null inside the list", len(c.valid))
				}
				v = append(v, x)
			}
			c.list = append(c.list, v)
		}
		return nil
	}
	for i := 0; i < n; i++ {
		v, ok, err := numberAt(a, i)
		if err != nil {
			return err
		}
		c.valid = append(c.valid, ok)
		c.num = append(c.num, v)
	}
	return nil
}

// numberAt reads element i of a numeric array as float64; ok is false for null.
func numberAt(a arrow.Array, i int) (v float64, ok bool, err error) {
	if a.IsNull(i) {
		return 0, false, nil
	}
	switch a := a.(type) {
	case *array.Float64:
		return a.Value(i), true, nil
	case *array.Float32:
		return float64(a.Value(i)), true, nil
	case *array.Float16:
		return float64(a.Value(i).Float32()), true, nil
	case *array.Int64:
		return float64(a.Value(i)), true, nil
	case *array.Int32:
		return float64(a.Value(i)), true, nil
	case *array.Int16:
		return float64(a.Value(i)), true, nil
	case *array.Int8:
		return float64(a.Value(i)), true, nil
	case *array.Uint64:
		return float64(a.Value(i)), true, nil
	case *array.Uint32:
		return float64(a.Value(i)), true, nil
	case *array.Uint16:
		return float64(a.Value(i)), true, nil
	case *array.Uint8:
		return float64(a.Value(i)), true, nil
	}
	return 0, false, fmt.Errorf("type %s, want a number, a string or a list of numbers", a.DataType())
}
