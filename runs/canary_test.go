package runs

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

func canaryMeta(k int, names ...string) Meta {
	m := testMeta([]string{"llr"}, true, false)
	m.Canaries, m.CanaryStatNames = k, names
	return m
}

// TestCanaryRoundTrip writes run files with canaries (several batches, with and without canary
// statistics) and reads back the metadata and every row exactly; the file says version 3, and a
// file without canaries keeps version 2.
func TestCanaryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta Meta
		rows int
	}{
		{"bits only", canaryMeta(5), 7},
		{"bits and statistics", canaryMeta(40, CanaryCosFinal, CanaryCosMax, CanaryLLRAll), 11},
		{"one canary", canaryMeta(1, CanaryLoss), 3},
		{"empty", canaryMeta(3, CanaryLoss), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			path := filepath.Join(t.TempDir(), "run.arrow")
			want := makeRows(tc.meta, 0, tc.rows, 4)
			writeFile(t, path, tc.meta, want, WithBatchRows(3), WithAllocator(mem))
			tab, err := Open(path, WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			got := tab.Meta()
			if got.Canaries != tc.meta.Canaries || !slices.Equal(got.CanaryStatNames, tc.meta.CanaryStatNames) {
				t.Errorf("canaries %d %v, wrote %d %v", got.Canaries, got.CanaryStatNames, tc.meta.Canaries, tc.meta.CanaryStatNames)
			}
			checkRows(t, readAll(t, tab), want)
			if v := fileVersion(t, path); v != "3" {
				t.Errorf("format version %q, want 3 for a file with canaries", v)
			}
			if _, err := VerifyFile(path); err != nil {
				t.Errorf("VerifyFile: %v", err)
			}
		})
	}
	plain := filepath.Join(t.TempDir(), "plain.arrow")
	writeFile(t, plain, testMeta([]string{"llr"}, false, false), makeRows(testMeta([]string{"llr"}, false, false), 0, 2, 0))
	if v := fileVersion(t, plain); v != "2" {
		t.Errorf("format version %q, want 2 for a file without canaries", v)
	}
}

func fileVersion(t *testing.T, path string) string {
	t.Helper()
	af, err := openArrowFile(path, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	v, _ := af.Reader().Schema().Metadata().GetValue(KeyFormatVersion)
	return v
}

func TestCanaryWriteValidation(t *testing.T) {
	m := canaryMeta(4, CanaryLoss)
	good := makeRows(m, 0, 1, 4)[0]
	for _, tc := range []struct {
		name string
		edit func(r *Row)
		want string
	}{
		{"bits short", func(r *Row) { r.CanaryIn = r.CanaryIn[:3] }, "3 canary inclusion bits, the file declares 4"},
		{"no statistics", func(r *Row) { r.CanaryStats = nil }, "0 canary statistics, the file declares 1"},
		{"statistic short", func(r *Row) { r.CanaryStats[0] = r.CanaryStats[0][:2] }, "has 2 values for 4 canaries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Create(filepath.Join(t.TempDir(), "r.arrow"), m)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			r := good
			r.CanaryIn = slices.Clone(good.CanaryIn)
			r.CanaryStats = [][]float64{slices.Clone(good.CanaryStats[0])}
			tc.edit(&r)
			if err := w.Write(r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Write = %v, want %q", err, tc.want)
			}
		})
	}
	w, err := Create(filepath.Join(t.TempDir(), "plain.arrow"), testMeta([]string{"llr"}, true, false))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Write(good); err == nil || !strings.Contains(err.Error(), "declares no canaries") {
		t.Errorf("canary row in a file without canaries: %v", err)
	}
	for _, bad := range []Meta{canaryMeta(-1), canaryMeta(0, CanaryLoss), canaryMeta(2, CanaryLoss, CanaryLoss), canaryMeta(2, "llr"), canaryMeta(2, "canary_in")} {
		if _, err := Create(filepath.Join(t.TempDir(), "bad.arrow"), bad); err == nil {
			t.Errorf("Create accepted canaries %d %v", bad.Canaries, bad.CanaryStatNames)
		}
	}
}

// TestCanaryShardsMustAgree: shards with other canary columns are not one experiment.
func TestCanaryShardsMustAgree(t *testing.T) {
	a, b := canaryMeta(4, CanaryLoss), canaryMeta(5, CanaryLoss)
	a.Shard, b.Shard = Shard{0, 2}, Shard{1, 2}
	dir, _ := writeShards(t, a, b)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "canary columns differ") {
		t.Errorf("Open = %v, want canary columns differ", err)
	}
}

