package integrity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

var errBadBatchHeader = errors.New("corrupt record batch header")

// Slots of Arrow's Message.fbs that a batch's row count is read from.
const (
	headerRecordBatch = 3 // MessageHeader.RecordBatch
	recordBatchLength = 0 // RecordBatch.length: the batch's rows
)

// BatchRows returns the rows record batch i declares in its message header, read without
// decoding the batch, so that a reader can reserve room for a whole file's rows before it
// decodes them (a score file of millions of rows otherwise grows its slice a quarter at a
// time: five times its size allocated, twice it held at once). The header is read with every
// offset checked, but what it declares is only as trustworthy as the file: verify the batch
// (VerifyBatch) before relying on it.
func (af *File) BatchRows(i int) (int64, error) {
	if i < 0 || i >= len(af.blocks) {
		return 0, fmt.Errorf("%w: no record batch %d", ErrDamaged, i)
	}
	b := af.blocks[i]
	if b.offset < 0 || b.metaLength < 8 || int64(b.metaLength) > maxLeadingSchema || b.offset > af.size || int64(b.metaLength) > af.size-b.offset {
		return 0, fmt.Errorf("%w: the header of record batch %d (%d bytes at offset %d) lies outside the file", ErrDamaged, i, b.metaLength, b.offset)
	}
	buf := make([]byte, b.metaLength)
	if _, err := af.f.ReadAt(buf, b.offset); err != nil && err != io.EOF {
		return 0, err
	}
	// An encapsulated message: the continuation marker (absent before Arrow 0.15), the length
	// of its flatbuffer, the flatbuffer and padding.
	if binary.LittleEndian.Uint32(buf) == 0xffffffff {
		buf = buf[4:]
	}
	n := int64(binary.LittleEndian.Uint32(buf))
	if n < 4 || 4+n > int64(len(buf)) {
		return 0, fmt.Errorf("%w: the header of record batch %d has length %d in %d bytes", ErrDamaged, i, n, len(buf))
	}
	rows, err := recordBatchRows(buf[4 : 4+n])
	if err != nil {
		return 0, fmt.Errorf("%w: record batch %d: %v", ErrDamaged, i, err)
	}
	return rows, nil
}

// recordBatchRows walks a Message flatbuffer holding a record batch to its length field.
func recordBatchRows(buf []byte) (int64, error) {
	c := &fbChecker{buf: buf, kind: errBadBatchHeader}
	m, err := c.message(headerRecordBatch, "record batch")
	if err != nil {
		return 0, err
	}
	hp := c.field(m, messageHeader)
	if hp < 0 {
		return 0, fmt.Errorf("%w: a record batch message without its header", c.bad())
	}
	h, err := c.ref(hp)
	if err != nil {
		return 0, err
	}
	rb, err := c.table(h)
	if err != nil {
		return 0, err
	}
	lp := c.field(rb, recordBatchLength)
	if lp < 0 {
		return 0, nil // a flatbuffer leaves out a field at its default, 0
	}
	if lp+8 > int64(len(buf)) {
		return 0, fmt.Errorf("%w: the length field lies outside the header", c.bad())
	}
	rows := int64(binary.LittleEndian.Uint64(buf[lp:]))
	if rows < 0 {
		return 0, fmt.Errorf("%w: %d rows", c.bad(), rows)
	}
	return rows, nil
}
