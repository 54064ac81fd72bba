package train

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
)

// train runs every round, handing the checkpoints to rec.
func (e *engine) train(ctx context.Context, rec checkpoint.Recorder, progress func(done, total int)) error {
	cfg := e.cfg
	if err := e.rounds.init(ctx); err != nil {
		return err
	}
	if rec == nil {
		return errors.New("train: nil recorder")
	}
	total := cfg.Rounds
	if slices.Contains(cfg.Checkpoints, 0) {
		if err := e.recordCheckpoint(ctx, rec, 0); err != nil {
			return err
		}
	}
	for t := 0; t < total; t++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		record := slices.Contains(cfg.Checkpoints, t+1)
		if err := e.rounds.round(ctx, t, record); err != nil {
			return fmt.Errorf("train: round %d: %w", t, err)
		}
		if record {
			if err := e.recordCheckpoint(ctx, rec, t+1); err != nil {
				return err
			}
		}
		if progress != nil {
			progress(t+1, total)
		}
	}
	return nil
}

// clientData is one client's samples on the backend: X is N x dim, Y is N x 1 labels. On a
// device the clients of world C lie in one buffer pair (engine.samples), client i's rows from
// row0 on.
type clientData struct {
	x, y compute.Mat
	n    int
	row0 int
}

type engine struct {
	cfg    Config
	be     compute.Backend
	model  model.Model
	ws     model.Workspace
	d, dim int
	pitch  int // floats between replica rows of the R x d buffers (compute.Pitch)
	m, n   int // clients, participants per round
	P, R   int
	first  int
	target TargetInfo
	perEx  float32 // per-example clip norm (dpsgd), else 0
	// gradCanary is the gradient canary's direction u (one row of d), nil without one.
	gradCanary compute.Buffer
	// crafted is the crafted update's direction u (one row of d), nil without one.
	crafted compute.Buffer
	clipV   float32 // whole-gradient clip norm (fedavg, fedprox), else 0
	alpha   float32

	data    [2][]clientData
	samples clientData // on a device, every client of world C one after another (loadData)
	test    *clientData
	seeds   []uint64 // per replica (equal within a pair)

	g, l, acc, grad, noise, shadow, upload compute.Buffer
	xb, yb                                 compute.Buffer // gathered minibatch
	maxRows                                int

	perm      []int32
	idx       []int32
	part      []bool // part[p*m+i]: pair p's round includes client i
	coef      []float32
	scaleT    []float32
	scaleO    []float32
	hasTarget []bool // per pair: the target client takes part this round
	dots      []float64
	dd        []float64
	diverged  []bool
	uploaded  []bool
	divNorm   float64

	eta   float32 // learning rate of the current local step
	chunk int     // pairs per chunk of local training

	// The strategies, chosen once in newEngine: the algorithm family's round and the form of
	// the local steps; stats observes for the informed adversary (nil when not informed).
	rounds rounds
	steps  localSteps
	stats  *informedStats

	eval evalBuffers // the checkpoints' evaluation (checkpoint.go)

	// tmp holds host-drawn noise of the non-Gaussian mechanisms on its way into a buffer;
	// use and streams are the participants' noise streams for a compute.NoiseSampler.
	tmp     compute.Buffer
	use     []bool
	streams []uint32

	// stop is set when the training's context is cancelled (TrainOn).
	stop atomic.Bool

	// canary holds the runs' canaries (canaries.go); nil without Config.Canaries.
	canary *canaryState
	// mix is the informed adversary's average over the Poisson minibatches' draws of the
	// target sample (poissonmix.go); nil where the draws do not hide it.
	mix *poissonMixture
}

// checkedJob is a Job's data after checkJob: C' with the remove-client slot filled, and the
// shapes every client shares.
type checkedJob struct {
	worldC, worldCP    []*datasets.Dataset
	target             TargetInfo
	shape              []int // one sample's shape (client 0 of C)
	dim, classes, minN int
}

