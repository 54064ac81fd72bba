//go:build cgo

package hostshim

import (
	"context"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// countingDevice is the shim with every host-visible call counted: Read is a blocking copy to
// the host on a GPU (the host waits for every earlier launch), Launch a kernel launch, Gemm a
// cuBLAS call, Stage an upload of per-call arguments.
type countingDevice struct {
	*Device
	reads, writes, launches, gemms, stages int
	perKernel                              map[kernels.Kernel]int
}

func (c *countingDevice) Write(dst uint64, src []byte) error {
	c.writes++
	return c.Device.Write(dst, src)
}

func (c *countingDevice) Read(dst []byte, src uint64) error {
	c.reads++
	return c.Device.Read(dst, src)
}

func (c *countingDevice) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	c.launches++
	c.perKernel[k]++
	return c.Device.Launch(k, grid, block, args)
}

func (c *countingDevice) Gemm(g cuda.GemmArgs) error {
	c.gemms++
	return c.Device.Gemm(g)
}

func (c *countingDevice) Stage(src []byte) (uint64, error) {
	c.stages++
	return c.Device.Stage(src)
}

// roundCounts is what one W1 round costs in device calls: blocking reads, writes (uploads of
// host data), kernel launches, cuBLAS calls, staged copies of per-call arguments, batches of
// queued work issued (cuda.Ops queues until the host needs the device), and with graphs the
// batches captured and replayed.
type roundCounts struct {
	reads, writes, launches, gemms, stages, batches int
	perKernel                                       map[kernels.Kernel]int
	graphs                                          cuda.GraphStats
}

// trainCounted trains job on the shim behind a counting device with the backend options opt
// and returns the device and the backend (closed when the test ends).
func trainCounted(t *testing.T, job train.Job, opt cuda.Options) (*countingDevice, *cuda.Ops) {
	t.Helper()
	d := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
	ops := cuda.NewOps(d, opt)
	t.Cleanup(func() { ops.Close() })
	job.Recorder = cuda.CheckRecorder(ops, discardRec{})
	if err := train.TrainOn(context.Background(), ops, job); err != nil {
		t.Fatal(err)
	}
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	return d, ops
}

// counted is what d saw and ops issued.
func counted(d *countingDevice, ops *cuda.Ops) roundCounts {
	return roundCounts{d.reads, d.writes, d.launches, d.gemms, d.stages, ops.Batches(), d.perKernel, ops.GraphStats()}
}

// w1Job is W1 (one pair) for rounds rounds with a checkpoint after the last only.
func w1Job(rounds int) train.Job {
	c, cp, tgt := traintest.W1Data()
	cfg := traintest.W1Config()
	cfg.Rounds, cfg.Checkpoints = rounds, []int{rounds}
	return train.Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: train.PairRange{Count: 1}}
}

// w1Counts runs w1Job(rounds) and returns the calls its device saw (launches and cuBLAS calls
// as issued to the device, so with graphs those captured, not those replayed).
func w1Counts(t *testing.T, rounds int, opt cuda.Options) roundCounts {
	t.Helper()
	return counted(trainCounted(t, w1Job(rounds), opt))
}

