package outputs

import (
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// sharedLogits is a record of rows outputs whose logits column is built from raw buffers: a
// list type lt over width values, with the given offsets (and sizes, for a list view) and
// validity bitmap (nil: all valid).
func sharedLogits(rows, width int, lt arrow.DataType, offsets, sizes []int32, valid []byte) arrow.Record {
	mem := memory.NewGoAllocator()
	pb, wb, lb := array.NewInt64Builder(mem), array.NewStringBuilder(mem), array.NewInt64Builder(mem)
	for i := range rows {
		pb.Append(int64(i / 2))
		wb.Append(worldText(i % 2))
		lb.Append(0)
	}
	vb := array.NewFloat64Builder(mem)
	for k := range width {
		vb.Append(float64(k % 7))
	}
	values := vb.NewArray()
	i32 := func(v []int32) *memory.Buffer {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
		}
		return memory.NewBufferBytes(b)
	}
	bufs := []*memory.Buffer{nil, i32(offsets)}
	nulls := 0
	if valid != nil {
		bufs[0] = memory.NewBufferBytes(valid)
		nulls = rows - bitsSet(valid, rows)
	}
	if sizes != nil {
		bufs = append(bufs, i32(sizes))
	}
	logits := array.MakeFromData(array.NewData(lt, rows, bufs, []arrow.ArrayData{values.Data()}, nulls, 0))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "pair_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "world", Type: arrow.BinaryTypes.String},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
		{Name: "logits", Type: lt, Nullable: true},
	}, nil)
	return array.NewRecord(schema, []arrow.Array{pb.NewArray(), wb.NewArray(), lb.NewArray(), logits}, int64(rows))
}

func bitsSet(bitmap []byte, n int) int {
	c := 0
	for i := range n {
		if bitmap[i/8]&(1<<(i%8)) != 0 {
			c++
		}
	}
	return c
}

// Rows of a logits column that name the same values are refused before they are copied out:
// a list view (each row an offset and a size of its own) of 200 rows over one list of 65536
// values took 100 MiB of copies from a file of half a megabyte, and a list whose null rows
// step the offsets back does the same.
func TestSharedListValuesRefused(t *testing.T) {
	const rows, width = 200, 1 << 16
	viewOffsets, viewSizes := make([]int32, rows), make([]int32, rows)
	for i := range viewSizes {
		viewSizes[i] = width
	}
	// A list's row i is [offsets[i], offsets[i+1]): 0, width, 0, width, ... with the odd rows
	// null makes every even row the whole values array (the last offset, width, makes the
	// writer keep them).
	listOffsets := make([]int32, rows+1)
	listOffsets[rows] = width
	valid := make([]byte, (rows+7)/8)
	for i := range listOffsets {
		if i%2 == 1 {
			listOffsets[i] = width
		}
		if i < rows && i%2 == 0 {
			valid[i/8] |= 1 << (i % 8)
		}
	}
	cases := []struct {
		name string
		rec  arrow.Record
		want string
	}{
		{"list view", sharedLogits(rows, width, arrow.ListViewOf(arrow.PrimitiveTypes.Float64), viewOffsets, viewSizes, nil),
			"column logits: type list_view<item: float64, nullable>: list views are not read"},
		{"list offsets stepping back", sharedLogits(rows, width, arrow.ListOf(arrow.PrimitiveTypes.Float64), listOffsets, nil, valid),
			"column logits: row 3: list offsets [0, 65536) overlap the list before it, which ends at 65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := arrowStreamBytes(t, c.rec)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := ReadArrow(data)
			runtime.ReadMemStats(&after)
			var ie *InputError
			if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an InputError containing %q", err, c.want)
			}
			// Reading the file takes a few times its half megabyte; one copied row 512 KiB.
			if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
				t.Errorf("refusing a %d-byte file allocated %d bytes", len(data), got)
			}
		})
	}
}
