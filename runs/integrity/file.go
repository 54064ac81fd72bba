package integrity

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Limits on a single allocation made while decoding a file. The Arrow reader trusts buffer sizes
// written in the file and allocates them before reading; a corrupt or hostile file could ask
// for terabytes. Zstd can legitimately expand data a lot (all-zero buffers), hence the factor.
//
// AllocFloor is the least limit, whatever the file's size. Fuzz tests lower it so that bogus
// buffer sizes cost little memory per input; the cap works the same way at any floor.
var (
	AllocFloor  = 256 << 20
	allocFactor = 1024
)

func allocLimit(fileSize int64) int {
	limit := int64(AllocFloor) + int64(allocFactor)*fileSize
	if limit < 0 || limit > int64(^uint(0)>>1) {
		return int(^uint(0) >> 1)
	}
	return int(limit)
}

// cappedAllocator refuses allocations above limit by panicking with allocTooLarge; readers recover
// it at their boundary (see DecodeSafely).
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

// DecodeSafely runs f and turns a panic into an error. The Arrow IPC reader panics instead of
// returning errors on several kinds of malformed input; since files come from outside, a bad
// file must be an error, never a crash. Record batches of a File are decoded inside it, so that
// the File's cap on allocations is an error too.
func DecodeSafely(f func() error) (err error) {
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

// File is an open Arrow IPC file whose footer has been checked, with what the footer says for
// verification.
type File struct {
	f         *os.File
	r         *ipc.FileReader
	size      int64
	footerLen int
	blocks    []block
	sums      *checksums // nil for a file without checksums
}

// Close closes the reader and the file.
func (af *File) Close() {
	af.r.Close()
	af.f.Close()
}

// Reader is the Arrow reader of the file. Its record batches must be decoded inside
// DecodeSafely, each after VerifyBatch.
func (af *File) Reader() *ipc.FileReader { return af.r }

// Size is the file's size in bytes.
func (af *File) Size() int64 { return af.size }

// Checked reports whether the file carries checksums (format version 2 and later). Verifying a
// file without them does nothing.
func (af *File) Checked() bool { return af.sums != nil }

// Block returns where record batch i lies in the file as the footer's block table says: its
// offset, and the lengths of its message header and of its body that follows it.
func (af *File) Block(i int) (offset, metaLength, bodyLength int64) {
	b := af.blocks[i]
	return b.offset, int64(b.metaLength), b.bodyLength
}

// Open opens path as an Arrow IPC file: it checks the magic bytes and walks the footer (see
// verifyFooter) before the Arrow reader sees them, and checks the schema checksum of a file
// that carries checksums. The reader allocates through mem (nil: the default allocator) with
// every single allocation capped by the file's size. A damaged file gives an error wrapping
// ErrDamaged; no error names the file, which the caller does.
func Open(path string, mem memory.Allocator) (*File, error) {
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
	err = DecodeSafely(func() error {
		var err error
		r, err = ipc.NewFileReader(f, ipc.WithAllocator(&cappedAllocator{mem: mem, limit: allocLimit(st.Size())}))
		return err
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	af := &File{f: f, r: r, size: st.Size(), footerLen: len(footer), blocks: blocks, sums: sums}
	if sums != nil && schemaChecksum(r.Schema()) != sums.schema {
		af.Close()
		return nil, fmt.Errorf("%w: schema checksum mismatch: the schema or its metadata (the config) changed after the file was written", ErrDamaged)
	}
	return af, nil
}

// bare drops the path from an *fs.PathError, since callers' errors name the file already.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Magic is what an Arrow IPC file starts and ends with; a file that starts with it is told
// from a CSV file by its content.
const Magic = "ARROW1"

var arrowMagic = []byte(Magic)

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