// W1's host round-trips and launches per round, counted on the shim: a 2-round run minus a
// 1-round run (the same setup and final checkpoint) is the cost of one round. Goals of issue
// 18: at most 2 blocking reads per round (no read inside a local step: clip factors stay on
// the device) and at most 10 kernel launches per client step (m = 10 clients x K = 5 steps).
// Since the fused hidden step, the queued batches and the device samplers, a round is one
// batch with one staged copy of its arguments and no other upload; the test holds the counts
// measured then (1 read, 1 staged copy, 1 batch); 15 hidden_step launches since the clients
// other than the target run their steps grouped (55 before: train/grouped.go); 8 cuBLAS
// calls since a group's Gram matrices and its products x W_0^T are one call each (24 before;
// 79 before each step read its minibatch's Gram matrix from its client's); and 36 launches
// since a group's parameters are copied from w_t and added to the round's sum by one call each
// (52 before, 68 before a group's minibatches were gathered by one call per array, 108 before
// grouping), so a change that adds work per round shows here. Those are the counts of a round
// whose target minibatches split the worlds (3 of W1's 20); in the others the target groups
// with the other clients too: 18 launches, 5 of them hidden_step, and 3 cuBLAS calls. docs/gpu.md
// quotes the numbers this logs.
func TestW1RoundCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("W1 on the shim takes several seconds")
	}
	one, two, three := w1Counts(t, 1, cuda.Options{}), w1Counts(t, 2, cuda.Options{}), w1Counts(t, 3, cuda.Options{})
	cfg := traintest.W1Config()
	steps := 10 * cfg.LocalSteps // W1's clients (all participate) x local steps
	// Round 1 (0-based) is one of W1's three rounds in 20 whose target minibatches hold the
	// target sample (1, 8, 19): the target's replicas train alone, a world at a time, beside a
	// group of the 9 others. Round 2 is one of the other 17: all 10 clients in one group.
	for _, c := range []struct {
		name          string
		before, after roundCounts
		most          roundCounts
	}{
		{"round 1 (the target's worlds split)", one, two, roundCounts{reads: 1, launches: 36, gemms: 8, stages: 1, batches: 1,
			perKernel: map[kernels.Kernel]int{kernels.HiddenStep: 15}}},
		{"round 2 (the target grouped)", two, three, roundCounts{reads: 1, launches: 18, gemms: 3, stages: 1, batches: 1,
			perKernel: map[kernels.Kernel]int{kernels.HiddenStep: 5}}},
	} {
		before, after := c.before, c.after
		r := roundCounts{reads: after.reads - before.reads, writes: after.writes - before.writes, launches: after.launches - before.launches,
			gemms: after.gemms - before.gemms, stages: after.stages - before.stages, batches: after.batches - before.batches, perKernel: map[kernels.Kernel]int{}}
		for k, n := range after.perKernel {
			if m := n - before.perKernel[k]; m != 0 {
				r.perKernel[k] = m
			}
		}
		t.Logf("W1 %s, 1 pair: %d blocking reads, %d writes, %d kernel launches (%.1f per client step), %d cuBLAS calls (%.1f per client step), %d staged uploads, %d batches",
			c.name, r.reads, r.writes, r.launches, float64(r.launches)/float64(steps), r.gemms, float64(r.gemms)/float64(steps), r.stages, r.batches)
		for _, k := range kernels.All() {
			if n := r.perKernel[k]; n != 0 {
				t.Logf("  %-20s %4d", k, n)
			}
		}
		if r.reads > 2 {
			t.Errorf("%s: %d blocking reads, want at most 2", c.name, r.reads)
		}
		if r.launches > 10*steps {
			t.Errorf("%s: %d kernel launches (%.1f per client step), want at most 10 per client step", c.name, r.launches, float64(r.launches)/float64(steps))
		}
		m := c.most
		for _, x := range []struct {
			what      string
			got, most int
		}{{"blocking reads", r.reads, m.reads}, {"writes", r.writes, m.writes}, {"kernel launches", r.launches, m.launches},
			{"hidden_step launches", r.perKernel[kernels.HiddenStep], m.perKernel[kernels.HiddenStep]}, {"cuBLAS calls", r.gemms, m.gemms},
			{"staged uploads", r.stages, m.stages}, {"batches", r.batches, m.batches}} {
			if x.got > x.most {
				t.Errorf("%s: %d %s, measured %d before", c.name, x.got, x.what, x.most)
			}
		}
	}
}

