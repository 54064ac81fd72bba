package integrity

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// writeSealed writes an Arrow IPC file of one int64 column through a Sink: batches record
// batches of rows rows each.
func writeSealed(t testing.TB, path string, batches, rows int, fileCRC bool) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := arrow.NewMetadata([]string{"config"}, []string{`{"a":1}`})
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, &md)
	sink := NewSink(f, schema, fileCRC)
	w, err := ipc.NewFileWriter(sink, ipc.WithSchema(schema), ipc.WithZstd())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < batches; i++ {
		for k := 0; k < rows; k++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i*rows + k))
		}
		rec := b.NewRecord()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Seal(w); err != nil {
		t.Fatal(err)
	}
}

func TestSealVerify(t *testing.T) {
	for _, fileCRC := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "f.arrow")
		writeSealed(t, path, 3, 4, fileCRC)
		af, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !af.Checked() || af.Reader().NumRecords() != 3 || af.Verify() != nil {
			t.Fatalf("fileCRC %v: checked %v, %d batches, Verify %v", fileCRC, af.Checked(), af.Reader().NumRecords(), af.Verify())
		}
		off, meta, body := af.Block(1)
		af.Close()

		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		raw[off+meta+body/2] ^= 0x10
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		af, err = Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = af.Verify()
		af.Close()
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "batch 1") {
			t.Fatalf("fileCRC %v: Verify of a flipped batch = %v, want damage in batch 1", fileCRC, err)
		}
	}
}

// The rewritten footer keeps the alignment strict flatbuffer verifiers (Arrow C++) demand:
// the footer is a multiple of 8 bytes and its block table starts 8-aligned.
func TestFooterAlignment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.arrow")
	writeSealed(t, path, 5, 2, true)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(raw[len(raw)-10:]))
	footer := raw[len(raw)-10-n : len(raw)-10]
	if n%8 != 0 {
		t.Fatalf("footer of %d bytes, want a multiple of 8", n)
	}
	parts, err := parseFooter(footer)
	if err != nil {
		t.Fatal(err)
	}
	if (parts.recs+4)%8 != 0 {
		t.Fatalf("block table at %d, want its elements 8-aligned", parts.recs+4)
	}
	if len(parts.blocks) != 5 || parts.meta[KeyBatchCRC] == "" || parts.meta[KeySchemaCRC] == "" {
		t.Fatalf("footer: %d blocks, metadata %v", len(parts.blocks), parts.meta)
	}
}

func TestAllocationCap(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	capped := &cappedAllocator{mem: mem, limit: 100}
	err := DecodeSafely(func() error {
		capped.Free(capped.Allocate(100))
		capped.Allocate(101)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "buffer of 101 bytes exceeds the limit of 100") {
		t.Errorf("DecodeSafely = %v, want the allocation refused", err)
	}
	mem.AssertSize(t, 0)
	if err := DecodeSafely(func() error { return errors.New("plain") }); err == nil || err.Error() != "plain" {
		t.Errorf("DecodeSafely passed %v, want the function's own error", err)
	}
	// The limit grows with the file but never wraps around.
	if allocLimit(1<<62) <= 0 || allocLimit(10) != AllocFloor+10*allocFactor {
		t.Errorf("allocLimit: %d, %d", allocLimit(1<<62), allocLimit(10))
	}
}
