package train

import (
	"context"

	"github.com/fedaudit/fedaudit/compute"
)

// Grouped clients. A round's clients train independently from the same w_t, so the local steps
// of several clients can run as one call. A backend with the fused hidden step that gains from
// that (compute.ClientBatcher: a GPU at few replicas, where one block per replica leaves most
// of the device idle and each launch pays its latency) gets step k of up to c clients of a
// deferred window in one grouped HiddenStep, instead of a call per client: W1 at 64 replicas
// goes from 55 launches of 64 blocks a round to 15 (cuda/hostshim TestW1RoundCounts). The group's
// minibatches are gathered, its Gram matrices computed and its products x W_0^T taken by one
// call each too.
//
// The target client joins a group in the rounds where its minibatches are the same in both
// worlds (neither the target sample nor, for a client-level target, the client is in them):
// its training is then every other client's, and where the round reads its whole parameters
// (its upload, its informed shadow) they are written out from the group's rows when the round
// reaches it, as its own training would have written them. In the other rounds its replicas
// train in two groups, one per world, alone. Every element of the group's
// products is the sum the client's own call computes, its step is computed as alone
// (compute.HiddenStepArgs' Groups), and its parameters are added to the round's sum in client
// order, so grouping changes no bit on a backend whose products sum in a fixed order (the CPU,
// the shim: train's TestGroupedClientsKeepBits, the parity suite's ClientGroupsKeepBits); on a
// GPU cuBLAS may round the group's larger products differently.

// clientGroups holds the grouped clients' state between their training and their
// accumulation into the round's sum.
type clientGroups struct {
	c       int            // most clients in a group
	restLen int            // parameters past the first weight matrix
	pre     compute.Buffer // R x c x K B x h: the group's first-layer pre-activations, by replica
	rest    compute.Buffer // c x R x restLen: the group's parameters past the first matrix
	gram    compute.Buffer // c x K B x K B: the group's Gram matrices of their minibatches
	idx     []int32        // c x K B: the group's minibatches' rows of the clients' samples
	args    compute.HiddenStepArgs
	// sum adds the group's parameters to the round's sum in one call where the backend can
	// (else one Axpby a client); coefs holds their weights meanwhile, c x R.
	sum   compute.InOrderAccumulator
	coefs []float32
	// Clients [first, first+count) of the current round were trained into the group.
	first, count int
}

// newClientGroups returns the grouped clients' state when the backend wants clients grouped
// and the deferred step is its fused hidden step, else nil. A group holds at most as many
// replica steps as the backend asks for (at most compute.MaxClientBatch, which the device
// memory estimate counts) and at most a window of clients.
func newClientGroups(e *engine, ds *deferredState) *clientGroups {
	cb, ok := e.be.(compute.ClientBatcher)
	// The DP-FedAvg family reads every client's whole update (clientUpdate materializes it),
	// which the groups do not keep.
	if !ok || !ds.model.HasHiddenStep(e.be) || e.chunk != e.P || e.cfg.IsClientDP() {
		return nil
	}
	c := min(ds.window, min(cb.ClientBatch(), compute.MaxClientBatch)/e.R)
	if c < 2 {
		return nil
	}
	g := &clientGroups{c: c, restLen: ds.model.Rest(e.all(e.g)).Cols}
	g.pre = e.be.Alloc(c * e.R * ds.kb * ds.h)
	g.rest = e.be.Alloc(c * e.R * g.restLen)
	g.gram = e.be.Alloc(c * ds.kb * ds.kb)
	g.idx = make([]int32, c*ds.kb)
	if acc, ok := e.be.(compute.InOrderAccumulator); ok {
		g.sum, g.coefs = acc, make([]float32, c*e.R)
	}
	return g
}

// has says whether client i's parameters of the current round are in the group.
func (g *clientGroups) has(i int) bool { return i >= g.first && i < g.first+g.count }

// restRows is the parameters past the first matrix of the group's q-th client, every replica.
func (g *clientGroups) restRows(q, R int) compute.Mat {
	return compute.Mat{Buf: g.rest, Off: q * R * g.restLen, Rows: 1, Cols: g.restLen, Stride: g.restLen, Batch: R, BatchStride: g.restLen}
}

// span is how many clients from i on round t can group: the following clients of i's window
// (the window's slots are what the server's sum reads), at most c, up to the target client
// unless its round-t minibatches are the same in both worlds.
func (g *clientGroups) span(e *engine, ds *deferredState, t, i int) int {
	n := 0
	for j := i; j < e.m && n < g.c && j/ds.window == i/ds.window; j++ {
		// ds.idx is free until the next gather.
		if j == e.target.Client && e.drawSplits(t, j, ds.idx[:e.cfg.LocalSteps*e.cfg.BatchSize]) {
			break
		}
		n++
	}
	return n
}

// materialize writes grouped client i's whole parameters into buf, every replica: the group's
// rows past the first matrix, and W_0 + U_i^T X_i by localTrainDeferred's own product over the
// same operands (its group of all replicas where the worlds do not split).
func (g *clientGroups) materialize(e *engine, ds *deferredState, i int, buf compute.Buffer) {
	params := e.all(buf)
	e.be.Axpby(1, g.restRows(i-g.first, e.R), 0, ds.model.Rest(params), nil)
	s := ds.slot(i)
	x, _ := ds.x(e, 0, s, 1)
	x.Batch = e.R
	ds.writeFirstMatrix(e.be, params, e.all(e.g), ds.factors(false, s, 0, e.R, 1), x)
}

