package train

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
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

func summary(s ReplicaState) []float64 {
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
	ext.Config.Model = ModelConfig{Kind: External}
	if _, err := Evaluate(context.Background(), ext, 1, [][]float32{{1}, {2}}); !errors.Is(err, ErrExternal) {
		t.Errorf("external model: %v", err)
	}
	if _, err := ParamCount(ModelConfig{Kind: External}, 3, 2); !errors.Is(err, ErrExternal) {
		t.Errorf("ParamCount of an external model: %v", err)
	}
	var p problems
	bad := Config{Model: ModelConfig{Kind: External, Hidden: []int{3}}}
	bad.checkModel(&p, nil, 3, 2)
	if len(p) != 1 || !strings.Contains(p[0].Error(), "external takes no other field") {
		t.Errorf("external with hidden widths: %v", p)
	}
}
