package attacks

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/runs"
)

// canaryRunFile writes 2 pairs x 2 worlds x rounds 0..2 of 3 canaries with known observations.
func canaryRunFile(t *testing.T, names ...string) *runs.Table {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs.arrow")
	meta := runs.Meta{Config: []byte(`{}`), DatasetHash: "h", ToolVersion: "t", Canaries: 3, CanaryStatNames: names}
	w, err := runs.Create(path, meta)
	if err != nil {
		t.Fatal(err)
	}
	for round := int32(0); round < 3; round++ {
		for run := int64(0); run < 4; run++ {
			r := runs.Row{RunID: run, PairID: run / 2, World: int8(run % 2), Round: round,
				CanaryIn: []bool{run%2 == 0, true, false}}
			for c := range names {
				v := make([]float64, 3)
				for j := range v {
					v[j] = float64(100*c) + 10*float64(run) + float64(j) + float64(round)/10
				}
				r.CanaryStats = append(r.CanaryStats, v)
			}
			r.CanaryStats[0][2] = math.NaN()
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tab, err := runs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tab.Close() })
	return tab
}

// TestScoreCanaries: every canary of every run at every round asked for, paired with the slot's
// own sample and oriented so that higher means included (loss without minus loss with the
// canary; margin with minus without), with the run's bits, NaN as -Inf, in the documented order
// (attack, round, run, canary). The observations are 100 c + x for statistic c, so the paired
// scores are the constants 200 (loss) and -200 (margin); the cosine attack scores x itself.
func TestScoreCanaries(t *testing.T) {
	tab := canaryRunFile(t, runs.CanaryLoss, runs.CanaryMargin, runs.CanaryLossAlt, runs.CanaryMarginAlt)
	if got := CanaryDefault(tab.Meta()); strings.Join(got, ",") != "canary-loss,canary-margin" {
		t.Errorf("CanaryDefault = %v", got)
	}
	if got := CanaryDefault(canaryRunFile(t, runs.CanaryLoss, runs.CanaryMargin).Meta()); len(got) != 0 {
		t.Errorf("CanaryDefault without the slots' own samples = %v", got)
	}
	scores, err := ScoreCanaries(context.Background(), tab, []string{CanaryMargin, CanaryLoss}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(scores) != 2*2*4*3 {
		t.Fatalf("%d scores, want 2 attacks x 2 rounds (1, 2) x 4 runs x 3 canaries", len(scores))
	}
	for i, s := range scores {
		attack := []string{CanaryMargin, CanaryLoss}[i/24]
		round := int32(1 + (i/12)%2)
		run := int64((i / 3) % 4)
		j := int32(i % 3)
		if s.Attack != attack || s.Round != round || s.RunID != run || s.Canary != j || s.Threat != runs.ThreatFinal {
			t.Fatalf("score %d: %+v, want attack %s round %d run %d canary %d", i, s, attack, round, run, j)
		}
		want := 200.0
		if attack == CanaryMargin {
			want = -200
		}
		if attack == CanaryLoss && j == 2 {
			want = math.Inf(-1)
		}
		// Tolerance: the observations x + 100 c are sums in float64, so their difference can
		// miss 200 by an ulp of 300.
		if !(math.Abs(s.Score-want) < 1e-12 || s.Score == want) || s.Included != []bool{run%2 == 0, true, false}[j] || s.World != int8(run%2) || s.PairID != run/2 {
			t.Fatalf("score %d: %+v, want score %v", i, s, want)
		}
	}
	one, err := ScoreCanaries(context.Background(), tab, []string{CanaryLoss}, []int{2})
	if err != nil || len(one) != 12 || one[0].Round != 2 {
		t.Errorf("round 2 only: %v, %d scores", err, len(one))
	}
}

func TestScoreCanariesErrors(t *testing.T) {
	tab := canaryRunFile(t, runs.CanaryLoss, runs.CanaryLossAlt)
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "no canary attack selected"},
		{[]string{"loss"}, `unknown canary attack "loss"`},
		{[]string{CanaryCos}, "needs the canary observation"},
		{[]string{CanaryMargin}, `needs the canary observation "canary_margin"`},
		{[]string{CanaryLoss, CanaryLoss}, "selected twice"},
	} {
		if _, err := ScoreCanaries(context.Background(), tab, tc.names, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.names, err, tc.want)
		}
	}
	if _, err := ScoreCanaries(context.Background(), tab, []string{CanaryLoss}, []int{7}); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Errorf("absent round: %v", err)
	}
	if CanaryThreat(CanaryLLR) != runs.ThreatAllIterates || CanaryThreat("loss") != "" || !IsCanaryAttack(CanaryCosMax) || IsCanaryAttack("loss") {
		t.Error("canary attack lookup")
	}
}

// TestScoreCanariesCosine: an attack without a paired sample scores the observation itself.
func TestScoreCanariesCosine(t *testing.T) {
	tab := canaryRunFile(t, runs.CanaryCosFinal)
	scores, err := ScoreCanaries(context.Background(), tab, []string{CanaryCos}, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scores {
		want := 10*float64(s.RunID) + float64(s.Canary) + 0.1
		if s.Canary == 2 {
			want = math.Inf(-1)
		}
		if s.Score != want || s.Threat != runs.ThreatFinal {
			t.Fatalf("%+v, want score %v", s, want)
		}
	}
}