// gatherGroup draws the K minibatches of round t of clients [i0, i0+n) into their slots, as
// gatherDeferred does one client's. Where world C's clients lie in one buffer (on a device:
// engine.loadData) the indices, moved by each client's first row, address that buffer and
// one Gather per array fills every slot: the slots are consecutive rows. The target is among
// the clients only where its worlds' minibatches are the same, so world C's samples are every
// replica's.
func (e *engine) gatherGroup(ds *deferredState, g *clientGroups, t, i0, n int) {
	if e.samples.x.Buf == nil {
		for q := 0; q < n; q++ {
			e.gatherDeferred(ds, t, i0+q)
		}
		return
	}
	kb := ds.kb
	for q := 0; q < n; q++ {
		i := i0 + q
		e.drawMinibatches(t, i, g.idx[q*kb:(q+1)*kb], int32(e.data[0][i].row0))
		s := ds.slot(i)
		ds.split[s] = false
		ds.slotRound[s], ds.slotClient[s] = t, i
	}
	x, y := ds.x(e, 0, ds.slot(i0), 1)
	x.Rows, y.Rows = n*kb, n*kb
	e.be.Gather(x, e.samples.x, g.idx[:n*kb])
	e.be.Gather(y, e.samples.y, g.idx[:n*kb])
}

// trainGrouped runs the K local steps of clients [i0, i0+n) of round t together: the
// clients' minibatches into their window slots, their Gram matrices and x W_0^T (what
// localTrainDeferred computes for one client), then one grouped HiddenStep per step for all
// of them. The factors go to the clients' slots, the other parameters to the group's rows.
func (e *engine) trainGrouped(ctx context.Context, ds *deferredState, g *clientGroups, t, i0, n int) error {
	be, m := e.be, ds.model
	K, B, kb, h, R := e.cfg.LocalSteps, e.cfg.BatchSize, ds.kb, ds.h, e.R
	s0 := ds.slot(i0)
	g.first, g.count = i0, 0 // nothing of this round's group is valid until it has trained
	e.gatherGroup(ds, g, t, i0, n)
	anchor := e.all(e.g)
	// The clients' minibatches lie in consecutive slots, so each product below is one call for
	// the whole group: every client's Gram matrix (a batch of n), and x W_0^T of every client
	// for each replica (n kb rows of minibatches times the replica's W_0, which every client
	// of the round starts from). Each element of a product is the same sum as in the client's
	// own call, so the bits do not change on a backend that sums a product's depth in order
	// (the CPU and the shim); cuBLAS may pick another kernel for the taller product, which is
	// float rounding.
	xs, _ := ds.x(e, 0, s0, 1)
	if K > 1 || e.clipV > 0 {
		xb := xs
		xb.Batch, xb.BatchStride = n, kb*e.dim
		be.Gemm(false, true, 1, xb, xb, 0, compute.Mat{Buf: g.gram, Rows: kb, Cols: kb, Stride: kb, Batch: n, BatchStride: kb * kb})
	}
	// Every client starts from w_t's parameters past the first matrix: one copy for the
	// group, the anchor's R rows broadcast to the n clients' blocks of rows.
	from := m.Rest(anchor)
	from.Rows, from.Stride, from.Batch, from.BatchStride = R, from.BatchStride, n, 0
	be.Axpby(1, from, 0, compute.Mat{Buf: g.rest, Rows: R, Cols: g.restLen, Stride: g.restLen, Batch: n, BatchStride: R * g.restLen}, nil)
	xs.Rows, xs.Batch = n*kb, R
	be.Gemm(false, true, 1, xs, m.Weight(anchor, 0), 0, compute.Mat{Buf: g.pre, Rows: n * kb, Cols: h, Stride: h, Batch: R, BatchStride: g.c * kb * h})
	a := &g.args // kept in g: the call's arguments cost no allocation per step
	*a = m.RestHiddenArgs(g.restRows(0, R), anchor)
	a.V, a.Alpha, a.Groups = e.clipV, e.alpha, n
	a.GroupStrides = compute.HiddenGroupStrides{Pre: kb * h, Params: R * g.restLen, Gram: kb * kb,
		Prev: kb * h, Labels: kb, GX: kb * kb, U: kb * h}
	u := ds.factors(false, s0, 0, R, 1)
	_, y := ds.x(e, 0, s0, 1)
	hs := be.(compute.HiddenStepper)
	for k := 0; k < K; k++ {
		if e.stop.Load() {
			return context.Cause(ctx)
		}
		a.Eta = float32(e.cfg.LearningRateAt(t, k))
		a.Pre = compute.Mat{Buf: g.pre, Off: k * B * h, Rows: B, Cols: h, Stride: h, Batch: R, BatchStride: g.c * kb * h}
		a.Gram = compute.Mat{Buf: g.gram, Off: k * B * kb, Rows: B, Cols: k * B, Stride: kb, Batch: 1}
		a.Prev = u
		a.Prev.Rows = k * B
		a.U = u
		a.U.Off += k * B * h
		a.U.Rows = B
		a.Labels = y
		a.Labels.Off += k * B
		a.Labels.Rows = B
		a.GX = compute.Mat{}
		if e.clipV > 0 {
			a.GX = compute.Mat{Buf: g.gram, Off: k*B*kb + k*B, Rows: B, Cols: B, Stride: kb, Batch: 1}
		}
		hs.HiddenStep(a)
	}
	g.count = n
	return nil
}
