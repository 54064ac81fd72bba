package experiment

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
)

// A sequential run of a deployment far from its claim stops at the first look: only the first of
// 8 shards is trained, the analysis of its 25 pairs is a violation at the per-look confidence,
// the record says so, and every later stage analyzes the shards that exist without
// --allow-partial. The same deployment judged against a claim it meets trains every shard, looks
// 4 times (1, 2, 4, 8 shards) and ends consistent with all 200 pairs.
func TestSequentialRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Run(ctx, leakyConfig(), dir, RunOptions{Shards: 8, Sequential: true})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Headline.Violated() {
		t.Fatalf("headline %+v, want violated", a.Headline)
	}
	rec, err := ReadSequential(dir)
	if err != nil || rec == nil {
		t.Fatalf("sequential.json: %v %v", rec, err)
	}
	first := 1 - 0.05*1/15 // looks at 1, 2, 4 and 8 shards: the first spends 1/15 of the error
	if !rec.Stopped || len(rec.Looks) != 1 || rec.Looks[0].Pairs != 25 || math.Abs(rec.Looks[0].Confidence-first) > 1e-12 {
		t.Fatalf("record %+v: want a stop at the first of 4 looks (25 pairs, at confidence %v)", rec, first)
	}
	files, err := os.ReadDir(expdir.Dir(dir).Runs())
	if err != nil || len(files) != 1 {
		t.Fatalf("run files %v (%v): only the first shard must be trained", files, err)
	}
	if f := a.Family; math.Abs(f.Confidence-first) > 1e-12 {
		t.Errorf("the look certified at %v, want %v", f.Confidence, first)
	}
	later, err := AnalyzeDir(ctx, dir, AnalyzeOptions{}, AttackOptions{})
	if err != nil {
		t.Fatalf("a later analysis of the stopped run: %v", err)
	}
	if later.Headline.Status != a.Headline.Status || math.Abs(later.Family.Confidence-first) > 1e-12 || !hasNote(later.Headline, "stopped: the remaining 175 pairs are left out") {
		t.Errorf("later analysis %+v differs from the run's", later.Headline)
	}

	// The same directory run again in full: every shard trained and analyzed, and every later
	// stage analyzes what that run analyzed, not the stopped look's shards.
	full, err := Run(ctx, leakyConfig(), dir, RunOptions{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	again, err := AnalyzeDir(ctx, dir, AnalyzeOptions{}, AttackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range full.Findings {
		if f.Result.N0 != 200 || again.Findings[i].Result.N0 != f.Result.N0 || again.Findings[i].Result.MuLower != f.Result.MuLower {
			t.Fatalf("%s T=%d: the full run analyzed %d pairs (mu >= %v), a later analysis %d (mu >= %v)",
				f.Attack, f.Round, f.Result.N0, f.Result.MuLower, again.Findings[i].Result.N0, again.Findings[i].Result.MuLower)
		}
	}

	consistent := leakyConfig()
	consistent.Audit.ClaimMu = 50
	dir = t.TempDir()
	a, err = Run(ctx, consistent, dir, RunOptions{Shards: 8, Sequential: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err = ReadSequential(dir)
	if err != nil || rec == nil || rec.Stopped || len(rec.Looks) != 4 || rec.Looks[3].Pairs != 200 || a.Headline.Status != findings.StatusConsistent ||
		math.Abs(a.Family.Confidence-(1-0.05*8/15)) > 1e-12 {
		t.Fatalf("record %+v, headline %+v: want 4 looks ending consistent at 200 pairs", rec, a.Headline)
	}
	for _, f := range a.Findings {
		if n := f.Result.N0; n != 200 {
			t.Errorf("%s T=%d scored %d pairs of world C at the last look, want 200: a stale score file of an earlier look", f.Attack, f.Round, n)
		}
	}
}

func hasNote(h findings.Headline, s string) bool {
	for _, n := range h.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// A score file written when fewer shards existed no longer covers the runs: it is scored again.
func TestScoresCoverRuns(t *testing.T) {
	ctx := context.Background()
	cfg := leakyConfig()
	dir := t.TempDir()
	data := trainFirstShards(t, cfg, dir, 1, 4)
	shards := AllShards(4)
	if _, err := AttackDir(ctx, dir, AttackOptions{AllowPartial: true}); err != nil {
		t.Fatal(err)
	}
	if err := TrainShards(ctx, cfg, data, dir, shards, TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	ed, err := openExperimentDir(ctx, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ed.Close()
	sf, err := runs.ReadScoreFile(expdir.Dir(dir).Scores())
	if err != nil {
		t.Fatal(err)
	}
	pairOf := func(s runs.Score) int64 { return s.PairID }
	if why := scoresCoverRuns(sf.Scores, pairOf, ed.tab, cfg.Pairs, 1); why == "" {
		t.Fatal("a score file of the first shard covers all four")
	}
	fresh, _, err := ed.allScores(ctx, AttackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if why := scoresCoverRuns(fresh.Scores, pairOf, ed.tab, cfg.Pairs, 1); why != "" {
		t.Fatalf("rescored file: %s", why)
	}
}

// A learned attack is fitted on shadow pairs of the runs it scores, and a sequential look scores
// the first shards only: a first look of fewer than attacks.MinPairs pairs cannot fit it, so
// the run would train the first shard and then fail (exit 1) where a fixed audit of the same
// config succeeds. It is refused as a configuration error before anything is trained; a first
// look of enough pairs, or attacks that are not learned, plan as before.
func TestSequentialFirstLookFitsLearnedAttacks(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		pairs   int
		shards  int
		attacks []string
		refused bool
	}{
		{"listed learned attack, 2 pairs a look", 40, 16, []string{"lira-online", "loss"}, true},
		{"default attacks, 2 pairs a look", 40, 16, nil, true},
		{"listed learned attack, 10 pairs a look", 40, 4, []string{"lira-online", "loss"}, false},
		{"no learned attack, 2 pairs a look", 40, 16, []string{"informed-all", "loss"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := leakyConfig()
			cfg.Pairs = tc.pairs
			cfg.Audit.Attacks = tc.attacks
			var ce *spec.ConfigError
			if tc.refused {
				dir := t.TempDir()
				_, err := Run(ctx, cfg, dir, RunOptions{Shards: tc.shards, Sequential: true})
				if !errors.As(err, &ce) {
					t.Errorf("Run: %v, want a config error", err)
				}
				// The count is the first look's pairs, not the experiment's.
				if want := "at least 10 pairs, and there are 2"; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Run: %v, want it to say %q", err, want)
				}
				if _, err := os.Stat(expdir.Dir(dir).Runs()); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused sequential run trained shards: %v", err)
				}
			}
			err := CheckSequential(cfg, tc.shards, nil)
			if got := errors.As(err, &ce); got != tc.refused {
				t.Fatalf("CheckSequential: %v, want refused %v", err, tc.refused)
			}
		})
	}
}

// TestSequentialRecordChecked: sequential.json was read as any JSON that parsed, so a flipped
// byte put "error levels adding up to -7.95, so that all 4 hold jointly at 8.95" into the
// analysis and a lost field "look 1 of 0". A record no run writes is refused, naming the file.
func TestSequentialRecordChecked(t *testing.T) {
	valid := func() *SequentialRecord {
		return &SequentialRecord{Format: SequentialFormat, Shards: 4, Pairs: 100, Confidence: 0.95,
			Planned: []int{1, 2, 4}, PlannedConfidence: []float64{0.99, 0.98, 0.98},
			Looks: []SequentialLook{{Shards: 1, Pairs: 25, Confidence: 0.99, Status: "consistent"}}, Status: "consistent"}
	}
	dir := t.TempDir()
	if err := writeSequential(dir, valid()); err != nil {
		t.Fatal(err)
	}
	if r, err := ReadSequential(dir); err != nil || r.Looks[0].Pairs != 25 {
		t.Fatalf("a valid record: %+v, %v", r, err)
	}
	for _, tc := range []struct {
		name   string
		change func(*SequentialRecord)
		want   string
	}{
		{"confidence above 1", func(r *SequentialRecord) { r.Confidence = 8.95 }, "confidence 8.95 is not in (0, 1)"},
		{"planned looks lost", func(r *SequentialRecord) { r.Planned, r.PlannedConfidence = nil, nil }, "0 planned looks"},
		{"a level lost", func(r *SequentialRecord) { r.PlannedConfidence = r.PlannedConfidence[:2] }, "3 planned looks with 2 levels"},
		{"looks out of order", func(r *SequentialRecord) { r.Planned = []int{2, 1, 4} }, "planned look 2"},
		{"a look beyond the shards", func(r *SequentialRecord) { r.Planned[2] = 5 }, "planned look 3"},
		{"a look not planned", func(r *SequentialRecord) { r.Looks[0].Shards = 2 }, "look 1 (2 shards"},
		{"no shards", func(r *SequentialRecord) { r.Shards = 0 }, "0 shards of 100 pairs"},
	} {
		r := valid()
		tc.change(r)
		if err := writeSequential(dir, r); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSequential(dir); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sequential.json") {
			t.Errorf("%s: %v, want an error naming the file and saying %q", tc.name, err, tc.want)
		}
	}
	raw := []byte(`{"format": "fedaudit-sequential/1", "rairs": 100}`)
	if err := os.WriteFile(expdir.Dir(dir).Sequential(), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSequential(dir); err == nil || !strings.Contains(err.Error(), `unknown field "rairs"`) {
		t.Errorf("an unknown field: %v", err)
	}
}

// TestSequentialRecordOfAnEarlierVersion: versions before planned_confidence wrote
// look_confidence under the same format name; the strict reader refused it, and with it every
// task of a new sequential array in that directory. A task removes it as stale, as it does a
// record of other settings; an analysis still refuses it with the way out.
func TestSequentialRecordOfAnEarlierVersion(t *testing.T) {
	dir := t.TempDir()
	old := `{"format": "fedaudit-sequential/1", "shards": 4, "pairs": 100, "confidence": 0.95,
		"planned_looks": [1, 2, 4], "look_confidence": 0.9833, "looks": [], "stopped": false, "status": ""}`
	if err := os.WriteFile(expdir.Dir(dir).Sequential(), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSequential(dir); err == nil || !strings.Contains(err.Error(), "run the audit again with --sequential") {
		t.Errorf("an earlier version's record read as %v", err)
	}
	settled, stale, err := SequentialSettled(dir, leakyConfig(), 4)
	if err != nil || settled != nil || stale == nil {
		t.Fatalf("SequentialSettled: settled %v, stale %v, %v; want it stale", settled, stale, err)
	}
	if _, err := os.Stat(expdir.Dir(dir).Sequential()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale record was kept: %v", err)
	}
}
