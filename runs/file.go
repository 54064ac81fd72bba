package runs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

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

// errClosed is returned by writers used after Close or Abort.
var errClosed = errors.New("writer is closed")

// fileWriter writes record batches to a temporary file in the destination directory and renames
// it into place on close. The rename is what makes a file appear complete: rename within one
// directory is atomic on POSIX file systems, and the data is synced before it.
type fileWriter struct {
	path string
	tmp  string
	f    *os.File
	buf  *bufferedFile
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
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	// CreateTemp makes files private; a finished run file is data like any other.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	buf := &bufferedFile{w: bufio.NewWriterSize(f, 1<<20)}
	w, err := ipc.NewFileWriter(buf, ipc.WithSchema(schema), ipc.WithZstd(), ipc.WithAllocator(o.mem))
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &fileWriter{
		path: path, tmp: f.Name(), f: f, buf: buf, w: w,
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
		err = fw.w.Close()
	}
	if err == nil {
		err = fw.buf.w.Flush()
	}
	if err == nil {
		err = fw.f.Sync()
	}
	if cerr := fw.f.Close(); err == nil {
		err = cerr
	}
	fw.b.Release()
	fw.done = true
	if err == nil {
		err = os.Rename(fw.tmp, fw.path)
	}
	if err != nil {
		os.Remove(fw.tmp)
		return fmt.Errorf("close %s: %w", fw.path, err)
	}
	syncDir(filepath.Dir(fw.path))
	return nil
}

// abort discards the temporary file. After close it does nothing, so `defer w.Abort()` guards
// every early return without undoing a successful Close.
func (fw *fileWriter) abort() error {
	if fw.done {
		return nil
	}
	fw.done = true
	fw.b.Release()
	fw.f.Close()
	if err := os.Remove(fw.tmp); err != nil {
		return fmt.Errorf("abort %s: %w", fw.path, err)
	}
	return nil
}

// syncDir makes a rename durable. Errors are ignored: some file systems cannot sync directories,
// and the file itself is already complete.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}

// bufferedFile gives the IPC writer buffered writes. The writer seeks only to learn its
// position, which is tracked here.
type bufferedFile struct {
	w   *bufio.Writer
	pos int64
}

func (b *bufferedFile) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	b.pos += int64(n)
	return n, err
}

func (b *bufferedFile) Seek(offset int64, whence int) (int64, error) {
	if offset == 0 && whence == io.SeekCurrent {
		return b.pos, nil
	}
	return 0, errors.New("bufferedFile: only Seek(0, io.SeekCurrent) is supported")
}

// Limits on a single allocation made while decoding a file. The Arrow reader trusts buffer sizes
// written in the file and allocates them before reading; a corrupt or hostile file could ask
// for terabytes. Zstd can legitimately expand data a lot (all-zero buffers), hence the factor.
var (
	allocFloor  = 256 << 20
	allocFactor = 1024
)

func allocLimit(fileSize int64) int {
	limit := int64(allocFloor) + int64(allocFactor)*fileSize
	if limit < 0 || limit > int64(^uint(0)>>1) {
		return int(^uint(0) >> 1)
	}
	return int(limit)
}

// cappedAllocator refuses allocations above limit by panicking with allocTooLarge; readers recover
// it at their boundary (see decodeSafely).
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

// decodeSafely runs f and turns a panic into an error. The Arrow IPC reader panics instead of
// returning errors on several kinds of malformed input; since files come from outside, a bad
// file must be an error, never a crash.
func decodeSafely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch r := r.(type) {
			case allocTooLarge:
				err = fmt.Errorf("corrupt file: buffer of %d bytes exceeds the limit of %d", r.size, r.limit)
			default:
				err = fmt.Errorf("corrupt file: %v", r)
			}
		}
	}()
	return f()
}

// openArrowFile opens path as an Arrow IPC file. The caller closes both returned values.
func openArrowFile(path string, mem memory.Allocator) (*os.File, *ipc.FileReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, bare(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, bare(err)
	}
	if st.IsDir() {
		f.Close()
		return nil, nil, errors.New("is a directory")
	}
	if err := checkMagic(f, st.Size()); err != nil {
		f.Close()
		return nil, nil, err
	}
	footer, err := readFooter(f, st.Size())
	if err == nil {
		err = verifyFooter(footer)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	var r *ipc.FileReader
	err = decodeSafely(func() error {
		var err error
		r, err = ipc.NewFileReader(f, ipc.WithAllocator(&cappedAllocator{mem: mem, limit: allocLimit(st.Size())}))
		return err
	})
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, r, nil
}

// bare drops the path from an *fs.PathError, since our own errors name the file already.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

var arrowMagic = []byte("ARROW1")

// checkMagic distinguishes "not an Arrow file" and "truncated" before the IPC reader gives its
// own, less telling, errors.
func checkMagic(r io.ReaderAt, size int64) error {
	head := make([]byte, len(arrowMagic))
	if n, _ := r.ReadAt(head, 0); n < len(head) || string(head) != string(arrowMagic) {
		return errors.New("not an Arrow IPC file (no ARROW1 magic at the start)")
	}
	tail := make([]byte, len(arrowMagic))
	if size < 2*int64(len(arrowMagic)) {
		return errors.New("truncated Arrow file (no footer; was its writer interrupted?)")
	}
	if n, _ := r.ReadAt(tail, size-int64(len(tail))); n < len(tail) || string(tail) != string(arrowMagic) {
		return errors.New("truncated Arrow file (no footer; was its writer interrupted?)")
	}
	return nil
}
