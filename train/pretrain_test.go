package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

func pretrainConfig() Config {
	return Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "quadratic", Curvature: 1},
		Rounds: 2, LocalSteps: 3, LearningRate: 0.5, Schedule: "constant", Batching: "full",
		ClipNorm: 100, NoiseStd: 0.1, Seed: 9, Checkpoints: []int{0, 2}, RecordParams: true,
		Pretrain: &Pretrain{Rounds: 4, LearningRate: 0.3},
	}
}

// sampleWorlds: world C' is C with sample 2 of client 1 moved far away.
func sampleWorlds(m, n, dim int) (c, cp []*datasets.Dataset) {
	c, _ = quadClients(m, n, dim, 0)
	cp = slices.Clone(c)
	cp[1] = c[1].Clone()
	for q := 0; q < dim; q++ {
		cp[1].Features[2*dim+q] = 3
	}
	return c, cp
}

// TestPretrainedInitialReplaysFedAvg: every replica's w_0 is the model pretrained by FedAvg
// without clipping or noise (full batches, every client, the pretraining's learning rate) for
// pretrain.rounds rounds from the seeded w_0 on the data both worlds share: without the target
// sample (sample-level), without the target client (client-level). Replayed in float64 from the
// recorded seeded w_0 of a run without pretraining; tolerance 1e-5 (float32 training).
func TestPretrainedInitialReplaysFedAvg(t *testing.T) {
	const m, n, dim, pairs = 4, 3, 3, 2
	c, cp := sampleWorlds(m, n, dim)
	for _, tc := range []struct {
		name   string
		target TargetInfo
		shared []*datasets.Dataset
	}{
		{"sample", TargetInfo{Client: 1, Index: 2}, []*datasets.Dataset{c[0], c[1].Subset("c1", []int{0, 1}), c[2], c[3]}},
		{"client", TargetInfo{Client: 1, Index: 2, WholeClient: true}, []*datasets.Dataset{c[0], c[2], c[3]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pretrainConfig()
			plain := cfg
			plain.Pretrain = nil
			seeded := run(t, plain, c, cp, tc.target, PairRange{0, 1})[0].Replicas[0].Params
			w := make([]float64, dim)
			for q, x := range seeded {
				w[q] = float64(x)
			}
			for r := 0; r < cfg.Pretrain.Rounds; r++ {
				next := slices.Clone(w)
				for _, d := range tc.shared {
					u := quadUpdate(w, d, 1, cfg.Pretrain.LearningRate, cfg.LocalSteps)
					for q := range next {
						next[q] += u[q] / float64(len(tc.shared))
					}
				}
				w = next
			}
			cps := run(t, cfg, c, cp, tc.target, PairRange{0, pairs})
			for _, rs := range cps[0].Replicas {
				for q := range w {
					if math.Abs(float64(rs.Params[q])-w[q]) > 1e-5 {
						t.Fatalf("replica %d/%d coordinate %d: w_0 %g, pretrained replay %g (seeded %g)", rs.Pair, rs.World, q, rs.Params[q], w[q], seeded[q])
					}
				}
			}
			if math.Abs(w[0]-float64(seeded[0])) < 1e-3 {
				t.Fatal("the pretraining did not move w_0: the fixture tests nothing")
			}
		})
	}
}

// On the quadratic instance with clipping inactive the rounds are affine with a common linear
// part, so the coupled difference w_T - w'_T (shared noise) does not depend on w_0: pretraining
// leaves it, and so every exact mu of the instance, unchanged (1e-5). The groups share one
// pretraining: group sizes 1 and 3 give the same bits.
func TestPretrainKeepsTheQuadraticDifference(t *testing.T) {
	const m, n, dim, pairs = 4, 3, 3, 3
	c, cp := sampleWorlds(m, n, dim)
	tgt := TargetInfo{Client: 1, Index: 2}
	cfg := pretrainConfig()
	plain := cfg
	plain.Pretrain = nil
	with := run(t, cfg, c, cp, tgt, PairRange{0, pairs})
	without := run(t, plain, c, cp, tgt, PairRange{0, pairs})
	if slices.Equal(with[0].Replicas[0].Params, without[0].Replicas[0].Params) {
		t.Fatal("the pretraining left w_0 where it was: the fixture does not test it")
	}
	last := len(with) - 1
	for p := 0; p < pairs; p++ {
		a, b := with[last].Replicas[2*p], with[last].Replicas[2*p+1]
		x, y := without[last].Replicas[2*p], without[last].Replicas[2*p+1]
		for q := 0; q < dim; q++ {
			dw, dp := float64(a.Params[q]-b.Params[q]), float64(x.Params[q]-y.Params[q])
			if math.Abs(dw-dp) > 1e-5 {
				t.Fatalf("pair %d coordinate %d: w_T - w'_T %g with pretraining, %g without", p, q, dw, dp)
			}
		}
	}
	grouped := cfg
	grouped.GroupPairs = 1
	var rec memRecorder
	if err := Train(context.Background(), Job{Config: grouped, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, pairs}, Recorder: &rec}); err != nil {
		t.Fatal(err)
	}
	if !sameParams(rec.cps, with) {
		t.Fatal("groups of one pair differ from one group of three")
	}
}

