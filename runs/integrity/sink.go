package integrity

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
)

// Sink is what an Arrow IPC file writer writes a file through, so that the file carries
// checksums: it gives the writer buffered writes, keeps the CRC32C of every byte written, and
// Seal adds the checksums to the footer. The Arrow writer seeks only to learn its position,
// which is tracked here.
type Sink struct {
	f       *os.File
	w       *bufio.Writer
	pos     int64
	crc     hash.Hash32   // CRC32C of the bytes written to the file so far
	capture *bytes.Buffer // when set, writes go here instead of to the file
	schema  *arrow.Schema
	fileCRC bool
}

// NewSink returns a Sink writing to f, a new empty file, the Arrow IPC file of the given
// schema. fileCRC false leaves KeyFileCRC out of the footer, as writers did before it (for
// tests of older files).
func NewSink(f *os.File, schema *arrow.Schema, fileCRC bool) *Sink {
	return &Sink{f: f, w: bufio.NewWriterSize(f, 1<<20), crc: crc32.New(castagnoli), schema: schema, fileCRC: fileCRC}
}

// Write implements io.Writer for the Arrow writer.
func (s *Sink) Write(p []byte) (int, error) {
	if s.capture != nil {
		s.pos += int64(len(p))
		return s.capture.Write(p)
	}
	n, err := s.w.Write(p)
	s.crc.Write(p[:n])
	s.pos += int64(n)
	return n, err
}

// Seek supports Seek(0, io.SeekCurrent) only: the Arrow writer's way of learning its position.
func (s *Sink) Seek(offset int64, whence int) (int64, error) {
	if offset == 0 && whence == io.SeekCurrent {
		return s.pos, nil
	}
	return 0, errors.New("integrity.Sink: only Seek(0, io.SeekCurrent) is supported")
}

// writeAll writes the parts to the file, after the checksum is taken.
func (s *Sink) writeAll(parts ...[]byte) error {
	for _, p := range parts {
		if _, err := s.w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// raw writes bytes the IPC writer counted already (while captured) to the file.
func (s *Sink) raw(p []byte) error {
	n, err := s.w.Write(p)
	s.crc.Write(p[:n])
	return err
}

// Seal has the Arrow writer w, which writes through s, write its footer; adds the checksums of
// the record batches to it, writes it and flushes the file's buffer. The Arrow writer cannot
// add footer metadata itself, so its footer is caught in memory rather than written, and the
// batches it points at are read back from the file.
func (s *Sink) Seal(w *ipc.FileWriter) error {
	footer, size, err := s.closeWriter(w)
	if err != nil {
		return err
	}
	parts, err := parseFooter(footer)
	if err != nil {
		return err
	}
	crcs := make([]uint32, len(parts.blocks))
	for i, b := range parts.blocks {
		if crcs[i], err = blockChecksum(s.f, b, size); err != nil {
			return err
		}
	}
	withSums, err := withChecksums(footer, s.schema, crcs, s.fileCRC)
	if err != nil {
		return err
	}
	if err := s.writeFooter(withSums); err != nil {
		return err
	}
	return s.w.Flush()
}

// closeWriter closes the Arrow writer with its output caught, writes what precedes the footer
// to the file and returns the footer and the size of the file written so far.
func (s *Sink) closeWriter(w *ipc.FileWriter) (footer []byte, size int64, err error) {
	var caught bytes.Buffer
	s.capture = &caught
	err = w.Close()
	s.capture = nil
	if err != nil {
		return nil, 0, err
	}
	// What the writer wrote in Close: the file's start if no batch was written before (magic
	// and schema), then the footer, its length and the magic.
	out := caught.Bytes()
	const trailer = 4 + 6
	if len(out) < trailer {
		return nil, 0, errors.New("arrow writer wrote no footer")
	}
	n := int(binary.LittleEndian.Uint32(out[len(out)-trailer:]))
	if n <= 0 || n > len(out)-trailer {
		return nil, 0, errors.New("arrow writer wrote a bad footer length")
	}
	head, footer := out[:len(out)-trailer-n], out[len(out)-trailer-n:len(out)-trailer]
	if err := s.raw(head); err != nil {
		return nil, 0, err
	}
	if err := s.w.Flush(); err != nil {
		return nil, 0, err
	}
	return footer, s.pos - int64(len(out)) + int64(len(head)), nil
}

// writeFooter writes the footer with its checksums, its length and the magic, after putting
// the whole file's checksum into it: the bytes written so far, then the footer but the
// checksum's own 8 digits, its length and the magic.
func (s *Sink) writeFooter(withSums []byte) error {
	var lenBuf [4]byte
	binary.LittleEndian.PutUint32(lenBuf[:], uint32(len(withSums)))
	parts, err := parseFooter(withSums)
	if err != nil {
		return err
	}
	if !s.fileCRC {
		return s.writeAll(withSums, lenBuf[:], arrowMagic)
	}
	at, ok := parts.metaPos[KeyFileCRC]
	if !ok || parts.meta[KeyFileCRC] != fileCRCPlaceholder {
		return errors.New("footer lost its file checksum")
	}
	h := s.crc
	h.Write(withSums[:at])
	h.Write(withSums[at+int64(len(fileCRCPlaceholder)):])
	h.Write(lenBuf[:])
	h.Write(arrowMagic)
	copy(withSums[at:], fmt.Sprintf("%08x", h.Sum32()))
	return s.writeAll(withSums, lenBuf[:], arrowMagic)
}
