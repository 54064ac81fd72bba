package experiment

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/bounds"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/report"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/theory"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// leakyConfig is a softmax experiment whose noise is far too small for a claim of mu 0.3: the
// informed adversary and the loss attack certify mu around 1.8 with 200 pairs.
func leakyConfig() *spec.Config {
	cfg := &spec.Config{
		Name: "leaky", Seed: 3, Pairs: 200,
		Data: spec.DataConfig{Source: "synthetic", Synthetic: spec.SyntheticConfig{Dim: 8, Classes: 3},
			Clients: 3, PerClient: 10, TestSamples: 30},
		Adjacency: spec.AdjacencyConfig{Kind: "replace", Client: 0, Index: 2, Canary: "dirac"},
		Train: train.Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "softmax"},
			Rounds: 3, LocalSteps: 2, LearningRate: 0.1, ClipNorm: 1, NoiseStd: 0.01,
			Checkpoints: []int{1, 3}, Informed: true},
		Audit: spec.AuditConfig{Attacks: []string{"informed-all", "loss"}, ClaimMu: 0.3},
	}
	cfg.FillDefaults()
	return cfg
}

// TestDirectoryClaimJudgedByEveryStage: the claim of the config decides the verdict of `run`,
// and every later analysis of the directory (analyze, report, the cluster's finish job) judges
// the same claim unless the caller overrides it, which the analysis then says.
func TestDirectoryClaimJudgedByEveryStage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Run(ctx, leakyConfig(), dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Headline.Status != findings.StatusViolated {
		t.Fatalf("run: headline %+v, want violated", a.Headline)
	}
	later, err := AnalyzeDir(ctx, dir, AnalyzeOptions{}, AttackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if later.Headline.Status != findings.StatusViolated {
		t.Errorf("analyze of the directory: headline %q, want violated (the config's claim)", later.Headline.Text)
	}
	for i, f := range later.Findings {
		if f.ClaimSource != "config claim" || f.Verdict == nil || f.Verdict.Checks[0].Claimed != 0.3 {
			t.Errorf("row %d judged %q %+v, want the config claim mu = 0.3", i, f.ClaimSource, f.Verdict)
		}
		if f.Verdict.Status != a.Findings[i].Verdict.Status {
			t.Errorf("row %d: analyze says %s, run said %s", i, f.Verdict.Status, a.Findings[i].Verdict.Status)
		}
	}
	over, err := AnalyzeDir(ctx, dir, AnalyzeOptions{Claim: audit.Claim{Mu: 50}, ClaimSource: "--claim-mu claim"}, AttackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if over.Headline.Status != findings.StatusConsistent {
		t.Errorf("override: headline %q, want consistent", over.Headline.Text)
	}
	if !slices.ContainsFunc(over.Headline.Notes, func(n string) bool {
		return strings.Contains(n, "mu 50 from the command line replaces the configuration's claim_mu 0.3")
	}) {
		t.Errorf("override not noted: %q", over.Headline.Notes)
	}
}

// coupledScores makes a coupled score file: pairs of a Gaussian mechanism whose world-C score
// is N(mu, 1) and world-C' score N(0, 1), one attack at round 1.
func coupledScores(n int, mu float64, seed uint64) *runs.ScoreFile {
	rng := rand.New(rand.NewPCG(seed, 1))
	sf := &runs.ScoreFile{Coupled: true}
	for p := 0; p < n; p++ {
		sf.Scores = append(sf.Scores,
			runs.Score{RunID: int64(2 * p), PairID: int64(p), World: runs.WorldC, Round: 1, Attack: "a", Threat: runs.ThreatFinal, Score: mu + rng.NormFloat64()},
			runs.Score{RunID: int64(2*p + 1), PairID: int64(p), World: runs.WorldCPrime, Round: 1, Attack: "a", Threat: runs.ThreatFinal, Score: rng.NormFloat64()})
	}
	return sf
}

// TestCoupledScoresWithoutPartner: coupled scores with a pair whose partner is missing are
// never certified with Bonferroni (invalid for dependent worlds); the default is dkw+band, the
// unpaired ids are counted and named, and the split method, which needs the pairs, refuses.
func TestCoupledScoresWithoutPartner(t *testing.T) {
	ctx := context.Background()
	sf := coupledScores(300, 1, 5)
	// Drop world C' of pair 17 and world C of pair 250.
	sf.Scores = slices.DeleteFunc(sf.Scores, func(s runs.Score) bool {
		return (s.PairID == 17 && s.World == runs.WorldCPrime) || (s.PairID == 250 && s.World == runs.WorldC)
	})
	a, err := AnalyzeScores(ctx, sf, AnalyzeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := a.Findings[0]
	if f.Result.Method != audit.DKWBand || f.Result.Paired || !slices.Equal(f.Unpaired, []int64{17, 250}) {
		t.Errorf("method %s paired %v unpaired %v, want dkw+band, unpaired [17 250]", f.Result.Method, f.Result.Paired, f.Unpaired)
	}
	if !slices.ContainsFunc(a.Headline.Notes, func(n string) bool {
		return strings.Contains(n, "2 coupled scores without a partner") && strings.Contains(n, "17, 250")
	}) {
		t.Errorf("unpaired scores not noted: %q", a.Headline.Notes)
	}
	var out strings.Builder
	if err := report.WriteAnalysis(&out, a); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "with dkw+band (coupled scores, incomplete pairs) thresholds") {
		t.Errorf("the table output does not name the method:\n%s", out.String())
	}
	for _, m := range []audit.ThresholdMethod{audit.Bonferroni, audit.Split} {
		_, err := AnalyzeScores(ctx, sf, AnalyzeOptions{Method: m}, nil)
		if err == nil || !strings.Contains(err.Error(), "coupled") || !strings.Contains(err.Error(), "17, 250") {
			t.Errorf("method %s on incomplete coupled pairs: err = %v, want a refusal naming the ids", m, err)
		}
	}
	// A pair id twice in one world cannot name one pair.
	dup := coupledScores(20, 1, 6)
	dup.Scores = append(dup.Scores, dup.Scores[0])
	if _, err := AnalyzeScores(ctx, dup, AnalyzeOptions{}, nil); err == nil || !strings.Contains(err.Error(), "pair id 0 occurs twice in world C") {
		t.Errorf("duplicate pair id: err = %v", err)
	}
	// Complete pairs are certified as pairs.
	a, err = AnalyzeScores(ctx, coupledScores(300, 1, 5), AnalyzeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := a.Findings[0]; !f.Result.Paired || f.Result.Method != audit.DKWBand || len(f.Unpaired) != 0 {
		t.Errorf("complete pairs: %+v", f.Result)
	}
}

// TestReversedScoresFlagged: scores whose direction is reversed (world C' scores higher) are
// not called consistent without a note: the reversed reading certifies a positive mu.
func TestReversedScoresFlagged(t *testing.T) {
	sf := coupledScores(500, 2, 7)
	for i := range sf.Scores {
		sf.Scores[i].Score = -sf.Scores[i].Score
	}
	a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Claim: audit.Claim{Mu: 0.5}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := a.Findings[0]
	if f.Result.AUC >= 0.5 || !f.Reversed() || f.ReversedMuLower < 1 {
		t.Fatalf("AUC %v, reversed mu %v: want the reversal detected", f.Result.AUC, f.ReversedMuLower)
	}
	if !slices.ContainsFunc(a.Headline.Notes, func(n string) bool { return strings.Contains(n, "worse than guessing") }) {
		t.Errorf("headline notes %q lack the reversal", a.Headline.Notes)
	}
	var out strings.Builder
	if err := report.WriteAnalysis(&out, a); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "[reversed scores?]") {
		t.Errorf("table does not mark the reversed row:\n%s", out.String())
	}
	// A weak attack that is merely below 1/2 by chance gets no such note.
	weak := coupledScores(500, 0, 8)
	a, err = AnalyzeScores(context.Background(), weak, AnalyzeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Findings[0].Reversed() {
		t.Errorf("mu = 0: flagged reversed (AUC %v, reversed mu %v)", a.Findings[0].Result.AUC, a.Findings[0].ReversedMuLower)
	}
	// A score of -MaxFloat64 is a valid score, but read reversed it is the largest float64,
	// which the analysis reserves: the diagnostic is left out, and the analysis stands.
	lowest := coupledScores(500, 2, 7)
	for i := range lowest.Scores {
		lowest.Scores[i].Score = -lowest.Scores[i].Score
	}
	lowest.Scores[0].Score = -math.MaxFloat64
	a, err = AnalyzeScores(context.Background(), lowest, AnalyzeOptions{}, nil)
	if err != nil {
		t.Fatalf("a score of -MaxFloat64 in reversed scores: %v", err)
	}
	if f := a.Findings[0]; f.Result.AUC >= 0.5 || !math.IsNaN(f.ReversedMuLower) {
		t.Errorf("AUC %v, reversed mu %v: want the forward analysis without the diagnostic", f.Result.AUC, f.ReversedMuLower)
	}
}

// TestFamilyWiseRows: every row is certified at the Bonferroni row level of the family, so that
// all bounds hold jointly at the stated confidence; the family is reported.
func TestFamilyWiseRows(t *testing.T) {
	sf := &runs.ScoreFile{Coupled: true}
	for r := 1; r <= 5; r++ {
		g := coupledScores(200, 1, uint64(r))
		for _, s := range g.Scores {
			s.Round = int32(r)
			sf.Scores = append(sf.Scores, s)
		}
	}
	a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Confidence: 0.9}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Family.Rows != 5 || math.Abs(a.Family.RowConfidence-0.98) > 1e-12 || a.Family.Confidence != 0.9 {
		t.Errorf("family %+v, want 5 rows at 0.98 each for 0.9 jointly", a.Family)
	}
	for _, f := range a.Findings {
		if math.Abs(f.Result.Confidence-0.98) > 1e-12 {
			t.Errorf("round %d certified at %v, want the row level 0.98", f.Round, f.Result.Confidence)
		}
	}
}

// TestHeadlineEstimateIsNoViolation: a row above the convergent bound computed from an assumed
// L says "exceeds estimate", and the headline does not turn it into a deployment violation.
func TestHeadlineEstimateIsNoViolation(t *testing.T) {
	bound := &theory.Bound{T: 5, Mu: 0.4, MuComposition: 9}
	claim, source, kind := theoryClaim(runs.ThreatFinal, bound, bounds.Smoothness{L: 1, Source: "given"})
	if claim.Mu != 0.4 || source != "convergent bound with given L" || kind != findings.ClaimEstimate {
		t.Fatalf("theoryClaim = %v %q %q", claim, source, kind)
	}
	// A certified L does not make the convergent bound a bound (TestConvergentBoundIsNoProof).
	if _, source, kind := theoryClaim(runs.ThreatFinal, bound, bounds.Smoothness{L: 1, Source: "certified"}); kind != findings.ClaimEstimate || source != "convergent bound with certified L" {
		t.Errorf("certified L: %q %q, want an estimate", source, kind)
	}
	sf := coupledScores(400, 2, 9)
	a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Smoothness: bounds.Smoothness{L: 1, Source: "estimated"}},
		func(int) *theory.Bound { return bound })
	if err != nil {
		t.Fatal(err)
	}
	f := a.Findings[0]
	if f.Verdict == nil || f.Verdict.Status != audit.Violated || f.ClaimKind != findings.ClaimEstimate {
		t.Fatalf("row: %+v %q", f.Verdict, f.ClaimKind)
	}
	if a.Headline.Status == findings.StatusViolated {
		t.Errorf("headline %q: an estimate exceeded is not a violation of the deployment", a.Headline.Text)
	}
	if !slices.ContainsFunc(a.Headline.Notes, func(n string) bool { return strings.Contains(n, "convergent bound with estimated L") }) {
		t.Errorf("notes %q lack the exceeded estimate", a.Headline.Notes)
	}
	var out strings.Builder
	if err := report.WriteTable(&out, a.Findings); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "exceeds estimate (") || strings.Contains(out.String(), "violated") {
		t.Errorf("table:\n%s", out.String())
	}
	// The split method's seed is recorded.
	a, err = AnalyzeScores(context.Background(), sf, AnalyzeOptions{Method: audit.Split, Seed: 42}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := rowJSON(t, a.Findings[0]); r["split_seed"] != 42.0 {
		t.Errorf("split seed not recorded: %v", r["split_seed"])
	}
}