// checkJob checks that the job's worlds, target, pairs, configuration and test set fit
// together; every error says what does not.
func checkJob(job Job) (checkedJob, error) {
	cfg, worldC, worldCP, target, test, pairs := job.Config, job.WorldC, job.WorldCPrime, job.Target, job.Test, job.Pairs
	m := len(worldC)
	if target.Absent {
		// remove-client: C' lacks the target client. The engine keeps m slots in both worlds
		// and gives the target no weight in C' (see dpRound); its slot holds C's data, which
		// only the per-sample statistics read.
		if len(worldCP) != m-1 || target.Client < 0 || target.Client >= m {
			return checkedJob{}, fmt.Errorf("train: remove-client target %d: C has %d clients, C' %d; need C' to have one fewer", target.Client, m, len(worldCP))
		}
		worldCP = append(append(append([]*datasets.Dataset(nil), worldCP[:target.Client]...), worldC[target.Client]), worldCP[target.Client:]...)
		target.WholeClient = true
	}
	if m == 0 || len(worldCP) != m {
		return checkedJob{}, fmt.Errorf("train: worlds have %d and %d clients, need the same positive count", m, len(worldCP))
	}
	if target.Client < 0 || target.Client >= m {
		return checkedJob{}, fmt.Errorf("train: target client %d outside 0..%d", target.Client, m-1)
	}
	if target.WholeClient && !cfg.IsClientDP() && cfg.Algorithm != algo.FedAvg && cfg.Algorithm != algo.FedProx {
		return checkedJob{}, fmt.Errorf("train: client-level adjacency needs a federated algorithm, not %q", cfg.Algorithm)
	}
	if target.Absent && !cfg.IsClientDP() {
		return checkedJob{}, fmt.Errorf("train: remove-client adjacency needs the DP-FedAvg family (server-side noise), not %q: a removed Noisy-FedAvg client would also remove its own noise", cfg.Algorithm)
	}
	if cfg.CraftedUpdate != nil && !target.Absent {
		return checkedJob{}, errors.New("train: crafted_update: the canary client is the target of remove-client adjacency (C holds it, C' lacks it)")
	}
	if pairs.First < 0 || pairs.Count < 1 {
		return checkedJob{}, fmt.Errorf("train: pair range first %d count %d: need first >= 0, count >= 1", pairs.First, pairs.Count)
	}
	dim, classes, minN := worldC[0].Dim(), worldC[0].Classes, math.MaxInt
	for w, world := range [2][]*datasets.Dataset{worldC, worldCP} {
		for i, ds := range world {
			if ds == nil {
				return checkedJob{}, fmt.Errorf("train: world %d client %d: nil dataset", w, i)
			}
			if err := ds.Validate(); err != nil {
				return checkedJob{}, fmt.Errorf("train: world %d client %d: %w", w, i, err)
			}
			if ds.Dim() != dim || ds.Classes != classes {
				return checkedJob{}, fmt.Errorf("train: world %d client %d: dim %d, %d classes; client 0 of C has %d, %d", w, i, ds.Dim(), ds.Classes, dim, classes)
			}
			if ds.Len() == 0 {
				return checkedJob{}, fmt.Errorf("train: world %d client %d has no samples", w, i)
			}
			minN = min(minN, ds.Len())
		}
	}
	for i := range worldC {
		if err := compareClients(worldC[i], worldCP[i], i, target); err != nil {
			return checkedJob{}, err
		}
	}
	if tc := worldC[target.Client]; target.Index < 0 || target.Index >= tc.Len() {
		return checkedJob{}, fmt.Errorf("train: target index %d outside client %d's %d samples", target.Index, target.Client, tc.Len())
	}
	if err := cfg.validate(m, minN, worldC[0].Shape, dim, classes); err != nil {
		return checkedJob{}, err
	}
	if test != nil {
		if err := test.Validate(); err != nil {
			return checkedJob{}, fmt.Errorf("train: test set: %w", err)
		}
		if test.Dim() != dim {
			return checkedJob{}, fmt.Errorf("train: test set has dim %d, clients %d", test.Dim(), dim)
		}
	}
	return checkedJob{worldC: worldC, worldCP: worldCP, target: target, shape: worldC[0].Shape, dim: dim, classes: classes, minN: minN}, nil
}

