package outputs

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
)

// simRow is one simulated output: a classifier's logits on a record of class label.
type simRow struct {
	pair   int
	world  int
	record string
	label  int
	logits []float64
}

// simulate makes a 3-class classifier's logits for pairs coupled by a shared per-pair noise:
// the canary's true-class logit is shifted up by mu in world C, so its margin separates the
// worlds; refs reference records per run share the run's shift.
func simulate(pairs, refs int, mu float64, seed uint64) []simRow {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []simRow
	for p := 0; p < pairs; p++ {
		noise := rng.NormFloat64()
		runShift := rng.NormFloat64()
		for w := 0; w < 2; w++ {
			z := []float64{0.5 + noise + runShift, rng.NormFloat64() * 0.1, -0.3}
			if w == 0 {
				z[0] += mu
			}
			out = append(out, simRow{p, w, "canary", 0, z})
			for r := 0; r < refs; r++ {
				out = append(out, simRow{p, w, fmt.Sprintf("ref%d", r), 1, []float64{0.1, 1 + runShift + 0.1*rng.NormFloat64(), 0}})
			}
		}
	}
	return out
}

func worldText(w int) string { return []string{"C", "C'"}[w] }

// csvLogitColumns writes rows with columns logit_0..logit_2.
func csvLogitColumns(rows []simRow) []byte {
	var b strings.Builder
	b.WriteString("pair_id,world,record,label,logit_0,logit_1,logit_2\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d,%s,%s,%d,%v,%v,%v\n", r.pair, worldText(r.world), r.record, r.label, r.logits[0], r.logits[1], r.logits[2])
	}
	return []byte(b.String())
}

// csvLogitList writes rows with one logits column as pandas prints a list, worlds as 0/1.
func csvLogitList(rows []simRow) []byte {
	var b strings.Builder
	b.WriteString("world,logits,label,record,pair\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d,\"[%v, %v, %v]\",%d,%s,%d\n", r.world, r.logits[0], r.logits[1], r.logits[2], r.label, r.record, r.pair)
	}
	return []byte(b.String())
}

// record builds an Arrow record with logits as a list<float64> (fixed: fixed_size_list<float32>
// of 3, as a float32 model would give).
func record(rows []simRow, fixed bool) arrow.Record {
	mem := memory.NewGoAllocator()
	var lt arrow.DataType = arrow.ListOf(arrow.PrimitiveTypes.Float64)
	if fixed {
		lt = arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float64)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "pair_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "world", Type: arrow.BinaryTypes.String},
		{Name: "record", Type: arrow.BinaryTypes.String},
		{Name: "label", Type: arrow.PrimitiveTypes.Int32},
		{Name: "logits", Type: lt},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(r.pair))
		b.Field(1).(*array.StringBuilder).Append(worldText(r.world))
		b.Field(2).(*array.StringBuilder).Append(r.record)
		b.Field(3).(*array.Int32Builder).Append(int32(r.label))
		var vb *array.Float64Builder
		if fixed {
			lb := b.Field(4).(*array.FixedSizeListBuilder)
			lb.Append(true)
			vb = lb.ValueBuilder().(*array.Float64Builder)
		} else {
			lb := b.Field(4).(*array.ListBuilder)
			lb.Append(true)
			vb = lb.ValueBuilder().(*array.Float64Builder)
		}
		for _, v := range r.logits {
			vb.Append(v)
		}
	}
	return b.NewRecord()
}

func parquetBytes(t testing.TB, rec arrow.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func arrowFileBytes(t testing.TB, rec arrow.Record) []byte {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "*.arrow")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func arrowStreamBytes(t testing.TB, rec arrow.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*(1+math.Abs(a)) }
