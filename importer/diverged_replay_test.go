package importer

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/runs"
)

// A run its trainer declared diverged keeps its informed statistics from then on, in an import
// as in fedaudit's trainer: its later iterates are the parameters it kept, not noisy steps, so
// a residual computed from them is no draw of the noise. The replay added such residuals, so an
// imported diverged run's informed score differed from the native audit's of the same runs.
// Before the checkpoint that declares it, a run's replayed statistics agree with the trainer's
// (1e-4 relative, as TestReplayMatchesTrainer); from it on they are those of the checkpoint
// before it, exactly. The trainer's own differ from them by the round of the divergence, which
// it observed from its noise draw and an import cannot (replay.go).
func TestReplayFreezesDivergedRuns(t *testing.T) {
	// Parameter norms of replayYAML's runs: about 1.8 at rounds 1 and 2, 1.88 to 1.98 at round
	// 3 and 2.1 to 2.2 at round 4, so a bound of 1.95 has some runs diverge at round 3 and the
	// rest at round 4.
	cfg := parse(t, strings.Replace(replayYAML, "  informed: true\n", "  informed: true\n  divergence_norm: 1.95\n", 1))
	own := trainOwn(t, cfg)
	ownMeta, ownRows := rowsOf(t, own)
	first := map[int64]int{} // run -> first checkpoint declared diverged
	for k, r := range ownRows {
		if r.Diverged {
			if f, ok := first[k[0]]; !ok || int(k[1]) < f {
				first[k[0]] = int(k[1])
			}
		}
	}
	byRound := map[int]int{}
	for _, f := range first {
		byRound[f]++
	}
	if byRound[3] == 0 || byRound[4] == 0 {
		t.Fatalf("runs first diverged by round %v: want some at round 3 and some at 4", byRound)
	}
	t.Logf("runs first declared diverged, by checkpoint: %v of %d", byRound, 2*cfg.Pairs)

	// The snapshots' manifest with the trainer's diverged column on the global models' rows.
	snap := t.TempDir()
	path := exportSnapshots(t, cfg, own, snap, false)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	lines[0] += ",diverged"
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		if f[4] != "" { // an upload's row
			lines[i+1] += ","
			continue
		}
		pair, _ := strconv.Atoi(f[2])
		round, _ := strconv.Atoi(f[3])
		world := 0
		if f[1] == "C'" {
			world = 1
		}
		lines[i+1] += fmt.Sprintf(",%v", ownRows[[2]int64{int64(2*pair + world), int64(round)}].Diverged)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, imp := importReplayed(t, cfg, path)
	impMeta, impRows := rowsOf(t, imp)

	replayed := []string{runs.StatLLRAll, runs.StatLLRLast, runs.StatMu2, runs.StatLLRUpload, runs.StatMu2Upload}
	frozen := append([]string{runs.StatLLRDiff}, replayed...)
	for k, b := range impRows {
		run, round := k[0], int(k[1])
		f, diverged := first[run]
		if ownRows[k].Diverged != b.Diverged {
			t.Fatalf("run %d round %d: imported diverged %v, trainer's %v", run, round, b.Diverged, ownRows[k].Diverged)
		}
		if !diverged || round < f {
			a := ownRows[k]
			for _, n := range replayed {
				va, vb := a.Stats[ownMeta.StatIndex(n)], b.Stats[impMeta.StatIndex(n)]
				if math.Abs(va-vb)/(1+math.Abs(va)) > 1e-4 {
					t.Errorf("run %d round %d %s: trainer %v, replayed %v", run, round, n, va, vb)
				}
			}
			continue
		}
		before := impRows[[2]int64{run, int64(f - 1)}]
		for _, n := range frozen {
			if i := impMeta.StatIndex(n); b.Stats[i] != before.Stats[i] {
				t.Errorf("run %d (diverged by round %d) round %d %s: %v, want round %d's %v", run, f, round, n, b.Stats[i], f-1, before.Stats[i])
			}
		}
	}
}
