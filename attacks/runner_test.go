package attacks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/model"
)

var softmaxSpec = simSpec{model: model.Config{Kind: "softmax"}, dim: 12, classes: 3, pairs: 30, steps: 2, eta: 0.5, seed: 11}

// TestExactRecoveryWithoutNoise: with sigma = 0 and a one-sample client, the analytic inversion
// recovers the sample up to float32 storage of the parameters (PSNR > 60 dB) and the bias-sign
// rule finds every label, for softmax regression and an MLP.
func TestExactRecoveryWithoutNoise(t *testing.T) {
	mlp := softmaxSpec
	mlp.model = model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"}
	for name, spec := range map[string]simSpec{"softmax": softmaxSpec, "mlp": mlp} {
		t.Run(name, func(t *testing.T) {
			spec.sigma = 0
			spec.pairs = 4
			path, env, _ := simulate(t, spec)
			res, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{"label", "inversion"}, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if got := summaryOf(t, res, "label").Means["label_accuracy"]; got != 1 {
				t.Errorf("label accuracy %v, want 1", got)
			}
			psnrCol := slices.Index(res.MetricNames, MetricPSNR)
			for _, s := range res.Scores {
				if s.Attack != "inversion" {
					continue
				}
				if p := s.Metrics[psnrCol]; !(p > 60) {
					t.Errorf("run %d (world %s): PSNR %.1f dB, want > 60", s.RunID, runs.WorldName(s.World), p)
				}
				if (s.World == runs.WorldC) != (s.Score > 0) {
					t.Errorf("run %d (world %s): inversion score %g has the wrong sign", s.RunID, runs.WorldName(s.World), s.Score)
				}
			}
		})
	}
}

// TestBatchLabelCounts: with a client of 6 samples, one full-batch step and no noise, the bias
// update is -eta (pbar - n/N) exactly, so the LLG-style count estimator recovers every count when
// pbar is known. Giving the world-C client's own samples as Env.Aux makes pbar exact in world C
// (accuracy 1); in world C' it is off by one sample's prediction (1/6 of a probability vector),
// which can move at most one count: accuracy >= 5/6. With the uniform guess for pbar instead the
// estimate must still get at least half the labels (observed 0.67-0.83 on these seeds) and stay
// below the exact-pbar accuracy.
func TestBatchLabelCounts(t *testing.T) {
	spec := softmaxSpec
	spec.sigma, spec.pairs, spec.extra, spec.steps = 0, 3, 5, 1
	path, env, client := simulate(t, spec)
	tb := openTable(t, path)
	uniform, err := Score(context.Background(), tb, env, Options{Attacks: []string{"label"}})
	if err != nil {
		t.Fatal(err)
	}
	env.Aux = client
	exact, err := Score(context.Background(), tb, env, Options{Attacks: []string{"label"}})
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(exact.MetricNames, "label_accuracy")
	for _, s := range exact.Scores {
		want := 1.0
		if s.World == runs.WorldCPrime {
			want = 5.0 / 6
		}
		if got := s.Metrics[col]; got < want-1e-12 {
			t.Errorf("run %d (world %s): label accuracy %v with exact pbar, want >= %v", s.RunID, runs.WorldName(s.World), got, want)
		}
	}
	u, e := summaryOf(t, uniform, "label").Means["label_accuracy"], summaryOf(t, exact, "label").Means["label_accuracy"]
	t.Logf("label accuracy: uniform pbar %.3f, exact pbar %.3f", u, e)
	if !(u >= 0.5) || u > e {
		t.Errorf("label accuracy %v with uniform pbar, %v with exact: want 0.5 <= uniform <= exact", u, e)
	}
}