// snapshot hashes every file under dir with its modification time, to tell whether anything
// was touched.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%x %d", sha256.Sum256(raw), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStageOnlyChangesReuseRuns: changing the audit section reuses the trained runs (and
// rescoring happens only when the attacks change); changing training or the shard count is
// refused before anything is written, naming what differs.
func TestStageOnlyChangesReuseRuns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := leakyConfig()
	cfg.Pairs = 40
	if _, err := Run(ctx, cfg, dir, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	runFile := filepath.Join(expdir.Dir(dir).Runs(), runs.Shard{Index: 0, Count: 1}.FileName())
	before := snapshot(t, expdir.Dir(dir).Runs())
	scoresBefore := snapshot(t, expdir.Dir(dir).Scores())

	// A new claim and name: the runs and the scores are reused, the verdict follows the claim.
	changed := *cfg
	changed.Name, changed.Audit.ClaimMu = "renamed", 50
	var logs []string
	logf := func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	a, err := Run(ctx, &changed, dir, RunOptions{Train: TrainOptions{Logf: logf}, Attack: AttackOptions{Logf: logf}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Headline.Status != findings.StatusConsistent {
		t.Errorf("claim 50: headline %q", a.Headline.Text)
	}
	if after := snapshot(t, expdir.Dir(dir).Runs()); !maps.Equal(before, after) {
		t.Error("a stage-only change retrained the runs")
	}
	if after := snapshot(t, expdir.Dir(dir).Scores()); !maps.Equal(scoresBefore, after) {
		t.Error("a claim change rescored the runs")
	}
	if !slices.ContainsFunc(logs, func(l string) bool {
		return strings.Contains(l, "reusing its trained runs") && strings.Contains(l, "audit.claim_mu: 0.3 -> 50") && strings.Contains(l, `name: "leaky" -> "renamed"`)
	}) {
		t.Errorf("logs do not name the changed settings: %q", logs)
	}

	// Other attacks: the scores are stale and redone, the runs still reused.
	fewer := changed
	fewer.Audit.Attacks = []string{"loss"}
	a, err = Run(ctx, &fewer, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range a.Findings {
		if f.Attack != "loss" {
			t.Errorf("after changing the attacks to [loss], a row of %s", f.Attack)
		}
	}
	if after := snapshot(t, expdir.Dir(dir).Runs()); !maps.Equal(before, after) {
		t.Error("changing the attacks retrained the runs")
	}

	// Other training, or another shard count: refused, and the directory is left as it was.
	whole := snapshot(t, dir)
	noisier := fewer
	noisier.Train.NoiseStd = 0.02
	if _, err := Run(ctx, &noisier, dir, RunOptions{}); err == nil || !strings.Contains(err.Error(), "train.noise_std: 0.01 -> 0.02") {
		t.Errorf("other noise: err = %v, want a refusal naming train.noise_std", err)
	}
	if _, err := Run(ctx, &fewer, dir, RunOptions{Shards: 2}); err == nil || !strings.Contains(err.Error(), "1-shard layout") || !strings.Contains(err.Error(), "--shards 1") {
		t.Errorf("other shard count: err = %v, want a refusal naming the layout", err)
	}
	if after := snapshot(t, dir); !maps.Equal(whole, after) {
		t.Error("a refused run changed the directory")
	}
	if _, err := os.Stat(runFile); err != nil {
		t.Error(err)
	}
}

// TestUploadsRowsJudgedAgainstUploadsBound: issue 13 item 4a. An uploads row sees one client's
// upload with noise sigma, so it is judged against MuUploads = sqrt(Mu(T-1)^2 + (Gamma/sigma)^2),
// not the composition bound of the average (sqrt(n) smaller). The deployment (100
// clients, clip 0.01, sigma 0.01, eta 1, K 1) has MuComposition 0.2 and MuUploads 2 at T = 1;
// an attack at its true upload mu (about 1.6) used to read "violated" and is consistent.
func TestUploadsRowsJudgedAgainstUploadsBound(t *testing.T) {
	bs, err := theory.Bounds(theory.Config{Algo: algo.FedAvg, Eta: 1, L: 1, K: 1, M: 100, Sigma: 0.01, Clip: 0.01}, []int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	one, three := &bs[0], &bs[1]
	if math.Abs(one.MuComposition-0.2) > 1e-12 || math.Abs(one.MuUploads-2) > 1e-12 {
		t.Fatalf("T=1: composition %v uploads %v, want 0.2 and 2", one.MuComposition, one.MuUploads)
	}
	unknownL := *three
	unknownL.MuUploads = math.NaN()
	for _, tc := range []struct {
		name         string
		bound        *theory.Bound
		sm           bounds.Smoothness
		mu           float64
		source, kind string
	}{
		{"T=1 needs no L", one, bounds.Smoothness{L: 1, Source: "estimated"}, one.MuUploads, "uploads bound", findings.ClaimTheory},
		{"certified L", three, bounds.Smoothness{L: 1, Source: "certified"}, three.MuUploads, "uploads bound with certified L", findings.ClaimEstimate},
		{"estimated L", three, bounds.Smoothness{L: 1, Source: "estimated"}, three.MuUploads, "uploads bound with estimated L", findings.ClaimEstimate},
		{"no L", &unknownL, bounds.Smoothness{Source: "none"}, three.MuUploadsComposition, "uploads composition bound", findings.ClaimTheory},
	} {
		claim, source, kind := theoryClaim(runs.ThreatUploads, tc.bound, tc.sm)
		if claim.Mu != tc.mu || source != tc.source || kind != tc.kind {
			t.Errorf("%s: theoryClaim = %v %q %q, want mu %v %q %q", tc.name, claim.Mu, source, kind, tc.mu, tc.source, tc.kind)
		}
	}
	sf := coupledScores(500, 1.6, 11)
	for i := range sf.Scores {
		sf.Scores[i].Threat, sf.Scores[i].Attack = runs.ThreatUploads, "label"
	}
	a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Smoothness: bounds.Smoothness{L: 1, Source: "certified"}},
		func(int) *theory.Bound { return one })
	if err != nil {
		t.Fatal(err)
	}
	f := a.Findings[0]
	if f.Result.MuLower <= one.MuComposition {
		t.Fatalf("certified mu %v does not exceed the composition bound %v: the test shows nothing", f.Result.MuLower, one.MuComposition)
	}
	if f.Verdict == nil || f.Verdict.Status != audit.Consistent || f.ClaimSource != "uploads bound" || f.ClaimKind != findings.ClaimTheory {
		t.Errorf("verdict %+v against %q (%s), want consistent against the uploads bound", f.Verdict, f.ClaimSource, f.ClaimKind)
	}
	if rec := rowJSON(t, a.Findings[0]); rec["mu_uploads"] != one.MuUploads {
		t.Errorf("record mu_uploads %v, want %v", rec["mu_uploads"], one.MuUploads)
	}
	var buf strings.Builder
	if err := report.WriteTable(&buf, a.Findings); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "uploads  ") || !strings.Contains(buf.String(), "(0.") {
		t.Errorf("table lacks the uploads column or the ratio:\n%s", buf.String())
	}
}

// rowJSON is a finding's row of findings.json, decoded generically.
func rowJSON(t *testing.T, f findings.Finding) map[string]any {
	t.Helper()
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var row map[string]any
	if err := json.Unmarshal(raw, &row); err != nil {
		t.Fatal(err)
	}
	return row
}

// TestClaimNamesWhatItIsAbout: issue 24 item 5. A claim with no scope used to be judged on every
// row, uploads rows included, so the server's view of one upload (whose bound is sqrt(n) larger
// than the average's) of a correct deployment could read violated. A claim is about the released
// global models by default (final and all-iterates rows; the uploads rows keep the uploads
// bound), or about each upload (audit.claim_about: uploads; the model rows keep their bounds).
func TestClaimNamesWhatItIsAbout(t *testing.T) {
	bs, err := theory.Bounds(theory.Config{Algo: algo.FedAvg, Eta: 1, L: 1, K: 1, M: 100, Sigma: 0.01, Clip: 0.01}, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	one := &bs[0]
	up := coupledScores(500, 1.6, 11)
	for i := range up.Scores {
		up.Scores[i].Threat, up.Scores[i].Attack = runs.ThreatUploads, "label"
	}
	sf := coupledScores(500, 0.1, 12) // a final-model attack that certifies next to nothing
	sf.Scores = append(sf.Scores, up.Scores...)
	lookup := func(int) *theory.Bound { return one }
	sm := bounds.Smoothness{L: 1, Source: "certified"}
	rows := func(about string) (final, uploads findings.Finding, h findings.Headline) {
		t.Helper()
		a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Smoothness: sm, ClaimAbout: about,
			Claim: audit.Claim{Mu: 0.5}, ClaimSource: "--claim-mu claim"}, lookup)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range a.Findings {
			if f.Threat == runs.ThreatUploads {
				uploads = f
			} else {
				final = f
			}
		}
		return final, uploads, a.Headline
	}
	final, uploads, h := rows("")
	if uploads.Result.MuLower <= 0.5 {
		t.Fatalf("uploads row certifies %v, not above the claim 0.5: the test shows nothing", uploads.Result.MuLower)
	}
	if uploads.ClaimSource != "uploads bound" || uploads.Verdict.Status != audit.Consistent {
		t.Errorf("default scope: uploads row judged %s against %q, want consistent against the uploads bound", uploads.Verdict.Status, uploads.ClaimSource)
	}
	if final.ClaimSource != "--claim-mu claim" || final.Verdict.Checks[0].Claimed != 0.5 {
		t.Errorf("default scope: final row judged against %q %+v, want the claim", final.ClaimSource, final.Verdict)
	}
	if h.Status != findings.StatusConsistent {
		t.Errorf("default scope: headline %q, want consistent", h.Text)
	}
	final, uploads, h = rows(spec.ClaimAboutUploads)
	if !strings.HasPrefix(uploads.ClaimSource, "--claim-mu claim") || uploads.Verdict.Status != audit.Violated {
		t.Errorf("claim about uploads: uploads row judged %s against %q, want violated against the claim", uploads.Verdict.Status, uploads.ClaimSource)
	}
	if final.ClaimSource != "convergent bound" { // round 1: the one-round bound, proven
		t.Errorf("claim about uploads: final row judged against %q, want its convergent bound", final.ClaimSource)
	}
	if h.Status != findings.StatusViolated || !strings.Contains(h.Text, "each upload") {
		t.Errorf("claim about uploads: headline %q, want violated, naming the upload claim", h.Text)
	}
	if _, err := spec.Parse([]byte("pairs: 2\naudit: {claim_mu: 1, claim_about: gradients}\n")); err == nil || !strings.Contains(err.Error(), "audit.claim_about") {
		t.Errorf("claim_about: gradients accepted (%v)", err)
	}
}

