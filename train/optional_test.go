package train

import (
	"fmt"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// The engine takes the optional backend interfaces (compute.DeviceClipper, Fuser) when a
// backend has them; each must give exactly the bits of the host path it replaces. The CPU
// backend is run with its optional interfaces hidden in every combination the engine can meet
// (a GPU backend has DeviceClipper and Fuser but no HiddenStepper), in the deferred, fused and
// direct forms, and every recorded value must have the bits of the plain backend's (only
// compute.Backend: the host path). The full CPU backend must match too, except in the deferred
// form of a one-hidden-layer MLP, where its HiddenStepper runs instead; that fused step sums in
// another order and agrees with the op-by-op path to float32 rounding only (its contract in
// compute, and TestFusedStepMatchesClipStep).
func TestOptionalInterfacesKeepBits(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(4, 20, 12, 3, tgt, 9)
	base := mlpConfig()
	base.Rounds, base.LocalSteps, base.BatchSize, base.Checkpoints = 3, 3, 4, []int{1, 3}
	two := base
	two.Model = model.Config{Kind: "mlp", Hidden: []int{5, 4}, Activation: "softplus"}
	poisson := base
	poisson.Batching = "poisson"
	configs := []struct {
		name   string
		cfg    Config
		direct bool // not the deferred form: fused for fixed minibatches, else direct
		hidden bool // the CPU backend's HiddenStepper applies
	}{
		{"deferred", base, false, true}, {"fused", base, true, false}, {"deferred-2-layers", two, false, false},
		{"fused-2-layers", two, true, false}, {"direct-poisson", poisson, true, false},
	}
	type gpuLike struct {
		compute.Backend
		compute.DeviceClipper
		compute.Fuser
	}
	type clipOnly struct {
		compute.Backend
		compute.DeviceClipper
	}
	type fuseOnly struct {
		compute.Backend
		compute.Fuser
	}
	type plain struct{ compute.Backend }
	for _, tc := range configs {
		t.Run(tc.name, func(t *testing.T) {
			run := func(wrap func(*cpu.Backend) compute.Backend) []*checkpoint.Checkpoint {
				be := cpu.New(2)
				defer be.Close()
				cps, _ := trainEngine(t, wrap(be), Job{Config: tc.cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{First: 1, Count: 2}}, tc.direct)
				return cps
			}
			want := run(func(b *cpu.Backend) compute.Backend { return plain{b} })
			if !tc.hidden {
				sameBits(t, "full", run(func(b *cpu.Backend) compute.Backend { return b }), want)
			}
			for _, w := range []struct {
				name string
				wrap func(*cpu.Backend) compute.Backend
			}{
				{"gpu-like", func(b *cpu.Backend) compute.Backend { return gpuLike{b, b, b} }},
				{"clip-only", func(b *cpu.Backend) compute.Backend { return clipOnly{b, b} }},
				{"fuse-only", func(b *cpu.Backend) compute.Backend { return fuseOnly{b, b} }},
			} {
				sameBits(t, w.name, run(w.wrap), want)
			}
		})
	}
}

// sameBits fails unless every recorded value of got has want's bits.
func sameBits(t *testing.T, name string, got, want []*checkpoint.Checkpoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d checkpoints, want %d", name, len(got), len(want))
	}
	f64 := func(what string, a, b float64) bool {
		if math.Float64bits(a) != math.Float64bits(b) {
			t.Errorf("%s: %s: %v, want %v", name, what, a, b)
			return false
		}
		return true
	}
	for i, g := range got {
		w := want[i]
		for r := range w.Replicas {
			gr, wr := &g.Replicas[r], &w.Replicas[r]
			at := func(s string) string { return fmt.Sprintf("round %d replica %d %s", w.Round, r, s) }
			ok := f64(at("train loss"), gr.TrainLoss, wr.TrainLoss)
			for k := 0; k < 2 && ok; k++ {
				ok = f64(at("target loss"), gr.TargetLoss[k], wr.TargetLoss[k]) && f64(at("target margin"), gr.TargetMargin[k], wr.TargetMargin[k])
			}
			for k := range wr.Stats {
				ok = ok && f64(at("stat "+w.StatNames[k]), gr.Stats[k], wr.Stats[k])
			}
			for q := range wr.Params {
				ok = ok && f64(at(fmt.Sprintf("param %d", q)), float64(gr.Params[q]), float64(wr.Params[q]))
			}
			for q := range wr.Upload {
				ok = ok && f64(at(fmt.Sprintf("upload %d", q)), float64(gr.Upload[q]), float64(wr.Upload[q]))
			}
			if len(gr.CanaryStats) != len(wr.CanaryStats) {
				t.Fatalf("%s: %s: %d canary statistics, want %d", name, at("canaries"), len(gr.CanaryStats), len(wr.CanaryStats))
			}
			for k := range wr.CanaryStats {
				for j := range wr.CanaryStats[k] {
					ok = ok && f64(at(fmt.Sprintf("canary %s %d", w.CanaryStatNames[k], j)), gr.CanaryStats[k][j], wr.CanaryStats[k][j])
				}
			}
			if !ok {
				return
			}
		}
	}
}
