package train

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

// sortedReplicas flattens checkpoints into (round, pair, world) order, whatever order the
// groups delivered them in.
func sortedReplicas(cps []*checkpoint.Checkpoint) []struct {
	round int
	rs    checkpoint.ReplicaState
} {
	var out []struct {
		round int
		rs    checkpoint.ReplicaState
	}
	for _, cp := range cps {
		for _, rs := range cp.Replicas {
			out = append(out, struct {
				round int
				rs    checkpoint.ReplicaState
			}{cp.Round, rs})
		}
	}
	slices.SortStableFunc(out, func(a, b struct {
		round int
		rs    checkpoint.ReplicaState
	}) int {
		return cmp.Or(cmp.Compare(a.round, b.round), cmp.Compare(a.rs.Pair, b.rs.Pair), cmp.Compare(a.rs.World, b.rs.World))
	})
	return out
}

// Results are bit-identical whatever the grouping of a shard's pairs: groups of 1, 7 and all
// 10 pairs, on the configurations the shard test covers plus full batches and the deferred
// first-layer path. Within one round the recorder sees pairs in ascending order in every
// grouping (what per-round sums over rows rely on).
func TestGroupInvariance(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 0}
	c, cp := synthWorlds(3, 6, 5, 3, tgt, 8)
	fedavg := mlpConfig()
	fedavg.Participants = 2
	full := mlpConfig()
	full.Batching, full.BatchSize = "full", 0
	wide := mlpConfig() // K·B <= dim: the deferred first-layer updates apply
	wide.BatchSize, wide.LocalSteps = 2, 2
	c1, cp1 := synthWorlds(1, 12, 5, 3, TargetInfo{Client: 0, Index: 3}, 9)
	dp := mlpConfig()
	dp.Algorithm, dp.Batching, dp.BatchSize, dp.LearningRate = algo.DPSGD, "poisson", 4, 0.1
	cases := []struct {
		name  string
		cfg   Config
		c, cp []*datasets.Dataset
		tgt   TargetInfo
	}{{"fedavg-partial", fedavg, c, cp, tgt}, {"full", full, c, cp, tgt}, {"deferred", wide, c, cp, tgt},
		{"dpsgd-poisson", dp, c1, cp1, TargetInfo{Client: 0, Index: 3}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ref []struct {
				round int
				rs    checkpoint.ReplicaState
			}
			for _, g := range []int{0, 1, 7} {
				cfg := tc.cfg
				cfg.GroupPairs = g
				cps := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{First: 3, Count: 10})
				want := 1
				if g > 0 {
					want = (10 + g - 1) / g
				}
				if len(cps) != want*len(cfg.Checkpoints) {
					t.Fatalf("groups of %d: %d checkpoints, want %d", g, len(cps), want*len(cfg.Checkpoints))
				}
				for _, cp := range cps {
					if !slices.IsSortedFunc(cp.Replicas, func(a, b checkpoint.ReplicaState) int { return cmp.Compare(2*a.Pair+a.World, 2*b.Pair+b.World) }) {
						t.Fatalf("groups of %d: a checkpoint's replicas are not in pair order", g)
					}
				}
				got := sortedReplicas(cps)
				if ref == nil {
					ref = got
					continue
				}
				if len(got) != len(ref) {
					t.Fatalf("groups of %d: %d replica states, want %d", g, len(got), len(ref))
				}
				for i := range got {
					a, b := got[i].rs, ref[i].rs
					if got[i].round != ref[i].round || a.Pair != b.Pair || a.World != b.World || a.Seed != b.Seed ||
						!slices.Equal(a.Params, b.Params) || !slices.Equal(a.Upload, b.Upload) || !slices.Equal(a.Stats, b.Stats) ||
						a.TrainLoss != b.TrainLoss || a.TargetLoss != b.TargetLoss || a.TargetMargin != b.TargetMargin || a.Diverged != b.Diverged {
						t.Fatalf("groups of %d: round %d pair %d world %d differs from one group", g, got[i].round, a.Pair, a.World)
					}
				}
			}
		})
	}
}

// countingCPU counts the bytes the engine allocates on the backend.
type countingCPU struct {
	*cpu.Backend
	bytes int64
}

func (c *countingCPU) Alloc(n int) compute.Buffer {
	c.bytes += 4 * int64(n)
	return c.Backend.Alloc(n)
}