// TestNoiseWeakensAttacks: as sigma grows, every attack's AUC falls. At sigma = 1e-3 the signal
// (parameter moves of order 0.1) dominates and AUC is near 1; at sigma = 10 it is chance, whose
// AUC over 30 + 30 runs has standard deviation about 0.075. We assert AUC(low) >= AUC(high) +
// 0.25 and, between neighbouring levels, no rise above 0.15 (two standard deviations).
func TestNoiseWeakensAttacks(t *testing.T) {
	sigmas := []float64{1e-3, 0.1, 1, 10}
	names := []string{"informed-all", "loss", "margin", "lira-offline", "lira-online", "grad-align", "linear", "label", "inversion"}
	auc := map[string][]float64{}
	var labelAcc, psnrs []float64
	for _, sigma := range sigmas {
		spec := softmaxSpec
		spec.sigma = sigma
		path, env, _ := simulate(t, spec)
		res, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: names, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			auc[n] = append(auc[n], summaryOf(t, res, n).AUC)
		}
		labelAcc = append(labelAcc, summaryOf(t, res, "label").Means["label_accuracy"])
		psnrs = append(psnrs, summaryOf(t, res, "inversion").Means[MetricPSNR])
	}
	for _, n := range names {
		a := auc[n]
		if !(a[0] >= a[len(a)-1]+0.25) {
			t.Errorf("%s: AUC %v at sigma %v: does not fall with noise", n, a, sigmas)
		}
		for i := 1; i < len(a); i++ {
			if a[i] > a[i-1]+0.15 {
				t.Errorf("%s: AUC rises from %.3f to %.3f between sigma %g and %g", n, a[i-1], a[i], sigmas[i-1], sigmas[i])
			}
		}
		if a[0] < 0.9 {
			t.Errorf("%s: AUC %.3f at sigma %g, want >= 0.9 with almost no noise", n, a[0], sigmas[0])
		}
	}
	for i := 1; i < len(sigmas); i++ {
		if labelAcc[i] > labelAcc[i-1] || psnrs[i] >= psnrs[i-1] {
			t.Errorf("label accuracy %v and PSNR %v must fall as sigma grows through %v", labelAcc, psnrs, sigmas)
			break
		}
	}
}

func sameResults(a, b *Result) bool {
	eq := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	if !slices.Equal(a.MetricNames, b.MetricNames) || len(a.Scores) != len(b.Scores) || len(a.Summary) != len(b.Summary) {
		return false
	}
	for i, s := range a.Scores {
		o := b.Scores[i]
		if s.RunID != o.RunID || s.PairID != o.PairID || s.World != o.World || s.Round != o.Round ||
			s.Attack != o.Attack || s.Threat != o.Threat || !eq(s.Score, o.Score) || !slices.EqualFunc(s.Metrics, o.Metrics, eq) {
			return false
		}
	}
	for i, m := range a.Summary {
		o := b.Summary[i]
		if m.Attack != o.Attack || m.Round != o.Round || m.Runs != o.Runs || m.Missing != o.Missing ||
			!eq(m.AUC, o.AUC) || !eq(m.Accuracy, o.Accuracy) || len(m.Means) != len(o.Means) {
			return false
		}
		for k, v := range m.Means {
			if !eq(v, o.Means[k]) {
				return false
			}
		}
	}
	return true
}