// TestDivergedRunsReachHeadline: issue 24 item 2. A training whose runs diverged used to be
// judged like any other (every run diverged: "CONSISTENT ... 0.00 of the composition bound",
// exit 0). Any diverged run of an audited checkpoint is noted beside the verdict; where more
// than half diverged the headline is inconclusive and keeps what the rows said in a note.
// Checkpoints without rows do not count.
func TestDivergedRunsReachHeadline(t *testing.T) {
	sf := coupledScores(200, 1, 3)
	for _, tc := range []struct {
		name     string
		rounds   []findings.RoundSummary
		status   string
		noteWith string
	}{
		{"none", []findings.RoundSummary{{Round: 1, Runs: 400}}, findings.StatusConsistent, ""},
		{"a few", []findings.RoundSummary{{Round: 1, Runs: 400, Diverged: 12}}, findings.StatusConsistent, "training diverged in 12 of 400 runs by T = 1"},
		{"half", []findings.RoundSummary{{Round: 1, Runs: 400, Diverged: 200}}, findings.StatusConsistent, "training diverged in 200 of 400 runs"},
		{"most", []findings.RoundSummary{{Round: 1, Runs: 400, Diverged: 201}}, findings.StatusInconclusive, "what the rows say of the diverged runs, not of the mechanism: CONSISTENT"},
		{"not audited", []findings.RoundSummary{{Round: 1, Runs: 400}, {Round: 7, Runs: 400, Diverged: 400}}, findings.StatusConsistent, ""},
	} {
		a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Claim: audit.Claim{Mu: 50}, Rounds: tc.rounds}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := a.Headline
		if h.Status != tc.status {
			t.Errorf("%s: headline %q, want status %s", tc.name, h.Text, tc.status)
		}
		noted := slices.ContainsFunc(h.Notes, func(n string) bool { return tc.noteWith != "" && strings.Contains(n, tc.noteWith) })
		if noted != (tc.noteWith != "") || (tc.noteWith == "" && strings.Contains(strings.Join(h.Notes, " ")+h.Text, "diverged")) {
			t.Errorf("%s: notes %q, want one with %q", tc.name, h.Notes, tc.noteWith)
		}
		if tc.status == findings.StatusInconclusive && (!strings.HasPrefix(h.Text, "INCONCLUSIVE: training diverged in 201 of 400 runs by T = 1") || h.Tightness != nil || h.Claim != "") {
			t.Errorf("%s: headline %+v", tc.name, h)
		}
	}
}