// MemoryOf bounds what the engine really allocates (counted on the backend, after a round and
// a checkpoint) and is not wildly above it, for every model family and batching, so that the
// groups it sizes keep to their budget.
func TestMemoryOfBoundsAllocations(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 0}
	c, cp := synthWorlds(3, 6, 5, 3, tgt, 8)
	full := mlpConfig()
	full.Batching, full.BatchSize = "full", 0
	wide := mlpConfig()
	wide.BatchSize, wide.LocalSteps = 2, 2
	deep := mlpConfig()
	deep.Model.Hidden = []int{16, 8}
	soft := mlpConfig()
	soft.Model = model.Config{Kind: "softmax"}
	quad := mlpConfig()
	quad.Model = model.Config{Kind: "quadratic", Curvature: 1}
	quad.Informed = false
	lap := mlpConfig()
	lap.Mechanism, lap.Informed = algo.Laplace, false
	c1, cp1 := synthWorlds(1, 12, 5, 3, TargetInfo{Client: 0, Index: 3}, 9)
	dp := mlpConfig()
	dp.Algorithm, dp.Batching, dp.BatchSize, dp.LearningRate = algo.DPSGD, "poisson", 4, 0.1
	cases := []struct {
		name  string
		cfg   Config
		c, cp []*datasets.Dataset
		tgt   TargetInfo
	}{{"fixed", mlpConfig(), c, cp, tgt}, {"full", full, c, cp, tgt}, {"deferred", wide, c, cp, tgt}, {"deep", deep, c, cp, tgt},
		{"softmax", soft, c, cp, tgt}, {"quadratic", quad, c, cp, tgt}, {"laplace", lap, c, cp, tgt},
		{"dpsgd-poisson", dp, c1, cp1, TargetInfo{Client: 0, Index: 3}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem, err := MemoryOf(tc.cfg, memory.SizesOf(tc.c, nil))
			if err != nil {
				t.Fatal(err)
			}
			for _, pairs := range []int{1, 8} {
				be := &countingCPU{Backend: cpu.New(1)}
				err := TrainOn(context.Background(), be, Job{Config: tc.cfg, WorldC: tc.c, WorldCPrime: tc.cp, Target: tc.tgt, Pairs: PairRange{Count: pairs}, Recorder: &memRecorder{}})
				be.Close()
				if err != nil {
					t.Fatal(err)
				}
				est := mem.Bytes(pairs)
				if be.bytes > est || est > 4*be.bytes+4096 {
					t.Errorf("%d pairs: engine allocated %d bytes, MemoryOf estimates %d", pairs, be.bytes, est)
				}
			}
		})
	}
}

