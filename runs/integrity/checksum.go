package integrity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	flatbuffers "github.com/google/flatbuffers/go"
)

// Checksums. Arrow checks the structure of a file but not its values: a bit flipped inside a
// float buffer reads as another float, and an audit computed from it is silently wrong. Files
// of format version 2 therefore carry, in the custom metadata of the Arrow footer (the standard
// place for file-level metadata; pyarrow shows it as RecordBatchFileReader.metadata):
//
//   - KeyBatchCRC: the CRC32C of every record batch as stored (message header and compressed
//     body, the exact bytes the footer's block table points at), in batch order;
//   - KeySchemaCRC: the CRC32C of the schema as decoded (fields, types, metadata), which holds
//     the experiment config.
//
// Readers verify a batch's checksum before decoding it, so damaged bytes never reach the
// decoder, and the schema checksum when opening the file. Damage to the block table itself
// makes a checksum run over the wrong bytes and fail.
//
// Files written since the whole-file checksum was added also hold KeyFileCRC: the CRC32C of
// every byte of the file but the 8 hex digits of its own value, so that File.Verify reads every
// byte, the copy of the schema and config at the start of the file (which readers of the file
// format skip), the padding and the footer included. A single changed byte anywhere is always
// detected (CRC32C detects every burst of up to 32 bits). Files without it (written before) are
// verified as before, with their leading schema copy decoded and compared with the footer's.
const (
	KeyBatchCRC  = "fedaudit.batch_crc32c"  // comma-separated hex CRC32C, one per record batch
	KeySchemaCRC = "fedaudit.schema_crc32c" // hex CRC32C of the schema
	KeyFileCRC   = "fedaudit.file_crc32c"   // hex CRC32C of the whole file but these 8 digits
)

// fileCRCPlaceholder is the value KeyFileCRC holds while the file's checksum is computed.
const fileCRCPlaceholder = "00000000"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrDamaged marks a file whose stored checksums do not match its contents.
var ErrDamaged = errors.New("damaged")

// block is one entry of the footer's table of record batches.
type block struct {
	offset     int64
	metaLength int32
	bodyLength int64
}

func (b block) size() int64 { return int64(b.metaLength) + b.bodyLength }

// checksums are what a file's footer stores for verification; nil for a file without them.
type checksums struct {
	batches []uint32
	schema  uint32
	// file is the whole file's checksum when hasFile (files written since KeyFileCRC); filePos
	// is the position of its 8 hex digits in the footer.
	file    uint32
	hasFile bool
	filePos int64
}

// footerParts returns the record-batch blocks, the custom metadata and the positions of the
// schema table, dictionary vector and record-batch vector of a footer checked by verifyFooter.
type footerParts struct {
	blocks              []block
	meta                map[string]string
	metaPos             map[string]int64 // position of each metadata value's bytes in the footer
	version             int16
	schema, dicts, recs int64 // positions in the footer buffer; -1 when absent
}

func parseFooter(buf []byte) (footerParts, error) {
	p := footerParts{meta: map[string]string{}, metaPos: map[string]int64{}, schema: -1, dicts: -1, recs: -1}
	c := &fbChecker{buf: buf}
	root, err := c.ref(0)
	if err != nil {
		return p, err
	}
	footer, err := c.table(root)
	if err != nil {
		return p, err
	}
	if v := c.field(footer, 0); v >= 0 {
		if v+2 > int64(len(buf)) {
			return p, fmt.Errorf("%w: version out of range", errBadFooter)
		}
		p.version = int16(binary.LittleEndian.Uint16(buf[v:]))
	}
	for slot, dst := range map[int]*int64{footerSchema: &p.schema, footerDictionaries: &p.dicts, footerRecordBatches: &p.recs} {
		if f := c.field(footer, slot); f >= 0 {
			if *dst, err = c.ref(f); err != nil {
				return p, err
			}
		}
	}
	start, n, err := c.vector(footer, footerRecordBatches, blockSize)
	if err != nil {
		return p, err
	}
	for i := int64(0); i < n; i++ {
		b := buf[start+i*blockSize:]
		p.blocks = append(p.blocks, block{
			offset:     int64(binary.LittleEndian.Uint64(b)),
			metaLength: int32(binary.LittleEndian.Uint32(b[8:])),
			bodyLength: int64(binary.LittleEndian.Uint64(b[16:])),
		})
	}
	err = c.tableVector(footer, footerMetadata, func(kv fbTable) error {
		k, err := c.str(kv, keyValueKey)
		if err != nil {
			return err
		}
		start, n, err := c.vector(kv, keyValueValue, 1)
		p.meta[k], p.metaPos[k] = string(c.buf[start:start+n]), start
		return err
	})
	return p, err
}

