package attacks

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/fedaudit/fedaudit/runs"
)

// rewriteRuns copies the run file at path, passing every row through edit (which drops a row by
// returning false), and returns the copy's path.
func rewriteRuns(t *testing.T, path string, edit func(r *runs.Row) bool) string {
	t.Helper()
	tb := openTable(t, path)
	out := filepath.Join(t.TempDir(), "runs.arrow")
	w, err := runs.Create(out, tb.Meta())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	err = tb.Scan(context.Background(), func(r runs.Row) error {
		if !edit(&r) {
			return nil
		}
		return w.Write(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDivergedShadowRunIsLeftOutOfTheFit: a shadow run whose parameters, update and statistics
// are not finite (a diverged run of an import) must not spoil the learned attacks' fit. The
// shadow pairs only choose the test, so leaving such a run out keeps the certification valid;
// letting it in made the LDA's covariance NaN (the linear attack refused the whole file) and
// every coefficient of the vector attacks NaN (every audited score written as 0). The scores
// must be those of the same file without that run's row.
func TestDivergedShadowRunIsLeftOutOfTheFit(t *testing.T) {
	spec := softmaxSpec
	spec.sigma = 0.1
	path, env, _ := simulate(t, spec)
	const shadowPair = 4 // the 5th pair by id: a shadow pair
	diverged := func(r *runs.Row) bool { return r.PairID == shadowPair && r.World == runs.WorldC && r.Round == 1 }
	nanPath := rewriteRuns(t, path, func(r *runs.Row) bool {
		if diverged(r) {
			nan := float32(math.NaN())
			for i := range r.Params {
				r.Params[i] = nan
			}
			r.Upload[0] = nan // not all NaN: the client took part
			for i := range r.Stats {
				r.Stats[i] = math.NaN()
			}
		}
		return true
	})
	refPath := rewriteRuns(t, path, func(r *runs.Row) bool { return !diverged(r) })
	names := []string{"linear", "lira-online", "param-lda", "param-cosine", "upload-lda"}
	got, err := Score(context.Background(), openTable(t, nanPath), env, Options{Attacks: names, Workers: 2})
	if err != nil {
		t.Fatalf("a diverged shadow run: %v", err)
	}
	want, err := Score(context.Background(), openTable(t, refPath), env, Options{Attacks: names, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Scores) != len(want.Scores) {
		t.Fatalf("%d scores, want %d", len(got.Scores), len(want.Scores))
	}
	for i, s := range got.Scores {
		if w := want.Scores[i]; s.RunID != w.RunID || s.Attack != w.Attack || s.Score != w.Score {
			t.Errorf("%s run %d: score %v, want %v (the fit without the diverged shadow run)", s.Attack, s.RunID, s.Score, w.Score)
		}
	}
	for _, m := range got.Summary {
		if m.NonFinite != 0 || !(m.AUC > 0.6) {
			t.Errorf("%s: %d non-finite scores, AUC %.3f", m.Attack, m.NonFinite, m.AUC)
		}
	}
}
