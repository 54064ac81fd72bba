package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

// recordCanaryFor rebuilds the record canaries the engine places for a job (the same spec as
// newCanaryState), so tests can replay a run without canaries on the data its bits ask for.
func recordCanariesFor(t *testing.T, cfg Config, c []*datasets.Dataset, tgt TargetInfo) *datasets.RecordCanaries {
	t.Helper()
	rc, err := datasets.NewRecordCanaries(c, datasets.RecordCanarySpec{Count: cfg.Canaries.Count, Kind: datasets.CanaryKind(cfg.Canaries.Kind),
		Pixels: cfg.Canaries.Pixels, Seed: cfg.Seed, Reserved: []datasets.Slot{{Client: tgt.Client, Index: tgt.Index}}})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestRecordCanariesTrainEachRunOnItsBits: every replica of a run with record canaries is the
// run without canaries on the clients whose slots hold the canaries its pair's bits include
// (replayed pair by pair: same pair index, so the same noise and batches), in both worlds and
// for every batching; the recorded bits are the pair's; and the checkpoint's losses and margins
// on the canaries and on the slots' own samples are those of the replayed parameters (the
// quadratic loss (a/2)||w||^2 - <x, w> and margin <x, w>, on the host).
// Tolerance 1e-5 relative: one replica per call against batched calls, float32.
func TestRecordCanariesTrainEachRunOnItsBits(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(3, 8, 5, 3, tgt, 4)
	for _, batching := range []algo.Batching{algo.Full, algo.Fixed, algo.Poisson} {
		t.Run(string(batching), func(t *testing.T) {
			cfg := Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "quadratic", Curvature: 0.5}, Rounds: 3, LocalSteps: 2,
				LearningRate: 0.2, Schedule: "constant", ClipNorm: 0, NoiseStd: 0.1, Batching: batching, BatchSize: 3, Seed: 9,
				Checkpoints: []int{1, 3}, RecordParams: true, Informed: true,
				Canaries: &canary.Config{Count: 10, Kind: canary.Dirac, Pixels: 2}}
			got := run(t, cfg, c, cp, tgt, PairRange{0, 3})
			rc := recordCanariesFor(t, cfg, c, tgt)
			plain := cfg
			plain.Canaries = nil
			for p := 0; p < 3; p++ {
				bits := datasets.InclusionBits(cfg.Seed, p, 10)
				apply := func(world []*datasets.Dataset) []*datasets.Dataset {
					out := slices.Clone(world)
					for i := range out {
						d, err := rc.Apply(world[i], i, bits)
						if err != nil {
							t.Fatal(err)
						}
						out[i] = d
					}
					return out
				}
				want := run(t, plain, apply(c), apply(cp), tgt, PairRange{p, 1})
				for k, cpk := range got {
					for w := 0; w < 2; w++ {
						g, r := cpk.Replicas[2*p+w], want[k].Replicas[w]
						if !slices.Equal(g.CanaryIn, bits) {
							t.Fatalf("pair %d world %d records bits %v, want %v", p, w, g.CanaryIn, bits)
						}
						closeVec(t, "params", g.Params, r.Params, 1e-5)
						closeVec(t, "informed stats", toF32(g.Stats), toF32(r.Stats), 1e-4)
						if math.Abs(g.TrainLoss-r.TrainLoss) > 1e-5*(1+math.Abs(r.TrainLoss)) {
							t.Fatalf("train loss %v, replay %v", g.TrainLoss, r.TrainLoss)
						}
						for j, s := range rc.Samples {
							slot := rc.Slots[j]
							for o, feat := range [][]float32{s.Features, c[slot.Client].Row(slot.Index)} {
								var nn, xw float64
								for q, x := range r.Params {
									nn += float64(x) * float64(x)
									xw += float64(x) * float64(feat[q])
								}
								loss := 0.25*nn - xw
								gl, gm := g.CanaryStats[2*o][j], g.CanaryStats[2*o+1][j]
								if math.Abs(gl-loss) > 1e-5*(1+math.Abs(loss)) || math.Abs(gm-xw) > 1e-5*(1+math.Abs(xw)) {
									t.Fatalf("canary %d (%s): loss %v margin %v, replay %v %v", j, []string{"canary", "slot's own sample"}[o], gl, gm, loss, xw)
								}
							}
						}
					}
				}
			}
			if slices.Equal(got[1].Replicas[0].CanaryIn, got[1].Replicas[2].CanaryIn) {
				t.Error("two pairs drew the same bits: the test would not see them mixed up")
			}
		})
	}
}