// parseChecksums reads the checksums of a footer's custom metadata; nil when there are none.
func parseChecksums(parts footerParts) (*checksums, error) {
	meta, nbatches := parts.meta, len(parts.blocks)
	batchText, hasBatch := meta[KeyBatchCRC]
	schemaText, hasSchema := meta[KeySchemaCRC]
	if !hasBatch && !hasSchema {
		return nil, nil
	}
	if !hasBatch || !hasSchema {
		return nil, fmt.Errorf("%w: footer has only one of %s and %s", ErrDamaged, KeyBatchCRC, KeySchemaCRC)
	}
	parse := func(s string) (uint32, error) {
		v, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("%w: bad checksum %q in the footer", ErrDamaged, s)
		}
		return uint32(v), nil
	}
	cs := &checksums{}
	var err error
	if cs.schema, err = parse(schemaText); err != nil {
		return nil, err
	}
	if batchText != "" {
		for _, s := range strings.Split(batchText, ",") {
			v, err := parse(s)
			if err != nil {
				return nil, err
			}
			cs.batches = append(cs.batches, v)
		}
	}
	if len(cs.batches) != nbatches {
		return nil, fmt.Errorf("%w: footer lists %d record batches but %d checksums", ErrDamaged, nbatches, len(cs.batches))
	}
	// Our footers hold our keys only: another key is one of ours damaged (a changed byte of
	// KeyFileCRC's name must not make the file read as one written before it).
	for k := range meta {
		if k != KeyBatchCRC && k != KeySchemaCRC && k != KeyFileCRC {
			return nil, fmt.Errorf("%w: unknown key %q in the footer's metadata", ErrDamaged, k)
		}
	}
	if text, ok := meta[KeyFileCRC]; ok {
		if len(text) != len(fileCRCPlaceholder) {
			return nil, fmt.Errorf("%w: bad checksum %q in the footer", ErrDamaged, text)
		}
		if cs.file, err = parse(text); err != nil {
			return nil, err
		}
		cs.hasFile, cs.filePos = true, parts.metaPos[KeyFileCRC]
	}
	return cs, nil
}

// schemaChecksum hashes what a reader takes from a schema: field names, types, nullability and
// metadata, in order. It is computed from the decoded schema, so it does not depend on how the
// flatbuffer is laid out.
func schemaChecksum(s *arrow.Schema) uint32 {
	h := crc32.New(castagnoli)
	var field func(f arrow.Field)
	field = func(f arrow.Field) {
		fmt.Fprintf(h, "field %q %s %t\n", f.Name, f.Type, f.Nullable)
		writeMeta(h, f.Metadata)
	}
	for _, f := range s.Fields() {
		field(f)
	}
	writeMeta(h, s.Metadata())
	return h.Sum32()
}

func writeMeta(w io.Writer, md arrow.Metadata) {
	for i, k := range md.Keys() {
		fmt.Fprintf(w, "meta %q=%q\n", k, md.Values()[i])
	}
}

