package cuda

import (
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/fedaudit/fedaudit/kernels"
)

// Ops queues its launches and GEMMs and issues them in batches (flush): everything between two
// points where the host needs the device (a read, a write, a free, Err, Close) is one batch.
// The per-call arguments of a batch (indices, coefficients, seeds) are collected in one host
// arena and copied to the device by one Device.Stage call before the batch's launches, which
// take their staged pointers as offsets into the arena, patched when the base is known. In
// the engine a batch is a round: its only read is the divergence check at the end (one upload
// of the round's inputs instead of one per operation). With graphs on and a device that can
// capture them (GraphDevice), a batch runs as a CUDA graph: captured once, then launched again
// whenever a later batch issues the same launches with the same arguments (only the staged
// bytes may differ); otherwise it is captured anew.

// record is one queued launch or GEMM; its arguments are o.qargs[a0:a1], of which the ones at
// the positions o.qstaged[s0:s1] (relative to a0) are offsets into the arena.
type record struct {
	gemm        bool
	k           kernels.Kernel
	grid, block int
	a0, a1      int
	s0, s1      int
	g           GemmArgs
}

// Queue limits: a batch is issued early when it reaches either, so the host stays at most a
// bounded amount of work ahead and the arena stays small.
const (
	maxQueued     = 4096
	maxArenaBytes = 1 << 20
)

// GraphEnv is the environment variable that turns on Options.Graphs.
const GraphEnv = "FEDAUDIT_CUDA_GRAPHS"

// GraphDevice is implemented by devices that can capture a batch of launches and GEMMs as a
// graph and run it again (CUDA graphs; the host shim models them).
type GraphDevice interface {
	// CaptureGraph records the launches and GEMMs issue makes (through the device's Launch and
	// Gemm) as a graph, without running them. The graph owns a staging area of n bytes at the
	// device address issue is given; the graph's first step copies Launch's staged bytes
	// there.
	CaptureGraph(n int, issue func(staged uint64) error) (Graph, error)
}

// Graph is a captured batch.
type Graph interface {
	// Launch runs the graph after all earlier work, with staged (at most the capture's n
	// bytes) in its staging area.
	Launch(staged []byte) error
	// Destroy releases the graph once every launch of it has finished.
	Destroy() error
}

// graphCacheSize is the most graphs kept: a W1 round alternates between two (the engine swaps
// the parameter buffers every round) and a few more when the target client's minibatches
// split the replicas, and checkpoints and the informed statistics add batches of their own.
const graphCacheSize = 32

// minGraphRecords is the smallest batch run as a graph: a capture and instantiation cost more
// than launching a few kernels directly (the checkpoints' evaluation issues batches of four).
const minGraphRecords = 16

// cachedGraph is a graph with what it was captured from: its records (positions relative to
// its own argument slices) and arguments, to compare a batch with exactly.
type cachedGraph struct {
	key     uint64
	recs    []record
	args    []uint64
	staged  []int32
	arena   int
	g       Graph
	lastUse int
}

// GraphStats counts the batches run as graphs: captured (and instantiated) and replayed;
// Disabled is why graphs were turned off after a failed capture ("" while they are on or were
// never asked for).
type GraphStats struct {
	Captured, Replayed int
	Disabled           string
}

// queueLaunch queues kernel k with the current arguments.
func (o *Ops) queueLaunch(k kernels.Kernel, grid, block int) {
	o.queue = append(o.queue, record{k: k, grid: grid, block: block})
	o.finishRecord()
}

// queueGemm queues one GEMM call.
func (o *Ops) queueGemm(g GemmArgs) {
	o.queue = append(o.queue, record{gemm: true, g: g})
	o.finishRecord()
}

// finishRecord copies the current arguments into the queue and issues the batch when it is
// full, or at once when batching is off.
func (o *Ops) finishRecord() {
	r := &o.queue[len(o.queue)-1]
	r.a0, r.s0 = len(o.qargs), len(o.qstaged)
	if !r.gemm {
		o.qargs = append(o.qargs, o.args.v...)
		o.qstaged = append(o.qstaged, o.args.staged...)
	}
	r.a1, r.s1 = len(o.qargs), len(o.qstaged)
	if o.unbatched || len(o.queue) >= maxQueued || len(o.arena) >= maxArenaBytes {
		o.flush()
	}
}

// Flush issues every queued launch and GEMM (it does not wait for them).
func (o *Ops) Flush() { o.flush() }

// flush issues the queued batch: one staged copy of its arguments, then its launches and GEMMs
// in order, or the graph of the batch.
func (o *Ops) flush() {
	defer o.resetQueue()
	if len(o.queue) == 0 || o.err != nil {
		return
	}
	o.batches++
	if o.graphDev != nil && len(o.queue) >= minGraphRecords {
		o.runGraph()
		return
	}
	var base uint64
	if len(o.arena) > 0 {
		var err error
		if base, err = o.dev.Stage(o.arena); err != nil {
			o.fail("stage arguments", err)
			return
		}
	}
	o.issue(o.queue, o.qargs, o.qstaged, base)
}

