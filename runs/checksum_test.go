package runs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/runs/integrity"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// blockOf returns where record batch i of a file lies, as its footer lists it.
func blockOf(t testing.TB, path string, i int) (offset, metaLength, bodyLength int64) {
	t.Helper()
	af, err := openArrowFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	return af.Block(i)
}

// batchesOf returns the number of record batches of a file.
func batchesOf(t testing.TB, path string) int {
	t.Helper()
	af, err := openArrowFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	return af.Reader().NumRecords()
}

// FlipInBatch flips one bit in the middle of the data (body) of record batch i of the file at
// path: the kind of damage Arrow's structural checks cannot see.
func flipInBatch(t testing.TB, path string, i int) {
	t.Helper()
	off, meta, body := blockOf(t, path, i)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[off+meta+body/2] ^= 0x10
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestChecksumDetectsFlippedByte(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs-00000-of-00001.arrow")
	m := testMeta([]string{"llr"}, true, false)
	writeFile(t, path, m, makeRows(m, 0, 12, 8), WithBatchRows(4))
	if n := batchesOf(t, path); n != 3 {
		t.Fatalf("%d batches, want 3", n)
	}
	if checked, err := VerifyFile(path); err != nil || !checked {
		t.Fatalf("VerifyFile of an intact file = %v, %v; want checked, no error", checked, err)
	}
	flipInBatch(t, path, 1)

	checked, err := VerifyFile(path)
	if !checked || !errors.Is(err, integrity.ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "batch 1") {
		t.Fatalf("VerifyFile = %v, %v; want a damage error naming %s and batch 1", checked, err, path)
	}
	tab, err := Open(path) // the footer and schema are intact: opening works, reading must not
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	rows := 0
	err = tab.Scan(context.Background(), func(Row) error { rows++; return nil })
	if !errors.Is(err, integrity.ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "batch 1") {
		t.Fatalf("Scan = %v, want a damage error naming the file and batch 1", err)
	}
	if rows != 4 {
		t.Fatalf("Scan passed %d rows before failing, want the 4 of batch 0", rows)
	}

	infos, err := VerifyShards(context.Background(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].State != ShardDamaged || infos[0].Path != path || infos[0].Shard != (Shard{0, 1}) {
		t.Fatalf("VerifyShards = %+v, want shard 0/1 damaged", infos)
	}
	// Without --verify only footers are read: the file looks complete.
	if infos, _ := ShardStatus(dir, 0); infos[0].State != ShardComplete {
		t.Fatalf("ShardStatus = %+v", infos)
	}
}

func TestChecksumDetectsFlippedScoreByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scores.arrow")
	w, err := CreateScores(path, ScoreMeta{Config: []byte(`{}`)}, WithBatchRows(5))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testScores(20, 0)...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadScoreFile(path); err != nil {
		t.Fatal(err)
	}
	flipInBatch(t, path, 2)
	_, err = ReadScoreFile(path)
	if !errors.Is(err, integrity.ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "batch 2") {
		t.Fatalf("ReadScoreFile = %v, want a damage error naming the file and batch 2", err)
	}
}

// Every single-byte change of a run file is either refused or harmless (padding, the leading
// schema copy readers ignore): nothing reads as other values. Every third byte, to keep the
// test quick; FuzzFlipRunFile tries the others.
func TestChecksumEveryByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.arrow")
	m := testMeta([]string{"llr"}, true, true)
	writeFile(t, path, m, makeRows(m, 0, 4, 3), WithBatchRows(2))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := readFileRows(t, path)
	tab, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m = tab.Meta()
	tab.Close()
	for off := 0; off < len(orig); off += 3 {
		data := append([]byte(nil), orig...)
		data[off] ^= 0x01
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := sameRowsOrError(path, m, want); err != nil {
			t.Fatalf("byte %d of %d flipped: %v", off, len(orig), err)
		}
	}
}

func readFileRows(t testing.TB, path string) []Row {
	tab, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	var rows []Row
	if err := tab.Scan(context.Background(), func(r Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

// sameRowsOrError reads path and returns an error only when it reads without error but gives
// other metadata or rows than want.
func sameRowsOrError(path string, m Meta, want []Row) error {
	tab, err := Open(path)
	if err != nil {
		return nil
	}
	defer tab.Close()
	got := tab.Meta()
	if string(got.Config) != string(m.Config) || got.DatasetHash != m.DatasetHash || got.ToolVersion != m.ToolVersion ||
		strings.Join(got.StatNames, ",") != strings.Join(m.StatNames, ",") || got.Shard != m.Shard {
		return errors.New("read other metadata without an error")
	}
	var rows []Row
	if err := tab.Scan(context.Background(), func(r Row) error { rows = append(rows, r); return nil }); err != nil {
		return nil
	}
	if len(rows) != len(want) {
		return errors.New("read another number of rows without an error")
	}
	for i := range rows {
		if !sameRow(rows[i], want[i]) {
			return errors.New("read other values without an error")
		}
	}
	return nil
}

// Files written before checksums (format version 1) are read, and reported unverified.
func TestLegacyFileWithoutChecksums(t *testing.T) {
	dir := t.TempDir()
	m := testMeta(nil, false, false)
	m.Shard = Shard{0, 1}
	sc := editSchema(t, m, func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
		for i := range k {
			if k[i] == KeyFormatVersion {
				v[i] = legacyFormatVersion
			}
		}
		return f, k, v
	})
	path := filepath.Join(dir, "old.arrow")
	rows := makeRows(m, 0, 3, 0)
	build := func(b *array.RecordBuilder) {
		for _, r := range rows {
			b.Field(0).(*array.Int64Builder).Append(r.RunID)
			b.Field(1).(*array.Int64Builder).Append(r.PairID)
			b.Field(2).(*array.Int8Builder).Append(r.World)
			b.Field(3).(*array.Uint64Builder).Append(r.Seed)
			b.Field(4).(*array.Int32Builder).Append(r.Round)
			b.Field(5).(*array.BooleanBuilder).Append(r.Diverged)
			b.Field(6).(*array.Float64Builder).Append(r.TrainLoss)
			b.Field(7).(*array.Float64Builder).Append(r.TestAccuracy)
		}
	}
	writeUnchecked(t, path, sc, build)
	if got := readFileRows(t, path); len(got) != 3 {
		t.Fatalf("read %d rows of a version-1 file, want 3", len(got))
	}
	if checked, err := VerifyFile(path); checked || err != nil {
		t.Fatalf("VerifyFile = %v, %v; want unchecked, no error", checked, err)
	}
	infos, err := VerifyShards(context.Background(), dir, 0)
	if err != nil || len(infos) != 1 || infos[0].State != ShardComplete || !infos[0].Unverified {
		t.Fatalf("VerifyShards = %+v, %v; want complete and unverified", infos, err)
	}

	// The current version without checksums is damage (its footer was replaced), not old age.
	cur := filepath.Join(t.TempDir(), "new.arrow")
	writeUnchecked(t, cur, editSchema(t, m, func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) { return f, k, v }), build)
	if _, err := Open(cur); !errors.Is(err, integrity.ErrDamaged) || !strings.Contains(err.Error(), "no checksums") {
		t.Fatalf("Open of a version-2 file without checksums = %v", err)
	}
}

func TestEmptyFileChecksums(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.arrow")
	m := testMeta(nil, false, false)
	writeFile(t, path, m, nil)
	if checked, err := VerifyFile(path); !checked || err != nil {
		t.Fatalf("VerifyFile = %v, %v", checked, err)
	}
	if rows := readFileRows(t, path); len(rows) != 0 {
		t.Fatalf("%d rows", len(rows))
	}
}