// With graphs (Options.Graphs) each W1 round is one batch run as a graph: captured the first
// time its launches occur, replayed when they recur (every other round issues the same
// launches, the engine swapping the parameter buffers each round; rounds in which the
// target's minibatches split the replicas differ, and so does the first round, whose batch
// also holds the set-up's copy of w_0 to every replica): over 5 rounds, 4 captured and 1
// replayed (measured; 3 and 1 over 4 rounds before the copy). The rounds' staged arguments travel inside the graphs (each graph copies them
// into its own staging area), and the run's results have the bits of the run without graphs
// (paritytest's GraphsKeepBits checks that on small configurations).
func TestW1GraphCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("W1 on the shim takes several seconds")
	}
	const rounds = 5
	c := w1Counts(t, rounds, cuda.Options{Graphs: true})
	t.Logf("W1, %d rounds with graphs (1 pair): %d batches, %d graphs captured, %d replayed; %d launches and %d cuBLAS calls issued (captured or direct), %d staged copies, %d writes, %d reads",
		rounds, c.batches, c.graphs.Captured, c.graphs.Replayed, c.launches, c.gemms, c.stages, c.writes, c.reads)
	// Pinned to what was measured: setup or checkpoint batches cannot stand in for rounds.
	if c.graphs.Captured != 4 || c.graphs.Replayed != 1 {
		t.Errorf("%d graphs captured and %d replayed for %d rounds, measured 4 and 1", c.graphs.Captured, c.graphs.Replayed, rounds)
	}
}

// Options.Profile on the shim (timed by the host's clock): every launch and cuBLAS call of a
// W1 round is in the profile, under its kernel's name or its GEMM's shape, the call counts
// those the device saw, and graphs stay off while profiling (a graph's launches cannot be
// timed one by one).
func TestProfileCountsEveryCall(t *testing.T) {
	if testing.Short() {
		t.Skip("W1 on the shim takes several seconds")
	}
	d, ops := trainCounted(t, w1Job(1), cuda.Options{Profile: true, Graphs: true})
	prof, err := ops.Profile()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]kernels.Kernel{}
	for _, k := range kernels.All() {
		byName[k.Name()] = k
	}
	gemms, total := 0, 0.0
	seen := map[string]bool{}
	for _, p := range prof {
		seen[p.Op] = true
		total += p.Seconds
		if strings.HasPrefix(p.Op, "gemm ") {
			gemms += p.Calls
			continue
		}
		k, ok := byName[p.Op]
		if !ok {
			t.Errorf("profile entry %q is neither a kernel nor a GEMM", p.Op)
			continue
		}
		if p.Calls != d.perKernel[k] {
			t.Errorf("%s: %d calls in the profile, %d launched", p.Op, p.Calls, d.perKernel[k])
		}
		if p.Seconds <= 0 {
			t.Errorf("%s: %g s", p.Op, p.Seconds)
		}
	}
	for k, n := range d.perKernel {
		if !seen[k.Name()] {
			t.Errorf("%s launched %d times, not in the profile", k, n)
		}
	}
	if gemms != d.gemms {
		t.Errorf("%d GEMMs in the profile, %d issued", gemms, d.gemms)
	}
	if st := ops.GraphStats(); st.Captured != 0 {
		t.Errorf("%d graphs captured while profiling", st.Captured)
	}
	t.Logf("W1, 1 round on the shim: %d kinds of operation, %.2f s in all; the largest:", len(prof), total)
	for _, p := range prof[:min(5, len(prof))] {
		t.Logf("  %-36s %5d calls %8.3f s", p.Op, p.Calls, p.Seconds)
	}
}

// cnnCountsWith runs LeNet-5 with W2's training (2 clients of 64 of W2's images, K = 2, so
// that it is quick on the shim) on a backend of the given options for the given rounds and
// pairs, checkpoint after the last round only, and returns what its device saw.
func cnnCountsWith(t *testing.T, rounds, pairs int, opt cuda.Options) roundCounts {
	t.Helper()
	c, cp, tgt, err := traintest.W2Data()
	if err != nil {
		t.Fatal(err)
	}
	const clients, per = 2, 64
	shrink := func(ds []*datasets.Dataset) []*datasets.Dataset {
		out := make([]*datasets.Dataset, clients)
		for i := range out {
			d := *ds[i]
			dim := len(d.Features) / len(d.Labels)
			d.Features, d.Labels = d.Features[:per*dim], d.Labels[:per]
			out[i] = &d
		}
		return out
	}
	cfg := traintest.W2Config()
	cfg.LocalSteps, cfg.Rounds, cfg.Checkpoints = 2, rounds, []int{rounds}
	job := train.Job{Config: cfg, WorldC: shrink(c), WorldCPrime: shrink(cp), Target: tgt, Pairs: train.PairRange{Count: pairs}}
	return counted(trainCounted(t, job, opt))
}