// sameParams reports whether two recordings hold the same parameters for every (round, pair,
// world), however their checkpoints are split into groups.
func sameParams(a, b []*checkpoint.Checkpoint) bool {
	index := func(cps []*checkpoint.Checkpoint) map[[3]int][]float32 {
		out := map[[3]int][]float32{}
		for _, cp := range cps {
			for _, r := range cp.Replicas {
				out[[3]int{cp.Round, r.Pair, r.World}] = r.Params
			}
		}
		return out
	}
	ia, ib := index(a), index(b)
	if len(ia) != len(ib) {
		return false
	}
	for k, v := range ia {
		if !slices.Equal(v, ib[k]) {
			return false
		}
	}
	return true
}

// Bad pretraining settings are refused with the field named.
func TestPretrainChecks(t *testing.T) {
	for _, c := range []struct {
		p     Pretrain
		table bool // train's schedule a table, its learning_rate 0
		want  string
	}{
		{Pretrain{Rounds: 0}, false, "pretrain.rounds"},
		{Pretrain{Rounds: 2, LearningRate: -1}, false, "pretrain.learning_rate"},
		{Pretrain{Rounds: 2, LocalSteps: -1}, false, "pretrain.local_steps"},
		{Pretrain{Rounds: 2}, true, "pretrain.learning_rate: needed"},
	} {
		cfg := pretrainConfig()
		cfg.Pretrain = &c.p
		if c.table {
			cfg.Schedule, cfg.LearningRate = "table", 0
			cfg.ScheduleTable = [][]float64{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}}
		}
		if err := cfg.Check(4, 3, 2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s named", c.p, err, c.want)
		}
	}
}

// SharedClients: world C without the target sample (replace, remove), all of C when C' inserts
// a sample (add: C' has one more at the target client), without the target client at client
// level, and an emptied client dropped.
func TestSharedClients(t *testing.T) {
	c, _ := quadClients(3, 4, 2, 0)
	withLen := func(i, n int) []*datasets.Dataset {
		out := slices.Clone(c)
		idx := make([]int, n)
		for j := range idx {
			idx[j] = j % c[i].Len()
		}
		out[i] = c[i].Subset(c[i].Name, idx)
		return out
	}
	sizes := func(ds []*datasets.Dataset) []int {
		var out []int
		for _, d := range ds {
			out = append(out, d.Len())
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		wc, cp []*datasets.Dataset
		target TargetInfo
		want   []int
	}{
		{"replace", c, c, TargetInfo{Client: 1, Index: 2}, []int{4, 3, 4}},
		{"remove", c, withLen(1, 3), TargetInfo{Client: 1, Index: 2}, []int{4, 3, 4}},
		{"add", c, withLen(1, 5), TargetInfo{Client: 1, Index: 2}, []int{4, 4, 4}},
		{"replace-client", c, c, TargetInfo{Client: 1, WholeClient: true}, []int{4, 4}},
		{"remove-client", c, c[:2], TargetInfo{Client: 2, WholeClient: true, Absent: true}, []int{4, 4}},
		{"a one-sample client emptied", withLen(0, 1), withLen(0, 1), TargetInfo{Client: 0, Index: 0}, []int{4, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sizes(SharedClients(Job{WorldC: tc.wc, WorldCPrime: tc.cp, Target: tc.target}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("shared client sizes %v, want %v", got, tc.want)
			}
		})
	}
}
