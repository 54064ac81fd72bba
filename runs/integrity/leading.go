package integrity

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// An Arrow IPC file starts with its magic, two bytes of padding and a copy of the schema as a
// stream message; readers of the file format take the schema from the footer and skip that
// copy, but stream readers and other tools may read it. Files written before KeyFileCRC carry
// no checksum over it, so VerifyRest decodes it, with its flatbuffer checked first as the
// footer's is, and compares it with the footer's schema.

// Message slots, from Arrow's Message.fbs.
const (
	messageHeaderType = 1
	messageHeader     = 2
	headerSchema      = 1 // MessageHeader.Schema
)

// maxLeadingSchema bounds the copy of the schema: far above any config.
const maxLeadingSchema = 64 << 20

// verifyLeadingSchema checks the copy of the schema at the start of an open file against the
// footer's schema checksum.
func (af *File) verifyLeadingSchema() error {
	end := footerStart(af.size, af.footerLen)
	for _, b := range af.blocks {
		end = min(end, b.offset)
	}
	const start = 8 // "ARROW1" and two bytes of padding
	if end < start+8 || end-start > maxLeadingSchema {
		return fmt.Errorf("%w: no room for the schema at the start of the file (%d bytes)", ErrDamaged, end-start)
	}
	buf := make([]byte, end)
	if _, err := af.f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return err
	}
	if buf[6] != 0 || buf[7] != 0 {
		return fmt.Errorf("%w: the padding after the magic at the start of the file changed", ErrDamaged)
	}
	msg := buf[start:]
	if binary.LittleEndian.Uint32(msg) != 0xffffffff {
		return fmt.Errorf("%w: the schema at the start of the file lacks its message marker", ErrDamaged)
	}
	n := int64(binary.LittleEndian.Uint32(msg[4:]))
	if n < 8 || 8+n > int64(len(msg)) {
		return fmt.Errorf("%w: the schema at the start of the file has length %d in %d bytes", ErrDamaged, n, len(msg))
	}
	for _, c := range msg[8+n:] {
		if c != 0 {
			return fmt.Errorf("%w: the padding after the schema at the start of the file changed", ErrDamaged)
		}
	}
	if err := checkSchemaMessage(msg[8 : 8+n]); err != nil {
		return fmt.Errorf("%w: the schema at the start of the file: %v", ErrDamaged, err)
	}
	// The copy decoded as a stream of that one message and its end.
	stream := append(append([]byte(nil), msg[:8+n]...), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0)
	var sum uint32
	err := DecodeSafely(func() error {
		r, err := ipc.NewReader(bytes.NewReader(stream), ipc.WithAllocator(&cappedAllocator{mem: memory.DefaultAllocator, limit: allocLimit(int64(len(stream)))}))
		if err != nil {
			return err
		}
		defer r.Release()
		sum = schemaChecksum(r.Schema())
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: the schema at the start of the file: %v", ErrDamaged, err)
	}
	if sum != af.sums.schema {
		return fmt.Errorf("%w: the schema at the start of the file differs from the footer's (checksum %08x, stored %08x)", ErrDamaged, sum, af.sums.schema)
	}
	return nil
}

// checkSchemaMessage walks a Message flatbuffer holding a schema, with every offset and length
// checked, before the IPC reader decodes it (see verifyFooter).
func checkSchemaMessage(buf []byte) error {
	c := &fbChecker{buf: buf}
	m, err := c.message(headerSchema, "schema")
	if err != nil {
		return err
	}
	return c.schemaAt(c.field(m, messageHeader))
}

// message returns the root Message table of the buffer, checking that its header is of type
// kind (what names it in the error).
func (c *fbChecker) message(kind byte, what string) (fbTable, error) {
	root, err := c.ref(0)
	if err != nil {
		return fbTable{}, err
	}
	m, err := c.table(root)
	if err != nil {
		return fbTable{}, err
	}
	p := c.field(m, messageHeaderType)
	if p < 0 || p >= int64(len(c.buf)) || c.buf[p] != kind {
		return fbTable{}, fmt.Errorf("%w: not a %s message", c.bad(), what)
	}
	return m, nil
}