// TestConvergentBoundIsNoProof: why no row is judged violated against the convergent bound, even
// with a certified L (theoryClaim). On the worked example of docs/theory.md (constant schedule, n
// 20, sigma 0.1, V 10, K 5, eta 0.01) the bound falls as L grows, though an L-smooth loss is
// L'-smooth for every L' > L, so it cannot bound every L-smooth loss; and on the exact affine
// instance with curvature -L where one client's steps are clipped to a constant (a gradient
// canary larger than the clip norm), the average local map has coefficient A = (19 rho + 1) /
// 20 < rho, and the final model's exact mu, sqrt(n) gamma / sigma times sum A^j / sqrt(sum
// A^2j), exceeds the bound computed with rho (by 0.1% at T 10, 2.3% at T 100).
func TestConvergentBoundIsNoProof(t *testing.T) {
	rounds := []int{1, 10, 100}
	at := func(L float64) []theory.Bound {
		bs, err := theory.Bounds(theory.Config{Algo: algo.FedAvg, Eta: 0.01, L: L, K: 5, M: 20, Sigma: 0.1, Clip: 10}, rounds)
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}
	one, two := at(1), at(2)
	if math.Abs(one[1].Mu-7.000262) > 1e-5 || math.Abs(one[2].Mu-14.081248) > 1e-5 {
		t.Fatalf("worked example: mu %v %v, want 7.000262 and 14.081248", one[1].Mu, one[2].Mu)
	}
	if !(two[2].Mu < one[2].Mu) {
		t.Errorf("T=100: the bound with L 2 (%v) is not below L 1's (%v)", two[2].Mu, one[2].Mu)
	}
	rho := math.Pow(1.01, 5)
	A := (19*rho + 1) / 20
	for i, T := range rounds[1:] {
		var sum, sq float64
		for j := 0; j < T; j++ {
			sum += math.Pow(A, float64(j))
			sq += math.Pow(A, float64(2*j))
		}
		exact := one[0].Mu * sum / math.Sqrt(sq) // one[0].Mu = sqrt(n) gamma / sigma
		if !(exact > one[i+1].Mu) {
			t.Errorf("T=%d: exact mu %v of the clipped instance does not exceed the bound %v", T, exact, one[i+1].Mu)
		}
		t.Logf("T=%d: exact %.4f, convergent bound %.4f (L 1), %.4f (L 2)", T, exact, one[i+1].Mu, two[i+1].Mu)
	}
}

