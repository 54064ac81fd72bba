package runs

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/fedaudit/fedaudit/internal/fsutil"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func testMeta(stats []string, params, upload bool) Meta {
	return Meta{
		Config:      []byte(`{ "algo": "fedavg", "rounds": 3, "sigma": 0.5 }`),
		DatasetHash: "ab12",
		ToolVersion: "test",
		StatNames:   stats,
		HasParams:   params,
		HasUpload:   upload,
	}
}

// makeRows builds n deterministic rows for m, starting at run id first. Values are chosen so
// that every column differs between rows, and include NaN and infinities (a diverged run).
func makeRows(m Meta, first, n, dim int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		id := int64(first + i)
		r := Row{
			RunID: id / 3, PairID: id / 6, World: int8(id/3) % 2, Seed: uint64(id) * 0x9e3779b97f4a7c15,
			Round: int32(id % 3), Diverged: id%7 == 6, TrainLoss: 1 / float64(id+1), TestAccuracy: float64(id%10) / 10,
		}
		if r.Diverged {
			r.TrainLoss = math.NaN()
		}
		for j := range m.StatNames {
			r.Stats = append(r.Stats, float64(id)*float64(j+1)-0.25)
		}
		if len(m.StatNames) > 1 && id%5 == 4 {
			r.Stats[1] = math.Inf(-1)
		}
		if m.HasParams {
			r.Params = make([]float32, dim)
			for j := range r.Params {
				r.Params[j] = float32(id) + float32(j)/float32(dim)
			}
		}
		if m.HasUpload {
			r.Upload = make([]float32, dim)
			for j := range r.Upload {
				r.Upload[j] = -float32(id) * float32(j+1)
			}
		}
		if m.Canaries > 0 {
			r.CanaryIn = make([]bool, m.Canaries)
			for j := range r.CanaryIn {
				r.CanaryIn[j] = (id+int64(j))%3 == 0
			}
			for c := range m.CanaryStatNames {
				v := make([]float64, m.Canaries)
				for j := range v {
					v[j] = float64(id) - float64(j*(c+1))/7
				}
				r.CanaryStats = append(r.CanaryStats, v)
			}
		}
		rows[i] = r
	}
	return rows
}

// sameFloats compares bit patterns, so that NaN equals NaN and a lost sign of zero is caught.
func sameFloats[T float32 | float64](a, b []T) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if math.Float64bits(float64(a[i])) != math.Float64bits(float64(b[i])) {
			return false
		}
	}
	return true
}

func sameRow(a, b Row) bool {
	return a.RunID == b.RunID && a.PairID == b.PairID && a.World == b.World && a.Seed == b.Seed &&
		a.Round == b.Round && a.Diverged == b.Diverged &&
		sameFloats([]float64{a.TrainLoss, a.TestAccuracy}, []float64{b.TrainLoss, b.TestAccuracy}) &&
		sameFloats(a.Stats, b.Stats) && sameFloats(a.Params, b.Params) && sameFloats(a.Upload, b.Upload) &&
		slices.Equal(a.CanaryIn, b.CanaryIn) && slices.EqualFunc(a.CanaryStats, b.CanaryStats, sameFloats[float64])
}

