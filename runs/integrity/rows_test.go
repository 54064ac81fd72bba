package integrity

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBatchRows reads each batch's declared rows from its header and compares them with the
// rows the Arrow reader decodes, then damages every byte of a header in turn: BatchRows must
// return an error or a number, never panic or read outside the header.
func TestBatchRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.arrow")
	writeSealed(t, path, 4, 7, true)
	af, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < af.Reader().NumRecords(); i++ {
		got, err := af.BatchRows(i)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := af.Reader().RecordAt(i)
		if err != nil {
			t.Fatal(err)
		}
		if got != rec.NumRows() || got != 7 {
			t.Errorf("batch %d: header declares %d rows, the reader decodes %d", i, got, rec.NumRows())
		}
		rec.Release()
	}
	if _, err := af.BatchRows(4); !errors.Is(err, ErrDamaged) {
		t.Errorf("BatchRows past the last batch = %v, want ErrDamaged", err)
	}
	off, meta, _ := af.Block(2)
	af.Close()

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "d.arrow")
	errs := 0
	for k := off; k < off+meta; k++ {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			raw[k] ^= flip
			if err := os.WriteFile(damaged, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			raw[k] ^= flip
			af, err := Open(damaged, nil) // the footer is intact: the header is not checked by Open
			if err != nil {
				t.Fatalf("byte %d: %v", k, err)
			}
			if _, err := af.BatchRows(2); err != nil {
				if !errors.Is(err, ErrDamaged) {
					t.Errorf("byte %d ^ %#x: %v, want ErrDamaged", k, flip, err)
				}
				errs++
			}
			af.Close()
		}
	}
	if errs == 0 {
		t.Errorf("no damage to the header of %d bytes was noticed", meta)
	}
}

// FuzzBatchRows runs BatchRows over damaged files: it must not panic or hang.
func FuzzBatchRows(f *testing.F) {
	path := filepath.Join(f.TempDir(), "f.arrow")
	writeSealed(f, path, 2, 3, true)
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw, 0)
	f.Fuzz(func(t *testing.T, data []byte, i int) {
		p := filepath.Join(t.TempDir(), "f.arrow")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		af, err := Open(p, nil)
		if err != nil {
			return
		}
		defer af.Close()
		if n, err := af.BatchRows(i); err == nil && n < 0 {
			t.Errorf("batch %d: %d rows", i, n)
		}
	})
}