// TestWorkersDoNotChangeScores runs every attack with 1, 3 and 8 workers and demands
// bit-identical results, and checks the documented order (attack, round, run id).
func TestWorkersDoNotChangeScores(t *testing.T) {
	spec := softmaxSpec
	spec.sigma = 0.05
	spec.pairs = 12
	path, env, _ := simulate(t, spec)
	// grad-canary reads the direction of a gradient canary, which these runs lack: a
	// direction given here lets it score them like the rest.
	env.Config.GradientCanary = &canary.Gradient{Norm: 1, Direction: canary.GaussianDirection}
	tb := openTable(t, path)
	var all []string
	for _, info := range Names() {
		if fileLacks(info.Needs, tb.Meta()) == "" {
			all = append(all, info.Name)
		}
	}
	var ref *Result
	for _, w := range []int{1, 3, 8} {
		res, err := Score(context.Background(), tb, env, Options{Attacks: all, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = res
			continue
		}
		if !sameResults(ref, res) {
			t.Errorf("results with %d workers differ from those with 1", w)
		}
	}
	// Learned attacks do not score their shadow pairs (every 5th: 2 of 12 pairs).
	want := 0
	for _, name := range all {
		info, _ := Lookup(name)
		want += 2 * spec.pairs
		if info.Info().Learned {
			want -= 2 * (spec.pairs / 5)
		}
	}
	if len(ref.Scores) != want {
		t.Fatalf("%d scores, want %d", len(ref.Scores), want)
	}
	for i := 1; i < len(ref.Scores); i++ {
		a, b := ref.Scores[i-1], ref.Scores[i]
		ia, ib := slices.Index(all, a.Attack), slices.Index(all, b.Attack)
		if ia > ib || (ia == ib && (a.Round > b.Round || (a.Round == b.Round && a.RunID >= b.RunID))) {
			t.Fatalf("scores %d and %d out of order: %+v, %+v", i-1, i, a, b)
		}
	}
}

// spyLearner records which runs and pairs it was fitted on and scores 1 any run it saw or whose
// pair partner it saw, 0 otherwise.
type spyLearner struct{ fits *atomic.Int32 }

func (spyLearner) Info() Info {
	return Info{Name: "spy", Threat: runs.ThreatFinal, Learned: true}
}

func (spyLearner) Observe(_ *Env, obs *Observation) (Observed, error) {
	return Observed{Features: []float64{float64(obs.RunID), float64(obs.PairID)}}, nil
}

func (s spyLearner) Fit(_ *Env, train []Example) (func([]float64) float64, error) {
	s.fits.Add(1)
	runsSeen, pairsSeen := map[float64]bool{}, map[float64]bool{}
	for _, e := range train {
		runsSeen[e.Features[0]], pairsSeen[e.Features[1]] = true, true
	}
	return func(f []float64) float64 {
		if runsSeen[f[0]] || pairsSeen[f[1]] {
			return 1
		}
		// Encode the training set size so the test can tell the fit saw the other folds.
		return -float64(len(train))
	}, nil
}

// TestShadowPairsAreNeverScored: issue 13 item 4b. A learned attack is fitted once per round on
// the shadow pairs (every 5th pair in pair-id order, here pairs at positions 4 and 9 of 13) and
// scores only the other pairs, with that one scorer: no scored run was seen by the fit, the
// shadow pairs are absent from the scores, and the summary counts only the audited runs.
func TestShadowPairsAreNeverScored(t *testing.T) {
	spec := softmaxSpec
	spec.sigma, spec.pairs = 0.1, 13
	path, env, _ := simulate(t, spec)
	var fits atomic.Int32
	env.cache = nil
	e := env
	res, err := score(context.Background(), openTable(t, path), &e, []Attack{spyLearner{&fits}}, Options{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if fits.Load() != 1 {
		t.Errorf("%d fits, want one per round", fits.Load())
	}
	scored := map[int64]bool{}
	for _, s := range res.Scores {
		scored[s.PairID] = true
		if s.Score == 1 {
			t.Errorf("run %d (pair %d) was scored by a model fitted on it or its pair", s.RunID, s.PairID)
		}
		if s.Score != -4 { // 2 shadow pairs, 4 runs
			t.Errorf("run %d scored by a fit on %v runs, want 4", s.RunID, -s.Score)
		}
	}
	if len(res.Scores) != 22 || len(scored) != 11 {
		t.Errorf("%d scores of %d pairs, want 22 of 11", len(res.Scores), len(scored))
	}
	if len(res.Summary) != 1 || res.Summary[0].Runs != 22 {
		t.Errorf("summary %+v, want 22 runs", res.Summary)
	}
	// A plain attack on the same file still scores every pair.
	res, err = Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{"loss"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scores) != 26 {
		t.Errorf("loss: %d scores, want 26", len(res.Scores))
	}
}

func TestShadowPairs(t *testing.T) {
	obs := make([]Observation, 0, 2*1200)
	for p := int64(1199); p >= 0; p-- { // any order: the pick follows pair ids
		obs = append(obs, Observation{PairID: 3 * p}, Observation{PairID: 3 * p})
	}
	for _, tc := range []struct {
		k, limit, want int
		first, last    int64
	}{
		{0, 0, 240, 3 * 4, 3 * 1199},
		{5, 100, 100, 3 * 4, 3 * 499},
		{2, 0, 500, 3 * 1, 3 * 999},
	} {
		sh, err := shadowPairs(obs, tc.k, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(sh) != tc.want || !sh[tc.first] || !sh[tc.last] || sh[tc.first-3] {
			t.Errorf("k=%d limit=%d: %d shadow pairs (first %v, last %v), want %d from %d to %d", tc.k, tc.limit, len(sh), sh[tc.first], sh[tc.last], tc.want, tc.first, tc.last)
		}
	}
	if _, err := shadowPairs(obs, 1, 0); err == nil {
		t.Error("k = 1 accepted")
	}
}

func TestMissingColumnsAreNamed(t *testing.T) {
	cases := []struct {
		name   string
		mod    func(*simSpec)
		attack string
		want   string
	}{
		{"no params", func(s *simSpec) { s.noParams, s.noUpload = true, true }, "grad-align", "params"},
		{"no upload", func(s *simSpec) { s.noUpload = true }, "label", "upload"},
		{"no stats", func(s *simSpec) { s.noStats = true }, "loss", runs.StatTargetLossC},
		{"no informed", func(s *simSpec) { s.noStats = true }, "informed-all", runs.StatLLRAll},
		{"no round T-1", func(s *simSpec) { s.noRound0 = true }, "inversion", "no checkpoint at round 0"},
		{"quadratic labels", func(s *simSpec) { s.model = model.Config{Kind: "quadratic", Curvature: 1} }, "label", "softmax over classes"},
		{"unknown", func(*simSpec) {}, "dlg", "unknown attack"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := softmaxSpec
			spec.pairs, spec.sigma = 2, 0.1
			tc.mod(&spec)
			path, env, _ := simulate(t, spec)
			_, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{tc.attack}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestMissingUploadScoresZero: a run whose client did not take part in round T-1 has no upload;
// it gets score 0 and is counted as missing, and the other runs are scored as usual.
func TestMissingUploadScoresZero(t *testing.T) {
	spec := softmaxSpec
	spec.pairs, spec.sigma = 6, 0.001
	spec.skipUpload = func(p int) bool { return p%3 == 0 }
	path, env, _ := simulate(t, spec)
	res, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{"label"}})
	if err != nil {
		t.Fatal(err)
	}
	if m := summaryOf(t, res, "label"); m.Missing != 4 || m.Runs != 12 {
		t.Errorf("%d missing of %d, want 4 of 12", m.Missing, m.Runs)
	}
	for _, s := range res.Scores {
		if (s.PairID%3 == 0) != (s.Score == 0) {
			t.Errorf("run %d of pair %d: score %g", s.RunID, s.PairID, s.Score)
		}
	}
}

func TestDefaultFollowsColumns(t *testing.T) {
	cases := []struct {
		meta runs.Meta
		want []string
	}{
		{runs.Meta{StatNames: []string{runs.StatLLRAll, runs.StatLLRLast, runs.StatMu2}}, []string{"informed-all", "informed-last"}},
		{runs.Meta{StatNames: []string{runs.StatTargetLossC, runs.StatTargetLossCPrime}}, []string{"loss"}},
		{runs.Meta{HasParams: true}, []string{"grad-align", "linear", "param-lda", "param-cosine"}},
		{runs.Meta{HasParams: true, HasUpload: true}, []string{"grad-align", "linear", "label", "inversion", "invgrad", "param-lda", "param-cosine", "upload-lda"}},
		{runs.Meta{HasUpload: true}, nil},
		// The four target statistics support both LiRAs; only lira-online is in the default set
		// (lira-offline would repeat its row: by name only).
		{runs.Meta{StatNames: []string{runs.StatTargetLossC, runs.StatTargetLossCPrime, runs.StatTargetMarginC, runs.StatTargetMarginCPrime}},
			[]string{"loss", "margin", "lira-online"}},
	}
	for _, tc := range cases {
		if got := Default(tc.meta); !slices.Equal(got, tc.want) {
			t.Errorf("Default(%+v) = %v, want %v", tc.meta, got, tc.want)
		}
	}
}

// TestWriteScoresRoundTrip writes a result and reads it back through runs.ReadScoreFile.
func TestWriteScoresRoundTrip(t *testing.T) {
	spec := softmaxSpec
	spec.pairs, spec.sigma = 3, 0.1
	path, env, _ := simulate(t, spec)
	tb := openTable(t, path)
	res, err := Score(context.Background(), tb, env, Options{Attacks: []string{"loss", "inversion"}})
	if err != nil {
		t.Fatal(err)
	}
	out := path + ".scores.arrow"
	if err := WriteScores(out, tb.Meta(), "test", res); err != nil {
		t.Fatal(err)
	}
	sf, err := runs.ReadScoreFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sf.Meta.MetricNames, res.MetricNames) || len(sf.Scores) != len(res.Scores) {
		t.Fatalf("read back %v and %d scores, wrote %v and %d", sf.Meta.MetricNames, len(sf.Scores), res.MetricNames, len(res.Scores))
	}
	for i, s := range sf.Scores {
		if s.Score != res.Scores[i].Score || s.Attack != res.Scores[i].Attack || s.Threat != res.Scores[i].Threat {
			t.Errorf("score %d: read %+v, wrote %+v", i, s, res.Scores[i])
		}
	}
}

// TestQuadraticModel: on the quadratic instance of docs/theory.md (labels unused, loss
// (a/2)||w||^2 - <x, w>) the final-model attacks separate the worlds at small noise, and the
// label and inversion attacks are refused for lack of a softmax.
func TestQuadraticModel(t *testing.T) {
	spec := softmaxSpec
	spec.model = model.Config{Kind: "quadratic", Curvature: 0.5}
	spec.classes, spec.sigma, spec.pairs = 0, 0.01, 10
	path, env, _ := simulate(t, spec)
	tb := openTable(t, path)
	names := []string{"informed-all", "loss", "margin", "lira-online", "grad-align", "linear"}
	res, err := Score(context.Background(), tb, env, Options{Attacks: names})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if m := summaryOf(t, res, n); !(m.AUC >= 0.9) {
			t.Errorf("%s: AUC %.3f on the quadratic model at sigma %g, want >= 0.9", n, m.AUC, spec.sigma)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	spec := softmaxSpec
	spec.pairs, spec.sigma = 2, 0.1
	path, env, _ := simulate(t, spec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Score(ctx, openTable(t, path), env, Options{Attacks: []string{"loss"}}); err == nil {
		t.Error("cancelled context: no error")
	}
}

// infAttack scores world-C runs of even pairs +Inf, of odd pairs 1, world C' runs -Inf on pair
// 1 and 0 otherwise: what an attack whose statistic saturates gives.
type infAttack struct{}

func (infAttack) Info() Info { return Info{Name: "inf-test", Threat: runs.ThreatFinal} }
func (infAttack) Observe(_ *Env, obs *Observation) (Observed, error) {
	switch {
	case obs.World == runs.WorldC && obs.PairID%2 == 0:
		return Observed{Score: math.Inf(1)}, nil
	case obs.World == runs.WorldC:
		return Observed{Score: 1}, nil
	case obs.PairID == 1:
		return Observed{Score: math.Inf(-1)}, nil
	}
	return Observed{Score: 0}, nil
}

// The runner writes an attack's infinite scores as finite ones of the same rank (just beyond the
// round's finite scores), neither as 0 among the others nor dropped, and does not count them
// as non-finite; the AUC is that of the infinite scores.
func TestRunnerKeepsInfiniteRanks(t *testing.T) {
	registry = append(registry, infAttack{})
	defer func() { registry = registry[:len(registry)-1] }()
	spec := softmaxSpec
	spec.pairs = 6
	path, env, _ := simulate(t, spec)
	res, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{"inf-test"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Scores {
		var want float64
		switch {
		case s.World == runs.WorldC && s.PairID%2 == 0:
			want = 2 // above the largest finite score, 1
		case s.World == runs.WorldC:
			want = 1
		case s.PairID == 1:
			want = -1 // below the smallest finite score, 0
		}
		if s.Score != want {
			t.Errorf("round %d pair %d world %d: score %v, want %v", s.Round, s.PairID, s.World, s.Score, want)
		}
	}
	if m := summaryOf(t, res, "inf-test"); m.NonFinite != 0 || m.Runs != 12 || m.AUC != 1 {
		t.Errorf("summary %+v: want 12 runs, none non-finite, AUC 1", m)
	}
}

// The attack stage said nothing between "scoring [...]" and its score file (invgrad at 20
// checkpoints: two minutes); each attack now says when it has observed every run, in the
// order they finish, from several workers at once (clean under -race), without changing a
// score.
func TestScoreReportsProgress(t *testing.T) {
	path, env, _ := simulate(t, softmaxSpec)
	var lines []string
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	names := []string{"label", "inversion", "loss"}
	quiet, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: names, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	loud, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: names, Workers: 4, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, l := range lines {
		if strings.Contains(l, " done: ") && strings.Contains(l, fmt.Sprintf("of %d attacks)", len(names))) {
			done++
		}
	}
	if done != len(names) {
		t.Errorf("%d lines of attacks done, want %d: %q", done, len(names), lines)
	}
	if len(quiet.Scores) != len(loud.Scores) {
		t.Fatalf("%d scores with progress, %d without", len(loud.Scores), len(quiet.Scores))
	}
	for i := range quiet.Scores {
		if quiet.Scores[i].Score != loud.Scores[i].Score {
			t.Fatalf("score %d: %v with progress, %v without", i, loud.Scores[i].Score, quiet.Scores[i].Score)
		}
	}
}

// TestUnfittableRoundScoredMissing: when the target client sat out the round in all but one
// shadow pair, upload-lda cannot be fitted there. Its runs at that round are scored as missing
// and the stage says so; the other attacks keep their scores (the fit's error failed the whole
// stage, every attack's scores lost, under client sampling with few pairs).
func TestUnfittableRoundScoredMissing(t *testing.T) {
	spec := softmaxSpec
	spec.sigma = 0.1
	// Shadow pairs are every 5th (4, 9, ..., 29): only pair 29 has the upload.
	spec.skipUpload = func(p int) bool { return p%5 == 4 && p != 29 || p%7 == 0 }
	path, env, _ := simulate(t, spec)
	var lines []string
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	res, err := Score(context.Background(), openTable(t, path), env, Options{Attacks: []string{"loss", "label", "upload-lda"}, Workers: 3, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	if m := summaryOf(t, res, "upload-lda"); m.Runs != 48 || m.Missing != m.Runs {
		t.Errorf("upload-lda: %d missing of %d runs, want all 48 (24 audited pairs)", m.Missing, m.Runs)
	}
	for _, s := range res.Scores {
		if s.Attack == "upload-lda" && s.Score != 0 {
			t.Errorf("upload-lda scored run %d %g, want 0", s.RunID, s.Score)
		}
	}
	if m := summaryOf(t, res, "loss"); m.Missing != 0 || m.Runs != 60 {
		t.Errorf("loss: %d missing of %d runs, want 0 of 60", m.Missing, m.Runs)
	}
	if m := summaryOf(t, res, "label"); m.Missing == m.Runs {
		t.Errorf("label: every run missing")
	}
	said := strings.Join(lines, "\n")
	if !strings.Contains(said, "upload-lda at round 1 cannot be fitted on its 6 shadow pairs") || !strings.Contains(said, "have 1 of C and 1 of C'") {
		t.Errorf("log does not say why upload-lda's runs are missing:\n%s", said)
	}
}

// divergedShadows is LiRA online whose shadow pairs (every 5th) all diverged: their statistic
// is NaN, so its fit has no shadow run to use.
type divergedShadows struct{ liraAttack }

func (d divergedShadows) Info() Info {
	info := d.liraAttack.Info()
	info.Needs = Needs{}
	return info
}

func (d divergedShadows) Observe(env *Env, obs *Observation) (Observed, error) {
	if obs.PairID%5 == 4 {
		return Observed{Features: []float64{math.NaN()}}, nil
	}
	return Observed{Features: []float64{float64(obs.World)}}, nil
}

// TestUnfittableLearnerScoredMissing: the same for a fitted (Learner) attack, LiRA, whose
// shadow runs all diverged.
func TestUnfittableLearnerScoredMissing(t *testing.T) {
	spec := softmaxSpec
	spec.sigma = 0.1
	path, env, _ := simulate(t, spec)
	e := env
	res, err := score(context.Background(), openTable(t, path), &e, []Attack{divergedShadows{liraAttack{online: true}}}, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Summary) != 1 || res.Summary[0].Runs != 48 || res.Summary[0].Missing != 48 {
		t.Errorf("summary %+v, want 48 runs, all missing", res.Summary)
	}
}

func TestConstantScores(t *testing.T) {
	x, y := []float32{0.1, 0.2}, []float32{0.1, 0.3}
	for _, tc := range []struct {
		name        string
		eps, epsP   datasets.Sample
		wantSkipped []string
	}{
		{"relabel: same features", datasets.Sample{Features: x, Label: 1}, datasets.Sample{Features: x, Label: 2}, []string{"inversion", "invgrad"}},
		{"same label", datasets.Sample{Features: x, Label: 1}, datasets.Sample{Features: y, Label: 1}, []string{"label"}},
		{"a copy", datasets.Sample{Features: x, Label: 1}, datasets.Sample{Features: x, Label: 1}, []string{"label", "inversion", "invgrad"}},
		{"different", datasets.Sample{Features: x, Label: 1}, datasets.Sample{Features: y, Label: 2}, nil},
		{"removal", datasets.Sample{Features: x, Label: 1}, datasets.Sample{}, nil},
	} {
		if got := skipNames(ConstantScores(tc.eps, tc.epsP)); !slices.Equal(got, tc.wantSkipped) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.wantSkipped)
		}
	}
}

// skipNames is the names of skips, in order.
func skipNames(s []Skip) []string {
	var out []string
	for _, k := range s {
		out = append(out, k.Name)
	}
	return out
}
