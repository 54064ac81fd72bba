package outputs

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/runs"
)

// TestFormatsAgree reads one simulated table in five encodings (CSV with logit_k columns, CSV
// with a list column and numeric worlds, Parquet, Arrow file with a fixed-size list, Arrow
// stream) and requires the same scores from each, for every attack.
func TestFormatsAgree(t *testing.T) {
	rows := simulate(40, 2, 1, 3)
	rec := record(rows, false)
	defer rec.Release()
	fixed := record(rows, true)
	defer fixed.Release()
	inputs := map[string][]byte{
		"csv-columns":  csvLogitColumns(rows),
		"csv-list":     csvLogitList(rows),
		"parquet":      parquetBytes(t, rec),
		"arrow-file":   arrowFileBytes(t, fixed),
		"arrow-stream": arrowStreamBytes(t, rec),
	}
	formats := map[string]string{"csv-columns": "csv", "csv-list": "csv", "parquet": "parquet", "arrow-file": "arrow", "arrow-stream": "arrow"}
	var want *Result
	for _, name := range []string{"csv-columns", "csv-list", "parquet", "arrow-file", "arrow-stream"} {
		tab, err := Read(context.Background(), inputs[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tab.Format != formats[name] || tab.Classes != 3 || len(tab.Records) != len(rows) {
			t.Fatalf("%s: format %s, %d classes, %d records", name, tab.Format, tab.Classes, len(tab.Records))
		}
		res, err := Score(context.Background(), tab, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want == nil {
			want = res
			if strings.Join(res.Ran, ",") != "loss,margin,lira-offline,lira-online" || res.References != 2 || res.Shadow != 8 || res.Pairs != 40 {
				t.Fatalf("%s: ran %v, %d references, %d shadow pairs, %d pairs", name, res.Ran, res.References, res.Shadow, res.Pairs)
			}
			// loss and margin score all 80 runs, LiRA the 64 runs of the 32 pairs not fitted on.
			if len(res.Scores) != 80+80+64+64 {
				t.Fatalf("%d scores", len(res.Scores))
			}
			continue
		}
		if len(res.Scores) != len(want.Scores) {
			t.Fatalf("%s: %d scores, want %d", name, len(res.Scores), len(want.Scores))
		}
		for i, s := range res.Scores {
			w := want.Scores[i]
			if s.Attack != w.Attack || s.RunID != w.RunID || s.World != w.World || !near(s.Score, w.Score) {
				t.Fatalf("%s: score %d = %+v, want %+v", name, i, s, w)
			}
		}
	}
}

// TestScoreValues checks each attack's statistic on a hand-computed table: the loss is given,
// the margin and LiRA's confidence come from the logits, and the reference record calibrates.
func TestScoreValues(t *testing.T) {
	csv := "pair_id,world,record,loss,label,logit_0,logit_1\n" +
		"0,C,canary,0.5,0,2,0\n" +
		"0,C,x,1.0,1,0,0\n" +
		"0,C',canary,0.9,0,1,0\n" +
		"0,C',x,1.25,1,0,1\n" +
		"1,C,canary,0.1,0,3,0\n1,C,x,1,1,0,0\n1,C',canary,0.2,0,1,1\n1,C',x,1,1,0,0\n"
	tab, err := ReadCSV(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Score(context.Background(), tab, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range res.Scores {
		got[s.Attack+"/"+worldName(s.World)+"/"+string(rune('0'+s.PairID))] = s.Score
	}
	// pair 0, world C: loss score = mean ref loss - canary loss = 1.0 - 0.5; margin = (2 - 0) -
	// (0 - 0) = 2. World C': 1.25 - 0.9 and (1 - 0) - (1 - 0) = 0.
	for k, want := range map[string]float64{"loss/C/0": 0.5, "loss/C'/0": 0.35, "margin/C/0": 2, "margin/C'/0": 0} {
		if !near(got[k], want) {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if len(res.Skipped) == 0 || !strings.Contains(res.Skipped[0].Attack, "lira-offline") {
		t.Errorf("2 pairs must skip LiRA with a reason, skipped %v", res.Skipped)
	}
	if !near(crossEntropy([]float64{2, 0}, 0), math.Log(1+math.Exp(-2))) {
		t.Error("cross-entropy")
	}
}

// Column names are matched without regard to case or surrounding space, as a score CSV's
// header is; a name given twice in two cases is refused.
func TestColumnNamesCaseInsensitive(t *testing.T) {
	tab, err := ReadCSV(strings.NewReader("Pair_ID, World ,LOSS\n0,C,1\n0,C',2\n1,C,0.5\n1,C',3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Score(context.Background(), tab, Options{}); err != nil {
		t.Errorf("a table with upper-case column names: %v", err)
	}
	if _, err := ReadCSV(strings.NewReader("pair_id,world,loss,Loss\n0,C,1,1\n")); err == nil || !strings.Contains(err.Error(), `column "loss" appears twice`) {
		t.Errorf("loss and Loss: %v", err)
	}
}

// TestValidation: every kind of bad table is refused with the row and column named.
func TestValidation(t *testing.T) {
	cases := []struct{ name, csv, want string }{
		{"missing world", "pair_id,world,loss\n0,C,1\n0,C',2\n1,C,1\n", "pair 1 round 0: missing world C'"},
		{"duplicated pair", "pair_id,world,loss\n0,C,1\n0,C',2\n0,C,3\n", "row 3: duplicated: rows 1 and 3 both give the canary of pair 0 world C round 0"},
		{"NaN loss", "pair_id,world,loss\n0,C,NaN\n0,C',2\n", "row 1, column loss: NaN"},
		{"infinite logit", "pair_id,world,label,logit_0,logit_1\n0,C,0,1,+Inf\n0,C',0,1,1\n", "row 1, column logit_1: logit 1 is +Inf"},
		// Scores are differences of outputs: -1.8e308 made the largest float64 a score, which the
		// analysis refused after the import had succeeded.
		{"huge loss", "pair_id,world,loss\n0,C,-1.7976931348623157e308\n0,C',2\n", "row 1, column loss: -1.7976931348623157e+308 is beyond ±1e+150"},
		{"huge logit", "pair_id,world,label,logit_0,logit_1\n0,C,0,1,1e301\n0,C',0,1,1\n", "row 1, column logit_1: logit 1 is 1e+301"},
		{"large loss", "pair_id,world,loss\n0,C,1e200\n0,C',2\n", "row 1, column loss: 1e+200 is beyond ±1e+150 (the attacks take differences of losses"},
		{"label range", "pair_id,world,label,logits\n0,C,2,[1 2]\n0,C',0,[1 2]\n", "row 1, column label: class 2 out of range [0, 2)"},
		{"negative label", "pair_id,world,label,logits\n0,C,-1,[1 2]\n", "row 1, column label: class -1 out of range"},
		{"fractional label", "pair_id,world,label,logits\n0,C,0.5,[1 2]\n", "row 1, column label: 0.5 is not an integer"},
		{"bad world", "pair_id,world,loss\n0,X,1\n", "row 1, column world: world \"X\""},
		{"bad pair", "pair_id,world,loss\n-1,C,1\n", "row 1, column pair_id: -1 is not an integer"},
		{"no pair column", "world,loss\nC,1\n", "missing column pair_id"},
		{"unknown column", "pair_id,world,loss,rond\n0,C,1,2\n", "column \"rond\" is not part of the outputs format"},
		{"no outputs", "pair_id,world\n0,C\n", "no outputs"},
		{"logits without label", "pair_id,world,logits\n0,C,[1 2]\n", "logits without a label column"},
		{"ragged logits", "pair_id,world,label,logits\n0,C,0,[1 2]\n0,C',0,[1 2 3]\n", "row 2, column logits: 3 logits, earlier rows have 2"},
		{"one class", "pair_id,world,label,logits\n0,C,0,[1]\n", "row 1, column logits: 1 logits, want 2"},
		{"references differ", "pair_id,world,record,loss\n0,C,canary,1\n0,C,r,1\n0,C',canary,1\n", "pair 0 world C' round 0: 0 reference records, other runs have 1"},
		// Calibration subtracts the mean of a run's reference records from its canary's
		// statistic: world C calibrated on other records than world C' would shift every score
		// of one world and separate the worlds with no leak. Equal counts are not enough.
		{"other references", "pair_id,world,record,loss\n0,C,canary,1\n0,C,a,1\n0,C',canary,1\n0,C',b,1\n1,C,canary,1\n1,C,a,1\n1,C',canary,1\n1,C',b,1\n",
			`pair 0 world C' round 0: reference records "b", the first run (pair 0 world C round 0) has "a"`},
		{"a reference twice", "pair_id,world,record,loss\n0,C,canary,1\n0,C,a,1\n0,C,a,1\n0,C',canary,1\n0,C',a,1\n0,C',b,1\n",
			`row 3: reference record "a" of pair 0 world C round 0 given twice (also row 2)`},
		{"run ids clash", "pair_id,run_id,world,loss\n0,5,C,1\n0,6,C',1\n1,5,C,1\n1,7,C',1\n", "row 3, column run_id: run 5 is pair 1 world C here and pair 0 world C"},
		{"one pair", "pair_id,world,loss\n0,C,1\n0,C',2\n", "1 pair; an audit needs at least 2"},
		{"empty", "", "no header row"},
		{"header only", "pair_id,world,loss\n", "no rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab, err := ReadCSV(strings.NewReader(c.csv))
			if err == nil {
				_, err = Score(context.Background(), tab, Options{})
			}
			var ie *InputError
			if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an InputError containing %q", err, c.want)
			}
		})
	}
}

// TestImportAllOrNothing: a valid table writes the score file and the marker, readable as a
// coupled score file; an invalid one leaves nothing behind, and a non-empty --out is refused.
func TestImportAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	os.WriteFile(good, csvLogitColumns(simulate(20, 0, 1, 1)), 0o644)
	out := filepath.Join(dir, "out")
	sum, err := Import(context.Background(), ImportOptions{Input: good, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	sf, err := runs.ReadScoreFile(expdir.Dir(out).Scores())
	if err != nil || !sf.Coupled || len(sf.Scores) != 2*40+2*32 {
		t.Fatalf("score file: %v, coupled %v, %d scores (summary %+v)", err, sf != nil && sf.Coupled, len(sf.Scores), sum.Result)
	}
	if _, err := os.Stat(expdir.Dir(out).OutputsImport()); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(context.Background(), ImportOptions{Input: good, Out: out}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty out: %v", err)
	}
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("pair_id,world,loss\n0,C,1\n0,C',nan\n1,C,1\n1,C',1\n"), 0o644)
	out2 := filepath.Join(dir, "out2")
	if _, err := Import(context.Background(), ImportOptions{Input: bad, Out: out2}); err == nil {
		t.Fatal("bad table imported")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "good.csv" && e.Name() != "bad.csv" && e.Name() != "out" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
