package runs

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// lowerAllocFloor keeps bogus buffer sizes in fuzzed files from costing hundreds of megabytes per
// input; the cap works the same way at any floor.
func lowerAllocFloor(f *testing.F) {
	old := allocFloor
	allocFloor = 16 << 20
	f.Cleanup(func() { allocFloor = old })
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
			return nil
		})
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
		if s.World != WorldC && s.World != WorldCPrime || math.IsNaN(s.Score) || s.Attack == "" {
			t.Fatalf("ReadScores accepted %+v", s)
		}
	}
}

func FuzzReadScoresCSV(f *testing.F) {
	for _, s := range []string{
		"world,score\n0,1.5\n1,-2\n",
		"score,threat,attack,round,pair_id,run_id,world\n0.25,final,loss,3,7,14,1\n",
		"\ufeffWorld,Score\r\n1.0,-Inf\r\n",
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