// TestUncoveredClaimIsInconclusive: a claim about a threat model that no row observes leaves
// every row judged against its theory bound, so the headline cannot say whether the claim
// holds: a consistent (or empty) headline becomes inconclusive, keeping what the rows said in
// a note, while a violated theory bound stays the headline; a claim some row covers, or no
// claim, leaves the headline alone.
func TestUncoveredClaimIsInconclusive(t *testing.T) {
	models := []findings.Finding{{Attack: "loss", Threat: runs.ThreatFinal, Round: 3}}
	uploads := []findings.Finding{{Attack: "upload-lda", Threat: runs.ThreatUploads, Round: 3}}
	claim := AnalyzeOptions{Claim: audit.Claim{Mu: 0.3}, ClaimAbout: spec.ClaimAboutUploads, ClaimSource: "--claim-mu claim"}
	consistent := findings.Headline{Status: findings.StatusConsistent, Text: "CONSISTENT: rows"}
	for _, tc := range []struct {
		name   string
		before findings.Headline
		rows   []findings.Finding
		opts   AnalyzeOptions
		status string
		want   string
	}{
		{"consistent rows, claim about uploads", consistent, models, claim, findings.StatusInconclusive, "INCONCLUSIVE: the --claim-mu claim (mu 0.3, about the uploads) was judged on no row"},
		{"no verdict, claim about uploads", findings.Headline{Status: findings.StatusNoClaim, Text: "NO CLAIM: rows"}, models, claim, findings.StatusInconclusive, "INCONCLUSIVE:"},
		{"violated theory bound", findings.Headline{Status: findings.StatusViolated, Text: "VIOLATED: rows"}, models, claim, findings.StatusViolated, "VIOLATED: rows"},
		{"claim about the models, uploads rows only", consistent, uploads, AnalyzeOptions{Claim: audit.Claim{Epsilon: 2, Delta: 1e-5}}, findings.StatusInconclusive, "(epsilon 2, about the models)"},
		{"covered", consistent, uploads, claim, findings.StatusConsistent, "CONSISTENT: rows"},
		{"no claim", consistent, models, AnalyzeOptions{}, findings.StatusConsistent, "CONSISTENT: rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.before
			was := h.Text
			uncovered(&h, tc.rows, tc.opts)
			if h.Status != tc.status || !strings.Contains(h.Text, tc.want) {
				t.Fatalf("headline %q: %q, want %q containing %q", h.Status, h.Text, tc.status, tc.want)
			}
			if h.Status == findings.StatusInconclusive {
				if h.Claim != "" || h.Tightness != nil || len(h.Notes) == 0 || h.Notes[0] != "what the rows say against their theory bounds: "+was {
					t.Errorf("inconclusive headline keeps a claim, a tightness or loses the rows' headline: %+v", h)
				}
			}
			if tc.status == findings.StatusViolated && (len(h.Notes) != 1 || !strings.Contains(h.Notes[0], "judged on no row")) {
				t.Errorf("violated headline without the note on the claim: %+v", h.Notes)
			}
		})
	}
}

