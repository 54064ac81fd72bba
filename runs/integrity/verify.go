package integrity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The Arrow Go IPC reader trusts the flatbuffer footer of a file: it sizes slices by vector
// lengths read from it and follows offsets that can wrap around and form cycles. On a corrupt
// file that means allocations of many gigabytes or unbounded recursion, which kill the process
// rather than panic. verifyFooter walks the parts of the footer the reader decodes when it opens
// a file, with every offset and length checked, before the reader sees it. Everything else it
// reads later (record batch messages) goes through the capped allocator and DecodeSafely.

// Limits of a footer: far above any schema package runs writes or reads.
const (
	maxFooterTables = 1 << 16
	maxFieldDepth   = 8
)

// Field types a file may use: the ones our files and plain score tables from other tools are
// made of. Other types (views, unions, dictionaries, ...) have decoding paths that size
// allocations from untrusted counts, and no use here.
var allowedFieldTypes = map[uint8]string{
	2:  "int",
	3:  "floating point",
	4:  "binary",
	5:  "utf8",
	6:  "bool",
	8:  "date",
	9:  "time",
	10: "timestamp",
	12: "list",
	18: "duration",
	19: "large binary",
	20: "large utf8",
	21: "large list",
}

// Footer, Schema, Field and KeyValue slots, from Arrow's File.fbs and Schema.fbs.
const (
	footerSchema        = 1
	footerDictionaries  = 2
	footerRecordBatches = 3
	footerMetadata      = 4
	schemaFields        = 1
	schemaMetadata      = 2
	fieldName           = 0
	fieldTypeType       = 2
	fieldType           = 3
	fieldDictionary     = 4
	fieldChildren       = 5
	fieldMetadata       = 6
	keyValueKey         = 0
	keyValueValue       = 1
	blockSize           = 24 // struct Block { offset: long; metaDataLength: int; bodyLength: long }
)

var errBadFooter = errors.New("corrupt Arrow footer")

// readFooter returns the footer flatbuffer of an Arrow file of the given size, whose magic
// bytes have been checked.
func readFooter(r io.ReaderAt, size int64) ([]byte, error) {
	const trailer = 4 + 6 // footer length, "ARROW1"
	if size < 8+trailer {
		return nil, errors.New("file too small to be an Arrow file")
	}
	var lenBuf [4]byte
	if _, err := r.ReadAt(lenBuf[:], size-trailer); err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint32(lenBuf[:]))
	if n == 0 || n > size-8-trailer {
		return nil, fmt.Errorf("%w: footer length %d in a file of %d bytes", errBadFooter, n, size)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-trailer-n); err != nil {
		return nil, err
	}
	return buf, nil
}

type fbChecker struct {
	buf    []byte
	tables int
	// kind is what the errors say the buffer is; nil: errBadFooter.
	kind error
}

func (c *fbChecker) bad() error {
	if c.kind != nil {
		return c.kind
	}
	return errBadFooter
}

type fbTable struct {
	pos, vtable, vtableSize int64
}

func (c *fbChecker) uint32At(pos int64) (int64, error) {
	if pos < 0 || pos+4 > int64(len(c.buf)) {
		return 0, fmt.Errorf("%w: offset %d out of range", c.bad(), pos)
	}
	return int64(binary.LittleEndian.Uint32(c.buf[pos:])), nil
}

func (c *fbChecker) table(pos int64) (fbTable, error) {
	if c.tables++; c.tables > maxFooterTables {
		return fbTable{}, fmt.Errorf("%w: more than %d tables", c.bad(), maxFooterTables)
	}
	soff, err := c.uint32At(pos)
	if err != nil {
		return fbTable{}, err
	}
	vt := pos - int64(int32(uint32(soff)))
	if vt < 0 || vt+4 > int64(len(c.buf)) {
		return fbTable{}, fmt.Errorf("%w: vtable offset %d out of range", c.bad(), vt)
	}
	size := int64(binary.LittleEndian.Uint16(c.buf[vt:]))
	if size < 4 || size%2 != 0 || vt+size > int64(len(c.buf)) {
		return fbTable{}, fmt.Errorf("%w: bad vtable", c.bad())
	}
	return fbTable{pos: pos, vtable: vt, vtableSize: size}, nil
}

// field returns the position of a table's field, or -1 when the field is absent.
func (c *fbChecker) field(t fbTable, slot int) int64 {
	o := int64(4 + 2*slot)
	if o+2 > t.vtableSize {
		return -1
	}
	off := int64(binary.LittleEndian.Uint16(c.buf[t.vtable+o:]))
	if off == 0 {
		return -1
	}
	return t.pos + off
}