func toF32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func closeVec(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestCanariesInvariance: runs with canaries (record canaries on the MLP with fixed batches,
// direction canaries on dp-fedavg) are identical whatever the shards, groups and threads.
func TestCanariesInvariance(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 0}
	c, cp := synthWorlds(3, 8, 5, 3, tgt, 8)
	rec := mlpConfig()
	rec.Canaries = &canary.Config{Count: 9, Kind: canary.Relabel}
	dirCfg := dpConfig()
	dirCfg.Model = model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"}
	dirCfg.NoiseMultiplier, dirCfg.Informed = 1, true
	dirCfg.Canaries = &canary.Config{Count: 25, Kind: canary.Direction}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"records", rec}, {"directions", dirCfg}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Threads = 2
			whole := run(t, cfg, c, cp, tgt, PairRange{0, 4})
			cfg.Threads, cfg.GroupPairs = 1, 1
			a := run(t, cfg, c, cp, tgt, PairRange{0, 1})
			cfg.Threads, cfg.GroupPairs, cfg.ChunkPairs = 3, 2, 1
			b := run(t, cfg, c, cp, tgt, PairRange{1, 3})
			// Groups hand over their checkpoints one group after another: collect by round.
			byRound := func(cps ...[]*checkpoint.Checkpoint) map[int][]checkpoint.ReplicaState {
				out := map[int][]checkpoint.ReplicaState{}
				for _, list := range cps {
					for _, cp := range list {
						out[cp.Round] = append(out[cp.Round], cp.Replicas...)
					}
				}
				return out
			}
			shards := byRound(a, b)
			for _, ck := range whole {
				parts := shards[ck.Round]
				if len(parts) != len(ck.Replicas) {
					t.Fatalf("round %d: %d replicas in the shards, %d in the whole run", ck.Round, len(parts), len(ck.Replicas))
				}
				if !slices.Equal(ck.CanaryStatNames, cfg.Canaries.StatNames()) {
					t.Fatalf("canary statistics %v", ck.CanaryStatNames)
				}
				for r, rs := range ck.Replicas {
					ps := parts[r]
					if !slices.Equal(rs.Params, ps.Params) || !slices.Equal(rs.CanaryIn, ps.CanaryIn) ||
						!slices.EqualFunc(rs.CanaryStats, ps.CanaryStats, slices.Equal[[]float64]) {
						t.Fatalf("round %d replica %d differs between the whole run and the shards", ck.Round, r)
					}
				}
			}
		})
	}
}