// Final-model rows without a convergent bound (no L: CNNs and external models; FedProx outside
// Theorem 4) were left unjudged, and an audit of a CNN without a claim ended NO CLAIM with exit
// status 0. The final model is a function of every iterate, so the composition bound, proven,
// holds for it: those rows are judged against it, as a theory bound; with a convergent bound
// they keep it.
func TestFinalRowsWithoutLJudgedAgainstComposition(t *testing.T) {
	bs, err := theory.Bounds(theory.Config{Algo: algo.FedAvg, Eta: 1, L: 1, K: 1, M: 100, Sigma: 0.01, Clip: 0.01}, []int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		noL := b
		noL.Mu = math.NaN()
		claim, source, kind := theoryClaim(runs.ThreatFinal, &noL, bounds.Smoothness{Source: "none"})
		if claim.Mu != b.MuComposition || source != "composition bound" || kind != findings.ClaimTheory {
			t.Errorf("T=%d without L: theoryClaim = %v %q %q, want the composition bound %v", b.T, claim.Mu, source, kind, b.MuComposition)
		}
		if claim, _, _ := theoryClaim(runs.ThreatFinal, &b, bounds.Smoothness{L: 1, Source: "given"}); claim.Mu != b.Mu {
			t.Errorf("T=%d with L: judged against %v, want the convergent bound %v", b.T, claim.Mu, b.Mu)
		}
	}
}

