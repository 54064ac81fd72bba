// Package memory holds train's memory estimate: the data sizes the engine's memory depends on
// (DataSizes), what of a training configuration it depends on (Training), the estimate itself
// (Estimate: it mirrors the engine's allocations on the CPU or, with Device, a GPU's), the
// estimate for a group of pairs (Memory) with the number of pairs that fit a budget, and
// saturating byte arithmetic, so that an absurd model is refused rather than overflowing.
// train.MemoryOf and MemoryOn are its entry points from a configuration.
package memory

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/datasets"
)

// DefaultGroupMemory is the memory budget of one group of pairs trained together when
// train.Config.GroupMemory is zero. It is large enough that the engine's per-call costs are shared by
// many replicas (a Fashion-MNIST MLP of 51k parameters gets about 50 pairs per group) and small
// enough that a shard of any number of pairs fits a laptop.
const DefaultGroupMemory int64 = 256 << 20

// Backend says whose allocations an estimate follows.
type Backend int

const (
	// Host is the CPU backend: host memory the collector frees, convolution patches made a
	// cache-sized chunk of replicas at a time.
	Host Backend = iota
	// Device is a GPU: memory freed explicitly, every replica's convolution patches written
	// and held from the forward to the backward pass, or the stride-1 3 x 3 convolutions by
	// Winograd's F(4x4, 3x3) (the GPU's default) or F(2x2, 3x3): counted every way, the
	// largest taken, for a GPU whose options are not known or that computes by patches
	// (cuda.Options.PatchConv).
	Device
	// DeviceWinograd is a GPU known to run the stride-1 3 x 3 convolutions by Winograd's
	// F(2x2, 3x3) (cuda.Options.Winograd2): counted that way only (ResNet-18 takes about
	// three quarters of its memory by patches).
	DeviceWinograd
	// DeviceWinograd4 is a GPU known to run them by Winograd's F(4x4, 3x3), as it does by
	// default: counted that way only.
	DeviceWinograd4
)

// DeviceFor is the Backend of a GPU that runs the 3 x 3 convolutions that fit by Winograd's
// form t (compute.WinogradTile), or, for 0, by their patches (every form counted, the largest
// taken: Device).
func DeviceFor(t compute.WinogradTile) Backend {
	switch t {
	case compute.WinogradF2:
		return DeviceWinograd
	case compute.WinogradF4:
		return DeviceWinograd4
	}
	return Device
}

// WinogradTile is the Winograd form b counts the convolutions that fit by, 0 for none.
func (b Backend) WinogradTile() compute.WinogradTile {
	switch b {
	case DeviceWinograd:
		return compute.WinogradF2
	case DeviceWinograd4:
		return compute.WinogradF4
	}
	return 0
}

// device reports whether b is a GPU.
func (b Backend) device() bool { return b == Device || b == DeviceWinograd || b == DeviceWinograd4 }

// DataSizes are the data dimensions the engine's memory depends on.
type DataSizes struct {
	Dim, Classes int
	// Shape is one sample's shape (Dataset.Shape); nil when not known (Dim is then a stand-in).
	Shape       []int
	Clients     int // m
	MaxSamples  int // the largest client's sample count
	TestSamples int
}

// Memory is an estimate of the bytes the engine holds while it trains a group of pairs:
// Fixed for the data and shared buffers, PerPair for each pair's two replicas (parameter
// buffers, the model's workspace, the checkpoint's host copies). It counts float32 buffers the
// engine allocates, not the Go runtime's overhead.
type Memory struct {
	Params  int   `json:"params"` // d
	Fixed   int64 `json:"fixed_bytes"`
	PerPair int64 `json:"per_pair_bytes"`
	// WinogradConvolutions is how many convolutions the estimate counted by Winograd's
	// minimal filtering (DeviceWinograd and DeviceWinograd4 only; the others count none).
	WinogradConvolutions int `json:"winograd_convolutions,omitempty"`
}

// Bytes is the estimate for a group of pairs.
func (m Memory) Bytes(pairs int) int64 { return SatAdd(m.Fixed, SatMul(m.PerPair, int64(pairs))) }

// GroupPairs is the number of pairs whose replicas fit budget bytes beside the fixed part, at
// least 1 (a single pair is trained whatever the budget; whether it fits the machine is for the
// caller to check).
func (m Memory) GroupPairs(budget int64) int {
	if m.PerPair <= 0 {
		return math.MaxInt32
	}
	g := (budget - m.Fixed) / m.PerPair
	return int(min(max(g, 1), math.MaxInt32))
}

// SizesOf returns the data sizes of clients and a test set (nil: none).
func SizesOf(clients []*datasets.Dataset, test *datasets.Dataset) DataSizes {
	s := DataSizes{Clients: len(clients)}
	for _, c := range clients {
		if c != nil {
			s.Dim, s.Classes, s.Shape = c.Dim(), c.Classes, c.Shape
			s.MaxSamples = max(s.MaxSamples, c.Len())
		}
	}
	if test != nil {
		s.TestSamples = test.Len()
	}
	return s
}

// CeilBytes rounds x bytes up to a whole number, saturating at MaxInt64/2 so that sums of
// estimates cannot overflow.
func CeilBytes(x float64) int64 {
	if x >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(x))
}

// SatMul is a b, saturating at MaxInt64/2.
func SatMul(a, b int64) int64 {
	if a != 0 && b > (math.MaxInt64/2)/a {
		return math.MaxInt64 / 2
	}
	return a * b
}

// SatAdd is a + b, saturating at MaxInt64/2.
func SatAdd(a, b int64) int64 { return min(a+b, math.MaxInt64/2) }

// FormatBytes writes n in KiB, MiB or GiB for people: in whole MiB a budget of a few KiB read
// "the budget is 0 MiB" beside a pair that needs "0 MiB".
func FormatBytes(n int64) string {
	// A unit is taken from where the smaller one would round to 1024 of it.
	if n >= 1<<30-1<<19 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	if n >= 1<<20-1<<9 {
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	if n >= 1<<10 {
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// DeviceGroupPairs is the pairs of count a GPU with free bytes of free memory trains together
// at m bytes a pair: as many as fit groupMemory or, when it is 0, 90% of free (the rest is
// left to cuBLAS's workspace and the CUDA graphs), at least one; an error naming both sizes
// when one pair does not fit. A groupMemory above 90% of free is cut to it: the budget of a
// group cannot make the device larger, and groups sized by it would run out of device memory
// mid-training instead of being refused here.
func (m Memory) DeviceGroupPairs(groupMemory, free int64, count int) (int, error) {
	budget := groupMemory
	if limit := free / 10 * 9; budget <= 0 || free > 0 && budget > limit {
		budget = limit
	}
	if need := m.Bytes(1); need > budget {
		return 0, fmt.Errorf("train: one pair needs about %s of device memory (d = %d parameters), the budget is %s (free device memory %s)",
			FormatBytes(need), m.Params, FormatBytes(budget), FormatBytes(free))
	}
	return max(min(m.GroupPairs(budget), count), 1), nil
}
