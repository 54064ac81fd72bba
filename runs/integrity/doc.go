// Package integrity guards the Arrow IPC files of package runs (run files, score files, canary
// score files) against damage and against the Arrow reader's trust in what a file says.
//
// Before the Arrow Go IPC reader sees a file, Open checks its magic bytes and walks the
// flatbuffer footer with every offset and length checked, and the reader allocates through a
// cap set by the file's size; DecodeSafely turns the reader's panics on malformed input into
// errors. Files written through a Sink carry CRC32C checksums in the custom metadata of their
// footer (KeyBatchCRC, KeySchemaCRC, KeyFileCRC): File.VerifyBatch checks a record batch before
// it is decoded, File.VerifyRest the bytes outside the batches, File.Verify all of them. A
// changed byte gives an error wrapping ErrDamaged.
//
// The package knows the Arrow IPC container (footer, blocks, messages) but no schema: which
// columns a file holds, and which format versions must carry checksums, is package runs'
// business.
package integrity
