package outputs

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkStream walks the messages of an Arrow IPC stream before the Arrow reader sees them and
// refuses what would make it allocate without bound: the reader trusts the lengths in a
// message (metadata and body sizes, the number of fields and children of a schema) and makes
// slices of those sizes, so a few corrupt bytes could ask for terabytes, a fatal error no
// recover catches. Every length is checked against the bytes that hold it; nesting is capped.
func checkStream(data []byte) error {
	pos := 0
	for msg := 0; ; msg++ {
		if len(data)-pos < 4 {
			return nil // the reader reports a truncated stream
		}
		n := int64(binary.LittleEndian.Uint32(data[pos:]))
		pos += 4
		if n == 0xFFFFFFFF { // continuation marker, then the length
			if len(data)-pos < 4 {
				return nil
			}
			n = int64(int32(binary.LittleEndian.Uint32(data[pos:])))
			pos += 4
		} else {
			n = int64(int32(n))
		}
		if n == 0 {
			return nil // end of stream
		}
		if n < 0 || n > int64(len(data)-pos) {
			return fmt.Errorf("message %d: metadata of %d bytes, %d left in the file", msg, n, len(data)-pos)
		}
		body, err := checkMessage(data[pos : pos+int(n)])
		if err != nil {
			return fmt.Errorf("message %d: %w", msg, err)
		}
		pos += int(n)
		if body < 0 || body > int64(len(data)-pos) {
			return fmt.Errorf("message %d: body of %d bytes, %d left in the file", msg, body, len(data)-pos)
		}
		pos += int(body)
	}
}

// fb is a bounds-checked view of a flatbuffer.
type fb []byte

var errFB = errors.New("corrupt flatbuffer")

func (b fb) u32(at int64) (int64, error) {
	if at < 0 || at+4 > int64(len(b)) {
		return 0, errFB
	}
	return int64(binary.LittleEndian.Uint32(b[at:])), nil
}

func (b fb) i64(at int64) (int64, error) {
	if at < 0 || at+8 > int64(len(b)) {
		return 0, errFB
	}
	return int64(binary.LittleEndian.Uint64(b[at:])), nil
}

// field returns the absolute position of slot's value in the table at t, or -1 if absent.
func (b fb) field(t int64, slot int) (int64, error) {
	so, err := b.u32(t)
	if err != nil {
		return 0, err
	}
	vt := t - int64(int32(so))
	if vt < 0 || vt+4 > int64(len(b)) {
		return 0, errFB
	}
	vsize := int64(binary.LittleEndian.Uint16(b[vt:]))
	at := int64(4 + 2*slot)
	if at+2 > vsize {
		return -1, nil
	}
	if vt+at+2 > int64(len(b)) {
		return 0, errFB
	}
	off := int64(binary.LittleEndian.Uint16(b[vt+at:]))
	if off == 0 {
		return -1, nil
	}
	return t + off, nil
}

// deref follows the offset stored at p (to a table or vector).
func (b fb) deref(p int64) (int64, error) {
	o, err := b.u32(p)
	if err != nil {
		return 0, err
	}
	return p + o, nil
}

// vector returns the position of the elements and the length of the vector in slot, checking
// that length x elem bytes fit in the buffer; n is 0 when absent.
func (b fb) vector(t int64, slot int, elem int64) (start, n int64, err error) {
	p, err := b.field(t, slot)
	if err != nil || p < 0 {
		return 0, 0, err
	}
	v, err := b.deref(p)
	if err != nil {
		return 0, 0, err
	}
	n, err = b.u32(v)
	if err != nil {
		return 0, 0, err
	}
	if v+4+n*elem > int64(len(b)) {
		return 0, 0, fmt.Errorf("a vector of %d elements where %d bytes remain", n, int64(len(b))-v-4)
	}
	return v + 4, n, nil
}

// checkMessage checks an IPC Message flatbuffer and returns its body length.
func checkMessage(msg []byte) (int64, error) {
	b := fb(msg)
	root, err := b.deref(0)
	if err != nil {
		return 0, err
	}
	// Message: version 0, header_type 1, header 2, bodyLength 3, custom_metadata 4.
	if _, _, err := b.vector(root, 4, 4); err != nil {
		return 0, err
	}
	var body int64
	if p, err := b.field(root, 3); err != nil {
		return 0, err
	} else if p >= 0 {
		if body, err = b.i64(p); err != nil {
			return 0, err
		}
	}
	htype := byte(0)
	if p, err := b.field(root, 1); err != nil {
		return 0, err
	} else if p >= 0 {
		if p >= int64(len(b)) {
			return 0, errFB
		}
		htype = b[p]
	}
	hp, err := b.field(root, 2)
	if err != nil || hp < 0 {
		return body, err
	}
	h, err := b.deref(hp)
	if err != nil {
		return 0, err
	}
	switch htype {
	case 1: // Schema: endianness 0, fields 1, custom_metadata 2, features 3
		if err := checkFields(b, h, 1, 0); err != nil {
			return 0, err
		}
		for _, s := range []int{2, 3} {
			if _, _, err := b.vector(h, s, 8); err != nil {
				return 0, err
			}
		}
	case 3: // RecordBatch: length 0, nodes 1 (16-byte structs), buffers 2 (16-byte structs)
		for _, s := range []int{1, 2} {
			if _, _, err := b.vector(h, s, 16); err != nil {
				return 0, err
			}
		}
	case 2: // DictionaryBatch: dictionaries are not part of the outputs format
		return 0, errors.New("dictionary batches are not supported (write plain string and number columns)")
	}
	return body, nil
}

// maxNesting caps how deep fields may nest (a list of logits is depth 2).
const maxNesting = 8

// checkFields checks the fields vector in slot of the table at t, and their children.
func checkFields(b fb, t int64, slot, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("fields nested deeper than %d", maxNesting)
	}
	start, n, err := b.vector(t, slot, 4)
	if err != nil {
		return err
	}
	for i := int64(0); i < n; i++ {
		f, err := b.deref(start + 4*i)
		if err != nil {
			return err
		}
		// Field: name 0, nullable 1, type_type 2, type 3, dictionary 4, children 5,
		// custom_metadata 6.
		if _, _, err := b.vector(f, 0, 1); err != nil {
			return err
		}
		if _, _, err := b.vector(f, 6, 4); err != nil {
			return err
		}
		if err := checkFields(b, f, 5, depth+1); err != nil {
			return err
		}
	}
	return nil
}