// TestCanarySchemaErrors: metadata and columns of the canaries must agree.
func TestCanarySchemaErrors(t *testing.T) {
	m := canaryMeta(3, CanaryLoss)
	for _, tc := range []struct {
		name string
		edit func([]arrow.Field, []string, []string) ([]arrow.Field, []string, []string)
		want string
	}{
		{"count not a number", func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
			v[len(v)-1] = "x"
			return f, k, v
		}, "is not a positive count"},
		{"no count", func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
			return f, k[:len(k)-1], v[:len(v)-1]
		}, "canary columns without metadata"},
		{"bits of another type", func(f []arrow.Field, k, v []string) ([]arrow.Field, []string, []string) {
			for i := range f {
				if f[i].Name == colCanaryIn {
					f[i].Type = float32List
				}
			}
			return f, k, v
		}, `column "canary_in" has type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := editSchema(t, m, tc.edit)
			if _, _, err := parseRunSchema(sc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseRunSchema = %v, want %q", err, tc.want)
			}
		})
	}
}

func testCanaryScores(n int) []CanaryScore {
	out := make([]CanaryScore, n)
	for i := range out {
		out[i] = CanaryScore{RunID: int64(i / 5), PairID: int64(i / 10), World: int8(i/5) % 2, Round: int32(i % 3),
			Attack: "canary-cos", Threat: ThreatFinal, Canary: int32(i % 5), Included: i%3 == 1, Score: float64(i) - 2.5}
	}
	out[n-1].Score = math.Inf(-1)
	out[n-2].Threat = ThreatAllIterates
	return out
}

func TestCanaryScoresRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "canaries.arrow")
	want := testCanaryScores(23)
	w, err := CreateCanaryScores(path, ScoreMeta{Config: []byte(`{"a": 1}`), DatasetHash: "h", ToolVersion: "v"}, WithBatchRows(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(want...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCanaryScores(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Meta.Config) != `{"a":1}` || got.Meta.DatasetHash != "h" || got.Meta.ToolVersion != "v" {
		t.Errorf("meta %+v", got.Meta)
	}
	if !slices.Equal(got.Scores, want) {
		t.Errorf("scores differ:\n got %v\nwant %v", got.Scores, want)
	}
	// A score file is not a canary score file, and the other way round.
	if _, err := ReadScores(path); err == nil {
		t.Error("ReadScores read a canary score file")
	}
	sp := filepath.Join(t.TempDir(), "scores.arrow")
	sw, err := CreateScores(sp, ScoreMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Write(testScores(3, 0)...); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCanaryScores(sp); err == nil || !strings.Contains(err.Error(), "not canary-scores") {
		t.Errorf("ReadCanaryScores of a score file: %v", err)
	}
}

func TestCanaryScoreWriteValidation(t *testing.T) {
	good := testCanaryScores(2)[0]
	for _, tc := range []struct {
		name string
		edit func(*CanaryScore)
	}{
		{"nan", func(s *CanaryScore) { s.Score = math.NaN() }},
		{"world", func(s *CanaryScore) { s.World = 2 }},
		{"threat", func(s *CanaryScore) { s.Threat = ThreatUploads }},
		{"attack", func(s *CanaryScore) { s.Attack = "" }},
		{"canary", func(s *CanaryScore) { s.Canary = -1 }},
	} {
		w, err := CreateCanaryScores(filepath.Join(t.TempDir(), "c.arrow"), ScoreMeta{})
		if err != nil {
			t.Fatal(err)
		}
		s := good
		tc.edit(&s)
		if err := w.Write(good, s); err == nil {
			t.Errorf("%s: Write accepted %+v", tc.name, s)
		}
		w.Abort()
	}
}

// FuzzReadCanaryScores: arbitrary bytes may fail to read, never panic, and what is read
// satisfies the writer's checks.
func FuzzReadCanaryScores(f *testing.F) {
	lowerAllocFloor(f)
	path := filepath.Join(f.TempDir(), "seed.arrow")
	w, err := CreateCanaryScores(path, ScoreMeta{Config: []byte(`{}`)}, WithBatchRows(3))
	if err != nil {
		f.Fatal(err)
	}
	if err := w.Write(testCanaryScores(8)...); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	valid, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-9])
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "fuzz.arrow")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sf, err := ReadCanaryScores(p)
		if err != nil {
			return
		}
		for _, s := range sf.Scores {
			if err := checkCanaryScore(s); err != nil {
				t.Fatalf("ReadCanaryScores accepted %+v: %v", s, err)
			}
		}
	})
}

// TestCanaryScanStops is Scan over canary rows with a cancelled context: it stops between batches.
func TestCanaryScanStops(t *testing.T) {
	m := canaryMeta(2, CanaryLoss)
	path := filepath.Join(t.TempDir(), "r.arrow")
	writeFile(t, path, m, makeRows(m, 0, 6, 4), WithBatchRows(2))
	tab, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = tab.Scan(ctx, func(Row) error { n++; cancel(); return nil })
	if err == nil || n != 2 {
		t.Errorf("Scan after cancel: %v after %d rows, want an error after the first batch", err, n)
	}
}