func (o *Ops) resetQueue() {
	o.queue, o.qargs, o.qstaged, o.arena = o.queue[:0], o.qargs[:0], o.qstaged[:0], o.arena[:0]
}

// issue launches recs in order with the staged offsets turned into addresses at base (args is
// patched in place).
func (o *Ops) issue(recs []record, args []uint64, staged []int32, base uint64) {
	for _, r := range recs {
		if o.err != nil {
			return
		}
		a := args[r.a0:r.a1]
		for _, i := range staged[r.s0:r.s1] {
			a[i] += base
		}
		if r.gemm {
			o.fail("gemm", o.dev.Gemm(r.g))
			o.synced("gemm")
			continue
		}
		o.fail(r.k.Name(), o.dev.Launch(r.k, r.grid, r.block, a))
		o.synced(r.k.Name())
	}
}

// runGraph runs the batch as a graph: the cached graph of an identical batch, else a new one.
func (o *Ops) runGraph() {
	key := o.batchKey()
	o.graphUse++
	for _, c := range o.graphs {
		if c.key == key && c.arena >= len(o.arena) && o.sameBatch(c) {
			c.lastUse = o.graphUse
			o.graphStats.Replayed++
			o.fail("graph launch", c.g.Launch(o.arena))
			return
		}
	}
	c := &cachedGraph{key: key, recs: slices.Clone(o.queue), args: slices.Clone(o.qargs), staged: slices.Clone(o.qstaged),
		arena: max(len(o.arena), 8), lastUse: o.graphUse}
	// The capture patches its own copy of the arguments: c.args keeps the offsets, to compare.
	patched := slices.Clone(o.qargs)
	before := o.err
	g, err := o.graphDev.CaptureGraph(c.arena, func(staged uint64) error {
		o.issue(o.queue, patched, o.qstaged, staged)
		return o.err
	})
	if err != nil {
		// Nothing ran: the device cannot capture this batch (a driver or cuBLAS without
		// support). Graphs are off from here on, and the batch is issued directly.
		o.err = before
		o.graphDev, o.graphStats.Disabled = nil, err.Error()
		base, serr := uint64(0), error(nil)
		if len(o.arena) > 0 {
			base, serr = o.dev.Stage(o.arena)
		}
		if serr != nil {
			o.fail("stage arguments", serr)
			return
		}
		o.issue(o.queue, o.qargs, o.qstaged, base)
		return
	}
	c.g = g
	o.graphStats.Captured++
	if len(o.graphs) >= graphCacheSize {
		// Evict the least recently used graph.
		i := 0
		for j, x := range o.graphs {
			if x.lastUse < o.graphs[i].lastUse {
				i = j
			}
		}
		o.fail("graph destroy", o.graphs[i].g.Destroy())
		o.graphs = slices.Delete(o.graphs, i, i+1)
	}
	o.graphs = append(o.graphs, c)
	o.fail("graph launch", g.Launch(o.arena))
}

var graphSeed = maphash.MakeSeed()

// batchKey hashes what a graph fixes: the kernels, launch shapes, GEMMs and arguments (staged
// ones as offsets), not the staged bytes.
func (o *Ops) batchKey() uint64 {
	var h maphash.Hash
	h.SetSeed(graphSeed)
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	for _, r := range o.queue {
		if r.gemm {
			put(1 << 40)
			put(uint64(r.g.M)<<32 | uint64(r.g.N))
			put(uint64(r.g.K) | uint64(r.g.Math)<<40)
			put(r.g.A ^ r.g.B<<1 ^ r.g.C<<2)
			continue
		}
		put(uint64(r.k)<<32 | uint64(r.grid))
		for _, v := range o.qargs[r.a0:r.a1] {
			put(v)
		}
	}
	return h.Sum64()
}

// sameBatch reports whether the queued batch is exactly the one c was captured from.
func (o *Ops) sameBatch(c *cachedGraph) bool {
	if len(c.recs) != len(o.queue) || !slices.Equal(c.args, o.qargs) || !slices.Equal(c.staged, o.qstaged) {
		return false
	}
	for i, r := range o.queue {
		if r != c.recs[i] {
			return false
		}
	}
	return true
}

// GraphStats returns the counts of batches captured as graphs and replayed.
func (o *Ops) GraphStats() GraphStats { return o.graphStats }

// Batches is the number of batches issued so far.
func (o *Ops) Batches() int { return o.batches }

// closeGraphs destroys every cached graph.
func (o *Ops) closeGraphs() error {
	var first error
	for _, c := range o.graphs {
		if err := c.g.Destroy(); err != nil && first == nil {
			first = fmt.Errorf("destroy graph: %w", err)
		}
	}
	o.graphs = nil
	return first
}

// graphsWanted reports whether Options or the environment turn graphs on.
func graphsWanted(opt Options) bool { return opt.Graphs || SwitchOn(GraphEnv) }