// A row judged against an estimate (the convergent bound after T = 1, the uploads bound with
// an L) that certifies more than the bound holding whatever L (the composition bound of its
// threat) is violated against that bound, and the headline says so; below it, the row stays
// a finding about the estimate. Without this, a final-model row certifying mu 2.76 beside a
// composition bound of 0.8 ended NO CLAIM.
func TestAboveTheProvenBoundIsViolated(t *testing.T) {
	for _, tc := range []struct {
		threat     string
		bound      theory.Bound
		wantKind   string
		wantSource string
		wantStatus string
	}{
		{runs.ThreatFinal, theory.Bound{T: 5, Mu: 0.4, MuComposition: 0.8}, findings.ClaimTheory, "composition bound", "violated"},
		{runs.ThreatFinal, theory.Bound{T: 5, Mu: 0.4, MuComposition: 8}, findings.ClaimEstimate, "convergent bound with assumed L", "no claim"},
		{runs.ThreatUploads, theory.Bound{T: 5, MuUploads: 0.4, MuUploadsComposition: 0.8}, findings.ClaimTheory, "uploads composition bound", "violated"},
		{runs.ThreatUploads, theory.Bound{T: 5, MuUploads: 0.4, MuUploadsComposition: 8}, findings.ClaimEstimate, "uploads bound with assumed L", "no claim"},
		// Composition bounds that used an L not certified (DP-SGD, K >= 2) are estimates, and
		// the bounds whatever L judge: below them, no violation.
		{runs.ThreatAllIterates, theory.Bound{T: 5, MuComposition: 0.8, MuCompositionAnyL: 8}, findings.ClaimEstimate, "composition bound with assumed L", "no claim"},
		{runs.ThreatAllIterates, theory.Bound{T: 5, MuComposition: 0.8, MuCompositionAnyL: 1.5}, findings.ClaimTheory, "composition bound whatever L", "violated"},
		{runs.ThreatAllIterates, theory.Bound{T: 5, MuComposition: 0.8}, findings.ClaimTheory, "composition bound", "violated"},
		{runs.ThreatFinal, theory.Bound{T: 5, Mu: 0.4, MuComposition: 0.8, MuCompositionAnyL: 8}, findings.ClaimEstimate, "convergent bound with assumed L", "no claim"},
		{runs.ThreatUploads, theory.Bound{T: 5, MuUploads: 0.4, MuUploadsComposition: 0.8, MuUploadsCompositionAnyL: 8}, findings.ClaimEstimate, "uploads bound with assumed L", "no claim"},
		// At T = 1 the convergent and uploads bounds are the composition bounds, with their L.
		{runs.ThreatFinal, theory.Bound{T: 1, Mu: 0.8, MuComposition: 0.8}, findings.ClaimTheory, "convergent bound", "violated"},
		{runs.ThreatFinal, theory.Bound{T: 1, Mu: 0.8, MuComposition: 0.8, MuCompositionAnyL: 8}, findings.ClaimEstimate, "convergent bound with assumed L", "no claim"},
		{runs.ThreatUploads, theory.Bound{T: 1, MuUploads: 0.8, MuUploadsComposition: 0.8, MuUploadsCompositionAnyL: 8}, findings.ClaimEstimate, "uploads bound with assumed L", "no claim"},
	} {
		sf := coupledScores(2000, 3, 9) // true mu 3: certifies about 2.76
		for i := range sf.Scores {
			sf.Scores[i].Threat = tc.threat
		}
		a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{}, func(int) *theory.Bound { b := tc.bound; return &b })
		if err != nil {
			t.Fatal(err)
		}
		f := a.Findings[0]
		if f.ClaimKind != tc.wantKind || f.ClaimSource != tc.wantSource || string(a.Headline.Status) != tc.wantStatus {
			t.Errorf("%s, composition %g: row judged against %q (%s), headline %s; want %q (%s), headline %s",
				tc.threat, f.Theory.MuComposition+f.Theory.MuUploadsComposition, f.ClaimSource, f.ClaimKind, a.Headline.Status, tc.wantSource, tc.wantKind, tc.wantStatus)
		}
	}
}

