package train

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// trainForm trains on the CPU backend in deferred form (when it applies) or, with direct, in
// the direct form of a weight update per step.
func trainForm(t *testing.T, cfg Config, c, cp []*datasets.Dataset, tgt TargetInfo, pairs PairRange, direct bool) (cps []*checkpoint.Checkpoint, deferred bool) {
	t.Helper()
	be := cpu.New(2)
	defer be.Close()
	cps, e := trainEngine(t, be, Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs}, direct)
	_, deferred = e.chosen.(*deferredSteps)
	return cps, deferred
}

// engineUnderTest is an engine with the local-step form newEngine chose for it (chosen) beside
// the one it trained with (steps).
type engineUnderTest struct {
	*engine
	chosen localSteps
}

// trainEngine trains job on be and returns its checkpoints and engine; with direct, in the
// direct form of a weight update per step, whatever form the engine chose.
func trainEngine(t *testing.T, be compute.Backend, job Job, direct bool) ([]*checkpoint.Checkpoint, engineUnderTest) {
	t.Helper()
	e, err := newEngine(be, job)
	if err != nil {
		t.Fatal(err)
	}
	chosen := e.steps
	if direct {
		e.steps = e.chooseSteps(false)
	}
	rec := &memRecorder{}
	if err := e.train(context.Background(), rec, nil); err != nil {
		t.Fatal(err)
	}
	return rec.cps, engineUnderTest{e, chosen}
}