func newEngine(be compute.Backend, job Job) (*engine, error) {
	j, err := checkJob(job)
	if err != nil {
		return nil, err
	}
	cfg, pairs, target, dim, m := job.Config, job.Pairs, j.target, j.dim, len(j.worldC)
	if p, ok := be.(compute.Precisioner); ok {
		// Set every time: a backend reused from a tf32 training must not keep it.
		if err := p.SetPrecision(cmp.Or(cfg.Precision, compute.FP32)); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	} else if cfg.Precision != "" && cfg.Precision != compute.FP32 {
		return nil, fmt.Errorf("train: precision %s needs the gpu backend (tensor cores); %T computes in float32", cfg.Precision, be)
	}
	if _, ok := be.(compute.Convolver); model.IsNNKind(cfg.Model.Kind) && !ok {
		return nil, fmt.Errorf("train: model %s needs a backend with image operations (compute.Convolver); %T has none: use the cpu or gpu backend", cfg.Model.Kind, be)
	}
	mdl, err := model.New(cfg.Model, j.shape, dim, j.classes)
	if err != nil {
		return nil, err
	}
	e := &engine{cfg: cfg, be: be, model: mdl, d: mdl.NumParams(), pitch: compute.Pitch(be, mdl.NumParams()), dim: dim, m: m, n: cfg.Participants,
		P: pairs.Count, R: 2 * pairs.Count, first: pairs.First, target: target, divNorm: cfg.DivergenceNorm}
	if e.n == 0 {
		e.n = m
	}
	if e.divNorm == 0 {
		e.divNorm = 1e6
	}
	// By default a chunk is the whole shard, as Config.ChunkPairs documents: the costs paid per
	// chunk and step (dispatch, packing the shared minibatch, its Gram matrix) outweigh keeping
	// a small chunk's parameters in cache (docs/training.md, Performance: W1 +20%).
	e.chunk = e.P
	if cfg.ChunkPairs > 0 {
		e.chunk = cfg.ChunkPairs
	}
	if cfg.EvalBatch == 0 {
		e.cfg.EvalBatch = 256
	}
	switch cfg.Algorithm {
	case algo.DPSGD:
		e.perEx = float32(cfg.ClipNorm)
	case algo.FedProx:
		e.alpha = float32(cfg.ProxAlpha)
		e.clipV = float32(cfg.ClipNorm)
	default:
		e.clipV = float32(cfg.ClipNorm)
	}
	e.allocate(e.loadData(j.worldC, j.worldCP, job.Test))
	R, d := e.R, e.d
	e.seeds = make([]uint64, R)
	for r := range e.seeds {
		e.seeds[r] = RunSeed(cfg.Seed, e.first+r/2)
	}
	// w_0 is public and the same for every pair: it is drawn from the master seed.
	w0 := seededInitial(mdl, cfg.Seed)
	if job.Initial != nil {
		if len(job.Initial) != d {
			return nil, fmt.Errorf("train: initial parameters: %d values for a model of %d", len(job.Initial), d)
		}
		copy(w0, job.Initial)
	}
	// w_0 is uploaded once and copied on the backend to the other replicas: R uploads of it
	// from host memory were 4,096 copies and 806 MB at W1's 4,096 replicas, 2.9 GB at W3's 64,
	// all inside a training's time. The copy is exact (y = 1 x; y is not read).
	be.Upload(e.g, 0, w0)
	if R > 1 {
		be.Axpby(1, compute.Mat{Buf: e.g, Rows: 1, Cols: d, Stride: d, Batch: R - 1}, 0, e.rows(e.g, 1, R-1, 1), nil)
	}
	if cfg.Canaries != nil {
		if e.canary, err = newCanaryState(e, j.worldC, j.worldCP, w0); err != nil {
			return nil, err
		}
	}
	// Both were checked against the model's parameter count by checkJob's validate.
	if gc := cfg.GradientCanary; gc != nil {
		e.gradCanary = compute.Upload(be, gc.Vector(cfg.Seed, d))
	}
	if cu := cfg.CraftedUpdate; cu != nil {
		e.crafted = compute.Upload(be, cu.Vector(cfg.Seed, d))
	}
	e.steps = e.chooseSteps(cfg.GradientCanary == nil)
	e.rounds = e.chooseRounds()
	if usesPoissonMixture(cfg, e.target) {
		if e.mix, err = e.newPoissonMixture(); err != nil {
			return nil, err
		}
	}
	if cfg.Informed {
		e.stats = newInformedStats(R, e.rounds.statNames())
	}
	return e, nil
}

