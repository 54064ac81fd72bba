package runs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fedaudit/fedaudit/runs/integrity"
)

// flipEvery flips each byte of the file at path before offset end (< 0: every byte) in turn
// (xor 0xff) and calls check with the byte's offset; the file is restored afterwards.
func flipEvery(t *testing.T, path string, end int, check func(off int)) {
	t.Helper()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(path, orig, 0o644)
	if end < 0 || end > len(orig) {
		end = len(orig)
	}
	for off := range end {
		data := append([]byte(nil), orig...)
		data[off] ^= 0xff
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		check(off)
	}
}

// VerifyFile reads every byte: a flipped byte anywhere in a run file (the schema and config
// copy at its start, a record batch, the footer, the padding between them, the trailer) is
// reported, which `audit status --verify` and the rerun's check of every shard rely on (flips in
// the leading schema copy used to go unnoticed).
func TestVerifyFileEveryByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs-00000-of-00001.arrow")
	m := testMeta([]string{"llr"}, true, true)
	m.Shard = Shard{0, 1}
	writeFile(t, path, m, makeRows(m, 0, 4, 3), WithBatchRows(3))
	if checked, err := VerifyFile(path); !checked || err != nil {
		t.Fatalf("VerifyFile of the intact file = %v, %v", checked, err)
	}
	missed := 0
	flipEvery(t, path, -1, func(off int) {
		if checked, err := VerifyFile(path); err == nil {
			if missed++; missed <= 10 {
				t.Errorf("byte %d flipped: VerifyFile = %v, nil; want an error", off, checked)
			}
		}
	})
	if missed > 0 {
		t.Errorf("%d flipped bytes went unnoticed", missed)
	}
	// VerifyShards (audit status --verify) reports the damage too: one byte of the schema copy.
	orig, _ := os.ReadFile(path)
	data := append([]byte(nil), orig...)
	data[200] ^= 0x01
	os.WriteFile(path, data, 0o644)
	infos, err := VerifyShards(context.Background(), filepath.Dir(path), 0)
	if err != nil || len(infos) != 1 || infos[0].State != ShardDamaged {
		t.Fatalf("VerifyShards after a flip at byte 200 = %+v, %v; want the shard damaged", infos, err)
	}
}

// The same for a score file.
func TestVerifyScoreFileEveryByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scores.arrow")
	w, err := CreateScores(path, ScoreMeta{Config: []byte(`{"name":"x"}`)}, WithBatchRows(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testScores(6, 0)...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if checked, err := VerifyFile(path); !checked || err != nil {
		t.Fatalf("VerifyFile of the intact file = %v, %v", checked, err)
	}
	missed := 0
	flipEvery(t, path, -1, func(off int) {
		if _, err := VerifyFile(path); err == nil {
			if missed++; missed <= 10 {
				t.Errorf("byte %d flipped: VerifyFile passed", off)
			}
		}
	})
	if missed > 0 {
		t.Errorf("%d flipped bytes went unnoticed", missed)
	}
	// Reading a score file checks every byte too: a damaged schema copy makes it damaged, so
	// the attack stage scores again instead of using it.
	orig, _ := os.ReadFile(path)
	data := append([]byte(nil), orig...)
	data[10] ^= 0x01
	os.WriteFile(path, data, 0o644)
	if _, err := ReadScoreFile(path); !errors.Is(err, integrity.ErrDamaged) {
		t.Fatalf("ReadScoreFile after a flip at byte 10 = %v, want integrity.ErrDamaged", err)
	}
}

// A file written before the whole-file checksum is still read and verified: its batches by
// their checksums, and the schema copy at its start decoded and compared with the footer's, so
// that a changed byte of the config or a column name there is reported. Bytes that change
// nothing a reader decodes (flatbuffer padding and alignment) cannot be told from intact ones.
func TestVerifyOlderFileLeadingSchema(t *testing.T) {
	omitFileCRC = true
	defer func() { omitFileCRC = false }()
	path := filepath.Join(t.TempDir(), "runs-00000-of-00001.arrow")
	m := testMeta([]string{"llr"}, true, true)
	m.Shard = Shard{0, 1}
	writeFile(t, path, m, makeRows(m, 0, 4, 3), WithBatchRows(3))
	omitFileCRC = false
	if checked, err := VerifyFile(path); !checked || err != nil {
		t.Fatalf("VerifyFile of the intact older file = %v, %v", checked, err)
	}
	if got := readFileRows(t, path); len(got) != 4 {
		t.Fatalf("the older file reads %d rows, want 4", len(got))
	}
	tab, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	config := tab.Meta().Config
	tab.Close()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := blockOf(t, path, 0)
	cfg := int64(bytes.Index(orig[:first], config))
	if cfg < 0 {
		t.Fatal("the config is not in the schema copy at the start")
	}
	// Outside the schema message (its 8 bytes of marker and length, then n bytes) every byte is
	// the magic or zero padding, which the check pins: a change there is always reported.
	msgEnd := 16 + int64(binary.LittleEndian.Uint32(orig[12:16]))
	missed, missedConfig := 0, 0
	flipEvery(t, path, int(first), func(off int) {
		if _, err := VerifyFile(path); err == nil {
			missed++
			if int64(off) >= cfg && int64(off) < cfg+int64(len(config)) {
				missedConfig++
			}
			if off < 16 || int64(off) >= msgEnd {
				t.Errorf("byte %d (magic, padding, marker or length of the schema copy, %d bytes) flipped: VerifyFile passed", off, msgEnd)
			}
		}
	})
	if missedConfig > 0 {
		t.Errorf("%d changed bytes of the config in the schema copy went unnoticed", missedConfig)
	}
	t.Logf("%d of %d bytes of the schema copy changed nothing decoded", missed, first)
}

// Reading a canary score file checks its bytes outside the record batches too: a flipped byte
// of the schema copy at its start makes it damaged.
func TestReadCanaryScoresLeadingByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "canaries.arrow")
	w, err := CreateCanaryScores(path, ScoreMeta{Config: []byte(`{"a":1}`)}, WithBatchRows(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testCanaryScores(6)...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCanaryScores(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[10] ^= 0x01
	os.WriteFile(path, data, 0o644)
	if _, err := ReadCanaryScores(path); !errors.Is(err, integrity.ErrDamaged) {
		t.Fatalf("ReadCanaryScores after a flip at byte 10 = %v, want integrity.ErrDamaged", err)
	}
}
