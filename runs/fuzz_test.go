package runs

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/runs/integrity"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// lowerAllocFloor keeps bogus buffer sizes in fuzzed files from costing hundreds of megabytes per
// input; the cap works the same way at any floor.
func lowerAllocFloor(f *testing.F) {
	old := integrity.AllocFloor
	integrity.AllocFloor = 16 << 20
	f.Cleanup(func() { integrity.AllocFloor = old })
}

// validRunFile returns the bytes of a small run file with params, upload and several batches.
func validRunFile(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "seed.arrow")
	m := testMeta([]string{"llr"}, true, true)
	w, err := Create(path, m, WithBatchRows(2))
	if err != nil {
		f.Fatal(err)
	}
	if err := w.Write(makeRows(m, 0, 5, 3)...); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// legacyRunFile returns the bytes of a small run file of format version 1 (no checksums).
func legacyRunFile(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "legacy.arrow")
	m := testMeta([]string{"llr"}, false, false)
	sc := editSchema(f, m, func(fs []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
		for i := range k {
			if k[i] == KeyFormatVersion {
				v[i] = legacyFormatVersion
			}
		}
		return fs, k, v
	})
	writeUnchecked(f, path, sc, func(b *array.RecordBuilder) {
		for _, r := range makeRows(m, 0, 3, 0) {
			b.Field(0).(*array.Int64Builder).Append(r.RunID)
			b.Field(1).(*array.Int64Builder).Append(r.PairID)
			b.Field(2).(*array.Int8Builder).Append(r.World)
			b.Field(3).(*array.Uint64Builder).Append(r.Seed)
			b.Field(4).(*array.Int32Builder).Append(r.Round)
			b.Field(5).(*array.BooleanBuilder).Append(r.Diverged)
			b.Field(6).(*array.Float64Builder).Append(r.TrainLoss)
			b.Field(7).(*array.Float64Builder).Append(r.TestAccuracy)
			b.Field(8).(*array.Float64Builder).Append(r.Stats[0])
		}
	})
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// canaryRunFile returns the bytes of a small run file with canaries (format version 3).
func canaryRunFile(f *testing.F) []byte {
	dir := f.TempDir()
	m := canaryMeta(3, CanaryLoss)
	checked := filepath.Join(dir, "checked.arrow")
	w, err := Create(checked, m, WithBatchRows(2))
	if err != nil {
		f.Fatal(err)
	}
	if err := w.Write(makeRows(m, 0, 4, 2)...); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(checked)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func validScoreFile(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "seed.arrow")
	w, err := CreateScores(path, ScoreMeta{Config: []byte(`{}`), MetricNames: []string{"m"}}, WithBatchRows(3))
	if err != nil {
		f.Fatal(err)
	}
	if err := w.Write(testScores(7, 1)...); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzOpenRunFile feeds arbitrary bytes to Open and Scan: they may fail, never panic, and what
// they accept must satisfy the checks the writer makes.
func FuzzOpenRunFile(f *testing.F) {
	lowerAllocFloor(f)
	valid := validRunFile(f)
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("ARROW1\x00\x00ARROW1"))
	f.Add([]byte("not arrow"))
	// A file without checksums (format version 1) lets the fuzzer reach the decoder behind them.
	f.Add(legacyRunFile(f))
	f.Add(canaryRunFile(f))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.arrow")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tab, err := Open(path)
		if err != nil {
			return
		}
		defer tab.Close()
		m := tab.Meta()
		tab.Scan(context.Background(), func(r Row) error {
			if r.World != WorldC && r.World != WorldCPrime {
				t.Fatalf("Scan accepted world %d", r.World)
			}
			if len(r.Stats) != len(m.StatNames) {
				t.Fatalf("row has %d stats for %d names", len(r.Stats), len(m.StatNames))
			}
			if (r.Params != nil) != m.HasParams || (r.Upload != nil) != m.HasUpload {
				t.Fatalf("row vectors disagree with the schema")
			}
			if len(r.CanaryIn) != m.Canaries || len(r.CanaryStats) != len(m.CanaryStatNames) {
				t.Fatalf("row has %d canary bits and %d statistics for %d canaries %v", len(r.CanaryIn), len(r.CanaryStats), m.Canaries, m.CanaryStatNames)
			}
			for _, v := range r.CanaryStats {
				if len(v) != m.Canaries {
					t.Fatalf("canary statistic of %d values for %d canaries", len(v), m.Canaries)
				}
			}
			return nil
		})
	})
}