// loadData puts both worlds' clients and the test set on the backend (world 1 shares every
// client but the target's with world 0) and returns the largest client's size.
func (e *engine) loadData(worldC, worldCP []*datasets.Dataset, test *datasets.Dataset) int {
	target, m := e.target, e.m
	maxN := 0
	// On a device, world C's clients go into one buffer pair, each a range of its rows, so
	// that the minibatches of several clients can be gathered by one call (grouped.go); a
	// backend that aliases host memory keeps each client's own arrays, as copying them would
	// double the data's memory.
	e.data[0] = make([]clientData, m)
	if _, aliases := e.be.(compute.HostAliaser); !aliases {
		e.samples = e.concatToDevice(worldC)
	}
	r0 := 0
	for i, ds := range worldC {
		n := ds.Len()
		if e.samples.x.Buf != nil {
			e.data[0][i] = clientData{x: rowRange(e.samples.x, r0, n), y: rowRange(e.samples.y, r0, n), n: n, row0: r0}
		} else {
			e.data[0][i] = e.toDevice(ds)
		}
		r0 += n
		maxN = max(maxN, n)
	}
	e.data[1] = make([]clientData, m)
	for i := range worldCP {
		if i != target.Client {
			e.data[1][i] = e.data[0][i] // identical data: one copy
			continue
		}
		e.data[1][i] = e.toDevice(worldCP[i])
		maxN = max(maxN, worldCP[i].Len())
	}
	if test != nil {
		td := e.toDevice(test)
		e.test = &td
	}
	return maxN
}

// allocate sizes the workspace for the configured batching and allocates every buffer of
// the R replicas.
func (e *engine) allocate(maxN int) {
	cfg, be, model, dim, m := e.cfg, e.be, e.model, e.dim, e.m
	switch cfg.Batching {
	case algo.Full:
		e.maxRows = maxN
	case algo.Poisson:
		// A Poisson batch above B + 8 sqrt(B) + 16 has probability below e^-30; such a draw
		// stops the run with an error rather than being truncated.
		b := float64(cfg.BatchSize)
		e.maxRows = min(maxN, int(b+8*math.Sqrt(b)+16))
	default:
		e.maxRows = cfg.BatchSize
	}
	wsRows := memory.WorkspaceRows(cfg.memoryTraining(), e.maxRows, cfg.EvalBatch)
	e.ws = model.NewWorkspace(be, wsRows, e.R)
	e.xb = be.Alloc(e.maxRows * dim)
	e.yb = be.Alloc(e.maxRows)
	R, rows := e.R, e.R*e.pitch
	for _, b := range []*compute.Buffer{&e.g, &e.l, &e.acc, &e.grad, &e.noise} {
		*b = be.Alloc(rows)
	}
	if cfg.Informed {
		e.shadow = be.Alloc(rows)
	}
	if cfg.RecordUpload {
		e.upload = be.Alloc(rows)
	}
	e.perm = make([]int32, max(maxN, m))
	e.idx = make([]int32, maxN)
	e.part = make([]bool, e.P*m)
	e.coef = make([]float32, R)
	e.scaleT = make([]float32, R)
	e.scaleO = make([]float32, R)
	e.hasTarget = make([]bool, e.P)
	e.dots = make([]float64, R)
	e.dd = make([]float64, R)
	e.diverged = make([]bool, R)
	e.uploaded = make([]bool, R)
}

// compareClients checks that client i is the same in both worlds, except the target sample:
// the same labels and the same float32 bits. Every training makes this check, on every sample
// of the federation; compared a value at a time it was two thirds of W1's host set-up (3.3 of
// 5 ms at 64 replicas), so the samples on each side of the target are compared as memory in
// one call each, and a client that both worlds share is not compared at all. Only where that
// finds a difference are the samples compared one by one, to name the first that differs.
func compareClients(a, b *datasets.Dataset, i int, target TargetInfo) error {
	if a.Len() != b.Len() {
		return fmt.Errorf("train: client %d has %d samples in C and %d in C'", i, a.Len(), b.Len())
	}
	if (i == target.Client && target.WholeClient) || a == b {
		return nil
	}
	skip := -1
	if i == target.Client {
		skip = target.Index
	}
	if n := a.Len(); n > 0 && len(a.Features) == len(b.Features) && len(a.Features)%n == 0 {
		dim := len(a.Features) / n
		same := sameFloatBits(a.Features, b.Features) && slices.Equal(a.Labels, b.Labels)
		if skip >= 0 && skip < n {
			lo, hi := skip*dim, (skip+1)*dim
			same = sameFloatBits(a.Features[:lo], b.Features[:lo]) && sameFloatBits(a.Features[hi:], b.Features[hi:]) &&
				slices.Equal(a.Labels[:skip], b.Labels[:skip]) && slices.Equal(a.Labels[skip+1:], b.Labels[skip+1:])
		}
		if same {
			return nil
		}
	}
	for j := 0; j < a.Len(); j++ {
		if j == skip {
			continue
		}
		if a.Labels[j] != b.Labels[j] || !sameFloatBits(a.Row(j), b.Row(j)) {
			return fmt.Errorf("train: client %d sample %d differs between C and C', but only client %d sample %d may", i, j, target.Client, target.Index)
		}
	}
	return nil
}