// A CNN round's device calls (LeNet-5, W2's training on 2 clients with K = 2: 4 client steps,
// plus the target client's second pass where its worlds' minibatches differ), counted on the
// shim as a 2-round run minus a 1-round run: the same with 1 pair and with 2 (no operation is
// issued per replica: one launch or cuBLAS call covers every replica), one blocking read (the
// divergence check), one staged upload and one batch per round, and no more launches and cuBLAS
// calls than measured (W2 itself, 10 clients of K = 5: 1659 launches and 1020 cuBLAS calls per
// round, 32.5 and 20 per step group; docs/gpu.md). The profile of a round says which.
// The counts measured when the test was written, by patches (Options.PatchConv), which a
// change may lower but not raise (171 launches then; 151 since LeNet-5's ReLUs run in its max
// poolings' launches: 4 a step group; 70 cuBLAS calls instead of 100 since the dense layers'
// biases are kernels of their own, compute.ColumnBiaser, in place of 6 cuBLAS calls of
// degenerate shapes a step group, with the ReLUs after the first two dense layers in the same
// passes: 2 add_col_activate, 2 activate_grad_sum_cols, 1 add_col and 1 sum_cols a step group,
// and 2 activate and 2 activate_grad fewer; and the softmax reads the logits as they lie,
// compute.ColumnXent, 2 transpose_blocks fewer: 151 launches still), and by the default's
// direct kernels (TestDirectConvCounts).
const cnnLaunchesPerRound, cnnGemmsPerRound = 151, 70

// cnnPatches is the patch form that cnnLaunchesPerRound and cnnGemmsPerRound count.
var cnnPatches = cuda.Options{PatchConv: true}

func TestCNNRoundCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("LeNet-5 on the shim takes several seconds")
	}
	for _, form := range []struct {
		name            string
		opt             cuda.Options
		launches, gemms int
	}{
		{"patches", cnnPatches, cnnLaunchesPerRound, cnnGemmsPerRound},
		{"default", cuda.Options{}, cnnLaunchesPerRound + 3, cnnGemmsPerRound - 15},
	} {
		t.Run(form.name, func(t *testing.T) { testCNNRoundCounts(t, form.opt, form.launches, form.gemms) })
	}
}

func testCNNRoundCounts(t *testing.T, opt cuda.Options, mostLaunches, mostGemms int) {
	var perPair []roundCounts
	for _, pairs := range []int{1, 2} {
		one, two := cnnCountsWith(t, 1, pairs, opt), cnnCountsWith(t, 2, pairs, opt)
		r := roundCounts{reads: two.reads - one.reads, writes: two.writes - one.writes, launches: two.launches - one.launches,
			gemms: two.gemms - one.gemms, stages: two.stages - one.stages, batches: two.batches - one.batches}
		if pairs == 1 {
			for _, k := range kernels.All() {
				if n := two.perKernel[k] - one.perKernel[k]; n != 0 {
					t.Logf("  %-20s %4d", k, n)
				}
			}
		}
		t.Logf("LeNet-5 per round (2 clients, K 2, %d pairs): %d blocking reads, %d writes, %d kernel launches, %d cuBLAS calls, %d staged uploads, %d batches",
			pairs, r.reads, r.writes, r.launches, r.gemms, r.stages, r.batches)
		perPair = append(perPair, r)
	}
	if a, b := perPair[0], perPair[1]; a.launches != b.launches || a.gemms != b.gemms || a.reads != b.reads || a.stages != b.stages {
		t.Errorf("the device calls per round depend on the pairs: %+v with 1, %+v with 2", a, b)
	}
	r := perPair[1]
	for _, c := range []struct {
		what      string
		got, most int
	}{{"blocking reads", r.reads, 1}, {"writes", r.writes, 0}, {"kernel launches", r.launches, mostLaunches},
		{"cuBLAS calls", r.gemms, mostGemms}, {"staged uploads", r.stages, 1}, {"batches", r.batches, 1}} {
		if c.got > c.most {
			t.Errorf("%d %s per round, measured %d before", c.got, c.what, c.most)
		}
	}
}