func checkRows(t *testing.T, got, want []Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(want))
	}
	for i := range got {
		if !sameRow(got[i], want[i]) {
			t.Fatalf("row %d differs:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func writeFile(t *testing.T, path string, m Meta, rows []Row, opts ...Option) {
	t.Helper()
	w, err := Create(path, m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Write(rows...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, tab *Table) []Row {
	t.Helper()
	var rows []Row
	if err := tab.Scan(context.Background(), func(r Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name           string
		meta           Meta
		rows, dim      int
		opts           []Option
		wantMinBatches int
	}{
		{name: "no stats", meta: testMeta(nil, false, false), rows: 5},
		{name: "stats", meta: testMeta([]string{"target_loss_c", "llr_all_iterates", "realized_mu2"}, false, false), rows: 20},
		{name: "params and upload", meta: testMeta([]string{"llr"}, true, true), rows: 10, dim: 17},
		{name: "params only, batches by rows", meta: testMeta([]string{"a", "b"}, true, false), rows: 25, dim: 3,
			opts: []Option{WithBatchRows(4)}, wantMinBatches: 7},
		{name: "upload only, batches by bytes", meta: testMeta(nil, false, true), rows: 12, dim: 1000,
			opts: []Option{WithBatchBytes(10000)}, wantMinBatches: 4},
		{name: "empty", meta: testMeta([]string{"a"}, true, true), rows: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			path := filepath.Join(t.TempDir(), "run.arrow")
			want := makeRows(tc.meta, 0, tc.rows, tc.dim)
			w, err := Create(path, tc.meta, append(tc.opts, WithAllocator(mem))...)
			if err != nil {
				t.Fatal(err)
			}
			// Several Write calls, so that batches span calls.
			for i := 0; i < len(want); i += 3 {
				if err := w.Write(want[i:min(i+3, len(want))]...); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}

			tab, err := Open(path, WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			got := tab.Meta()
			if string(got.Config) != `{"algo":"fedavg","rounds":3,"sigma":0.5}` || got.DatasetHash != "ab12" ||
				got.ToolVersion != "test" || got.Shard != (Shard{0, 1}) || fmt.Sprint(got.StatNames) != fmt.Sprint(tc.meta.StatNames) ||
				got.HasParams != tc.meta.HasParams || got.HasUpload != tc.meta.HasUpload {
				t.Errorf("meta = %+v, wrote %+v", got, tc.meta)
			}
			if b := tab.Shards()[0].Batches; b < tc.wantMinBatches {
				t.Errorf("%d batches, want at least %d", b, tc.wantMinBatches)
			}
			checkRows(t, readAll(t, tab), want)
		})
	}
}

func TestShardDirectory(t *testing.T) {
	dir := t.TempDir()
	m := testMeta([]string{"llr"}, true, false)
	var want []Row
	const shards = 3
	for i := 0; i < shards; i++ {
		rows := makeRows(m, 10*i, 4+i, 5)
		want = append(want, rows...)
		sm := m
		sm.Shard = Shard{i, shards}
		// Names sort in the opposite order of shards: the reader must go by metadata.
		name := fmt.Sprintf("part-%c.arrow", 'z'-i)
		writeFile(t, filepath.Join(dir, name), sm, rows, WithBatchRows(2))
	}
	// Files the reader must ignore: hidden, other extension, subdirectory.
	os.WriteFile(filepath.Join(dir, ".runs-x.arrow.tmp-123"), []byte("partial"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub.arrow"), 0o755)

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	tab, err := Open(dir, WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	if s := tab.Meta().Shard; s != (Shard{}) {
		t.Errorf("table shard = %v, want zero for a directory", s)
	}
	sh := tab.Shards()
	if len(sh) != shards {
		t.Fatalf("%d shards, want %d", len(sh), shards)
	}
	for i, s := range sh {
		if s.Shard != (Shard{i, shards}) || filepath.Base(s.Path) != fmt.Sprintf("part-%c.arrow", 'z'-i) {
			t.Errorf("shard %d = %+v", i, s)
		}
	}
	checkRows(t, readAll(t, tab), want)

	// The range iterator sees the same rows and stops when the loop breaks.
	var n int
	for r, err := range tab.All(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if !sameRow(r, want[n]) {
			t.Fatalf("All: row %d differs", n)
		}
		if n++; n == 5 {
			break
		}
	}
	if n != 5 {
		t.Errorf("All yielded %d rows before break, want 5", n)
	}
}

func TestScanStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.arrow")
	m := testMeta(nil, false, false)
	writeFile(t, path, m, makeRows(m, 0, 10, 0), WithBatchRows(2))
	tab, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	var n int
	err = tab.Scan(context.Background(), func(Row) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Errorf("Scan returned %v after %d rows, want the callback's error after 3", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	err = tab.Scan(ctx, func(Row) error {
		n++
		cancel()
		return nil
	})
	// Cancellation is noticed between batches: the first batch (2 rows) completes.
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Errorf("Scan returned %v after %d rows, want context.Canceled after 2", err, n)
	}
	tab.Close()
	if err := tab.Scan(context.Background(), func(Row) error { return nil }); err == nil {
		t.Error("Scan after Close succeeded")
	}
}

// writeShards writes one file per meta into a fresh directory, named a.arrow, b.arrow, ...
func writeShards(t *testing.T, metas ...Meta) (string, []string) {
	dir := t.TempDir()
	var paths []string
	for i, m := range metas {
		p := filepath.Join(dir, string(rune('a'+i))+".arrow")
		writeFile(t, p, m, makeRows(m, i*10, 2, 2))
		paths = append(paths, p)
	}
	return dir, paths
}

func TestOpenRefusesMixedShards(t *testing.T) {
	shard := func(m Meta, i, n int) Meta { m.Shard = Shard{i, n}; return m }
	base := testMeta([]string{"llr"}, false, false)
	other := func(f func(*Meta)) Meta { m := base; f(&m); return shard(m, 1, 2) }
	for _, tc := range []struct {
		name     string
		second   Meta
		wantErr  string
		bothName bool
	}{
		{"config", other(func(m *Meta) { m.Config = []byte(`{"algo":"fedprox"}`) }), "experiment configs differ", true},
		{"dataset", other(func(m *Meta) { m.DatasetHash = "ff00" }), "dataset hashes differ", true},
		{"version", other(func(m *Meta) { m.ToolVersion = "other" }), "tool versions differ", true},
		{"stats", other(func(m *Meta) { m.StatNames = []string{"llr", "x"} }), "statistic columns differ", true},
		{"params", other(func(m *Meta) { m.HasParams = true }), "params/upload columns differ", true},
		{"count", shard(base, 1, 3), "shard counts differ", true},
		{"duplicate", shard(base, 0, 2), "duplicate shard 0/2", true},
		{"missing", shard(base, 0, 2), "", false}, // replaced below: one file of two
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			var paths []string
			if tc.name == "missing" {
				dir, paths = writeShards(t, shard(base, 1, 3))
				tc.wantErr = "2 of 3 shards missing (0/3, 2/3)"
			} else {
				dir, paths = writeShards(t, shard(base, 0, 2), tc.second)
			}
			_, err := Open(dir)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
			for _, p := range paths {
				if !strings.Contains(err.Error(), p) && tc.bothName {
					t.Errorf("error %q does not name %s", err, p)
				}
			}
			if tc.name == "missing" {
				tab, err := Open(dir, AllowPartial())
				if err != nil {
					t.Fatalf("Open with AllowPartial: %v", err)
				}
				if rows := readAll(t, tab); len(rows) != 2 {
					t.Errorf("partial table has %d rows, want 2", len(rows))
				}
			}
		})
	}
}

func TestTempFileAndAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.arrow")
	m := testMeta(nil, true, false)
	listDir := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}

	w, err := Create(path, m, WithBatchRows(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(makeRows(m, 0, 3, 4)...); err != nil {
		t.Fatal(err)
	}
	// Batches have been written, yet nothing is visible under the final name.
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("before Close: stat %s = %v, want not exist", path, err)
	}
	if names := listDir(); len(names) != 1 || !strings.HasPrefix(names[0], ".run.arrow.tmp-") {
		t.Fatalf("before Close the directory holds %v, want one hidden temporary file", names)
	}
	if _, err := Open(dir); err == nil {
		t.Error("Open of a directory holding only a temporary file succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if names := listDir(); len(names) != 1 || names[0] != "run.arrow" {
		t.Fatalf("after Close the directory holds %v, want [run.arrow]", names)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("after Close: stat = %v, %v; want mode 0644", st, err)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after Close: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Abort after Close removed the file: %v", err)
	}
	if err := w.Write(makeRows(m, 0, 1, 4)...); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close = %v, want errClosed", err)
	}
	if err := w.Close(); !errors.Is(err, errClosed) {
		t.Errorf("second Close = %v, want errClosed", err)
	}

	path2 := filepath.Join(dir, "aborted.arrow")
	w, err = Create(path2, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(makeRows(m, 0, 3, 4)...); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if names := listDir(); len(names) != 1 || names[0] != "run.arrow" {
		t.Fatalf("after Abort the directory holds %v, want only run.arrow", names)
	}
	if err := w.Close(); !errors.Is(err, errClosed) {
		t.Errorf("Close after Abort = %v, want errClosed", err)
	}

	if _, err := Create(filepath.Join(dir, "no", "such", "dir.arrow"), m); err == nil {
		t.Error("Create in a missing directory succeeded")
	}
}

func TestWriteValidation(t *testing.T) {
	m := testMeta([]string{"a", "b"}, true, true)
	good := makeRows(m, 0, 1, 3)[0]
	mod := func(f func(*Row)) Row {
		r := good
		r.Stats = append([]float64(nil), good.Stats...)
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		row  Row
		want string
	}{
		{"world", mod(func(r *Row) { r.World = 2 }), "world 2"},
		{"stats", mod(func(r *Row) { r.Stats = r.Stats[:1] }), "1 statistics, the file declares 2"},
		{"no params", mod(func(r *Row) { r.Params = nil }), "no params"},
		{"params length", mod(func(r *Row) { r.Params = r.Params[:2] }), "params has length 2, earlier rows 3"},
		{"upload length", mod(func(r *Row) { r.Upload = append(r.Upload, 1) }), "upload has length 4, earlier rows 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.arrow")
			w, err := Create(path, m)
			if err != nil {
				t.Fatal(err)
			}
			// The bad row comes second in one call: the good one must not be written either.
			err = w.Write(good, tc.row)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Write = %v, want an error naming %s and saying %q", err, path, tc.want)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			tab, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if rows := readAll(t, tab); len(rows) != 0 {
				t.Errorf("%d rows written by a rejected call, want 0", len(rows))
			}
		})
	}

	noVectors := testMeta(nil, false, false)
	w, err := Create(filepath.Join(t.TempDir(), "run.arrow"), noVectors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Write(Row{Params: []float32{1}}); err == nil || !strings.Contains(err.Error(), "does not declare") {
		t.Errorf("Write of undeclared params = %v", err)
	}
}

func TestCreateValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(*Meta)
		want string
	}{
		{"empty config", func(m *Meta) { m.Config = nil }, "config is empty"},
		{"bad config", func(m *Meta) { m.Config = []byte("{nope") }, "not valid JSON"},
		{"duplicate stat", func(m *Meta) { m.StatNames = []string{"a", "a"} }, `duplicate column "a"`},
		{"reserved stat", func(m *Meta) { m.StatNames = []string{"round"} }, `"round" is reserved`},
		{"reserved params", func(m *Meta) { m.StatNames = []string{"params"} }, `"params" is reserved`},
		{"empty stat", func(m *Meta) { m.StatNames = []string{""} }, "empty column name"},
		{"shard", func(m *Meta) { m.Shard = Shard{3, 3} }, "invalid shard 3/3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMeta(nil, false, false)
			tc.f(&m)
			dir := t.TempDir()
			_, err := Create(filepath.Join(dir, "run.arrow"), m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create = %v, want %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("failed Create left %d files", len(entries))
			}
		})
	}
}

// writeRaw writes an Arrow file with any schema, bypassing the package's checks of rows and
// schema (but with checksums, as the package writes them), to make files it would refuse to write.
func writeRaw(t *testing.T, path string, sc *arrow.Schema, build func(*array.RecordBuilder)) {
	t.Helper()
	fw, err := newFileWriter(path, sc, newOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer fw.abort()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	build(b)
	rec := b.NewRecord()
	defer rec.Release()
	if err := fw.w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.close(); err != nil {
		t.Fatal(err)
	}
}

// writeUnchecked writes an Arrow file with the plain Arrow writer: no checksums in the footer,
// as files of format version 1 and of other tools.
func writeUnchecked(t testing.TB, path string, sc *arrow.Schema, build func(*array.RecordBuilder)) {
	t.Helper()
	writeUncheckedBatches(t, path, sc, 1, func(_ int, b *array.RecordBuilder) { build(b) })
}

// writeUncheckedBatches is writeUnchecked of n record batches, batch i built by build(i, ...).
func writeUncheckedBatches(t testing.TB, path string, sc *arrow.Schema, n int, build func(int, *array.RecordBuilder)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sc))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		build(i, b)
		rec := b.NewRecord()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// editSchema returns the run schema of m with fields and metadata changed by f.
func editSchema(t testing.TB, m Meta, f func(fields []arrow.Field, keys, values []string) ([]arrow.Field, []string, []string)) *arrow.Schema {
	sc, err := runSchema(m)
	if err != nil {
		t.Fatal(err)
	}
	md := sc.Metadata()
	fields, keys, values := f(append([]arrow.Field(nil), sc.Fields()...), append([]string(nil), md.Keys()...), append([]string(nil), md.Values()...))
	nmd := arrow.NewMetadata(keys, values)
	return arrow.NewSchema(fields, &nmd)
}

// fillRows appends n rows of default values to every column of b.
func fillRows(n int) func(*array.RecordBuilder) {
	return func(b *array.RecordBuilder) { fillExcept(b, n, -1) }
}

// fillExcept appends n default values to every column of b but column skip.
func fillExcept(b *array.RecordBuilder, n, skip int) {
	for i, fb := range b.Fields() {
		for j := 0; j < n && i != skip; j++ {
			fb.AppendEmptyValue()
		}
	}
}

// writeBrokenRunFiles writes to dir a good run file and, beside it, files that are not run files
// or whose schema is wrong in one way each (TestOpenErrors names them).
func writeBrokenRunFiles(t *testing.T, dir string) {
	t.Helper()
	m := testMeta([]string{"llr"}, false, false)
	good := filepath.Join(dir, "good.arrow")
	writeFile(t, good, m, makeRows(m, 0, 30, 0), WithBatchRows(5))
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"text.arrow":      []byte("run_id,world\n1,0\n"),
		"empty.arrow":     nil,
		"truncated.arrow": raw[:len(raw)/2],
		"magiconly.arrow": []byte("ARROW1\x00\x00ARROW1"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	without := func(key string) func([]arrow.Field, []string, []string) ([]arrow.Field, []string, []string) {
		return func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
			for i := range k {
				if k[i] == key {
					return f, append(k[:i], k[i+1:]...), append(v[:i], v[i+1:]...)
				}
			}
			t.Fatalf("no key %s", key)
			return nil, nil, nil
		}
	}
	setKey := func(key, val string) func([]arrow.Field, []string, []string) ([]arrow.Field, []string, []string) {
		return func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
			for i := range k {
				if k[i] == key {
					v[i] = val
				}
			}
			return f, k, v
		}
	}
	fieldEdit := func(f func([]arrow.Field) []arrow.Field) func([]arrow.Field, []string, []string) ([]arrow.Field, []string, []string) {
		return func(fs []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) { return f(fs), k, v }
	}
	schemas := map[string]*arrow.Schema{
		"nokind.arrow":    editSchema(t, m, without(KeyKind)),
		"noconfig.arrow":  editSchema(t, m, without(KeyConfig)),
		"noshard.arrow":   editSchema(t, m, without(KeyShard)),
		"version.arrow":   editSchema(t, m, setKey(KeyFormatVersion, "99")),
		"scores.arrow":    editSchema(t, m, setKey(KeyKind, KindScores)),
		"badshard.arrow":  editSchema(t, m, setKey(KeyShard, "2/2")),
		"badconfig.arrow": editSchema(t, m, setKey(KeyConfig, "{")),
		"noseed.arrow": editSchema(t, m, fieldEdit(func(f []arrow.Field) []arrow.Field {
			return append(f[:3], f[4:]...)
		})),
		"roundtype.arrow": editSchema(t, m, fieldEdit(func(f []arrow.Field) []arrow.Field {
			f[4].Type = arrow.PrimitiveTypes.Int64
			return f
		})),
		"stattype.arrow": editSchema(t, m, fieldEdit(func(f []arrow.Field) []arrow.Field {
			return append(f, arrow.Field{Name: "note", Type: arrow.BinaryTypes.String})
		})),
		"paramstype.arrow": editSchema(t, m, fieldEdit(func(f []arrow.Field) []arrow.Field {
			return append(f, arrow.Field{Name: "params", Type: arrow.ListOf(arrow.PrimitiveTypes.Float64)})
		})),
	}
	schemas["dict.arrow"] = editSchema(t, m, fieldEdit(func(f []arrow.Field) []arrow.Field {
		return append(f, arrow.Field{Name: "tag", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}})
	}))
	schemas["struct.arrow"] = editSchema(t, m, fieldEdit(func(f []arrow.Field) []arrow.Field {
		return append(f, arrow.Field{Name: "pair", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64})})
	}))
	for name, sc := range schemas {
		writeRaw(t, filepath.Join(dir, name), sc, fillRows(1))
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	writeBrokenRunFiles(t, dir)
	for _, tc := range []struct {
		file, want string
	}{
		{"absent.arrow", "no such file"},
		{"text.arrow", "not an Arrow IPC file"},
		{"empty.arrow", "not an Arrow IPC file"},
		{"truncated.arrow", "truncated Arrow file"},
		{"magiconly.arrow", "file too small"},
		{"nokind.arrow", `missing schema metadata "fedaudit.kind" (not written by fedaudit?)`},
		{"noconfig.arrow", `missing schema metadata "fedaudit.config"`},
		{"noshard.arrow", `missing schema metadata "fedaudit.shard"`},
		{"version.arrow", `format version "99"`},
		{"scores.arrow", "file holds scores, not runs"},
		{"badshard.arrow", "invalid shard 2/2"},
		{"badconfig.arrow", "not valid JSON"},
		{"noseed.arrow", `missing required column "seed"`},
		{"roundtype.arrow", `column "round" has type int64, want int32`},
		{"stattype.arrow", `column "note" has type utf8; statistic columns must be float64`},
		{"paramstype.arrow", `column "params" has type list<item: float64, nullable>`},
		{"dict.arrow", `column "tag": dictionary-encoded columns are not supported`},
		{"struct.arrow", `column "pair": unsupported Arrow type`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			_, err := Open(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open = %v, want an error naming %s and saying %q", err, path, tc.want)
			}
		})
	}
	if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no run files") {
		t.Errorf("Open of an empty directory = %v", err)
	}
}