// A score file of ours records its experiment's config: `analyze --scores` of it divides the
// scores for the split method with the experiment's seed, as `analyze DIR` does (they took
// seeds 1 and 3 and reached two verdicts on one file); a file without a config takes 1, and a
// seed given on the command line wins.
func TestScoreFileSplitSeed(t *testing.T) {
	for _, tc := range []struct {
		config string
		given  uint64
		want   uint64
	}{
		{`{"seed":3,"audit":{}}`, 0, 3},
		{`{"seed":3,"audit":{"split_seed":7}}`, 0, 7},
		{`{"seed":3}`, 5, 5},
		{"", 0, 1},
	} {
		sf := coupledScores(200, 1, 4)
		sf.Meta.Config = []byte(tc.config)
		a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Method: audit.Split, Seed: tc.given}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Findings[0].Seed; got != tc.want {
			t.Errorf("config %s, --seed %d: split seed %d, want %d", tc.config, tc.given, got, tc.want)
		}
	}
}

// A score file alone judges no claim: when it records an experiment that claims one, the
// analysis says so, unless a claim is given (an experiment's own score file ended NO CLAIM,
// exit 0, without a word, where its directory was VIOLATED).
func TestScoreFileNamesItsExperimentsClaim(t *testing.T) {
	for _, tc := range []struct {
		config string
		claim  audit.Claim
		want   string
	}{
		{`{"name":"e","seed":3,"audit":{"claim_mu":0.3}}`, audit.Claim{}, `these scores come from the experiment "e", whose directory is judged against its claim mu 0.3 (audit.claim_mu) and its theory bounds, where its system has them; a score file alone is judged only against --claim-mu or --claim-eps`},
		{`{"name":"e","seed":3,"audit":{"claim_epsilon":2}}`, audit.Claim{}, "its claim epsilon 2 (audit.claim_epsilon)"},
		{`{"name":"e","seed":3,"audit":{}}`, audit.Claim{}, "the claim its accountant gives and its theory bounds, where its system has them"},
		{`{}`, audit.Claim{}, "these scores come from an experiment, whose directory"},
		{`{"name":"e","seed":3,"audit":{"claim_mu":0.3}}`, audit.Claim{Mu: 0.3}, ""},
		{"", audit.Claim{}, ""},
	} {
		sf := coupledScores(200, 1, 4)
		sf.Meta.Config = []byte(tc.config)
		a, err := AnalyzeScores(context.Background(), sf, AnalyzeOptions{Claim: tc.claim}, nil)
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(a.Headline.Notes, "\n")
		if tc.want != "" && !strings.Contains(notes, tc.want) || tc.want == "" && strings.Contains(notes, "score file alone") {
			t.Errorf("config %s, claim %+v: notes %q, want %q", tc.config, tc.claim, notes, tc.want)
		}
	}
}