// The deferred form computes what the direct form computes, to float32 rounding: every
// recorded parameter, upload, loss and informed statistic, for every model shape, algorithm
// and option that changes its code path. The two sum the same terms in different orders, so
// they differ by a few float32 ulps (2^-24 = 6e-8 relative) per operation: after 4 rounds of 3
// steps by at most 6e-7 in parameters and losses and 3e-6 in the informed statistics, which
// scale a difference of nearly equal parameter vectors by m/sigma^2. The tolerance, 3e-5,
// leaves 10x; a wrong term (a missing correction, a wrong FedProx factor) moves values by 1e-3
// or more.
func TestDeferredMatchesDirect(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(6, 30, 12, 3, tgt, 5)
	base := mlpConfig()
	base.Rounds, base.LocalSteps, base.BatchSize, base.Checkpoints = 4, 3, 4, []int{2, 4}
	// The target sample is in client 1's batches in some rounds (the worlds' minibatches
	// differ: two replica groups) and not in others; checked below.
	cases := []struct {
		name string
		edit func(*Config, *TargetInfo)
	}{
		{"mlp-tanh", func(*Config, *TargetInfo) {}},
		{"softmax", func(c *Config, _ *TargetInfo) { c.Model = model.Config{Kind: "softmax"} }},
		{"mlp-softplus-2-layers", func(c *Config, _ *TargetInfo) {
			c.Model = model.Config{Kind: "mlp", Hidden: []int{5, 4}, Activation: "softplus"}
		}},
		{"fedprox-cyclic", func(c *Config, _ *TargetInfo) {
			c.Algorithm, c.ProxAlpha, c.Schedule = algo.FedProx, 0.8, "cyclic"
		}},
		{"relu-partial-participation", func(c *Config, _ *TargetInfo) {
			c.Model.Activation, c.Participants = "relu", 3
		}},
		{"window-below-clients", func(c *Config, _ *TargetInfo) { c.Model.Hidden = []int{12} }},
		{"chunks-no-clip", func(c *Config, _ *TargetInfo) { c.ChunkPairs, c.ClipNorm = 1, 0 }},
		{"one-step", func(c *Config, _ *TargetInfo) { c.LocalSteps = 1 }},
		{"client-level", func(_ *Config, tg *TargetInfo) { tg.WholeClient = true }},
		{"dp-fedavg", func(c *Config, _ *TargetInfo) {
			c.Algorithm, c.SamplingRate, c.NoiseMultiplier, c.UpdateClip, c.ServerLR = algo.DPFedAvg, 0.7, 0.5, 0.5, 1
			c.ClipNorm, c.NoiseStd, c.RecordUpload = 1, 0, false
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, tg := base, tgt
			tc.edit(&cfg, &tg)
			pairs := PairRange{First: 2, Count: 3}
			want, _ := trainForm(t, cfg, c, cp, tg, pairs, true)
			got, deferred := trainForm(t, cfg, c, cp, tg, pairs, false)
			if !deferred {
				t.Fatal("the deferred form does not apply to this configuration")
			}
			compareCheckpoints(t, got, want, 3e-5)
		})
	}
	// Both kinds of round occur: the target sample in one of client 1's minibatches or not.
	e, err := newEngine(cpu.New(1), Job{Config: base, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[bool]int{}
	ds := e.steps.(*deferredSteps).ds
	for r := 0; r < base.Rounds; r++ {
		e.gatherDeferred(ds, r, tgt.Client)
		seen[ds.split[ds.slot(tgt.Client)]]++
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("rounds with the target in a minibatch / without: %d / %d; need both", seen[true], seen[false])
	}
}

// compareCheckpoints fails unless every recorded value of got is within tol (relative to the
// larger magnitude, or absolute below 1) of want's.
func compareCheckpoints(t *testing.T, got, want []*checkpoint.Checkpoint, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d checkpoints, want %d", len(got), len(want))
	}
	var worst float64
	where := ""
	check := func(name string, a, b float64) {
		d := math.Abs(a-b) / max(1, math.Abs(a), math.Abs(b))
		if d > worst || math.IsNaN(d) {
			worst, where = d, fmt.Sprintf("%s: %g vs %g", name, a, b)
		}
	}
	for i, g := range got {
		w := want[i]
		for r := range g.Replicas {
			gr, wr := &g.Replicas[r], &w.Replicas[r]
			if gr.Diverged != wr.Diverged {
				t.Fatalf("round %d replica %d: diverged %v, want %v", g.Round, r, gr.Diverged, wr.Diverged)
			}
			name := func(s string) string { return fmt.Sprintf("round %d replica %d %s", g.Round, r, s) }
			check(name("train loss"), gr.TrainLoss, wr.TrainLoss)
			for k := 0; k < 2; k++ {
				check(name("target loss"), gr.TargetLoss[k], wr.TargetLoss[k])
				check(name("target margin"), gr.TargetMargin[k], wr.TargetMargin[k])
			}
			for k := range wr.Stats {
				check(name("stat "+g.StatNames[k]), gr.Stats[k], wr.Stats[k])
			}
			if len(gr.Params) != len(wr.Params) || len(gr.Upload) != len(wr.Upload) {
				t.Fatalf("%s: %d params and %d upload values, want %d and %d", name(""), len(gr.Params), len(gr.Upload), len(wr.Params), len(wr.Upload))
			}
			for q := range wr.Params {
				check(name(fmt.Sprintf("param %d", q)), float64(gr.Params[q]), float64(wr.Params[q]))
			}
			for q := range wr.Upload {
				check(name(fmt.Sprintf("upload %d", q)), float64(gr.Upload[q]), float64(wr.Upload[q]))
			}
		}
	}
	t.Logf("largest difference %.2e (%s)", worst, where)
	if worst > tol || math.IsNaN(worst) {
		t.Fatalf("largest difference %.2e > %.0e at %s", worst, tol, where)
	}
}

// DP-SGD clips every example: neither the fused nor the deferred step (whole-gradient
// clipping) may take its minibatches.
func TestDPSGDClipsPerExample(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 3}
	c, cp := synthWorlds(1, 30, 12, 3, tgt, 5)
	cfg := mlpConfig()
	cfg.Algorithm, cfg.Participants = algo.DPSGD, 0
	e, err := newEngine(cpu.New(1), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if ws, ok := e.steps.(*wholeSteps); !ok {
		t.Fatalf("dpsgd with fixed batches takes the deferred form (%T)", e.steps)
	} else if _, direct := ws.form.(*directSteps); !direct {
		t.Fatalf("dpsgd with fixed batches takes a whole-gradient step (%T)", ws.form)
	}
}
