package train

import (
	"context"
	"errors"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// groupingCPU is the CPU backend asking for grouped clients (compute.ClientBatcher, as the GPU
// backend does) and counting the grouped steps it is given.
type groupingCPU struct {
	*cpu.Backend
	batch          int
	grouped, steps int // grouped HiddenStep calls, and the client steps they held
}

func (g *groupingCPU) ClientBatch() int { return g.batch }

func (g *groupingCPU) HiddenStep(a *compute.HiddenStepArgs) {
	if a.Groups > 1 {
		g.grouped++
		g.steps += a.Groups
	}
	g.Backend.HiddenStep(a)
}

// Grouping clients' local steps (grouped.go) changes no bit of any result: with the CPU
// backend asking for groups of every size (2 and 3 clients, and a whole window), every
// recorded value (parameters, uploads, the informed statistics, the evaluations) has the bits
// of the run without groups. The cases move the target client to the first, a middle, the
// last client of a window and the last client (the groups end before it and resume after it),
// and cover FedProx, partial participation, one local step, no clipping, a client-level
// target, a learning rate that changes with the step, the DP-FedAvg family (which never groups), and two windows (10 clients, a window
// of 5; one window with one local step). The run must have grouped steps, so the groups cannot be skipped unnoticed;
// with whole windows, the target must have grouped exactly in the rounds where its minibatches
// do not split the worlds (its whole parameters then written out for its upload and shadow).
func TestGroupedClientsKeepBits(t *testing.T) {
	const clients = 10
	base := mlpConfig()
	base.Rounds, base.LocalSteps, base.BatchSize, base.Checkpoints = 3, 3, 4, []int{1, 3}
	fedprox := base
	fedprox.Algorithm, fedprox.ProxAlpha = algo.FedProx, 0.4
	partial := base
	partial.Participants = 6
	oneStep := base
	oneStep.LocalSteps = 1
	unclipped := base
	unclipped.ClipNorm = 0
	cyclic := base
	cyclic.Schedule = "cyclic"
	// The DP-FedAvg family materializes every client's update: it never groups clients, and
	// asking for groups changes nothing.
	dp := base
	dp.Algorithm, dp.NoiseStd, dp.ClipNorm = algo.DPFedAvg, 0, 0
	dp.SamplingRate, dp.NoiseMultiplier, dp.UpdateClip, dp.ServerLR = 0.5, 0.8, 0.3, 1
	dp.RecordUpload = false
	cases := []struct {
		name string
		cfg  Config
		tgt  TargetInfo
	}{
		{"target-1", base, TargetInfo{Client: 1, Index: 2}},
		{"target-0", base, TargetInfo{Client: 0, Index: 5}},
		{"target-7-window-end", base, TargetInfo{Client: 7, Index: 0}},
		{"target-9-last", base, TargetInfo{Client: 9, Index: 3}},
		{"fedprox", fedprox, TargetInfo{Client: 4, Index: 1}},
		{"participants-6", partial, TargetInfo{Client: 2, Index: 2}},
		{"one-step", oneStep, TargetInfo{Client: 3, Index: 4}},
		{"unclipped", unclipped, TargetInfo{Client: 5, Index: 2}},
		{"whole-client", base, TargetInfo{Client: 6, WholeClient: true}},
		{"cyclic-schedule", cyclic, TargetInfo{Client: 8, Index: 1}},
		{"dpfedavg-never-groups", dp, TargetInfo{Client: 3, Index: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, cp := synthWorlds(clients, 20, 12, 3, tc.tgt, 9)
			run := func(be compute.Backend) ([]*checkpoint.Checkpoint, engineUnderTest) {
				return trainEngine(t, be, Job{Config: tc.cfg, WorldC: c, WorldCPrime: cp, Target: tc.tgt, Pairs: PairRange{First: 1, Count: 2}}, false)
			}
			plain := cpu.New(2)
			defer plain.Close()
			want, e0 := run(plain)
			ds, ok := e0.steps.(*deferredSteps)
			if !ok || ds.groups != nil {
				t.Fatalf("the plain run's steps are %T (groups %v): want the deferred form without groups", e0.steps, ok && ds.groups != nil)
			}
			window := ds.ds.window
			if tc.cfg.LocalSteps > 1 && window != 5 {
				t.Fatalf("window of %d clients, want 5 (two windows of the 10 clients)", window)
			}
			for _, per := range []int{2, 3, clients} {
				be := &groupingCPU{Backend: cpu.New(2), batch: per * e0.R}
				got, e := run(be)
				g := e.steps.(*deferredSteps).groups
				grouping := tc.cfg.Algorithm != algo.DPFedAvg
				if grouping && (g == nil || g.c != min(per, window)) || !grouping && g != nil {
					t.Fatalf("%d clients a group asked: groups %+v (the family groups: %v)", per, g, grouping)
				}
				if grouping != (be.grouped > 0) {
					t.Fatalf("%d clients a group: %d grouped steps ran (the family groups: %v)", per, be.grouped, grouping)
				}
				t.Logf("%d clients a group: %d grouped steps of %d client steps", per, be.grouped, be.steps)
				if grouping && per == clients {
					// Whole windows: a window's clients form one group, except in the rounds where
					// the target's minibatches split the worlds: then it trains alone (each world's
					// replicas apart) and the clients before and after it group where there are
					// at least two of them.
					want := 0
					idx := make([]int32, tc.cfg.LocalSteps*tc.cfg.BatchSize)
					grouped := func(n int) int {
						if n >= 2 {
							return n
						}
						return 0
					}
					for r := 0; r < tc.cfg.Rounds; r++ {
						split := e.drawSplits(r, tc.tgt.Client, idx)
						for w0 := 0; w0 < clients; w0 += window {
							w1 := min(w0+window, clients)
							if c := tc.tgt.Client; split && c >= w0 && c < w1 {
								want += tc.cfg.LocalSteps * (grouped(c-w0) + grouped(w1-c-1))
							} else {
								want += tc.cfg.LocalSteps * grouped(w1-w0)
							}
						}
					}
					if be.steps != want {
						t.Errorf("whole windows: %d client steps grouped, want %d (the target grouped in the rounds it does not split)", be.steps, want)
					}
				}
				sameBits(t, "grouped", got, want)
				be.Close()
			}
		})
	}
}

// A backend that asks for fewer replica steps than two clients' worth, or an engine that
// trains pairs a chunk at a time, gets no groups.
func TestClientGroupsOnlyWhereTheyFit(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(4, 20, 12, 3, tgt, 9)
	cfg := mlpConfig()
	for _, tc := range []struct {
		name   string
		batch  int
		chunk  int
		groups bool
	}{
		{"two clients", 8, 0, true}, {"under two clients", 7, 0, false}, {"chunked", 8, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cfg
			cfg.ChunkPairs = tc.chunk
			be := &groupingCPU{Backend: cpu.New(1), batch: tc.batch}
			defer be.Close()
			e, err := newEngine(be, Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{First: 0, Count: 2}})
			if err != nil {
				t.Fatal(err)
			}
			ds := e.steps.(*deferredSteps)
			if got := ds.groups != nil; got != tc.groups {
				t.Fatalf("R %d, %d replica steps asked, chunk %d: groups %v, want %v", e.R, tc.batch, tc.chunk, got, tc.groups)
			}
		})
	}
}

// cancellingCPU cancels the training's context at its first grouped step.
type cancellingCPU struct {
	groupingCPU
	cancel context.CancelFunc
}

func (c *cancellingCPU) HiddenStep(a *compute.HiddenStepArgs) {
	if a.Groups > 1 {
		c.cancel()
	}
	c.groupingCPU.HiddenStep(a)
}

// A training cancelled while clients train grouped ends with the context's error.
func TestGroupedClientsStopWhenCancelled(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 2}
	c, cp := synthWorlds(6, 20, 12, 3, tgt, 9)
	cfg := mlpConfig()
	cfg.Rounds, cfg.LocalSteps, cfg.Checkpoints = 50, 3, []int{50}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	be := &cancellingCPU{groupingCPU: groupingCPU{Backend: cpu.New(1), batch: compute.MaxClientBatch}, cancel: cancel}
	defer be.Close()
	err := TrainOn(ctx, be, Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 2}, Recorder: &memRecorder{}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the context's cancellation", err)
	}
	if be.grouped == 0 {
		t.Fatal("no grouped step ran before the cancellation")
	}
}
