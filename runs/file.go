package runs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs/integrity"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Defaults for the size of record batches. A batch is the unit a reader holds in memory, so
// it is bounded in bytes as well as rows: one row may carry a whole model in params.
const (
	DefaultBatchRows  = 1024
	DefaultBatchBytes = 64 << 20
)

// Option adjusts a writer or reader.
type Option func(*options)

type options struct {
	batchRows    int
	batchBytes   int
	mem          memory.Allocator
	allowPartial bool
	firstShards  int // > 0: read only the shards of index below it
}

func newOptions(opts []Option) options {
	o := options{batchRows: DefaultBatchRows, batchBytes: DefaultBatchBytes, mem: memory.DefaultAllocator}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithBatchRows bounds the rows of a record batch written (n > 0).
func WithBatchRows(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.batchRows = n
		}
	}
}

// WithBatchBytes bounds the approximate uncompressed bytes of a record batch written (n > 0). A
// single row larger than n still makes a batch of its own.
func WithBatchBytes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.batchBytes = n
		}
	}
}

// WithAllocator sets the Arrow memory allocator of a writer or reader (for leak checks in tests).
func WithAllocator(mem memory.Allocator) Option {
	return func(o *options) {
		if mem != nil {
			o.mem = mem
		}
	}
}

// AllowPartial lets Open read a directory whose shard set is incomplete. Without it Open
// refuses, so that an analysis never runs silently on part of an experiment.
func AllowPartial() Option {
	return func(o *options) { o.allowPartial = true }
}

// FirstShards makes Open read only the shard files of index below k, as a set of k shards of
// which none may be missing (unless AllowPartial is given): the pairs a sequential audit's look
// saw, whatever shards were trained after it. It applies to directories; k < 1 is ignored.
func FirstShards(k int) Option {
	return func(o *options) { o.firstShards = k }
}

// omitFileCRC makes writers leave integrity.KeyFileCRC out, as they did before it (tests of
// older files).
var omitFileCRC bool

// errClosed is returned by writers used after Close or Abort.
var errClosed = errors.New("writer is closed")

// fileWriter writes record batches to a temporary file in the destination directory and renames
// it into place on close. The rename is what makes a file appear complete: rename within one
// directory is atomic on POSIX file systems, and the data is synced before it.
type fileWriter struct {
	path string
	tf   *fsutil.File // the temporary file, locked while written (see fsutil)
	sink *integrity.Sink
	w    *ipc.FileWriter
	b    *array.RecordBuilder

	batchRows, batchBytes int
	rows, bytes           int // pending in b

	done bool
	err  error // first failure; the writer is unusable after it
}

func newFileWriter(path string, schema *arrow.Schema, o options) (*fileWriter, error) {
	dir, base := filepath.Split(path)
	if base == "" {
		return nil, fmt.Errorf("create %s: not a file name", path)
	}
	if dir == "" {
		dir = "."
	}
	tf, err := fsutil.Create(path)
	if err != nil {
		return nil, err
	}
	sink := integrity.NewSink(tf.File, schema, !omitFileCRC)
	w, err := ipc.NewFileWriter(sink, ipc.WithSchema(schema), ipc.WithZstd(), ipc.WithAllocator(o.mem))
	if err != nil {
		tf.Abort()
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &fileWriter{
		path: path, tf: tf, sink: sink, w: w,
		b:         array.NewRecordBuilder(o.mem, schema),
		batchRows: o.batchRows, batchBytes: o.batchBytes,
	}, nil
}

// usable reports why no more rows may be written, or nil.
func (fw *fileWriter) usable() error {
	if fw.done {
		return fmt.Errorf("write %s: %w", fw.path, errClosed)
	}
	return fw.err
}

// added records that one row of about size bytes was appended, and flushes a full batch.
func (fw *fileWriter) added(size int) error {
	fw.rows++
	fw.bytes += size
	if fw.rows >= fw.batchRows || fw.bytes >= fw.batchBytes {
		return fw.flush()
	}
	return nil
}

func (fw *fileWriter) flush() error {
	if fw.rows == 0 {
		return nil
	}
	rec := fw.b.NewRecord()
	defer rec.Release()
	fw.rows, fw.bytes = 0, 0
	if err := fw.w.Write(rec); err != nil {
		fw.err = fmt.Errorf("write %s: %w", fw.path, err)
		return fw.err
	}
	return nil
}

// close writes the footer, syncs and renames the file into place. On any failure the temporary
// file is removed and nothing appears at path.
func (fw *fileWriter) close() error {
	if fw.done {
		return fmt.Errorf("close %s: %w", fw.path, errClosed)
	}
	if fw.err != nil {
		err := fw.err
		fw.abort()
		return err
	}
	err := fw.flush()
	if err == nil {
		err = fw.sink.Seal(fw.w) // the footer with the checksums
	}
	fw.b.Release()
	fw.done = true
	if err == nil {
		return fw.tf.Commit() // sync, rename into place, sync the directory
	}
	fw.tf.Abort()
	return fmt.Errorf("close %s: %w", fw.path, err)
}

// abort discards the temporary file. After close it does nothing, so `defer w.Abort()` guards
// every early return without undoing a successful Close.
func (fw *fileWriter) abort() error {
	if fw.done {
		return nil
	}
	fw.done = true
	fw.b.Release()
	return fw.tf.Abort()
}

// openArrowFile opens path as an Arrow IPC file (see integrity.Open). A file that declares one
// of our format versions with checksums must carry them. mem nil means the default allocator.
func openArrowFile(path string, mem memory.Allocator) (*integrity.File, error) {
	af, err := integrity.Open(path, mem)
	if err != nil {
		return nil, err
	}
	md := af.Reader().Schema().Metadata()
	_, ours := md.GetValue(KeyKind)
	version, _ := md.GetValue(KeyFormatVersion)
	if !af.Checked() && ours && (version == FormatVersion || version == checkedFormatVersion) {
		af.Close()
		return nil, fmt.Errorf("%w: format version %s but no checksums in the footer", integrity.ErrDamaged, version)
	}
	return af, nil
}

// VerifyFile checks every stored checksum of a run or score file without decoding its rows.
// checked is false for a file that carries no checksums (format version 1, or a score file of
// another tool): nothing could be verified, and its structure is checked by decoding instead.
// A damaged file gives an error wrapping integrity.ErrDamaged that names the file and the batch.
func VerifyFile(path string) (checked bool, err error) {
	af, err := openArrowFile(path, nil)
	if err != nil {
		return false, fmt.Errorf("verify %s: %w", path, err)
	}
	defer af.Close()
	if !af.Checked() {
		return false, nil
	}
	if err := af.Verify(); err != nil {
		return true, fmt.Errorf("verify %s: %w", path, err)
	}
	return true, nil
}

// bare drops the path from an *fs.PathError, since our own errors name the file already.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