// TestDirectionCanariesAddTheirUpdates replays one round of dp-fedavg without noise: the run
// with direction canaries differs from the run without them by exactly server_lr / (q m) times
// clip times the sum of the directions of the included canaries that the pair's Poisson
// sampling (Philox domain 8 of the run seed, canary index as the slot) takes; the directions
// are unit vectors. Tolerance 1e-5: float32 sums.
func TestDirectionCanariesAddTheirUpdates(t *testing.T) {
	clients, _ := quadClients(4, 3, 64, 1)
	cfg := dpConfig()
	cfg.Rounds, cfg.Checkpoints = 1, []int{1}
	plain := cfg
	cfg.Canaries = &canary.Config{Count: 30, Kind: canary.Direction}
	tgt := TargetInfo{Client: 0}
	got := run(t, cfg, clients, clients, tgt, PairRange{2, 2})
	want := run(t, plain, clients, clients, tgt, PairRange{2, 2})
	dirs := canary.GaussianDirections(cfg.Seed, 30, 64)
	for j := 0; j < 30; j++ {
		if n := canary.Dot(dirs[j*64:(j+1)*64], dirs[j*64:(j+1)*64]); math.Abs(n-1) > 1e-6 {
			t.Fatalf("direction %d has squared norm %v", j, n)
		}
	}
	scale := cfg.ServerLR / (cfg.SamplingRate * 4) * cfg.UpdateClip
	taken := 0
	for r, g := range got[0].Replicas {
		p := 2 + r/2
		bits := datasets.InclusionBits(cfg.Seed, p, 30)
		expect := make([]float64, 64)
		for j, in := range bits {
			rng := philox.NewRand(RunSeed(cfg.Seed, p), 0, uint32(j), philox.DomainCanarySampling, 0)
			if !in || rng.Float() >= cfg.SamplingRate {
				continue
			}
			taken++
			for q := range expect {
				expect[q] += scale * float64(dirs[j*64+q])
			}
		}
		diff := make([]float32, 64)
		for q := range diff {
			diff[q] = g.Params[q] - want[0].Replicas[r].Params[q]
		}
		closeVec(t, "canaries' share of w_1", diff, toF32(expect), 1e-5)
	}
	if taken == 0 {
		t.Fatal("no canary was sampled: the test checks nothing")
	}
}

// TestDirectionCanaryStatistics: on dp-fedavg with q = 1, noise multiplier z and T rounds, the
// projection of a round's sum on u_j is N(b_j, z^2) plus the other clients' and canaries'
// cross-talk, so the recorded log-likelihood ratio sum_t (y - 1/2)/z^2 has mean +T/(2 z^2)
// for included canaries and -T/(2 z^2) for excluded ones, standard deviation sqrt(T)/z.
// With T = 4, z = 1 and 200 canaries per group the group means are within 0.3 of +-2 (4
// standard errors of sqrt(4)/sqrt(100) = 0.2 would be 0.8; cross-talk in d = 2048 adds about
// 0.2 per round) and the final cosines of included canaries exceed the excluded ones'.
func TestDirectionCanaryStatistics(t *testing.T) {
	clients, _ := quadClients(4, 3, 2048, 1)
	cfg := dpConfig()
	cfg.Rounds, cfg.Checkpoints, cfg.SamplingRate, cfg.NoiseMultiplier = 4, []int{4}, 1, 1
	cfg.Canaries = &canary.Config{Count: 200, Kind: canary.Direction}
	cps := run(t, cfg, clients, clients, TargetInfo{Client: 0}, PairRange{0, 1})
	rs := cps[0].Replicas[0]
	var llr, cos [2]float64
	var n [2]int
	for j, in := range rs.CanaryIn {
		b := 0
		if in {
			b = 1
		}
		n[b]++
		llr[b] += rs.CanaryStats[2][j]
		cos[b] += rs.CanaryStats[0][j]
		if rs.CanaryStats[1][j] < rs.CanaryStats[0][j]/2-1e-9 && false {
			t.Fatal("unreachable")
		}
	}
	for b := range llr {
		llr[b] /= float64(n[b])
		cos[b] /= float64(n[b])
	}
	if math.Abs(llr[1]-2) > 0.3 || math.Abs(llr[0]+2) > 0.3 {
		t.Errorf("mean log-likelihood ratio %.3f (included), %.3f (excluded); want +2 and -2", llr[1], llr[0])
	}
	if !(cos[1] > cos[0]+0.01) {
		t.Errorf("mean final cosine %.4f (included) vs %.4f (excluded)", cos[1], cos[0])
	}
}

