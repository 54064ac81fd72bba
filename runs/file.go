package runs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fedaudit/fedaudit/internal/fsutil"

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
	path   string
	tf     *fsutil.File // the temporary file, locked while written (see fsutil)
	f      *os.File
	buf    *bufferedFile
	w      *ipc.FileWriter
	b      *array.RecordBuilder
	schema *arrow.Schema

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
	f := tf.File
	buf := &bufferedFile{w: bufio.NewWriterSize(f, 1<<20), crc: crc32.New(castagnoli)}
	w, err := ipc.NewFileWriter(buf, ipc.WithSchema(schema), ipc.WithZstd(), ipc.WithAllocator(o.mem))
	if err != nil {
		tf.Abort()
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &fileWriter{
		path: path, tf: tf, f: f, buf: buf, w: w, schema: schema,
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
		err = fw.finish()
	}
	if err == nil {
		err = fw.buf.w.Flush()
	}
	fw.b.Release()
	fw.done = true
	if err == nil {
		return fw.tf.Commit() // sync, rename into place, sync the directory
	}
	fw.tf.Abort()
	return fmt.Errorf("close %s: %w", fw.path, err)
}

// finish has the Arrow writer write its footer, adds the checksums of the record batches to
// it and writes it. The Arrow writer cannot add footer metadata itself, so its footer is caught
// in memory rather than written, and the batches it points at are read back from the file.
func (fw *fileWriter) finish() error {
	var caught bytes.Buffer
	fw.buf.capture = &caught
	err := fw.w.Close()
	fw.buf.capture = nil
	if err != nil {
		return err
	}
	// What the writer wrote in Close: the file's start if no batch was written before (magic
	// and schema), then the footer, its length and the magic.
	out := caught.Bytes()
	const trailer = 4 + 6
	if len(out) < trailer {
		return errors.New("arrow writer wrote no footer")
	}
	n := int(binary.LittleEndian.Uint32(out[len(out)-trailer:]))
	if n <= 0 || n > len(out)-trailer {
		return errors.New("arrow writer wrote a bad footer length")
	}
	head, footer := out[:len(out)-trailer-n], out[len(out)-trailer-n:len(out)-trailer]
	if err := fw.buf.raw(head); err != nil {
		return err
	}
	if err := fw.buf.w.Flush(); err != nil {
		return err
	}
	parts, err := parseFooter(footer)
	if err != nil {
		return err
	}
	size := fw.buf.pos - int64(len(out)) + int64(len(head))
	crcs := make([]uint32, len(parts.blocks))
	for i, b := range parts.blocks {
		if crcs[i], err = blockChecksum(fw.f, b, size); err != nil {
			return err
		}
	}
	withSums, err := withChecksums(footer, fw.schema, crcs)
	if err != nil {
		return err
	}
	var lenBuf [4]byte
	binary.LittleEndian.PutUint32(lenBuf[:], uint32(len(withSums)))
	// The whole file's checksum: the bytes written so far, then the footer but the checksum's
	// own 8 digits, its length and the magic.
	parts, err = parseFooter(withSums)
	if err != nil {
		return err
	}
	if omitFileCRC {
		return fw.buf.writeAll(withSums, lenBuf[:], arrowMagic)
	}
	at, ok := parts.metaPos[KeyFileCRC]
	if !ok || parts.meta[KeyFileCRC] != fileCRCPlaceholder {
		return errors.New("footer lost its file checksum")
	}
	h := fw.buf.crc
	h.Write(withSums[:at])
	h.Write(withSums[at+int64(len(fileCRCPlaceholder)):])
	h.Write(lenBuf[:])
	h.Write(arrowMagic)
	copy(withSums[at:], fmt.Sprintf("%08x", h.Sum32()))
	return fw.buf.writeAll(withSums, lenBuf[:], arrowMagic)
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

// bufferedFile gives the IPC writer buffered writes. The writer seeks only to learn its
// position, which is tracked here, with the checksum of every byte written to the file.
type bufferedFile struct {
	w       *bufio.Writer
	pos     int64
	crc     hash.Hash32   // CRC32C of the bytes written to the file so far
	capture *bytes.Buffer // when set, writes go here instead of to the file
}

func (b *bufferedFile) Write(p []byte) (int, error) {
	if b.capture != nil {
		b.pos += int64(len(p))
		return b.capture.Write(p)
	}
	n, err := b.w.Write(p)
	b.crc.Write(p[:n])
	b.pos += int64(n)
	return n, err
}

// writeAll writes the parts to the file, after the checksum is taken.
func (b *bufferedFile) writeAll(parts ...[]byte) error {
	for _, p := range parts {
		if _, err := b.w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// raw writes bytes the IPC writer counted already (while captured) to the file.
func (b *bufferedFile) raw(p []byte) error {
	n, err := b.w.Write(p)
	b.crc.Write(p[:n])
	return err
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

// arrowFile is an open Arrow IPC file with what its footer says for verification.
type arrowFile struct {
	f         *os.File
	r         *ipc.FileReader
	size      int64
	footerLen int
	blocks    []block
	sums      *checksums // nil for a file without checksums
}

func (af *arrowFile) Close() {
	af.r.Close()
	af.f.Close()
}

// openArrowFile opens path as an Arrow IPC file and checks its schema checksum. A file that
// declares our current format version must carry checksums. mem nil means the default allocator.
func openArrowFile(path string, mem memory.Allocator) (*arrowFile, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, bare(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, bare(err)
	}
	if st.IsDir() {
		f.Close()
		return nil, errors.New("is a directory")
	}
	if err := checkMagic(f, st.Size()); err != nil {
		f.Close()
		return nil, err
	}
	footer, err := readFooter(f, st.Size())
	if err == nil {
		err = verifyFooter(footer)
	}
	var sums *checksums
	var blocks []block
	if err == nil {
		sums, blocks, err = fileChecksums(footer)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	var r *ipc.FileReader
	err = decodeSafely(func() error {
		var err error
		r, err = ipc.NewFileReader(f, ipc.WithAllocator(&cappedAllocator{mem: mem, limit: allocLimit(st.Size())}))
		return err
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	af := &arrowFile{f: f, r: r, size: st.Size(), footerLen: len(footer), blocks: blocks, sums: sums}
	md := r.Schema().Metadata()
	_, ours := md.GetValue(KeyKind)
	version, _ := md.GetValue(KeyFormatVersion)
	switch {
	case sums != nil && schemaChecksum(r.Schema()) != sums.schema:
		err = fmt.Errorf("%w: schema checksum mismatch: the schema or its metadata (the config) changed after the file was written", ErrDamaged)
	case sums == nil && ours && (version == FormatVersion || version == checkedFormatVersion):
		err = fmt.Errorf("%w: format version %s but no checksums in the footer", ErrDamaged, version)
	}
	if err != nil {
		af.Close()
		return nil, err
	}
	return af, nil
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
