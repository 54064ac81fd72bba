package train

import (
	"context"
	"fmt"
	"slices"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/model"
)

// Deferred first-layer updates. A local step changes the first weight matrix by a low-rank
// term: W_{k+1} = W_k + u_k^T x_k, with x_k the step's B x in minibatch (shared by every
// replica) and u_k = -eta_k c_k delta_k the B x h scaled deltas of one replica (FedProx also
// shrinks the earlier terms by 1 - eta_k alpha). So client i's weights after k steps are
//
//	W_k = W_0 + U_{<k}^T X_{<k},
//
// and the step's pre-activation x_k W_k^T = (x_k W_0^T) + (x_k X_{<k}^T) U_{<k} needs only the
// rows of one product P = X W_0^T computed for all K minibatches at once (depth in, K B rows)
// and a correction through the Gram matrix X X^T, shared by every replica. The weights are
// never written during local training: the server's sum over a window of clients,
// sum_i (W_0 + U_i^T X_i), is one product of depth (window) K B. Exact in real arithmetic; in
// float32 the sums are taken in another order than the direct form's, so the two agree to
// rounding (deferred_test.go). What it saves is memory traffic: the direct form reads each
// replica's first-layer weights once in the forward product and reads and writes them in the
// update at every step; here they are read once per client and written once per window, and
// both big products are deep enough to run at the micro-kernel's rate (docs/training.md).

// deferredState is the engine's storage for deferred first-layer updates.
type deferredState struct {
	model     *model.MLP
	kb, h     int // rows per client (K B) and the first layer's width
	window    int // clients whose factors are kept before they are folded into the sum
	xs, ys    [2]compute.Buffer
	u, shadow compute.Buffer // factors: R x window x K B x h, and R x K B x h for the informed shadow
	p         compute.Buffer // R x K B x h: the client's first-layer pre-activations
	gram      compute.Buffer // K B x K B
	idx       []int32        // a client's K minibatches' sample indices
	// Per slot: the client whose minibatches it holds (round, client), and whether the
	// two worlds' minibatches differ (the target sample or client is in them).
	slotRound, slotClient []int
	split                 []bool
}

// newDeferred returns the deferred state when the configuration can use it: an MLP with
// whole-gradient clipping and fixed minibatches small enough that the corrections (about
// (K-1) B / (4 in) of the direct form's first-layer work) stay small.
func newDeferred(e *engine) *deferredState {
	m, ok := e.model.(*model.MLP)
	cfg := e.cfg
	K, B := cfg.LocalSteps, cfg.BatchSize
	if !ok || e.perEx != 0 || cfg.Batching != algo.Fixed || B > e.dim || (K-1)*B > e.dim {
		return nil
	}
	if e.canary != nil && e.canary.variants != nil {
		return nil // record canaries give replicas their own minibatches; the deferred form shares them
	}
	ds := &deferredState{model: m, kb: K * B, h: m.Sizes[1]}
	// The window depends on the model and the schedule only, never on the number of replicas,
	// so that the order of the server's sum (and so its rounding) is the same in every shard.
	ds.window = max(1, min(e.m, 4*e.d/(ds.kb*ds.h)))
	be, R := e.be, e.R
	for w := range ds.xs {
		ds.xs[w] = be.Alloc(ds.window * ds.kb * e.dim)
		ds.ys[w] = be.Alloc(ds.window * ds.kb)
	}
	ds.u = be.Alloc(R * ds.window * ds.kb * ds.h)
	if cfg.Informed {
		ds.shadow = be.Alloc(R * ds.kb * ds.h)
	}
	ds.p = be.Alloc(R * ds.kb * ds.h)
	ds.gram = be.Alloc(ds.kb * ds.kb)
	ds.idx = make([]int32, ds.kb)
	ds.slotRound = slices.Repeat([]int{-1}, ds.window)
	ds.slotClient = slices.Repeat([]int{-1}, ds.window)
	ds.split = make([]bool, ds.window)
	return ds
}

// slot is the window slot of client i.
func (ds *deferredState) slot(i int) int { return i % ds.window }

// x is world w's minibatch rows of slot s (all K steps), shared by a batch of replicas.
func (ds *deferredState) x(e *engine, w, s, batch int) (x, y compute.Mat) {
	x = compute.Mat{Buf: ds.xs[w], Off: s * ds.kb * e.dim, Rows: ds.kb, Cols: e.dim, Stride: e.dim, Batch: batch}
	y = compute.Mat{Buf: ds.ys[w], Off: s * ds.kb, Rows: ds.kb, Cols: 1, Stride: 1, Batch: batch}
	return x, y
}

