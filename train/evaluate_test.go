package train

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// Evaluate on the parameters a training run recorded gives back, bit for bit, the statistics it
// recorded beside them, whatever pairs it is given at once: for an MLP, a CNN and DP-FedAvg with
// a removed client (whose C' has one client fewer).
func TestEvaluateReproducesCheckpoints(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	mc, mcp := synthWorlds(3, 6, 5, 3, tgt, 4)
	ic, icp := imageWorlds(t, 2, 5, 1, 8, 8, 3, TargetInfo{Client: 0, Index: 1})
	dp := mlpConfig()
	dp.Algorithm, dp.NoiseStd, dp.NoiseMultiplier, dp.UpdateClip, dp.ServerLR, dp.Informed, dp.RecordUpload, dp.SamplingRate = algo.DPFedAvg, 0, 0.5, 1, 1, false, false, 1
	rc, rcp := synthWorlds(3, 6, 5, 3, TargetInfo{Client: 2, Index: 0}, 8)
	cases := []struct {
		name   string
		cfg    Config
		c, cp  []*datasets.Dataset
		target TargetInfo
	}{
		{"mlp", mlpConfig(), mc, mcp, tgt},
		{"cnn", tinyCNN(), ic, icp, TargetInfo{Client: 0, Index: 1}},
		{"remove-client", dp, rc, rcp[:2], TargetInfo{Client: 2, Absent: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			test := tc.c[0]
			job := Job{Config: tc.cfg, WorldC: tc.c, WorldCPrime: tc.cp, Target: tc.target, Test: test, Pairs: PairRange{First: 0, Count: 3}}
			rec := &memRecorder{}
			job.Recorder = rec
			if err := Train(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			for _, cp := range rec.cps {
				params := make([][]float32, len(cp.Replicas))
				for r := range params {
					params[r] = cp.Replicas[r].Params
				}
				// All three pairs at once, and pair 1 alone (as the importer's groups do).
				for _, pr := range []PairRange{{First: 0, Count: 3}, {First: 1, Count: 1}} {
					ej := job
					ej.Pairs = pr
					got, err := Evaluate(context.Background(), ej, cp.Round, params[2*pr.First:2*(pr.First+pr.Count)])
					if err != nil {
						t.Fatal(err)
					}
					for j, g := range got.Replicas {
						w := cp.Replicas[2*pr.First+j]
						if g.Pair != w.Pair || g.World != w.World || !sameFloat64(g.TrainLoss, w.TrainLoss) || !sameFloat64(g.TestAccuracy, w.TestAccuracy) ||
							g.TargetLoss != w.TargetLoss || g.TargetMargin != w.TargetMargin {
							t.Fatalf("round %d pairs %+v replica %d: evaluated %+v\nrecorded %+v", cp.Round, pr, j, summary(g), summary(w))
						}
					}
				}
			}
		})
	}
}

func sameFloat64(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func summary(s checkpoint.ReplicaState) []float64 {
	return []float64{float64(s.Pair), float64(s.World), s.TrainLoss, s.TestAccuracy, s.TargetLoss[0], s.TargetLoss[1], s.TargetMargin[0], s.TargetMargin[1]}
}

func TestEvaluateRefuses(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := synthWorlds(2, 4, 3, 2, tgt, 1)
	job := Job{Config: mlpConfig(), WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{Count: 1}}
	if _, err := Evaluate(context.Background(), job, 1, [][]float32{make([]float32, 5)}); err == nil || !strings.Contains(err.Error(), "two per pair") {
		t.Errorf("one vector for a pair: %v", err)
	}
	if _, err := Evaluate(context.Background(), job, 1, [][]float32{make([]float32, 5), make([]float32, 5)}); err == nil || !strings.Contains(err.Error(), "the model 38") {
		t.Errorf("wrong length: %v", err)
	}
	ext := job
	ext.Config.Model = model.Config{Kind: model.External}
	if _, err := Evaluate(context.Background(), ext, 1, [][]float32{{1}, {2}}); !errors.Is(err, model.ErrExternal) {
		t.Errorf("external model: %v", err)
	}
	if _, err := model.ParamCount(model.Config{Kind: model.External}, 3, 2); !errors.Is(err, model.ErrExternal) {
		t.Errorf("ParamCount of an external model: %v", err)
	}
	var p problems
	bad := Config{Model: model.Config{Kind: model.External, Hidden: []int{3}}}
	bad.checkModel(&p, nil, 3, 2)
	if len(p) != 1 || !strings.Contains(p[0].Error(), "external takes no other field") {
		t.Errorf("external with hidden widths: %v", p)
	}
}

// Without noise a round is a function of w_t: replaying it from the recorded w_t gives back the
// recorded w_{t+1} bit for bit in the replica's own world, and at round 0, where both worlds of a
// pair start from the same w_0, the partner's w_1 in the other world; the target's local result
// is the recorded upload. A configuration that draws minibatches or participants from seeds is
// refused with the reason.
func TestReplayRound(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(3, 6, 5, 3, tgt, 4)
	cfg := mlpConfig()
	cfg.Batching, cfg.NoiseStd, cfg.Informed, cfg.Checkpoints, cfg.Algorithm, cfg.ProxAlpha = "full", 0, false, []int{0, 1, 2, 3}, algo.FedProx, 0.5
	replayMatches(t, Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{First: 2, Count: 3}})
	cnn := tinyCNN()
	cnn.Batching, cnn.NoiseStd, cnn.Informed, cnn.Checkpoints = "full", 0, false, []int{0, 1, 2}
	ic, icp := imageWorlds(t, 2, 5, 1, 8, 8, 3, TargetInfo{Client: 0, Index: 1})
	replayMatches(t, Job{Config: cnn, WorldC: ic, WorldCPrime: icp, Target: TargetInfo{Client: 0, Index: 1}, Pairs: PairRange{Count: 2}})

	fixed := Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{Count: 1}}
	fixed.Config.NoiseStd, fixed.Config.Batching, fixed.Config.BatchSize = 0.1, "fixed", 4
	if _, err := ReplayRound(context.Background(), fixed, 0, nil); err == nil || !strings.Contains(err.Error(), "batching fixed") {
		t.Errorf("fixed minibatches: %v", err)
	}
	if err := Replayable(cfg, 3); err == nil || !strings.Contains(err.Error(), "noise_std is 0") {
		t.Errorf("no noise: %v", err)
	}
	// Under gradient adjacency the worlds hold the same data: a replay that swaps the data
	// gave both worlds one mean, and every imported informed statistic was 0.
	grad := fixed.Config
	grad.Batching, grad.GradientCanary = "full", &canary.Gradient{Norm: 1}
	if err := Replayable(grad, 3); err == nil || !strings.Contains(err.Error(), "adjacency kind gradient") {
		t.Errorf("gradient canary: %v", err)
	}
	// The DP-FedAvg family's noise is noise_multiplier's (noise_std is 0 by its rules): the
	// reason is the server's noise, not a missing one.
	dp := cfg
	dp.Algorithm, dp.NoiseMultiplier = algo.DPFedAvg, 1
	if err := Replayable(dp, 3); err == nil || !strings.Contains(err.Error(), "noises on the server") || strings.Contains(err.Error(), "noise_std is 0") {
		t.Errorf("dp-fedavg: %v, want the server's noise and no word of noise_std", err)
	}
}