// FuzzFlipRunFile changes bytes of a valid run file (with checksums): reading must either fail
// or give exactly the original metadata and rows. Arbitrary bytes (FuzzOpenRunFile) almost never
// get past the checksums; this target keeps the fuzzer on the files the checksums protect.
func FuzzFlipRunFile(f *testing.F) {
	lowerAllocFloor(f)
	orig := validRunFile(f)
	dir := f.TempDir()
	path := filepath.Join(dir, "orig.arrow")
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		f.Fatal(err)
	}
	want := readFileRows(f, path)
	tab, err := Open(path)
	if err != nil {
		f.Fatal(err)
	}
	meta := tab.Meta()
	tab.Close()
	f.Add(uint32(0), byte(1), uint32(0), byte(0))
	f.Add(uint32(len(orig)/2), byte(0x80), uint32(len(orig)-20), byte(3))
	f.Add(uint32(len(orig)-12), byte(0xff), uint32(9), byte(0x40))
	f.Fuzz(func(t *testing.T, off1 uint32, x1 byte, off2 uint32, x2 byte) {
		data := append([]byte(nil), orig...)
		data[int(off1)%len(data)] ^= x1
		data[int(off2)%len(data)] ^= x2
		p := filepath.Join(dir, "fuzz.arrow")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := sameRowsOrError(p, meta, want); err != nil {
			t.Fatalf("bytes %d ^ %#x and %d ^ %#x: %v", int(off1)%len(data), x1, int(off2)%len(data), x2, err)
		}
	})
}

func checkFuzzedScores(t *testing.T, path string) {
	scores, err := ReadScores(path)
	if err != nil {
		return
	}
	if len(scores) == 0 {
		t.Fatal("ReadScores returned no scores and no error")
	}
	for _, s := range scores {
		if s.World != WorldC && s.World != WorldCPrime || math.IsNaN(s.Score) || math.IsInf(s.Score, 0) || s.Score == math.MaxFloat64 ||
			s.Round < 0 || !ValidThreat(s.Threat) || s.Attack == "" {
			t.Fatalf("ReadScores accepted %+v", s)
		}
	}
}

func FuzzReadScoresCSV(f *testing.F) {
	for _, s := range []string{
		"world,score\n0,1.5\n1,-2\n",
		"score,threat,attack,round,pair_id,run_id,world\n0.25,final,loss,3,7,14,1\n",
		"\ufeffWorld,Score\r\n1.0,-Inf\r\n",
		"world,score,round,threat\nC',2,-3,foo\nc,1,0,uploads\n",
		"attack,world,score\n\"a,b\",0,\"3\"\n",
		"world,score\n1,NaN\n",
		"world,score\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.csv")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		checkFuzzedScores(t, path)
	})
}

func FuzzReadScoresArrow(f *testing.F) {
	lowerAllocFloor(f)
	valid := validScoreFile(f)
	f.Add(valid)
	f.Add(valid[:len(valid)-7])
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.arrow")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		checkFuzzedScores(t, path)
	})
}

// FuzzVerifyFile changes bytes before the first record batch of a run file written before the
// whole-file checksum (the schema copy that VerifyFile decodes for such files, which no other
// checksum covers) and of a current one: VerifyFile may report damage, never panic or hang, and
// a file it passes opens.
func FuzzVerifyFile(f *testing.F) {
	lowerAllocFloor(f)
	current := validRunFile(f)
	omitFileCRC = true
	older := validRunFile(f)
	omitFileCRC = false
	dir := f.TempDir()
	f.Add(false, []byte{}, uint16(0))
	f.Add(true, []byte{0x01}, uint16(200))
	f.Add(true, []byte{0xff, 0xff, 0xff, 0x7f}, uint16(12))
	f.Add(false, []byte{0x40}, uint16(9))
	f.Fuzz(func(t *testing.T, old bool, patch []byte, at uint16) {
		data := slices.Clone(current)
		if old {
			data = slices.Clone(older)
		}
		for i, b := range patch {
			if j := int(at) + i; j < len(data) {
				data[j] ^= b
			}
		}
		p := filepath.Join(dir, "fuzz.arrow")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if checked, err := VerifyFile(p); err != nil || !checked {
			return
		}
		tab, err := Open(p)
		if err != nil {
			t.Fatalf("VerifyFile passed a file Open refuses: %v", err)
		}
		tab.Close()
	})
}