// factors is slot s's factors (K B x h) of replicas first, first+stride, ... (count), or the
// shadow's.
func (ds *deferredState) factors(shadow bool, s, first, count, stride int) compute.Mat {
	if shadow {
		n := ds.kb * ds.h
		return compute.Mat{Buf: ds.shadow, Off: first * n, Rows: ds.kb, Cols: ds.h, Stride: ds.h, Batch: count, BatchStride: stride * n}
	}
	n := ds.window * ds.kb * ds.h
	return compute.Mat{Buf: ds.u, Off: first*n + s*ds.kb*ds.h, Rows: ds.kb, Cols: ds.h, Stride: ds.h, Batch: count, BatchStride: stride * n}
}

// gather draws client i's K minibatches of round t into its slot, for both worlds when they
// differ. The K minibatches' indices are drawn first and gathered by one Gather per world and
// array (on a GPU, two launches per world instead of two per step).
func (e *engine) gatherDeferred(ds *deferredState, t, i int) {
	be := e.be
	s := ds.slot(i)
	B := e.cfg.BatchSize
	ds.split[s] = e.drawSplits(t, i, ds.idx[:e.cfg.LocalSteps*B])
	for w := 0; w < 2; w++ {
		if w == 1 && i != e.target.Client {
			break
		}
		cd := &e.data[w][i]
		x, y := ds.x(e, w, s, 1)
		be.Gather(x, cd.x, ds.idx)
		be.Gather(y, cd.y, ds.idx)
	}
	ds.slotRound[s], ds.slotClient[s] = t, i
}

// drawSplits draws client i's K minibatches of round t into idx (drawMinibatches) and reports
// whether they differ between the worlds: i is the target client, and they hold the target
// sample or the whole client differs. The draws depend on (seed, round, client, step) alone, so
// every form of the local steps, and the groups before they train, can ask.
func (e *engine) drawSplits(t, i int, idx []int32) bool {
	e.drawMinibatches(t, i, idx, 0)
	return i == e.target.Client && (e.target.WholeClient || slices.Contains(idx, int32(e.target.Index)))
}

// drawMinibatches puts client i's K minibatches of round t, each B sample indices plus shift,
// into idx (K B long).
func (e *engine) drawMinibatches(t, i int, idx []int32, shift int32) {
	B := e.cfg.BatchSize
	for k := 0; k < e.cfg.LocalSteps; k++ {
		rng := philox.NewRand(e.cfg.Seed, uint32(t), uint32(i), philox.DomainBatch, uint32(k))
		philox.SamplePrefix(&rng, e.perm[:e.data[0][i].n], B)
		for j, v := range e.perm[:B] {
			idx[k*B+j] = v + shift
		}
	}
}

// group is a set of replicas that see the same minibatches: first, first+stride, ... (count).
type group struct{ first, count, stride, world int }

// groupOf is the replicas of pairs [p0, p1) that see world w's minibatches of a slot: all of
// them when the worlds' minibatches are the same (not split), else those of world w.
func groupOf(split bool, w, p0, p1 int) group {
	if !split {
		return group{2 * p0, 2 * (p1 - p0), 1, 0}
	}
	return group{2*p0 + w, p1 - p0, 2, w}
}

// worlds is the number of replica groups of a slot.
func worlds(split bool) int {
	if split {
		return 2
	}
	return 1
}

