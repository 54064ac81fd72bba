package train

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

func collectByRound(cps ...[]*checkpoint.Checkpoint) map[int][]checkpoint.ReplicaState {
	out := map[int][]checkpoint.ReplicaState{}
	for _, list := range cps {
		for _, cp := range list {
			out[cp.Round] = append(out[cp.Round], cp.Replicas...)
		}
	}
	return out
}

func sameState(a, b checkpoint.ReplicaState) string {
	eq := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || (math.IsNaN(x) && math.IsNaN(y))
	}
	switch {
	case a.Pair != b.Pair || a.World != b.World || a.Seed != b.Seed:
		return "identity"
	case !slices.Equal(a.Params, b.Params):
		return "params"
	case !slices.Equal(a.Upload, b.Upload):
		return "upload"
	case !slices.EqualFunc(a.Stats, b.Stats, eq):
		return fmt.Sprintf("stats %v vs %v", a.Stats, b.Stats)
	case !eq(a.TrainLoss, b.TrainLoss) || !eq(a.TargetLoss[0], b.TargetLoss[0]) || !eq(a.TargetLoss[1], b.TargetLoss[1]):
		return "losses"
	case a.Diverged != b.Diverged:
		return "diverged"
	case !slices.Equal(a.CanaryIn, b.CanaryIn) || !slices.EqualFunc(a.CanaryStats, b.CanaryStats, func(x, y []float64) bool { return slices.EqualFunc(x, y, eq) }):
		return "canaries"
	}
	return ""
}

// TestBroadInvariance: the paths TestShardInvariance and TestGroupInvariance do not cover (the
// deferred form with partial participation and a window of clients, the fused form, the Poisson
// mixture, Laplace and staircase noise, the gradient canary, the DP-FedAvg family with every
// adjacency, the crafted update, pretraining, record canaries with Poisson batches, one-run
// gradient canaries) give the same bits for any split into shards, groups, chunks and threads.
func TestBroadInvariance(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 0}
	c, cp := synthWorlds(4, 8, 5, 3, tgt, 8)
	cW, cpW := synthWorlds(4, 8, 12, 3, tgt, 8)
	mk := func(edit func(*Config)) Config {
		cfg := mlpConfig()
		cfg.Rounds, cfg.Checkpoints = 3, []int{0, 1, 2, 3}
		edit(&cfg)
		return cfg
	}
	dp := func(edit func(*Config)) Config {
		cfg := dpConfig()
		cfg.Model = model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"}
		cfg.NoiseMultiplier, cfg.Informed = 1, true
		cfg.Rounds, cfg.Checkpoints = 3, []int{1, 3}
		edit(&cfg)
		return cfg
	}
	remove := TargetInfo{Client: 1, WholeClient: true, Absent: true}
	cpRemove := slices.Delete(slices.Clone(c), 1, 2)
	cases := []struct {
		name  string
		cfg   Config
		c, cp []*datasets.Dataset
		tgt   TargetInfo
	}{
		{"deferred-partial", mk(func(c *Config) { c.Participants = 2; c.BatchSize = 3 }), cW, cpW, tgt},
		{"fused-partial", mk(func(c *Config) { c.Participants = 3; c.BatchSize = 4; c.LocalSteps = 3 }), c, cp, tgt},
		{"poisson-mixture", mk(func(c *Config) { c.Batching = algo.Poisson; c.BatchSize = 3; c.Participants = 3 }), c, cp, tgt},
		{"laplace", mk(func(c *Config) { c.Mechanism = algo.Laplace; c.Informed = false; c.Participants = 3 }), c, cp, tgt},
		{"staircase-full", mk(func(c *Config) {
			c.Mechanism, c.StaircaseEpsilon, c.Informed, c.Batching, c.BatchSize = algo.Staircase, 1, false, algo.Full, 0
		}), c, cp, tgt},
		{"gradient-canary", mk(func(c *Config) {
			c.GradientCanary = &canary.Gradient{Norm: 3, Direction: canary.GaussianDirection}
		}), c, cp, tgt},
		{"dp-fedavg", dp(func(c *Config) {}), c, cp, TargetInfo{Client: 1, WholeClient: true}},
		{"dp-fedavg-remove-laplace", dp(func(c *Config) { c.Mechanism = algo.Laplace }), c, cpRemove, remove},
		{"dp-fedavg-fixed-deferred", dp(func(c *Config) { c.Batching, c.BatchSize = algo.Fixed, 3 }), cW, cpW, tgt},
		{"crafted", dp(func(c *Config) { c.CraftedUpdate = &canary.Update{Direction: canary.GaussianDirection} }), c, cpRemove, remove},
		{"pretrain", mk(func(c *Config) { c.Pretrain = &Pretrain{Rounds: 2} }), c, cp, tgt},
		{"record-canaries-poisson", mk(func(c *Config) {
			c.Batching, c.BatchSize, c.Informed = algo.Poisson, 3, false
			c.Canaries = &canary.Config{Count: 6, Kind: canary.Dirac}
		}), c, cp, tgt},
		{"gradient-canaries", mk(func(c *Config) {
			c.Batching, c.BatchSize, c.Informed = algo.Full, 0, false
			c.Canaries = &canary.Config{Count: 6, Kind: canary.Gradients, Norm: 2, Client: 2}
		}), c, cp, tgt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Threads = 2
			whole := collectByRound(run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 6}))
			cfg.Threads, cfg.GroupPairs, cfg.ChunkPairs = 1, 1, 0
			a := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 1})
			cfg.Threads, cfg.GroupPairs, cfg.ChunkPairs = 3, 2, 1
			b := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{1, 3})
			cfg.Threads, cfg.GroupPairs, cfg.ChunkPairs = 8, 0, 2
			d := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{4, 2})
			parts := collectByRound(a, b, d)
			for round, reps := range whole {
				if len(parts[round]) != len(reps) {
					t.Fatalf("round %d: %d replicas vs %d", round, len(parts[round]), len(reps))
				}
				for r := range reps {
					if why := sameState(reps[r], parts[round][r]); why != "" {
						t.Fatalf("round %d replica %d differs: %s", round, r, why)
					}
				}
			}
			last := whole[cfg.Rounds]
			if slices.Equal(last[0].Params, last[2].Params) {
				t.Error("pairs identical")
			}
		})
	}
}
