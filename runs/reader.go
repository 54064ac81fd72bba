package runs

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs/integrity"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// ShardFile is one file of a Table.
type ShardFile struct {
	Path    string
	Shard   Shard
	Batches int // record batches in the file
}

// Table is a run file, or a directory of shard files of one experiment read as one table. Open
// reads only footers and schemas; rows are decoded batch by batch during Scan, so a table of any
// size is never held in memory at once.
type Table struct {
	path   string
	meta   Meta
	files  []ShardFile
	mem    memory.Allocator
	closed bool
}

// header is what Open learns of a file without decoding its rows.
type header struct {
	meta    Meta
	layout  runLayout
	schema  *arrow.Schema
	batches int
	checked bool // the file carries checksums
}

func readHeader(path string, mem memory.Allocator) (header, error) {
	af, err := openArrowFile(path, mem)
	if err != nil {
		return header{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer af.Close()
	m, lay, err := parseRunSchema(af.Reader().Schema())
	if err != nil {
		return header{}, fmt.Errorf("open %s: %w", path, err)
	}
	return header{meta: m, layout: lay, schema: af.Reader().Schema(), batches: af.Reader().NumRecords(), checked: af.Checked()}, nil
}

// runFiles lists the run files of a directory: *.arrow, not hidden (writers' temporary files are
// hidden), sorted by name.
func runFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || filepath.Ext(name) != ".arrow" {
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	return out, nil
}

// ErrShardsMissing marks a set of run files that lacks some of its shards (Open without
// AllowPartial).
var ErrShardsMissing = errors.New("shards missing")

// Open opens a run file, or a directory whose *.arrow files are the shards of one experiment.
// It refuses files of different experiments (config, dataset hash, tool version or columns),
// two files claiming the same shard, and, unless AllowPartial is given, an incomplete set.
func Open(path string, opts ...Option) (*Table, error) {
	o := newOptions(opts)
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, bare(err))
	}
	if !st.IsDir() {
		h, err := readHeader(path, o.mem)
		if err != nil {
			return nil, err
		}
		files := []ShardFile{{Path: path, Shard: h.meta.Shard, Batches: h.batches}}
		return &Table{path: path, meta: h.meta, files: files, mem: o.mem}, nil
	}

	paths, err := runFiles(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, bare(err))
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("open %s: no run files (*.arrow) in directory", path)
	}
	var first header
	firstPath := ""
	byIndex := map[int]string{}
	var files []ShardFile
	for _, p := range paths {
		h, err := readHeader(p, o.mem)
		if err != nil {
			return nil, err
		}
		if o.firstShards > 0 && h.meta.Shard.Index >= o.firstShards {
			continue
		}
		if firstPath == "" {
			first, firstPath = h, p
		} else if why := first.meta.sameExperiment(h.meta); why != "" {
			return nil, fmt.Errorf("open %s: %s and %s are not of one experiment: %s", path, firstPath, p, why)
		}
		if h.meta.Shard.Count != first.meta.Shard.Count {
			return nil, fmt.Errorf("open %s: %s is shard %s but %s is shard %s: shard counts differ",
				path, firstPath, first.meta.Shard, p, h.meta.Shard)
		}
		if other, dup := byIndex[h.meta.Shard.Index]; dup {
			return nil, fmt.Errorf("open %s: duplicate shard %s in %s and %s", path, h.meta.Shard, other, p)
		}
		byIndex[h.meta.Shard.Index] = p
		files = append(files, ShardFile{Path: p, Shard: h.meta.Shard, Batches: h.batches})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("open %s: none of the first %d shards has a run file", path, o.firstShards)
	}
	n := first.meta.Shard.Count
	if o.firstShards > 0 {
		n = min(n, o.firstShards)
	}
	if len(files) < n && !o.allowPartial {
		var missing []string
		for i := 0; i < n && len(missing) < 10; i++ {
			if _, ok := byIndex[i]; !ok {
				missing = append(missing, Shard{i, first.meta.Shard.Count}.String())
			}
		}
		more := ""
		if n-len(files) > len(missing) {
			more = ", ..."
		}
		return nil, fmt.Errorf("open %s: %d of %d %w (%s%s)", path, n-len(files), n, ErrShardsMissing, strings.Join(missing, ", "), more)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Shard.Index < files[j].Shard.Index })
	meta := first.meta
	meta.Shard = Shard{}
	if len(files) == 1 {
		meta.Shard = files[0].Shard
	}
	return &Table{path: path, meta: meta, files: files, mem: o.mem}, nil
}

