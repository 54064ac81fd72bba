package train

import (
	"context"
	"fmt"
	"runtime"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/memory"
)

// Job is one shard of an audit's training: what Train and TrainOn run.
type Job struct {
	// Config is the training configuration shared by every pair.
	Config Config
	// WorldC (world 0) and WorldCPrime (world 1) are the clients' datasets of the two worlds.
	// They list the same number of clients and differ only in sample Target.Index of client
	// Target.Client (remove-client: WorldCPrime lacks client Target.Client).
	WorldC, WorldCPrime []*datasets.Dataset
	// Target says where the worlds differ.
	Target TargetInfo
	// Test, when not nil, gives each checkpoint a test accuracy.
	Test *datasets.Dataset
	// Pairs is the shard: pair p trains both worlds with the seed RunSeed(Config.Seed, p).
	Pairs PairRange
	// Recorder receives every checkpoint.
	Recorder checkpoint.Recorder
	// Progress, when not nil, is called after every round of every group.
	Progress func(done, total int)
	// Initial, when not nil, is every replica's w_0 in place of the model's seeded
	// initialization; TrainOn and TrainInGroups set it from Config.Pretrain when it is nil.
	Initial []float32
}

// Train runs the pairs of one shard (job.Pairs) on the CPU backend; job.Recorder receives
// every checkpoint. Results do not depend on how pairs are split into shards or groups.
//
// The pairs are trained in groups (Config.GroupPairs, or as many as Config.GroupMemory holds by
// MemoryOf), one group after another, so memory is bounded by the group and not by the shard.
// The recorder receives each group's checkpoints in round order before the next group's: within one
// round the rows still come in pair order.
func Train(ctx context.Context, job Job) error {
	be := cpu.New(job.Config.Threads)
	defer be.Close()
	size := GroupSize(job.Config, memory.SizesOf(job.WorldC, job.Test), job.Pairs.Count)
	// The next group allocates as much again: return this one's buffers first, so the heap
	// does not grow to two groups before the collector runs on its own.
	return TrainInGroups(ctx, be, job, size, func() error { runtime.GC(); return nil })
}

// TrainInGroups trains job's pairs on be in groups of size pairs, one group after another
// (TrainOn each), and calls release between two groups: it frees the finished group's buffers
// (the collector on the CPU; the device memory of a GPU backend, cuda's FreeAll). Results do
// not depend on size.
func TrainInGroups(ctx context.Context, be compute.Backend, job Job, size int, release func() error) error {
	pairs, progress := job.Pairs, job.Progress
	if pairs.First < 0 || pairs.Count < 1 {
		return fmt.Errorf("train: pair range first %d count %d: need first >= 0, count >= 1", pairs.First, pairs.Count)
	}
	size = max(1, min(size, pairs.Count))
	// Once for every group: the groups share w_0. The pretraining's buffers are released
	// before the first group, which was sized to the memory free before it.
	if pretrained, err := setPretrainedInitial(ctx, be, &job); err != nil {
		return err
	} else if pretrained && release != nil {
		if err := release(); err != nil {
			return fmt.Errorf("pretrain: release its memory: %w", err)
		}
	}
	groups := (pairs.Count + size - 1) / size
	for g := 0; g < groups; g++ {
		gr := PairRange{First: pairs.First + g*size, Count: min(size, pairs.Count-g*size)}
		var prog func(done, total int)
		if progress != nil {
			prog = func(done, total int) { progress(g*total+done, groups*total) }
		}
		gj := job
		gj.Pairs, gj.Progress = gr, prog
		if err := TrainOn(ctx, be, gj); err != nil {
			if groups > 1 {
				return fmt.Errorf("pairs %d..%d: %w", gr.First, gr.First+gr.Count-1, err)
			}
			return err
		}
		if g+1 < groups && release != nil {
			if err := release(); err != nil {
				return fmt.Errorf("pairs %d..%d: release the group's memory: %w", gr.First, gr.First+gr.Count-1, err)
			}
		}
	}
	return nil
}

// DeviceGroupSize is the number of pairs a GPU trains together, out of count: GroupPairs when
// set, else as many as fit by MemoryOn(on) in GroupMemory or 90% of free, the device's free
// memory (memory.Memory.DeviceGroupPairs); a configuration one pair of which does not fit is
// refused with both sizes, instead of the device running out mid-training. on is
// memory.Device, or memory.DeviceWinograd4 (DeviceWinograd) for a device known to run its 3 x 3
// convolutions by Winograd's F(4x4, 3x3) (F(2x2, 3x3)).
func DeviceGroupSize(cfg Config, s memory.DataSizes, count int, free int64, on memory.Backend) (int, error) {
	if cfg.GroupPairs > 0 {
		return max(min(cfg.GroupPairs, count), 1), nil
	}
	mem, err := MemoryOn(cfg, s, on)
	if err != nil {
		return 0, err
	}
	return mem.DeviceGroupPairs(cfg.GroupMemory, free, count)
}

// GroupSize is the number of pairs Train trains together, out of count: GroupPairs when set,
// else as many as fit GroupMemory (memory.DefaultGroupMemory when 0) by MemoryOf, at least 1; the last
// group may be smaller. Sizes MemoryOf cannot size (an invalid model) give one group, whose
// engine then reports the error.
func GroupSize(cfg Config, s memory.DataSizes, count int) int {
	size := cfg.GroupPairs
	if size <= 0 {
		size = count
		if mem, err := MemoryOf(cfg, s); err == nil {
			budget := cfg.GroupMemory
			if budget <= 0 {
				budget = memory.DefaultGroupMemory
			}
			size = mem.GroupPairs(budget)
		}
	}
	return max(min(size, count), 1)
}

// TrainOn trains the pairs on a given backend as one group: every replica's state is allocated
// at once (Train groups them). It stops within one client step of ctx being cancelled.
func TrainOn(ctx context.Context, be compute.Backend, job Job) error {
	if _, err := setPretrainedInitial(ctx, be, &job); err != nil {
		return err
	}
	e, err := newEngine(be, job)
	if err != nil {
		return err
	}
	// The local-step loop polls an atomic flag, not ctx.Err() (a mutex), so the check costs
	// nothing beside a step; context.AfterFunc sets it when ctx is cancelled.
	if ctx.Err() != nil {
		return ctx.Err()
	}
	stop := context.AfterFunc(ctx, func() { e.stop.Store(true) })
	defer stop()
	return e.train(ctx, job.Recorder, job.Progress)
}