// localTrainDeferred is localTrain in deferred form. The parameters other than the first
// weight matrix end in buf; the first matrix's factors in the client's slot (the shadow's
// with flip); with materialize, buf's first matrix is W_0 + U^T X too.
func (e *engine) localTrainDeferred(ctx context.Context, ds *deferredState, t, i int, buf compute.Buffer, flip, materialize bool) error {
	be, m := e.be, ds.model
	s := ds.slot(i)
	if !flip {
		e.gatherDeferred(ds, t, i)
	} else if ds.slotRound[s] != t || ds.slotClient[s] != i {
		return fmt.Errorf("deferred shadow training of client %d in round %d before its own", i, t)
	}
	K, B, kb, h := e.cfg.LocalSteps, e.cfg.BatchSize, ds.kb, ds.h
	split := ds.split[s]
	for gw := 0; gw < worlds(split); gw++ {
		w := 0 // the world whose minibatches the group reads
		if split {
			w = gw
			if flip {
				w = 1 - gw
			}
		}
		x1, y1 := ds.x(e, w, s, 1)
		if K > 1 {
			be.Gemm(false, true, 1, x1, x1, 0, compute.Mat{Buf: ds.gram, Rows: kb, Cols: kb, Stride: kb, Batch: 1})
		}
		for p0 := 0; p0 < e.P; p0 += e.chunk {
			c := groupOf(split, gw, p0, min(p0+e.chunk, e.P))
			rows := func(b compute.Buffer) compute.Mat { return e.rows(b, c.first, c.count, c.stride) }
			params, anchor := rows(buf), rows(e.g)
			be.Axpby(1, m.Rest(anchor), 0, m.Rest(params), nil)
			x, y := x1, y1
			x.Batch, y.Batch = c.count, c.count
			pAll := compute.Mat{Buf: ds.p, Off: c.first * kb * h, Rows: kb, Cols: h, Stride: h, Batch: c.count, BatchStride: c.stride * kb * h}
			be.Gemm(false, true, 1, x, m.Weight(anchor, 0), 0, pAll)
			u := ds.factors(flip, s, c.first, c.count, c.stride)
			for k := 0; k < K; k++ {
				if e.stop.Load() {
					return context.Cause(ctx)
				}
				eta := float32(e.cfg.LearningRateAt(t, k))
				pre := pAll
				pre.Off += k * B * h
				pre.Rows = B
				prev := u
				prev.Rows = k * B
				gram := compute.Mat{Buf: ds.gram, Off: k * B * kb, Rows: B, Cols: k * B, Stride: kb, Batch: 1}
				// The step's own Gram matrix x x^T is the client's Gram's diagonal block k: one
				// product fewer per step (the backends' products give a block of a larger
				// product the bits of the block alone: TestGramBlockKeepsBits).
				var gx compute.Mat
				if K > 1 {
					gx = compute.Mat{Buf: ds.gram, Off: k*B*kb + k*B, Rows: B, Cols: B, Stride: kb, Batch: 1}
				}
				uk := u
				uk.Off += k * B * h
				uk.Rows = B
				xk, yk := x, y
				xk.Off += k * B * e.dim
				xk.Rows = B
				yk.Off += k * B
				yk.Rows = B
				m.DeferredStep(be, e.ws, params, xk, yk, pre, gram, gx, anchor, rows(e.grad), uk, prev, eta, e.clipV, e.alpha)
			}
			if materialize {
				ds.writeFirstMatrix(be, params, anchor, u, x)
			}
		}
	}
	return nil
}

// writeFirstMatrix sets params' first weight matrix to the client's W_0 + U^T X: anchor's W_0
// plus its factors u times its minibatches x, every replica of the Mats.
func (ds *deferredState) writeFirstMatrix(be compute.Backend, params, anchor, u, x compute.Mat) {
	wt := ds.model.Weight(params, 0)
	be.Axpby(1, ds.model.Weight(anchor, 0), 0, wt, nil)
	be.Gemm(true, false, 1, u, x, 1, wt)
}

// flushDeferred adds the first-matrix updates of slots [0, n) to acc's first weight matrix:
// acc_W += (1/participants) sum over the slots' clients of U_i^T X_i, for every replica.
func (e *engine) flushDeferred(ds *deferredState, n int) {
	be, m := e.be, ds.model
	split := slices.Contains(ds.split[:n], true)
	if split {
		// World 1 reads its own rows of a split slot and world 0's rows of the others, copied
		// a run of adjacent slots at a time (slots are contiguous: one copy per run).
		for s0 := 0; s0 < n; {
			if ds.split[s0] {
				s0++
				continue
			}
			s1 := s0 + 1
			for s1 < n && !ds.split[s1] {
				s1++
			}
			x0, _ := ds.x(e, 0, s0, 1)
			x1, _ := ds.x(e, 1, s0, 1)
			x0.Rows, x1.Rows = (s1-s0)*ds.kb, (s1-s0)*ds.kb
			be.Axpby(1, x0, 0, x1, nil)
			s0 = s1
		}
	}
	for w := 0; w < worlds(split); w++ {
		g := groupOf(split, w, 0, e.P)
		x, _ := ds.x(e, w, 0, g.count)
		x.Rows = n * ds.kb
		u := ds.factors(false, 0, g.first, g.count, g.stride)
		u.Rows = n * ds.kb
		be.Gemm(true, false, 1/float32(e.n), u, x, 1, m.Weight(e.rows(e.acc, g.first, g.count, g.stride), 0))
	}
}