// TestScanErrors covers files whose schema is right but whose values are not.
func TestScanErrors(t *testing.T) {
	dir := t.TempDir()
	m := testMeta(nil, true, false)
	sc, err := runSchema(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		build func(*array.RecordBuilder)
		want  string
	}{
		{"world", func(b *array.RecordBuilder) {
			fillExcept(b, 2, 2)
			b.Field(2).(*array.Int8Builder).AppendValues([]int8{0, 5}, nil)
		}, "row 1: world 5"},
		{"null", func(b *array.RecordBuilder) {
			fillExcept(b, 1, 6)
			b.Field(6).AppendNull()
		}, `column "train_loss" has 1 null values`},
		{"null params", func(b *array.RecordBuilder) {
			fillExcept(b, 1, 8)
			b.Field(8).AppendNull()
		}, `column "params" has 1 values (1 null)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".arrow")
			writeRaw(t, path, sc, tc.build)
			tab, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			err = tab.Scan(context.Background(), func(Row) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Scan = %v, want an error naming the file and saying %q", err, tc.want)
			}
		})
	}
}

func TestShardStatus(t *testing.T) {
	m := testMeta(nil, false, false)
	shard := func(i, n int) Meta { s := m; s.Shard = Shard{i, n}; return s }
	dir := t.TempDir()
	write := func(name string, meta Meta) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, meta, makeRows(meta, 0, 1, 0))
		return p
	}
	a := write("a.arrow", shard(0, 4))
	b := write("b.arrow", shard(0, 4)) // duplicate of a
	c := write("c.arrow", shard(2, 4))
	other := shard(3, 4)
	other.DatasetHash = "other"
	d := write("d.arrow", other)
	e := write("e.arrow", shard(1, 2))
	corrupt := filepath.Join(dir, "f.arrow")
	os.WriteFile(corrupt, []byte("garbage"), 0o644)
	// A writer at work: it holds the lock of its temporary file.
	live, err := fsutil.Create(filepath.Join(dir, "g.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	live.Write([]byte("ARROW1"))
	tmp := live.Name()

	infos, err := ShardStatus(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		shard Shard
		path  string
		state ShardState
	}{
		{Shard{0, 4}, a, ShardComplete},
		{Shard{1, 4}, "", ShardMissing},
		{Shard{2, 4}, c, ShardComplete},
		{Shard{3, 4}, "", ShardMissing},
		{Shard{}, tmp, ShardWriting},
		{Shard{0, 4}, b, ShardDuplicate},
		{Shard{3, 4}, d, ShardMismatch},
		{Shard{1, 2}, e, ShardMismatch},
		{Shard{}, corrupt, ShardCorrupt},
	}
	// Problems come in directory order (by name), after the shard indices.
	order := map[string]int{tmp: 0, b: 1, d: 2, e: 3, corrupt: 4}
	wantProblems := make([]ShardInfo, 5)
	for _, w := range want[4:] {
		wantProblems[order[w.path]] = ShardInfo{Shard: w.shard, Path: w.path, State: w.state}
	}
	if len(infos) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(infos), len(want), infos)
	}
	for i, got := range infos {
		w := ShardInfo{Shard: want[i].shard, Path: want[i].path, State: want[i].state}
		if i >= 4 {
			w = wantProblems[i-4]
		}
		if got.Shard != w.Shard || got.Path != w.Path || got.State != w.State {
			t.Errorf("entry %d = {%v %s %v}, want {%v %s %v}", i, got.Shard, got.Path, got.State, w.Shard, w.Path, w.State)
		}
		if (got.Err != nil) != (got.State >= ShardCorrupt && got.State <= ShardMismatch) {
			t.Errorf("entry %d (%v): Err = %v", i, got.State, got.Err)
		}
	}

	// With an explicit count and an empty directory every shard is missing.
	infos, err = ShardStatus(t.TempDir(), 3)
	if err != nil || len(infos) != 3 || infos[2].State != ShardMissing || infos[2].Shard != (Shard{2, 3}) {
		t.Errorf("ShardStatus(empty, 3) = %+v, %v", infos, err)
	}
	if _, err := ShardStatus(filepath.Join(dir, "absent"), 1); err == nil {
		t.Error("ShardStatus of a missing directory succeeded")
	}

	// Two shards' files swapped by hand: status called the set complete, and the training
	// stage then refused both files. Each is a mismatch now, and its shard missing.
	swapped := t.TempDir()
	one := filepath.Join(swapped, Shard{0, 2}.FileName())
	two := filepath.Join(swapped, Shard{1, 2}.FileName())
	writeFile(t, one, shard(1, 2), makeRows(shard(1, 2), 0, 1, 0))
	writeFile(t, two, shard(0, 2), makeRows(shard(0, 2), 0, 1, 0))
	infos, err = ShardStatus(swapped, 2)
	if err != nil {
		t.Fatal(err)
	}
	var states []ShardState
	for _, in := range infos {
		states = append(states, in.State)
		if in.State == ShardMismatch && !strings.Contains(in.Err.Error(), "under shard") {
			t.Errorf("%s: %v", in.Path, in.Err)
		}
	}
	if !slices.Equal(states, []ShardState{ShardMissing, ShardMissing, ShardMismatch, ShardMismatch}) {
		t.Errorf("swapped shard files: states %v, want both shards missing and both files mismatched", states)
	}
}

func TestShardString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Shard
		wantErr bool
	}{
		{"0/1", Shard{0, 1}, false},
		{"3/8", Shard{3, 8}, false},
		{"8/8", Shard{}, true},
		{"-1/2", Shard{}, true},
		{"1/0", Shard{}, true},
		{"1", Shard{}, true},
		{"a/b", Shard{}, true},
	} {
		got, err := ParseShard(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseShard(%q) = %v, %v", tc.in, got, err)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("Shard%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
	if s := (Shard{}).String(); s != "0/1" {
		t.Errorf("zero Shard = %q, want 0/1", s)
	}
	if s := (Shard{3, 12}).FileName(); s != "runs-00003-of-00012.arrow" {
		t.Errorf("FileName = %q", s)
	}
}

// TestGoldenSchema pins the on-disk schemas: a change here changes what other tools read and
// must come with a new FormatVersion. Run with -update to rewrite testdata/schema.golden.
func TestGoldenSchema(t *testing.T) {
	rs, err := runSchema(Meta{
		Config: []byte(`{"algo": "fedavg"}`), DatasetHash: "0123abcd", ToolVersion: "1.2.3", Shard: Shard{2, 4},
		StatNames: []string{"target_loss_c", "llr_all_iterates", "realized_mu2"}, HasParams: true, HasUpload: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := scoreSchema(ScoreMeta{Config: []byte(`{"algo": "fedavg"}`), DatasetHash: "0123abcd", ToolVersion: "1.2.3",
		MetricNames: []string{"threshold"}})
	if err != nil {
		t.Fatal(err)
	}
	cm := Meta{Config: []byte(`{"algo": "fedavg"}`), DatasetHash: "0123abcd", ToolVersion: "1.2.3", Shard: Shard{0, 1},
		StatNames: []string{"target_loss_c"}, Canaries: 1000, CanaryStatNames: []string{CanaryCosFinal, CanaryLLRAll}}
	crs, err := runSchema(cm)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := canaryScoreSchema(ScoreMeta{Config: []byte(`{"algo": "fedavg"}`), DatasetHash: "0123abcd", ToolVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	version := func(sc *arrow.Schema) string { v, _ := sc.Metadata().GetValue(KeyFormatVersion); return v }
	got := fmt.Sprintf("# run file, format version %s\n%s\n\n# score file, format version %s\n%s\n\n"+
		"# run file with canaries, format version %s\n%s\n\n# canary score file, format version %s\n%s\n",
		version(rs), rs, version(ss), ss, version(crs), crs, version(cs), cs)
	path := filepath.Join("testdata", "schema.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("schema differs from %s (run with -update after an intended change)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
