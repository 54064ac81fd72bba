package outputs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/thrift/lib/go/thrift"
)

// checkChunks walks the column chunks of a Parquet file before the Parquet reader decodes them
// and refuses what would make that reader crash or never return, where decodeSafely cannot help:
//   - a chunk outside the file: the reader makes a buffer of the chunk's declared length before
//     reading it, so a negative length panics and a huge one exhausts memory;
//   - pages that end before the values the chunk declares: past the chunk's end the reader's
//     buffered stream hands back stale bytes instead of an end of file, and the page reader
//     decodes them as page headers forever.
//
// The walk consumes the pages as the reader does (parquet/file's serializedPageReader.Next): a
// dictionary or data page's body after its header (an uncompressed data page v2: its
// uncompressed size), nothing after a page of another type; data pages count their values.
func checkChunks(pf *file.Reader, data []byte) error {
	size := int64(len(data))
	md := pf.MetaData()
	for g := range pf.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return err
			}
			start, n := cc.DataPageOffset(), cc.TotalCompressedSize()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && start > cc.DictionaryPageOffset() {
				start = cc.DictionaryPageOffset()
			}
			if start < 0 || n < 0 || start > size || n > size-start {
				return fmt.Errorf("row group %d, column %d: a chunk of %d bytes at offset %d, outside the file of %d bytes", g, c, n, start, size)
			}
			if err := checkPages(data[start:start+n], cc.NumValues()); err != nil {
				return fmt.Errorf("row group %d, column %d: %w", g, c, err)
			}
		}
	}
	return nil
}

// checkFooter checks the schema in a Parquet file's footer before the Parquet reader builds it:
// the reader makes room for a group's declared number of children before reading them
// (parquet/schema's FromParquet), so a corrupt count would exhaust memory, a fatal error no
// recover catches. The elements list the schema tree in preorder, so no group may declare more
// children than elements follow it, with those its enclosing groups still await. A file
// without a readable footer is left to the reader, which reports it.
func checkFooter(data []byte) error {
	n := len(data)
	if n < 12 || !bytes.HasSuffix(data, []byte("PAR1")) {
		return nil
	}
	size := int(binary.LittleEndian.Uint32(data[n-8:]))
	if size > n-12 {
		return nil
	}
	ctx := context.Background()
	p := thrift.NewTCompactProtocolConf(&thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(data[n-8-size : n-8])}, &thrift.TConfiguration{})
	errDone := errors.New("schema read")
	err := readStruct(ctx, p, func(id int16, t thrift.TType) (bool, error) {
		if id != 2 || t != thrift.LIST { // FileMetaData.schema
			return false, nil
		}
		_, elems, err := p.ReadListBegin(ctx)
		if err != nil {
			return true, err
		}
		pending := 1 // the elements still to come that the groups so far declare (the root first)
		for i := range elems {
			var children int32
			err := readStruct(ctx, p, func(id int16, t thrift.TType) (bool, error) {
				if id == 5 && t == thrift.I32 { // SchemaElement.num_children
					v, err := p.ReadI32(ctx)
					children = v
					return true, err
				}
				return false, nil
			})
			if err != nil {
				return true, err
			}
			pending += int(children) - 1
			if children < 0 || pending > elems-i-1 {
				return true, fmt.Errorf("schema element %d declares %d children, more than the %d elements after it", i, children, elems-i-1)
			}
		}
		return true, errDone
	})
	if err != nil && !errors.Is(err, errDone) {
		return fmt.Errorf("footer: %v", err)
	}
	return nil
}

// Page types of the Parquet format (parquet.thrift's PageType).
const (
	pageData       = 0
	pageDictionary = 2
	pageDataV2     = 3
)

// checkPages walks the pages of one column chunk until they hold the chunk's values.
func checkPages(chunk []byte, values int64) error {
	pos, seen := 0, int64(0)
	for seen < values {
		if pos >= len(chunk) {
			return fmt.Errorf("the pages hold %d of the %d values the chunk declares", seen, values)
		}
		h, n, err := readPageHeader(chunk[pos:])
		if err != nil {
			return fmt.Errorf("page header at byte %d of the chunk: %v", pos, err)
		}
		pos += n
		body := 0
		switch h.typ {
		case pageData, pageDictionary:
			body = int(h.compressed)
		case pageDataV2:
			body = int(h.compressed)
			if !h.v2Compressed {
				body = int(h.uncompressed)
			}
		}
		if h.typ == pageData || h.typ == pageDataV2 {
			v := h.values
			if h.typ == pageDataV2 {
				v = h.v2Values
			}
			if v < 0 {
				return fmt.Errorf("a data page of %d values", v)
			}
			seen += int64(v)
		}
		if body < 0 || body > len(chunk)-pos {
			return fmt.Errorf("a page of %d bytes where the chunk has %d left", body, len(chunk)-pos)
		}
		pos += body
	}
	return nil
}

// pageHeader is what checkPages needs of a parquet.thrift PageHeader.
type pageHeader struct {
	typ, uncompressed, compressed int32
	values, v2Values              int32 // data_page_header's and data_page_header_v2's num_values
	v2Compressed                  bool  // data_page_header_v2's is_compressed (default true)
}

// readPageHeader decodes a PageHeader (thrift compact protocol, as the reader does) from the
// start of b and returns it with the number of bytes it takes.
func readPageHeader(b []byte) (pageHeader, int, error) {
	h := pageHeader{v2Compressed: true}
	ctx := context.Background()
	buf := &thrift.TMemoryBuffer{Buffer: bytes.NewBuffer(b)}
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	err := readStruct(ctx, p, func(id int16, t thrift.TType) (bool, error) {
		var err error
		switch {
		case id == 1 && t == thrift.I32:
			h.typ, err = p.ReadI32(ctx)
		case id == 2 && t == thrift.I32:
			h.uncompressed, err = p.ReadI32(ctx)
		case id == 3 && t == thrift.I32:
			h.compressed, err = p.ReadI32(ctx)
		case id == 5 && t == thrift.STRUCT:
			err = readStruct(ctx, p, func(id int16, t thrift.TType) (bool, error) {
				if id == 1 && t == thrift.I32 {
					v, err := p.ReadI32(ctx)
					h.values = v
					return true, err
				}
				return false, nil
			})
		case id == 8 && t == thrift.STRUCT:
			err = readStruct(ctx, p, func(id int16, t thrift.TType) (bool, error) {
				switch {
				case id == 1 && t == thrift.I32:
					v, err := p.ReadI32(ctx)
					h.v2Values = v
					return true, err
				case id == 7 && t == thrift.BOOL:
					v, err := p.ReadBool(ctx)
					h.v2Compressed = v
					return true, err
				}
				return false, nil
			})
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return h, 0, err
	}
	return h, len(b) - buf.Len(), nil
}

// readStruct reads a thrift struct, handing each field to field, which reads it and returns true,
// or returns false to have it skipped.
func readStruct(ctx context.Context, p thrift.TProtocol, field func(int16, thrift.TType) (bool, error)) error {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, t, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if t == thrift.STOP {
			break
		}
		read, err := field(id, t)
		if err != nil {
			return err
		}
		if !read {
			if err := thrift.SkipDefaultDepth(ctx, p, t); err != nil {
				return err
			}
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return err
		}
	}
	return p.ReadStructEnd(ctx)
}