// blockChecksum computes the CRC32C of a block's bytes in f. A block reaching past the end of
// the file is an error.
func blockChecksum(f io.ReaderAt, b block, fileSize int64) (uint32, error) {
	if b.offset < 0 || b.metaLength < 0 || b.bodyLength < 0 || b.offset > fileSize || b.size() > fileSize-b.offset {
		return 0, fmt.Errorf("%w: record batch at offset %d of %d bytes lies outside the file", ErrDamaged, b.offset, b.size())
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(f, b.offset, b.size())); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// withChecksums returns the footer buf (as written by the Arrow writer) with the checksum keys
// added to its custom metadata. The original footer is embedded unchanged, 8-byte aligned as it
// was, and a new root table points into it: flatbuffer offsets are relative, so its schema and
// block tables stay valid without being rebuilt. Without fileCRC, KeyFileCRC is left out.
func withChecksums(buf []byte, schema *arrow.Schema, crcs []uint32, fileCRC bool) ([]byte, error) {
	parts, err := parseFooter(buf)
	if err != nil {
		return nil, err
	}
	if parts.schema < 0 {
		return nil, fmt.Errorf("%w: no schema", errBadFooter)
	}
	hex := make([]string, len(crcs))
	for i, c := range crcs {
		hex[i] = fmt.Sprintf("%08x", c)
	}
	keys := []string{KeyBatchCRC, KeySchemaCRC, KeyFileCRC}
	vals := []string{strings.Join(hex, ","), fmt.Sprintf("%08x", schemaChecksum(schema)), fileCRCPlaceholder}
	if !fileCRC {
		keys, vals = keys[:2], vals[:2]
	}

	b := flatbuffers.NewBuilder(len(buf) + 256 + 9*len(crcs))
	// The embedded footer: aligned to 8 at its start, as the Arrow writer aligned it.
	b.Prep(8, len(buf))
	for i := len(buf) - 1; i >= 0; i-- {
		b.PlaceByte(buf[i])
	}
	start := b.Offset() // offset from the end of the buffer of buf[0]
	at := func(pos int64) flatbuffers.UOffsetT { return start - flatbuffers.UOffsetT(pos) }

	kvs := make([]flatbuffers.UOffsetT, len(keys))
	for i := range keys {
		k, v := b.CreateString(keys[i]), b.CreateString(vals[i])
		b.StartObject(2)
		b.PrependUOffsetTSlot(keyValueKey, k, 0)
		b.PrependUOffsetTSlot(keyValueValue, v, 0)
		kvs[i] = b.EndObject()
	}
	b.StartVector(4, len(kvs), 4)
	for i := len(kvs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(kvs[i])
	}
	meta := b.EndVector(len(kvs))

	b.StartObject(5)
	b.PrependInt16Slot(0, parts.version, 0)
	b.PrependUOffsetTSlot(footerSchema, at(parts.schema), 0)
	if parts.dicts >= 0 {
		b.PrependUOffsetTSlot(footerDictionaries, at(parts.dicts), 0)
	}
	if parts.recs >= 0 {
		b.PrependUOffsetTSlot(footerRecordBatches, at(parts.recs), 0)
	}
	b.PrependUOffsetTSlot(footerMetadata, meta, 0)
	b.Finish(b.EndObject())
	return b.FinishedBytes(), nil
}

// fileChecksums reads the checksums of an open file's footer; nil for a file without them.
func fileChecksums(footer []byte) (*checksums, []block, error) {
	parts, err := parseFooter(footer)
	if err != nil {
		return nil, nil, err
	}
	cs, err := parseChecksums(parts)
	return cs, parts.blocks, err
}

// fileChecksum is the CRC32C of the size bytes of r but the 8 at skip (KeyFileCRC's digits).
func fileChecksum(r io.ReaderAt, size, skip int64) (uint32, error) {
	if skip < 0 || skip+int64(len(fileCRCPlaceholder)) > size {
		return 0, fmt.Errorf("%w: the file checksum's position %d lies outside the file", ErrDamaged, skip)
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, skip)); err != nil {
		return 0, err
	}
	rest := skip + int64(len(fileCRCPlaceholder))
	if _, err := io.Copy(h, io.NewSectionReader(r, rest, size-rest)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// footerStart is the offset of the footer in a file of the given size whose footer is n bytes.
func footerStart(size int64, n int) int64 { return size - 4 - int64(len(arrowMagic)) - int64(n) }

// VerifyBatch checks the stored checksum of record batch i: before it is decoded, so that
// damaged bytes never reach the decoder. It does nothing in a file without checksums.
func (af *File) VerifyBatch(i int) error {
	if af.sums == nil {
		return nil
	}
	if i < 0 || i >= len(af.blocks) {
		return fmt.Errorf("%w: no record batch %d", ErrDamaged, i)
	}
	got, err := blockChecksum(af.f, af.blocks[i], af.size)
	if err != nil {
		return err
	}
	if want := af.sums.batches[i]; got != want {
		return fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x): the file's bytes changed after it was written", ErrDamaged, want, got)
	}
	return nil
}

// Verify checks every stored checksum of the file without decoding its rows: those of the
// record batches, then VerifyRest. A damaged file gives an error wrapping ErrDamaged that names
// the batch. It does nothing in a file without checksums (see Checked).
func (af *File) Verify() error {
	if af.sums == nil {
		return nil
	}
	for i := range af.blocks {
		if err := af.VerifyBatch(i); err != nil {
			return fmt.Errorf("batch %d: %w", i, err)
		}
	}
	return af.VerifyRest()
}

// VerifyRest checks the bytes of the file outside its record batches: with the whole file's
// checksum (KeyFileCRC) every byte; in a file written before it, the copy of the schema at the
// start, decoded and compared with the footer's. It does nothing in a file without checksums.
func (af *File) VerifyRest() error {
	if af.sums == nil {
		return nil
	}
	if !af.sums.hasFile {
		return af.verifyLeadingSchema()
	}
	got, err := fileChecksum(af.f, af.size, footerStart(af.size, af.footerLen)+af.sums.filePos)
	if err != nil {
		return err
	}
	if got != af.sums.file {
		return fmt.Errorf("%w: file checksum mismatch (stored %08x, computed %08x): bytes outside the record batches changed (the copy of the schema and config at the start of the file, the footer or the padding)", ErrDamaged, af.sums.file, got)
	}
	return nil
}