// With Options.SplitK, LeNet-5's weight gradients by patches at 1 pair (2 replicas) are computed in depth
// slices of at least 512 where the slices outnumber the batch elements, each element's slices
// one cuBLAS call: conv1's (6 x 26 a replica, stacked into one product of the replicas' rows,
// depth 32 samples x 784 pixels = 25088, 1 tile) in 32 slices, one call in every step group;
// conv2's (16 x 151, depth 3200, 2 tiles) in 4 slices, a call per replica (2 in the 3 step
// groups of both replicas, 1 in the 2 of the target's worlds apart); every other product is
// unsplit. So a round issues 3 cuBLAS calls more than unsplit and 13 splitk_reduce launches (a
// call's worth per split element: 5 + 3 x 2 + 2). Issued a slice per call, as before the
// eleventh session, the same round took 80 calls more, each with no more output tiles than the
// unsplit product.
func TestSplitKCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("LeNet-5 on the shim takes several seconds")
	}
	split := cuda.Options{SplitK: true, PatchConv: true}
	one, two := cnnCountsWith(t, 1, 1, split), cnnCountsWith(t, 2, 1, split)
	gemms, reduces := two.gemms-one.gemms, two.perKernel[kernels.SplitKReduce]-one.perKernel[kernels.SplitKReduce]
	launches := two.launches - one.launches
	t.Logf("LeNet-5 per round with SplitK (2 clients, K 2, 1 pair): %d cuBLAS calls, %d launches of which %d splitk_reduce", gemms, launches, reduces)
	if gemms != cnnGemmsPerRound+3 || reduces != 13 || launches != cnnLaunchesPerRound+13 {
		t.Errorf("%d cuBLAS calls and %d launches (%d splitk_reduce) per round, want %d, %d and 13",
			gemms, launches, reduces, cnnGemmsPerRound+3, cnnLaunchesPerRound+13)
	}
}

// By default (unless Options.PatchConv), LeNet-5's second convolution (16 output channels of 150 patch rows,
// an input per replica) runs on the direct kernels: per step group conv_direct and
// conv_direct_dw once, two splitk_reduce (weights, bias), conv_direct_dx once, and two copies of
// its weights by conv_direct_wt (one for conv_direct, one for conv_direct_dx); no col2im, none
// of its three products by patches (3 cuBLAS calls a group), [W | b] copies or rows of ones
// (22 axpby a round), against the patch form (cnnPatches). The first convolution, whose input (the minibatch) every replica shares,
// keeps the patch form and its stacked products: its patches once a group (im2col_rows). So per
// round of 5 step groups: 15 cuBLAS calls fewer and 3 launches more.
func TestDirectConvCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("LeNet-5 on the shim takes several seconds")
	}
	direct := cuda.Options{}
	one, two := cnnCountsWith(t, 1, 1, direct), cnnCountsWith(t, 2, 1, direct)
	per := func(k kernels.Kernel) int { return two.perKernel[k] - one.perKernel[k] }
	gemms, launches := two.gemms-one.gemms, two.launches-one.launches
	t.Logf("LeNet-5 per round by the direct kernels (2 clients, K 2, 1 pair): %d cuBLAS calls, %d launches", gemms, launches)
	want := map[kernels.Kernel]int{kernels.ConvDirect: 5, kernels.ConvDirectDW: 5, kernels.ConvDirectDX: 5,
		kernels.ConvDirectWT: 10, kernels.SplitKReduce: 10, kernels.Im2col: 0, kernels.Im2colRows: 5,
		kernels.Col2im: 0, kernels.Axpby: 28}
	for k, n := range want {
		if got := per(k); got != n {
			t.Errorf("%s: %d launches per round, want %d", k, got, n)
		}
	}
	if gemms != cnnGemmsPerRound-15 || launches != cnnLaunchesPerRound+3 {
		t.Errorf("%d cuBLAS calls and %d launches per round, want %d and %d", gemms, launches, cnnGemmsPerRound-15, cnnLaunchesPerRound+3)
	}
}