// sameFloatBits reports whether a and b hold the same float32 bit patterns (so -0 differs from +0
// and a NaN equals only itself, bit for bit): their memory compared by bytes.Equal, a
// vectorized comparison (BenchmarkCompareClients: 3.1x a loop over math.Float32bits, which
// compared about 4 GB/s on the development VM).
func sameFloatBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return bytes.Equal(unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 4*len(a)), unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b)))
}

func (e *engine) toDevice(ds *datasets.Dataset) clientData {
	n := ds.Len()
	return clientData{
		x: compute.Mat{Buf: compute.Upload(e.be, ds.Features), Rows: n, Cols: e.dim, Stride: e.dim, Batch: 1},
		y: compute.Mat{Buf: compute.Upload(e.be, labelValues(ds)), Rows: n, Cols: 1, Stride: 1, Batch: 1},
		n: n,
	}
}

// concatToDevice copies the samples of sets, one set after another, to the backend as one
// clientData.
func (e *engine) concatToDevice(sets []*datasets.Dataset) clientData {
	n := 0
	for _, ds := range sets {
		n += ds.Len()
	}
	cd := clientData{
		x: compute.Mat{Buf: e.be.Alloc(max(1, n*e.dim)), Rows: n, Cols: e.dim, Stride: e.dim, Batch: 1},
		y: compute.Mat{Buf: e.be.Alloc(max(1, n)), Rows: n, Cols: 1, Stride: 1, Batch: 1},
		n: n,
	}
	r := 0
	for _, ds := range sets {
		e.be.Upload(cd.x.Buf, r*e.dim, ds.Features)
		e.be.Upload(cd.y.Buf, r, labelValues(ds))
		r += ds.Len()
	}
	return cd
}

// labelValues is ds's labels as the float32 values the backends hold.
func labelValues(ds *datasets.Dataset) []float32 {
	y := make([]float32, ds.Len())
	for i, v := range ds.Labels {
		y[i] = float32(v)
	}
	return y
}

// rows is replicas first, first+stride, ... (count of them) of an R x d buffer, whose rows are
// e.pitch floats apart.
func (e *engine) rows(buf compute.Buffer, first, count, stride int) compute.Mat {
	return compute.RowsOf(buf, first, count, stride, e.d, e.pitch)
}

func (e *engine) all(buf compute.Buffer) compute.Mat { return e.rows(buf, 0, e.R, 1) }

