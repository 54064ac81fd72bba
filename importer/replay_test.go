package importer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

const replayYAML = `
name: import-replay
seed: 6
pairs: 40
data:
  source: synthetic
  synthetic: {dim: 5, classes: 3}
  clients: 3
  per_client: 6
  test_samples: 10
adjacency: {kind: replace, client: 0, index: 2, canary: relabel}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [4], activation: tanh}
  rounds: 4
  local_steps: 2
  learning_rate: 0.5
  batching: full
  clip_norm: 0.5
  noise_std: 0.05
  checkpoints: [0, 1, 2, 3, 4]
  informed: true
  record_params: true
  record_upload: true
`

// The informed adversary replayed from imported iterates computes what fedaudit's trainer
// records from its own noise draws: the likelihood ratios and mu^2 of the model sequence and of
// the target's uploads agree to float32 rounding of the residuals (1e-4 relative).
func TestReplayMatchesTrainer(t *testing.T) {
	cfg := parse(t, replayYAML)
	own := trainOwn(t, cfg)
	m, imp := importReplayed(t, cfg, exportSnapshots(t, cfg, own, t.TempDir(), false))
	ownMeta, ownRows := rowsOf(t, own)
	impMeta, impRows := rowsOf(t, imp)
	if impMeta.StatIndex(runs.StatLLRDiff) < 0 {
		t.Fatalf("imported stats %v lack %s", impMeta.StatNames, runs.StatLLRDiff)
	}
	names := []string{runs.StatLLRAll, runs.StatLLRLast, runs.StatMu2, runs.StatLLRUpload, runs.StatMu2Upload,
		runs.StatTargetLossC, runs.StatTargetLossCPrime, runs.StatTargetMarginC, runs.StatTargetMarginCPrime}
	var worst float64
	for k, a := range ownRows {
		b, ok := impRows[k]
		if !ok {
			t.Fatalf("imported runs lack run %d round %d", k[0], k[1])
		}
		for _, n := range names {
			va, vb := a.Stats[ownMeta.StatIndex(n)], b.Stats[impMeta.StatIndex(n)]
			d := math.Abs(va-vb) / (1 + math.Abs(va))
			worst = math.Max(worst, d)
			if d > 1e-4 {
				t.Errorf("run %d round %d %s: trainer %v, replayed %v", k[0], k[1], n, va, vb)
			}
		}
	}
	t.Logf("largest relative difference of the replayed statistics: %.2g", worst)

	// Replay needs every round: with a gap the statistics are not computed, and the import says why.
	gap := *cfg
	gap.Train.Checkpoints = []int{0, 1, 3, 4}
	gap.Train.Informed = true
	var log []string
	m2 := &Manifest{Path: m.Path}
	for _, e := range m.Entries {
		if e.Round != 2 && e.Client < 0 {
			m2.Entries = append(m2.Entries, e)
		}
	}
	res, err := Import(context.Background(), Options{Manifest: m2, Config: &gap, Out: filepath.Join(t.TempDir(), "gap"),
		Logf: func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed || !strings.Contains(strings.Join(log, "\n"), "every round from 0 to 4 must be a checkpoint") {
		t.Fatalf("gap: replayed %v, log %q", res.Replayed, log)
	}
}

// importReplayed imports the snapshots of the manifest at path with cfg, failing the test
// unless the informed adversary's statistics were replayed; it returns the manifest and the
// imported directory.
func importReplayed(t *testing.T, cfg *spec.Config, path string) (*Manifest, string) {
	t.Helper()
	m, err := ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	imp := filepath.Join(t.TempDir(), "imported")
	res, err := Import(context.Background(), Options{Manifest: m, Config: cfg, Out: imp, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed {
		t.Fatalf("not replayed: %+v", res)
	}
	return m, imp
}

// aucOf is the AUC of an attack's scores at a round for telling world C from C'.
func aucOf(t *testing.T, dir, attack string, round int32) float64 {
	t.Helper()
	sf, err := experiment.AttackDir(context.Background(), dir, experiment.AttackOptions{Attacks: []string{attack}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var c, cp []float64
	for _, s := range sf.Scores {
		if s.Round != round {
			continue
		}
		if s.World == runs.WorldC {
			c = append(c, s.Score)
		} else {
			cp = append(cp, s.Score)
		}
	}
	var wins float64
	for _, a := range c {
		for _, b := range cp {
			switch {
			case a > b:
				wins++
			case a == b:
				wins += 0.5
			}
		}
	}
	return wins / float64(len(c)*len(cp))
}

// writeReplayedSnapshots writes to dir the .npy snapshots of an external trainer of cfg's
// pairs (job), every round replayed without noise by train.ReplayRound and then given noise
// of sd per pair, drawn afresh each round or, with reuse, once; it returns the manifest's
// path. It is its own piece because it is the trainer being audited, apart from the import
// and the AUCs that judge it.
func writeReplayedSnapshots(t *testing.T, dir string, cfg *spec.Config, job train.Job, lay Layout, sd float64, reuse bool) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	R := 2 * cfg.Pairs
	w := make([][]float32, R)
	w0 := make([]float32, lay.D)
	for i := range w0 {
		w0[i] = float32(rng.NormFloat64() * 0.3)
	}
	for r := range w {
		w[r] = w0
	}
	noise := make([][]float32, cfg.Pairs)
	lines := []string{"file,world,pair,round"}
	save := func(round int) {
		for r, v := range w {
			b, err := ingest.WriteNPY([]int{len(v)}, v)
			if err != nil {
				t.Fatal(err)
			}
			f := fmt.Sprintf("r%d_t%d.npy", r, round)
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%s,%d,%d,%d", f, r%2, r/2, round))
		}
	}
	save(0)
	for round := 0; round < cfg.Train.Rounds; round++ {
		rp, err := train.ReplayRound(context.Background(), job, round, w)
		if err != nil {
			t.Fatal(err)
		}
		for p := range noise {
			if noise[p] == nil || !reuse {
				noise[p] = make([]float32, lay.D)
				for i := range noise[p] {
					noise[p][i] = float32(sd * rng.NormFloat64())
				}
			}
		}
		next := make([][]float32, R)
		for r := range next {
			next[r] = make([]float32, lay.D)
			for i := range next[r] {
				next[r][i] = rp.Mean[r][r%2][i] + noise[r/2][i]
			}
		}
		w = next
		save(round + 1)
	}
	man := filepath.Join(dir, "manifest.csv")
	os.WriteFile(man, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	return man
}

// An external trainer that draws each pair's noise once and adds it every round is told apart
// without error by the differenced ratio (informed-diff), while the same trainer with fresh
// noise leaves that ratio far from perfect and gives the likelihood ratio of all iterates
// (informed-all) the AUC of the Gaussian mechanism with the realized mu. The "external trainer"
// here is train.ReplayRound plus noise written to .npy snapshots.
func TestReplayCatchesReusedNoise(t *testing.T) {
	cfg := parse(t, replayYAML)
	cfg.Pairs = 150
	cfg.Train.RecordUpload = false
	cfg.Train.NoiseStd = 0.4 // realized mu about 1.3 at T = 4
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lay, err := LayoutOf(cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		t.Fatal(err)
	}
	job := train.Job{Config: cfg.Train, WorldC: data.Pair.C, WorldCPrime: data.Pair.CPrime, Target: data.Target,
		Pairs: train.PairRange{Count: cfg.Pairs}}
	sd := cfg.Train.NoiseStd / math.Sqrt(float64(cfg.Data.Clients)) // the average's noise
	for _, reuse := range []bool{false, true} {
		dir := t.TempDir()
		R := 2 * cfg.Pairs
		man := writeReplayedSnapshots(t, dir, cfg, job, lay, sd, reuse)
		m, err := ReadManifest(man)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		if _, err := Import(context.Background(), Options{Manifest: m, Config: cfg, Out: out, Workers: 2}); err != nil {
			t.Fatal(err)
		}
		diff, all := aucOf(t, out, "informed-diff", 4), aucOf(t, out, "informed-all", 4)
		_, rows := rowsOf(t, out)
		meta, _ := rowsOf(t, out)
		var mu2 float64
		for k, r := range rows {
			if k[1] == 4 {
				mu2 += r.Stats[meta.StatIndex(runs.StatMu2)] / float64(R)
			}
		}
		gaussAUC := distuv.UnitNormal.CDF(math.Sqrt(mu2) / math.Sqrt2)
		t.Logf("reuse %v: informed-diff AUC %.4f, informed-all AUC %.4f (Gaussian mechanism with the realized mu %.3f: %.4f)", reuse, diff, all, math.Sqrt(mu2), gaussAUC)
		if reuse {
			if diff != 1 {
				t.Errorf("reused noise: informed-diff AUC %.4f, want 1 (the true world's differenced residuals vanish)", diff)
			}
			continue
		}
		if diff > 0.9 {
			t.Errorf("fresh noise: informed-diff AUC %.4f: the differenced ratio separates correct runs", diff)
		}
		// 300 runs: the AUC's standard error is about 0.03 near 0.8; 0.1 is three of them.
		if math.Abs(all-gaussAUC) > 0.1 {
			t.Errorf("fresh noise: informed-all AUC %.4f, the Gaussian mechanism's %.4f", all, gaussAUC)
		}
	}
}