// replayMatches trains job without noise and replays every recorded round.
func replayMatches(t *testing.T, job Job) {
	t.Helper()
	rec := &memRecorder{}
	job.Recorder = rec
	if err := Train(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	noisy := job
	noisy.Config.NoiseStd = 0.1 // the replay drops the noise whatever the config says
	// and takes every step whatever its norm: divergence is the trainer's record (with this
	// bound applied, every replayed mean was w_t).
	noisy.Config.DivergenceNorm = 1e-9
	for i := 0; i+1 < len(rec.cps); i++ {
		now, next := rec.cps[i], rec.cps[i+1]
		params := make([][]float32, len(now.Replicas))
		for r := range params {
			params[r] = now.Replicas[r].Params
		}
		rp, err := ReplayRound(context.Background(), noisy, now.Round, params)
		if err != nil {
			t.Fatal(err)
		}
		for r := range params {
			own := r % 2
			if !slices.Equal(rp.Mean[r][own], next.Replicas[r].Params) {
				t.Fatalf("round %d replica %d: replayed w_{t+1} differs from the recorded one", now.Round, r)
			}
			if !slices.Equal(rp.Target[r][own], next.Replicas[r].Upload) {
				t.Fatalf("round %d replica %d: replayed target result differs from the recorded upload", now.Round, r)
			}
			if now.Round == 0 && !slices.Equal(rp.Mean[r][1-own], next.Replicas[r^1].Params) {
				t.Fatalf("round 0 replica %d: replayed in the other world, w_1 differs from the partner's", r)
			}
			if slices.Equal(rp.Mean[r][0], rp.Mean[r][1]) {
				t.Fatalf("round %d replica %d: the worlds replay alike", now.Round, r)
			}
		}
	}
}