// commit makes the new parameters in acc every replica's w_{t+1} (acc's contents are then
// undefined). Divergence: a replica whose new parameters are not finite or too large keeps w_t.
func (e *engine) commit() {
	be := e.be
	be.Dots(e.all(e.acc), e.all(e.acc), e.dots)
	for r := range e.dots {
		if nn := math.Sqrt(e.dots[r]); !(nn <= e.divNorm) {
			e.diverged[r] = true
		}
	}
	if !slices.Contains(e.diverged, true) {
		e.g, e.acc = e.acc, e.g // every replica takes its new parameters: no copy
		return
	}
	for r := 0; r < e.R; {
		if e.diverged[r] {
			r++
			continue
		}
		r1 := r + 1
		for r1 < e.R && !e.diverged[r1] {
			r1++
		}
		be.Axpby(1, e.rows(e.acc, r, r1-r, 1), 0, e.rows(e.g, r, r1-r, 1), nil)
		r = r1
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// localTrain runs client i's K local steps of round t in the engine's local-step form.
func (e *engine) localTrain(ctx context.Context, t, i int, buf compute.Buffer, flip, materialize bool) error {
	return e.steps.train(ctx, t, i, buf, flip, materialize)
}

// localGrad runs form's step for every replica at params buf on client i's batch of (round t,
// step k), for pairs [p0, p1): the direct form writes the gradients into e.grad. Replicas that
// see the same rows are one group, one batched call.
func (e *engine) localGrad(form groupStepper, t, i, k int, buf compute.Buffer, flip bool, p0, p1 int) error {
	if e.canary.hasVariants(i) {
		return e.localGradVariants(form, t, i, k, buf, flip, p0, p1)
	}
	isTarget := i == e.target.Client
	world := func(w int) int {
		if flip {
			return 1 - w
		}
		return w
	}
	switch e.cfg.Batching {
	case algo.Full:
		defer e.addGradientCanaries(i, p0, p1, e.data[0][i].n)
		if isTarget {
			for w := 0; w < 2; w++ {
				cd := &e.data[world(w)][i]
				form.step(buf, 2*p0+w, p1-p0, 2, cd.x, cd.y)
				e.addGradientCanary(world(w), 2*p0+w, p1-p0, 2, cd.n)
			}
			return nil
		}
		cd := &e.data[0][i]
		form.step(buf, 2*p0, 2*(p1-p0), 1, cd.x, cd.y)
	case algo.Fixed:
		cd := &e.data[0][i]
		rng := philox.NewRand(e.cfg.Seed, uint32(t), uint32(i), philox.DomainBatch, uint32(k))
		philox.SamplePrefix(&rng, e.perm[:cd.n], e.cfg.BatchSize)
		idx := e.idx[:e.cfg.BatchSize]
		copy(idx, e.perm[:e.cfg.BatchSize])
		if isTarget && (e.target.WholeClient || slices.Contains(idx, int32(e.target.Index))) {
			for w := 0; w < 2; w++ {
				x, y := e.gather(&e.data[world(w)][i], idx)
				form.step(buf, 2*p0+w, p1-p0, 2, x, y)
				e.addGradientCanary(world(w), 2*p0+w, p1-p0, 2, len(idx))
			}
			return nil
		}
		x, y := e.gather(cd, idx)
		form.step(buf, 2*p0, 2*(p1-p0), 1, x, y)
	case algo.Poisson:
		cd := &e.data[0][i]
		q := float64(e.cfg.BatchSize) / float64(cd.n)
		for p := p0; p < p1; p++ {
			rng := philox.NewRand(e.seeds[2*p], uint32(t), uint32(i), philox.DomainPoisson, uint32(k))
			idx := e.idx[:0]
			hit := false
			for j := 0; j < cd.n; j++ {
				if e.poissonDraw(rng.Float() < q, i, j, k, p) {
					idx = append(idx, int32(j))
					hit = hit || (isTarget && (e.target.WholeClient || j == e.target.Index))
				}
			}
			if len(idx) > e.maxRows {
				return fmt.Errorf("poisson batch of %d samples (round %d, client %d, step %d, pair %d) exceeds the workspace of %d rows", len(idx), t, i, k, e.first+p, e.maxRows)
			}
			if len(idx) == 0 {
				e.be.Axpby(0, compute.Mat{}, 0, e.rows(e.grad, 2*p, 2, 1), nil)
				continue
			}
			if hit {
				for w := 0; w < 2; w++ {
					x, y := e.gather(&e.data[world(w)][i], idx)
					form.step(buf, 2*p+w, 1, 1, x, y)
					e.addGradientCanary(world(w), 2*p+w, 1, 1, len(idx))
				}
				continue
			}
			x, y := e.gather(cd, idx)
			form.step(buf, 2*p, 2, 1, x, y)
		}
	}
	return nil
}

// addGradientCanary adds the gradient canary's share Norm u / rows of a minibatch of rows
// samples holding the target to the mean gradients of replicas first, first+stride, ...
// (count) when they trained on world dataWorld's data and that world is C' (world 1), which
// holds the canary (the trained replicas of C', and the C replicas whose informed replay
// trains on the C' world's data), and -Norm u / rows on C's data when the canary is
// Opposite. The direct form clips after this, so the canary is clipped with the rest of the
// gradient.
func (e *engine) addGradientCanary(dataWorld, first, count, stride, rows int) {
	gc := e.cfg.GradientCanary
	if e.gradCanary == nil || rows == 0 || (dataWorld == 0 && !gc.Opposite) {
		return
	}
	scale := gc.Norm / float64(rows)
	if dataWorld == 0 {
		scale = -scale
	}
	u := compute.Mat{Buf: e.gradCanary, Rows: 1, Cols: e.d, Stride: e.d, Batch: count}
	e.be.Axpby(float32(scale), u, 1, e.rows(e.grad, first, count, stride), nil)
}

func (e *engine) gather(cd *clientData, idx []int32) (x, y compute.Mat) {
	x = compute.Mat{Buf: e.xb, Rows: len(idx), Cols: e.dim, Stride: e.dim, Batch: 1}
	y = compute.Mat{Buf: e.yb, Rows: len(idx), Cols: 1, Stride: 1, Batch: 1}
	e.be.Gather(x, cd.x, idx)
	e.be.Gather(y, cd.y, idx)
	return x, y
}