// ref follows the offset stored at pos.
func (c *fbChecker) ref(pos int64) (int64, error) {
	u, err := c.uint32At(pos)
	if err != nil {
		return 0, err
	}
	if pos+u >= int64(len(c.buf)) {
		return 0, fmt.Errorf("%w: offset %d out of range", c.bad(), pos+u)
	}
	return pos + u, nil
}

// vector returns the position of the first element and the length of a vector field, checking
// that its elements lie in the buffer; n is 0 for an absent field.
func (c *fbChecker) vector(t fbTable, slot int, elemSize int64) (start, n int64, err error) {
	p := c.field(t, slot)
	if p < 0 {
		return 0, 0, nil
	}
	v, err := c.ref(p)
	if err != nil {
		return 0, 0, err
	}
	if n, err = c.uint32At(v); err != nil {
		return 0, 0, err
	}
	if v+4+n*elemSize > int64(len(c.buf)) {
		return 0, 0, fmt.Errorf("%w: vector of %d elements out of range", c.bad(), n)
	}
	return v + 4, n, nil
}

// tables calls f for every table of a vector-of-tables field.
func (c *fbChecker) tableVector(t fbTable, slot int, f func(fbTable) error) error {
	start, n, err := c.vector(t, slot, 4)
	if err != nil {
		return err
	}
	for i := int64(0); i < n; i++ {
		pos, err := c.ref(start + 4*i)
		if err != nil {
			return err
		}
		tt, err := c.table(pos)
		if err != nil {
			return err
		}
		if err := f(tt); err != nil {
			return err
		}
	}
	return nil
}

func (c *fbChecker) str(t fbTable, slot int) (string, error) {
	start, n, err := c.vector(t, slot, 1)
	return string(c.buf[start : start+n]), err
}

func (c *fbChecker) keyValues(t fbTable, slot int) error {
	return c.tableVector(t, slot, func(kv fbTable) error {
		if _, err := c.str(kv, keyValueKey); err != nil {
			return err
		}
		_, err := c.str(kv, keyValueValue)
		return err
	})
}

func (c *fbChecker) schemaField(t fbTable, depth int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("%w: types nested deeper than %d", c.bad(), maxFieldDepth)
	}
	name, err := c.str(t, fieldName)
	if err != nil {
		return err
	}
	typ := uint8(0)
	if p := c.field(t, fieldTypeType); p >= 0 {
		if p >= int64(len(c.buf)) {
			return fmt.Errorf("%w: offset %d out of range", c.bad(), p)
		}
		typ = c.buf[p]
	}
	if _, ok := allowedFieldTypes[typ]; !ok {
		return fmt.Errorf("column %q: unsupported Arrow type (flatbuffer type id %d)", name, typ)
	}
	if p := c.field(t, fieldType); p >= 0 {
		pos, err := c.ref(p)
		if err != nil {
			return err
		}
		if _, err := c.table(pos); err != nil {
			return err
		}
	}
	if c.field(t, fieldDictionary) >= 0 {
		return fmt.Errorf("column %q: dictionary-encoded columns are not supported", name)
	}
	if err := c.tableVector(t, fieldChildren, func(child fbTable) error { return c.schemaField(child, depth+1) }); err != nil {
		return err
	}
	return c.keyValues(t, fieldMetadata)
}

// schemaAt checks the Schema table that the field at p (-1: absent) refers to, its fields
// and its metadata: the footer and the schema message at the start of a file both hold one.
func (c *fbChecker) schemaAt(p int64) error {
	if p < 0 {
		return fmt.Errorf("%w: no schema", c.bad())
	}
	pos, err := c.ref(p)
	if err != nil {
		return err
	}
	schema, err := c.table(pos)
	if err != nil {
		return err
	}
	if err := c.tableVector(schema, schemaFields, func(f fbTable) error { return c.schemaField(f, 0) }); err != nil {
		return err
	}
	return c.keyValues(schema, schemaMetadata)
}

// verifyFooter checks what the IPC reader decodes of a footer when it opens a file.
func verifyFooter(buf []byte) error {
	c := &fbChecker{buf: buf}
	root, err := c.ref(0)
	if err != nil {
		return err
	}
	footer, err := c.table(root)
	if err != nil {
		return err
	}
	if err := c.schemaAt(c.field(footer, footerSchema)); err != nil {
		return err
	}
	if _, n, err := c.vector(footer, footerDictionaries, blockSize); err != nil {
		return err
	} else if n > 0 {
		return errors.New("dictionary batches are not supported")
	}
	if _, _, err := c.vector(footer, footerRecordBatches, blockSize); err != nil {
		return err
	}
	return c.keyValues(footer, footerMetadata)
}
