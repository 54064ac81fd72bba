package experiment

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/runs"
)

// With several devices, every shard is trained exactly once, on one of the devices, no device
// trains two shards at once, the devices work in parallel, each shard gets its own progress
// callback (made in shard order before any worker starts), and Logf is never called
// concurrently.
func TestForEachShardSpreadsShardsOverDevices(t *testing.T) {
	shards := AllShards(7)
	var (
		mu       sync.Mutex
		trained  []int
		busy     = map[int]bool{}
		parallel atomic.Int32
		peak     atomic.Int32
		inLog    atomic.Int32
		made     []int
	)
	opts := TrainOptions{Devices: []int{0, 2, 5}, Logf: func(string, ...any) {
		if inLog.Add(1) > 1 {
			t.Error("Logf called concurrently")
		}
		inLog.Add(-1)
	}}
	progress := func(s runs.Shard) func(int, int) {
		made = append(made, s.Index)
		idx := s.Index
		return func(done, total int) {
			if done != idx {
				t.Errorf("shard %d got shard %d's progress callback", done, idx)
			}
		}
	}
	release := make(chan struct{})
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for peak.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		close(release) // at the deadline too, so that a serial bug fails instead of hanging
	}()
	err := forEachShard(context.Background(), shards, opts, progress, func(_ context.Context, s runs.Shard, o TrainOptions) error {
		mu.Lock()
		if busy[o.Device] {
			t.Errorf("device %d trains two shards at once", o.Device)
		}
		if !slices.Contains([]int{0, 2, 5}, o.Device) || o.Devices != nil {
			t.Errorf("shard %s on device %d (devices %v)", s, o.Device, o.Devices)
		}
		busy[o.Device] = true
		trained = append(trained, s.Index)
		mu.Unlock()
		n := parallel.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release // every device is busy once before any shard finishes
		o.Progress(s.Index, 7)
		o.Logf("shard %s done", s)
		parallel.Add(-1)
		mu.Lock()
		busy[o.Device] = false
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(trained)
	if !slices.Equal(trained, []int{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("trained shards %v, want each of 0..6 once", trained)
	}
	if !slices.Equal(made, []int{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("progress callbacks made for %v, want 0..6 in order", made)
	}
	if peak.Load() != 3 {
		t.Errorf("at most %d shards at once, want 3 (one per device)", peak.Load())
	}
}

// The first failure stops the rest and is returned, naming the shard and the device; one
// device (or none listed) trains in turn on it.
func TestForEachShardErrorsAndOneDevice(t *testing.T) {
	boom := errors.New("out of device memory")
	err := forEachShard(context.Background(), AllShards(6), TrainOptions{Devices: []int{0, 1}}, nil,
		func(ctx context.Context, s runs.Shard, o TrainOptions) error {
			if s.Index == 1 {
				return boom
			}
			return ctx.Err()
		})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the shard's error", err)
	}
	var devs []int
	err = forEachShard(context.Background(), AllShards(3), TrainOptions{Devices: []int{4}}, nil,
		func(_ context.Context, s runs.Shard, o TrainOptions) error {
			devs = append(devs, o.Device)
			return nil
		})
	if err != nil || !slices.Equal(devs, []int{4, 4, 4}) {
		t.Errorf("one device: %v, devices %v; want every shard on device 4 in turn", err, devs)
	}
}