// Groups follow GroupPairs when set, else the memory budget; a model too large for any budget
// still trains one pair at a time.
func TestGroupSize(t *testing.T) {
	cfg := mlpConfig()
	s := memory.DataSizes{Dim: 784, Classes: 10, Clients: 10, MaxSamples: 100}
	cfg.Model.Hidden = []int{64}
	mem, err := MemoryOf(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	cfg.GroupMemory = mem.Bytes(5)
	if g := GroupSize(cfg, s, 12); g != 5 {
		t.Errorf("budget of 5 pairs: groups of %d", g)
	}
	if g := GroupSize(cfg, s, 3); g != 3 {
		t.Errorf("budget of 5 pairs, 3 pairs: groups of %d", g)
	}
	cfg.GroupMemory = 1
	if g := GroupSize(cfg, s, 3); g != 1 {
		t.Errorf("tiny budget: groups of %d, want 1", g)
	}
	cfg.GroupPairs = 4
	if g := GroupSize(cfg, s, 9); g != 4 {
		t.Errorf("group_pairs 4: groups of %d", g)
	}
	cfg.GroupPairs, cfg.GroupMemory = 0, 0
	if g := GroupSize(cfg, s, 1000); g >= 1000 || g < 16 {
		t.Errorf("1000 pairs of a 51k-parameter MLP, default budget: groups of %d", g)
	}
	if mem.Bytes(1000) < 2*memory.DefaultGroupMemory {
		t.Errorf("estimate %d for 1000 pairs: expected several times the default budget", mem.Bytes(1000))
	}
}

// DeviceGroupSize: a shard split by the device's free memory (90% of it), group_pairs and
// group_memory as on the CPU, and a configuration one pair of which does not fit refused with
// both sizes named, before any training.
func TestDeviceGroupSize(t *testing.T) {
	cfg := mlpConfig()
	cfg.Model = model.Config{Kind: "lenet5"}
	s := memory.DataSizes{Dim: 784, Classes: 10, Clients: 10, MaxSamples: 50, Shape: []int{1, 28, 28}}
	mem, err := MemoryOn(cfg, s, memory.Device)
	if err != nil {
		t.Fatal(err)
	}
	host, err := MemoryOf(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	if mem == host {
		t.Errorf("device and host estimates of LeNet-5 are equal (%+v): the device's held patches are not counted", mem)
	}
	tests := []struct {
		name              string
		groupPairs        int
		groupMemory, free int64
		count, want       int
		wantErr           string
	}{
		{"free memory for 7 pairs", 0, 0, mem.Bytes(7)*10/9 + 100, 100, 7, ""},
		{"fewer pairs than fit", 0, 0, mem.Bytes(50) * 2, 3, 3, ""},
		{"group_pairs", 4, 0, 1, 9, 4, ""},
		{"group_memory", 0, mem.Bytes(2), 1 << 40, 100, 2, ""},
		{"one pair does not fit", 0, 0, mem.Bytes(1), 100, 0, "one pair needs about"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			c.GroupPairs, c.GroupMemory = tt.groupPairs, tt.groupMemory
			got, err := DeviceGroupSize(c, s, tt.count, tt.free, memory.Device)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %d, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// A GPU known to run its stride-1 3 x 3 convolutions by Winograd's F(2x2, 3x3)
// (memory.DeviceWinograd) is planned by that form's memory: W3's ResNet-18 workspace takes
// about two thirds of the patch form's (nn.DeviceMemoryOf), a pair's whole estimate about four
// fifths (beside the parameter-sized buffers and the evaluation), so the same free memory
// holds more pairs; a device of unknown options (memory.Device) is planned by the larger form,
// here the patches.
func TestDeviceGroupSizeFollowsTheConvolutionForm(t *testing.T) {
	cfg := mlpConfig()
	cfg.Model = model.Config{Kind: "resnet", Stages: 4, Blocks: 2, Width: 64, Groups: 32}
	cfg.Batching, cfg.BatchSize = "fixed", 32
	s := memory.DataSizes{Dim: 3 * 32 * 32, Classes: 10, Clients: 10, MaxSamples: 64, TestSamples: 256, Shape: []int{3, 32, 32}}
	any, err := MemoryOn(cfg, s, memory.Device)
	if err != nil {
		t.Fatal(err)
	}
	wino, err := MemoryOn(cfg, s, memory.DeviceWinograd)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("per pair: %d bytes (either form), %d (Winograd)", any.PerPair, wino.PerPair)
	if r := float64(wino.PerPair) / float64(any.PerPair); r < 0.7 || r > 0.85 {
		t.Errorf("Winograd's estimate per pair is %.3f of either form's, want about four fifths", r)
	}
	free := 80 * int64(1) << 30
	n, err := DeviceGroupSize(cfg, s, 1000, free, memory.Device)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := DeviceGroupSize(cfg, s, 1000, free, memory.DeviceWinograd)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("80 GiB: %d pairs by either form, %d by Winograd", n, nw)
	want, err := wino.DeviceGroupPairs(0, free, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if nw <= n || nw != want {
		t.Errorf("80 GiB holds %d pairs by either form and %d by Winograd: want more by Winograd, as its estimate says", n, nw)
	}
}

// A context cancelled in the middle of a round stops training within a client step: Train
// returns long before the round would have ended.
func TestCancelMidRound(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := synthWorlds(2, 64, 32, 3, tgt, 10)
	cfg := mlpConfig()
	cfg.Model.Hidden = []int{64}
	cfg.Rounds, cfg.Checkpoints, cfg.BatchSize = 1, []int{1}, 32
	cfg.LocalSteps = 1
	cfg.Threads = 1
	// The time of one step, from two rounds that differ only in their number of steps (the
	// set-up cost, which dominates a round of one step, cancels out).
	roundTime := func(steps int) time.Duration {
		cfg.LocalSteps = steps
		start := time.Now()
		if err := Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{Count: 8}, Recorder: &memRecorder{}}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	step := max((roundTime(41)-roundTime(1))/40, time.Microsecond)
	// A round of many steps takes about a second, far more than the 50 ms before the cancel.
	cfg.LocalSteps = int(min(max(time.Second/step, 50), 1_000_000))
	ctx, cancel := context.WithCancel(context.Background())
	var cancelled time.Time
	time.AfterFunc(50*time.Millisecond, func() { cancelled = time.Now(); cancel() })
	err := Train(ctx, Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{Count: 8}, Recorder: &memRecorder{}})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("training of %d steps a round returned %v before it was cancelled", cfg.LocalSteps, err)
	}
	if d := time.Since(cancelled); d > 100*time.Millisecond+20*step {
		t.Errorf("stopped %s after the cancel (one step takes at most %s)", d, step)
	}
}