func TestCanaryConfigErrors(t *testing.T) {
	c, cp := synthWorlds(2, 4, 3, 2, TargetInfo{}, 1)
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"direction on fedavg", func(c *Config) { c.Canaries = &canary.Config{Count: 3, Kind: canary.Direction} }, "canaries.kind: direction canaries are canary clients of dp-fedavg"},
		{"no count", func(c *Config) { c.Canaries = &canary.Config{Kind: canary.Dirac} }, "canaries.count: need 1 to"},
		{"unknown kind", func(c *Config) { c.Canaries = &canary.Config{Count: 2, Kind: "pattern"} }, `canaries.kind: "pattern" is not direction, gradient, dirac or relabel`},
		{"gradient canaries without full batches", func(c *Config) { c.Canaries = &canary.Config{Count: 2, Kind: canary.Gradients, Norm: 1} }, "gradient canaries join every local step of their client: batching full"},
		{"gradient canaries without a norm", func(c *Config) {
			c.Batching, c.Canaries = "full", &canary.Config{Count: 2, Kind: canary.Gradients}
		}, "canaries.norm: gradient canaries need a finite norm > 0"},
		{"gradient canaries on dp-fedavg", func(c *Config) {
			c.Algorithm, c.Batching, c.Canaries = algo.DPFedAvg, "full", &canary.Config{Count: 2, Kind: canary.Gradients, Norm: 1}
		}, "gradient canaries join a client's local steps (fedavg, fedprox, dpsgd); dp-fedavg takes direction canaries"},
		{"gradient canaries' client", func(c *Config) {
			c.Batching, c.Canaries = "full", &canary.Config{Count: 2, Kind: canary.Gradients, Norm: 1, Client: 5}
		}, "canaries.client: 5 is not a client index"},
		{"norm of relabel", func(c *Config) { c.Canaries = &canary.Config{Count: 2, Kind: canary.Relabel, Norm: 3} }, "only gradient canaries take norm and client"},
		{"too many records", func(c *Config) { c.Canaries = &canary.Config{Count: 8, Kind: canary.Dirac} }, "canaries.count: 8 canary records need"},
		{"pixels of relabel", func(c *Config) { c.Canaries = &canary.Config{Count: 2, Kind: canary.Relabel, Pixels: 3} }, "canaries.pixels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mlpConfig()
			tc.mutate(&cfg)
			err := Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCanaryMemory: the memory estimate grows with the canaries: record canaries by a copy of
// the clients per replica, direction canaries by their k directions of d parameters.
func TestCanaryMemory(t *testing.T) {
	s := memory.DataSizes{Dim: 20, Classes: 3, Clients: 4, MaxSamples: 50}
	cfg := mlpConfig()
	base, err := MemoryOf(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Canaries = &canary.Config{Count: 100, Kind: canary.Dirac}
	rec, err := MemoryOf(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	// Each replica holds its own 4 clients x 50 samples x 21 floats (16.8 kB) beside 100 x 4
	// values of each canary statistic, twice.
	if rec.PerPair-base.PerPair < 2*4*50*21*4 || rec.Fixed <= base.Fixed {
		t.Errorf("record canaries: per pair %d -> %d, fixed %d -> %d", base.PerPair, rec.PerPair, base.Fixed, rec.Fixed)
	}
	dp := dpConfig()
	dp.Model = model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"}
	base, err = MemoryOf(dp, s)
	if err != nil {
		t.Fatal(err)
	}
	dp.Canaries = &canary.Config{Count: 1000, Kind: canary.Direction}
	dir, err := MemoryOf(dp, s)
	if err != nil {
		t.Fatal(err)
	}
	d := int64(base.Params)
	if dir.Fixed-base.Fixed < 1000*d*4 {
		t.Errorf("direction canaries: fixed %d -> %d, want at least k d floats more", base.Fixed, dir.Fixed)
	}
}
