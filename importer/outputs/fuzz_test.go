package outputs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The readers take files from outside: whatever the bytes, they must return a table or an
// error, never panic or allocate without bound. Seeds are in testdata/fuzz/<Fuzz...>/; run
// `go test ./importer/outputs -fuzz FuzzReadParquet` (etc.) to search further.

// checkTable asserts what every accepted table guarantees.
func checkTable(t *testing.T, tab *Table) {
	for _, r := range tab.Records {
		if r.Logits != nil && (len(r.Logits) != tab.Classes || r.Label < 0 || r.Label >= tab.Classes) {
			t.Fatalf("row %d: %d logits of %d classes, label %d", r.Row, len(r.Logits), tab.Classes, r.Label)
		}
	}
	if res, err := Score(context.Background(), tab, Options{}); err == nil {
		for _, s := range res.Scores {
			if s.Score != s.Score {
				t.Fatalf("NaN score %+v", s)
			}
		}
	}
}

func FuzzReadCSV(f *testing.F) {
	f.Add(csvLogitColumns(simulate(3, 1, 1, 1)))
	f.Add(csvLogitList(simulate(2, 0, 1, 2)))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ReadCSV(strings.NewReader(string(data)))
		if err == nil {
			checkTable(t, tab)
		}
	})
}

func FuzzReadParquet(f *testing.F) {
	rec := record(simulate(2, 1, 1, 1), false)
	f.Add(parquetBytes(f, rec))
	rec.Release()
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ReadParquet(context.Background(), data)
		if err == nil {
			checkTable(t, tab)
		}
	})
}

func FuzzReadArrow(f *testing.F) {
	rec := record(simulate(2, 1, 1, 1), true)
	f.Add(arrowFileBytes(f, rec))
	f.Add(arrowStreamBytes(f, rec))
	rec.Release()
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ReadArrow(data)
		if err == nil {
			checkTable(t, tab)
		}
	})
}

// TestWriteFuzzSeeds writes the seed corpus in testdata/fuzz when FEDAUDIT_WRITE_SEEDS=1; the
// committed seeds run with every `go test`.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("FEDAUDIT_WRITE_SEEDS") != "1" {
		t.Skip("set FEDAUDIT_WRITE_SEEDS=1 to rewrite testdata/fuzz")
	}
	rows := simulate(3, 1, 1, 5)
	list, fixed := record(rows, false), record(rows, true)
	defer list.Release()
	defer fixed.Release()
	seeds := map[string][][]byte{
		"FuzzReadCSV": {csvLogitColumns(rows), csvLogitList(rows),
			[]byte("pair_id,world,loss\n0,C,1\n0,C',2\n1,C,0.5\n1,C',1\n"),
			[]byte("pair,world,round,record,label,logits\n0,0,3,canary,1,\"[0,1]\"\n0,1,3,canary,1,0;2\n")},
		"FuzzReadParquet": {parquetBytes(t, list), parquetBytes(t, fixed)},
		"FuzzReadArrow":   {arrowFileBytes(t, fixed), arrowStreamBytes(t, list), arrowFileBytes(t, list)},
	}
	for name, list := range seeds {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, b := range list {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