// Meta returns the metadata shared by the table's files. Its Shard is the zero Shard when the
// table spans several files.
func (t *Table) Meta() Meta { return t.meta }

// Shards lists the table's files in shard order.
func (t *Table) Shards() []ShardFile { return append([]ShardFile(nil), t.files...) }

// Path is the file or directory the table was opened from.
func (t *Table) Path() string { return t.path }

// Close releases the table. Files are opened only while Scan reads them, so Close just marks
// the table unusable.
func (t *Table) Close() error {
	t.closed = true
	return nil
}

// Scan calls fn for every row, file by file in shard order and batch by batch. The slices in a
// Row are its own; fn may keep them. An error from fn stops the scan and is returned unchanged;
// a cancelled ctx stops it between batches.
func (t *Table) Scan(ctx context.Context, fn func(Row) error) error {
	if t.closed {
		return fmt.Errorf("scan %s: table is closed", t.path)
	}
	for _, sf := range t.files {
		if err := t.scanFile(ctx, sf, fn); err != nil {
			return err
		}
	}
	return nil
}

// errStopped ends a Scan from within All when the loop body breaks.
var errStopped = errors.New("stopped")

// All returns an iterator over the rows, for range loops. A failure is yielded once, as the
// error of a final zero Row.
func (t *Table) All(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		err := t.Scan(ctx, func(r Row) error {
			if !yield(r, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(Row{}, err)
		}
	}
}

func (t *Table) scanFile(ctx context.Context, sf ShardFile, fn func(Row) error) error {
	af, err := openArrowFile(sf.Path, t.mem)
	if err != nil {
		return fmt.Errorf("read %s: %w", sf.Path, err)
	}
	defer af.Close()
	r := af.Reader()
	// The file was checked by Open; it may have been replaced since.
	m, lay, err := parseRunSchema(r.Schema())
	if err != nil {
		return fmt.Errorf("read %s: %w", sf.Path, err)
	}
	if why := t.meta.sameExperiment(m); why != "" || m.Shard != sf.Shard {
		return fmt.Errorf("read %s: file changed since it was opened", sf.Path)
	}
	paramLen, uploadLen := -1, -1 // fixed by the first batch with rows
	for i := 0; i < r.NumRecords(); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The checksum first: damaged bytes must not reach the decoder, nor the audit.
		if err := af.VerifyBatch(i); err != nil {
			return fmt.Errorf("read %s: batch %d: %w", sf.Path, i, err)
		}
		var b *runBatch
		err := integrity.DecodeSafely(func() error {
			var err error
			b, err = decodeRunBatch(r, i, lay)
			return err
		})
		if err == nil {
			err = b.params.sameWidth(colParams, &paramLen)
			if err == nil {
				err = b.upload.sameWidth(colUpload, &uploadLen)
			}
			if err != nil {
				b.rec.Release()
			}
		}
		if err != nil {
			return fmt.Errorf("read %s: batch %d: %w", sf.Path, i, err)
		}
		err = func() error {
			defer b.rec.Release()
			return b.each(fn)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// runBatch is a decoded record batch whose columns have been checked, so that building a Row
// from it cannot fail. Rows are built one at a time: a batch's Rows take several times the
// memory of its columns.
type runBatch struct {
	rec       arrow.Record
	n         int
	runID     []int64
	pairID    []int64
	world     []int8
	seed      []uint64
	round     []int32
	diverged  *array.Boolean
	trainLoss []float64
	testAcc   []float64
	stats     [][]float64
	params    float32Lists
	upload    float32Lists
	// canaryIn and canaryStats are the canary columns (nil without canaries).
	canaryIn    *boolLists
	canaryStats []float64Lists
}

func (b *runBatch) each(fn func(Row) error) error {
	for k := 0; k < b.n; k++ {
		var stats []float64 // nil without statistics, as writers pass it
		if len(b.stats) > 0 {
			stats = make([]float64, len(b.stats))
			for j := range b.stats {
				stats[j] = b.stats[j][k]
			}
		}
		row := Row{
			RunID: b.runID[k], PairID: b.pairID[k], World: b.world[k], Seed: b.seed[k], Round: b.round[k],
			Diverged: b.diverged.Value(k), TrainLoss: b.trainLoss[k], TestAccuracy: b.testAcc[k],
			Stats: stats, Params: b.params.row(k), Upload: b.upload.row(k),
		}
		if b.canaryIn != nil {
			row.CanaryIn = b.canaryIn.row(k)
			row.CanaryStats = make([][]float64, len(b.canaryStats))
			for j := range b.canaryStats {
				row.CanaryStats[j] = b.canaryStats[j].row(k)
			}
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return nil
}

// decodeRunBatch decodes batch i. It checks what the IPC reader does not: lengths, nulls, list
// offsets and world values, so that a corrupt file is an error here rather than a wrong number
// or a crash later. The caller releases b.rec.
func decodeRunBatch(r *ipc.FileReader, i int, lay runLayout) (b *runBatch, err error) {
	rec, err := r.RecordAt(i)
	if err != nil {
		return nil, err
	}
	defer func() {
		if b == nil {
			rec.Release()
		}
	}()
	n := int(rec.NumRows())
	col := func(idx int) (arrow.Array, error) {
		a := rec.Column(idx)
		name := rec.Schema().Field(idx).Name
		if a.Len() != n {
			return nil, fmt.Errorf("column %q has %d values for %d rows", name, a.Len(), n)
		}
		if a.NullN() != 0 {
			return nil, fmt.Errorf("column %q has %d null values", name, a.NullN())
		}
		return a, nil
	}
	var fixed [8]arrow.Array
	for j, idx := range lay.fixed {
		if fixed[j], err = col(idx); err != nil {
			return nil, err
		}
	}
	out := &runBatch{
		rec:       rec,
		n:         n,
		runID:     fixed[0].(*array.Int64).Int64Values(),
		pairID:    fixed[1].(*array.Int64).Int64Values(),
		world:     fixed[2].(*array.Int8).Int8Values(),
		seed:      fixed[3].(*array.Uint64).Uint64Values(),
		round:     fixed[4].(*array.Int32).Int32Values(),
		diverged:  fixed[5].(*array.Boolean),
		trainLoss: fixed[6].(*array.Float64).Float64Values(),
		testAcc:   fixed[7].(*array.Float64).Float64Values(),
	}
	if len(out.runID) != n || len(out.pairID) != n || len(out.world) != n || len(out.seed) != n ||
		len(out.round) != n || len(out.trainLoss) != n || len(out.testAcc) != n {
		return nil, errors.New("column buffers shorter than the batch")
	}
	if bits := out.diverged.Data().Buffers()[1]; n > 0 && (bits == nil || bits.Len()*8 < out.diverged.Data().Offset()+n) {
		return nil, fmt.Errorf("column %q: buffer shorter than the batch", colDiverged)
	}
	for k, w := range out.world {
		if w != WorldC && w != WorldCPrime {
			return nil, fmt.Errorf("row %d: world %d, want 0 or 1", k, w)
		}
	}
	for _, idx := range lay.stats {
		a, err := col(idx)
		if err != nil {
			return nil, err
		}
		v := a.(*array.Float64).Float64Values()
		if len(v) != n {
			return nil, errors.New("column buffers shorter than the batch")
		}
		out.stats = append(out.stats, v)
	}
	if out.params, err = listColumn(rec, lay.params, n); err != nil {
		return nil, err
	}
	if out.upload, err = listColumn(rec, lay.upload, n); err != nil {
		return nil, err
	}
	if err := decodeCanaries(rec, lay, n, lay.canaries, out); err != nil {
		return nil, err
	}
	return out, nil
}

// float32Lists gives checked access to a list<float32> column.
type float32Lists struct {
	offsets []int32
	values  []float32
	width   int // the values of every row
}

func (l float32Lists) row(k int) []float32 {
	if l.offsets == nil {
		return nil
	}
	return append([]float32(nil), l.values[l.offsets[k]:l.offsets[k+1]]...)
}

func listColumn(rec arrow.Record, idx, n int) (float32Lists, error) {
	if idx < 0 {
		return float32Lists{}, nil
	}
	name := rec.Schema().Field(idx).Name
	a, ok := rec.Column(idx).(*array.List)
	if !ok {
		return float32Lists{}, fmt.Errorf("column %q is not a list", name)
	}
	if a.Len() != n || a.NullN() != 0 {
		return float32Lists{}, fmt.Errorf("column %q has %d values (%d null) for %d rows", name, a.Len(), a.NullN(), n)
	}
	if n == 0 {
		return float32Lists{}, nil // an empty batch may come without offsets
	}
	vals, ok := a.ListValues().(*array.Float32)
	if !ok {
		return float32Lists{}, fmt.Errorf("column %q does not hold float32", name)
	}
	if vals.NullN() != 0 {
		return float32Lists{}, fmt.Errorf("column %q has null elements", name)
	}
	off := a.Data().Offset()
	offsets := a.Offsets()
	if off < 0 || len(offsets) < off+n+1 {
		return float32Lists{}, fmt.Errorf("column %q: offsets buffer too short", name)
	}
	offsets = offsets[off : off+n+1]
	values := vals.Float32Values()
	prev := int32(0)
	for k, o := range offsets {
		if o < prev || int(o) > len(values) || (k == 0 && o < 0) {
			return float32Lists{}, fmt.Errorf("column %q: invalid list offsets", name)
		}
		prev = o
	}
	// Every row holds the same number of values, at least one (docs/runfiles.md; Writer
	// refuses anything else).
	width := int(offsets[1] - offsets[0])
	for k := 1; k < n; k++ {
		if got := int(offsets[k+1] - offsets[k]); got != width {
			return float32Lists{}, fmt.Errorf("column %q: row %d holds %d values, row 0 %d", name, k, got, width)
		}
	}
	if width == 0 {
		return float32Lists{}, fmt.Errorf("column %q: empty rows", name)
	}
	return float32Lists{offsets: offsets, values: values, width: width}, nil
}

// sameWidth checks that the rows of a list column of a batch hold as many values as those of
// the file's earlier batches; *width is -1 before the first batch with rows.
func (l float32Lists) sameWidth(name string, width *int) error {
	switch {
	case l.offsets == nil:
	case *width < 0:
		*width = l.width
	case l.width != *width:
		return fmt.Errorf("column %q: rows of %d values, earlier batches' %d", name, l.width, *width)
	}
	return nil
}

// ShardState is the condition of one shard of an experiment directory.
type ShardState int

const (
	ShardComplete  ShardState = iota // a readable run file
	ShardMissing                     // no file for this shard index
	ShardCorrupt                     // a *.arrow file that cannot be read as a run file
	ShardDuplicate                   // a second readable file for a shard index already seen
	ShardMismatch                    // a readable run file of another experiment or shard count
	ShardWriting                     // a writer's temporary file, its writer still at work
	ShardDamaged                     // a run file whose checksums do not match its bytes (VerifyShards)
	ShardStale                       // a temporary file left by a writer that was killed
)

func (s ShardState) String() string {
	switch s {
	case ShardComplete:
		return "complete"
	case ShardMissing:
		return "missing"
	case ShardCorrupt:
		return "corrupt"
	case ShardDuplicate:
		return "duplicate"
	case ShardMismatch:
		return "mismatch"
	case ShardWriting:
		return "writing"
	case ShardDamaged:
		return "damaged"
	case ShardStale:
		return "stale"
	}
	return fmt.Sprintf("ShardState(%d)", int(s))
}

// ShardInfo describes one shard index or one file of a directory.
type ShardInfo struct {
	Shard Shard  // zero for corrupt and temporary files, whose shard is unknown
	Path  string // empty for missing shards
	State ShardState
	Err   error // why a file is corrupt, damaged, duplicate or mismatched
	// Unverified is set by VerifyShards on a complete file without checksums (format version
	// 1): its rows decode, but a changed value would not be noticed.
	Unverified bool
}

// ShardStatus reports the shards of a directory of run files: one entry per shard index of a set
// of count shards (complete or missing), then one per file that is corrupt, duplicate,
// mismatched or still being written. With count 0 the count is taken from the first readable
// file. It reads footers and schemas only: a file is complete when its footer is readable, which
// writers guarantee by renaming finished files into place.
func ShardStatus(dir string, count int) ([]ShardInfo, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shard status %s: %w", dir, bare(err))
	}
	var problems, corrupt []ShardInfo
	var ref *header
	var refPath string
	complete := map[int]string{}
	mem := memory.NewGoAllocator()
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		if e.IsDir() {
			continue
		}
		if fsutil.IsTemp(name) && strings.Contains(name, ".arrow.tmp-") {
			// A temporary file whose writer holds its lock is being written; one nobody holds
			// was left by a killed writer (removed by the next `audit run` or `audit train`).
			state := ShardStale
			if fsutil.InUse(path) {
				state = ShardWriting
			}
			problems = append(problems, ShardInfo{Path: path, State: state})
			continue
		}
		if strings.HasPrefix(name, ".") || filepath.Ext(name) != ".arrow" {
			continue
		}
		h, err := readHeader(path, mem)
		if err != nil {
			// A file of a shard's own name that cannot be read is that shard's (listed under
			// it below, once the count is known), not a missing shard and a corrupt file of
			// no shard besides.
			var s Shard
			if n, _ := fmt.Sscanf(name, "runs-%05d-of-%05d.arrow", &s.Index, &s.Count); n == 2 && s.FileName() == name {
				corrupt = append(corrupt, ShardInfo{Shard: s, Path: path, State: ShardCorrupt, Err: err})
				continue
			}
			problems = append(problems, ShardInfo{Path: path, State: ShardCorrupt, Err: err})
			continue
		}
		s := h.meta.Shard
		if count == 0 {
			count = s.Count
		}
		var named Shard
		if n, _ := fmt.Sscanf(name, "runs-%05d-of-%05d.arrow", &named.Index, &named.Count); n == 2 && named.FileName() == name && named != s {
			// Two shards' files swapped (or copied) by hand: the training stage refuses a file
			// under another shard's name, and status must not call the set complete before it.
			problems = append(problems, ShardInfo{Shard: s, Path: path, State: ShardMismatch,
				Err: fmt.Errorf("holds shard %s under shard %s's name; give it its own name (%s) or move it away", s, named, s.FileName())})
			continue
		}
		switch {
		case s.Count != count:
			problems = append(problems, ShardInfo{Shard: s, Path: path, State: ShardMismatch,
				Err: fmt.Errorf("shard %s does not belong to a set of %d", s, count)})
			continue
		case ref != nil && ref.meta.sameExperiment(h.meta) != "":
			problems = append(problems, ShardInfo{Shard: s, Path: path, State: ShardMismatch,
				Err: fmt.Errorf("not of the experiment of %s: %s", refPath, ref.meta.sameExperiment(h.meta))})
			continue
		}
		if ref == nil {
			ref, refPath = &h, path
		}
		if other, dup := complete[s.Index]; dup {
			problems = append(problems, ShardInfo{Shard: s, Path: path, State: ShardDuplicate,
				Err: fmt.Errorf("shard %s is also in %s", s, other)})
			continue
		}
		complete[s.Index] = path
	}
	if count == 0 {
		// Every shard's file is corrupt: the count is the one their names give.
		for _, c := range corrupt {
			count = max(count, c.Shard.Count)
		}
	}
	named := map[int]ShardInfo{}
	for _, c := range corrupt {
		if _, done := complete[c.Shard.Index]; done || c.Shard.Count != count || c.Shard.Index >= count {
			c.Shard = Shard{} // another set's name, or beside a complete file of its shard
			problems = append(problems, c)
			continue
		}
		named[c.Shard.Index] = c
	}
	out := make([]ShardInfo, 0, count+len(problems))
	for i := 0; i < count; i++ {
		s := Shard{i, count}
		if p, ok := complete[i]; ok {
			out = append(out, ShardInfo{Shard: s, Path: p, State: ShardComplete})
		} else if c, ok := named[i]; ok {
			out = append(out, c)
		} else {
			out = append(out, ShardInfo{Shard: s, State: ShardMissing})
		}
	}
	return append(out, problems...), nil
}

// VerifyShards is ShardStatus with every complete file read in full: its checksums are
// verified batch by batch (a file without checksums is decoded instead, and marked Unverified).
// A file that fails is reported as ShardDamaged under its shard index, with the error naming
// the file and the batch. It reads every byte of the directory's run files.
func VerifyShards(ctx context.Context, dir string, count int) ([]ShardInfo, error) {
	infos, err := ShardStatus(dir, count)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		in := &infos[i]
		if in.State != ShardComplete {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		checked, err := VerifyFile(in.Path)
		if err == nil && !checked {
			in.Unverified = true
			err = scanAll(ctx, in.Path)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			in.State, in.Err = ShardDamaged, err
		}
	}
	return infos, nil
}

// scanAll decodes every row of a run file.
func scanAll(ctx context.Context, path string) error {
	t, err := Open(path)
	if err != nil {
		return err
	}
	defer t.Close()
	return t.Scan(ctx, func(Row) error { return nil })
}

// decodeCanaries checks and attaches the canary columns of a batch: every row must hold k
// inclusion bits and k values of every canary statistic (the file's k canaries).
func decodeCanaries(rec arrow.Record, lay runLayout, n, k int, out *runBatch) error {
	if lay.canaryIn < 0 {
		return nil
	}
	in, err := boolListColumn(rec, lay.canaryIn, n)
	if err != nil {
		return err
	}
	out.canaryIn = &in
	for _, idx := range lay.canaryStats {
		l, err := float64ListColumn(rec, idx, n)
		if err != nil {
			return err
		}
		out.canaryStats = append(out.canaryStats, l)
	}
	for row := 0; row < n; row++ {
		if got := int(in.offsets[row+1] - in.offsets[row]); got != k {
			return fmt.Errorf("row %d: %d canary inclusion bits for %d canaries", row, got, k)
		}
		for j, l := range out.canaryStats {
			if got := int(l.offsets[row+1] - l.offsets[row]); got != k {
				return fmt.Errorf("row %d: canary statistic %q has %d values for %d canaries", row, rec.Schema().Field(lay.canaryStats[j]).Name, got, k)
			}
		}
	}
	return nil
}

// listOffsets checks a list column's shape (length, nulls, offsets within count values) and
// returns its n+1 offsets.
func listOffsets(rec arrow.Record, idx, n int, values func(arrow.Array) (int, bool)) (*array.List, []int32, error) {
	name := rec.Schema().Field(idx).Name
	a, ok := rec.Column(idx).(*array.List)
	if !ok {
		return nil, nil, fmt.Errorf("column %q is not a list", name)
	}
	if a.Len() != n || a.NullN() != 0 {
		return nil, nil, fmt.Errorf("column %q has %d values (%d null) for %d rows", name, a.Len(), a.NullN(), n)
	}
	if n == 0 {
		return a, make([]int32, 1), nil
	}
	if a.ListValues().NullN() != 0 {
		return nil, nil, fmt.Errorf("column %q has null elements", name)
	}
	count, ok := values(a.ListValues())
	if !ok {
		return nil, nil, fmt.Errorf("column %q has elements of type %s", name, a.ListValues().DataType())
	}
	off := a.Data().Offset()
	offsets := a.Offsets()
	if off < 0 || len(offsets) < off+n+1 {
		return nil, nil, fmt.Errorf("column %q: offsets buffer too short", name)
	}
	offsets = offsets[off : off+n+1]
	prev := int32(0)
	for k, o := range offsets {
		if o < prev || int(o) > count || (k == 0 && o < 0) {
			return nil, nil, fmt.Errorf("column %q: invalid list offsets", name)
		}
		prev = o
	}
	return a, offsets, nil
}

// boolLists gives checked access to a list<bool> column.
type boolLists struct {
	offsets []int32
	values  *array.Boolean
}

func (l boolLists) row(k int) []bool {
	out := make([]bool, l.offsets[k+1]-l.offsets[k])
	for i := range out {
		out[i] = l.values.Value(int(l.offsets[k]) + i)
	}
	return out
}

func boolListColumn(rec arrow.Record, idx, n int) (boolLists, error) {
	var vals *array.Boolean
	_, offsets, err := listOffsets(rec, idx, n, func(a arrow.Array) (int, bool) {
		b, ok := a.(*array.Boolean)
		if !ok {
			return 0, false
		}
		// The bitmap must hold every value the offsets may point at.
		if bits := b.Data().Buffers()[1]; b.Len() > 0 && (bits == nil || bits.Len()*8 < b.Data().Offset()+b.Len()) {
			return 0, false
		}
		vals = b
		return b.Len(), true
	})
	if err != nil {
		return boolLists{}, err
	}
	return boolLists{offsets: offsets, values: vals}, nil
}

// float64Lists gives checked access to a list<double> column.
type float64Lists struct {
	offsets []int32
	values  []float64
}

func (l float64Lists) row(k int) []float64 {
	return append([]float64(nil), l.values[l.offsets[k]:l.offsets[k+1]]...)
}

func float64ListColumn(rec arrow.Record, idx, n int) (float64Lists, error) {
	var vals []float64
	_, offsets, err := listOffsets(rec, idx, n, func(a arrow.Array) (int, bool) {
		f, ok := a.(*array.Float64)
		if !ok {
			return 0, false
		}
		vals = f.Float64Values()
		return len(vals), true
	})
	if err != nil {
		return float64Lists{}, err
	}
	return float64Lists{offsets: offsets, values: vals}, nil
}
