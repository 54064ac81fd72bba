package train

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/canary"
)

// The engine's canaries (package canary says what they are and what a checkpoint records of
// them): every run of pair p carries the same k canaries, canary j included by the bit
// datasets.InclusionBits(seed, p, k)[j] in both worlds of the pair. Direction canaries add
// their updates to the server's sum and are observed by projection every round; record
// canaries sit in the clients' sample slots and are evaluated at every checkpoint.

// canaryState is the engine's canaries: the inclusion bits of each pair and, by kind, the
// directions with their per-replica statistics, or the record canaries with each replica's
// copy of the clients that hold them.
type canaryState struct {
	k    int
	bits [][]bool // per pair (local index), k each

	// Direction and gradient canaries.
	gradients  bool      // gradient canaries: the cosine of w_T - w_0 is all a checkpoint records
	dirs       []float32 // k x d, unit rows
	w0         []float32 // the public initial parameters, for w_T - w_0
	cosMax     [][]float64
	llr        [][]float64
	host, next []float32 // w_t and w_{t+1} of one replica
	add        []float32 // one pair's sum of sampled canaries' updates
	addBuf     compute.Buffer

	// Record canaries.
	records  *datasets.RecordCanaries
	variants map[int][]clientData // client -> per replica (2p + w) its data with the pair's canaries
	recData  *clientData          // the k canary samples, for their loss and margin
	altData  *clientData          // the k samples the slots hold without their canary
}

// newCanaryState builds the canaries of the engine's pairs. worldC and worldCP are the
// clients of the two worlds (C' with the remove-client slot filled, as checkJob leaves it).
func newCanaryState(e *engine, worldC, worldCP []*datasets.Dataset, w0 []float32) (*canaryState, error) {
	cc := e.cfg.Canaries
	cs := &canaryState{k: cc.Count, bits: make([][]bool, e.P)}
	for p := range cs.bits {
		cs.bits[p] = datasets.InclusionBits(e.cfg.Seed, e.first+p, cs.k)
	}
	if cc.HasDirections() {
		if cc.Orthogonal && cs.k >= e.d {
			return nil, fmt.Errorf("train: canaries.orthogonal: %d orthonormal directions need a model of more parameters than that; it has %d", cs.k, e.d)
		}
		cs.initDirections(e, w0)
		if cc.Gradients() {
			cs.gradients = true
			cs.initGradientSums(e)
		}
		return cs, nil
	}
	rc, err := RecordCanariesOf(e.cfg, worldC, e.target)
	if err != nil {
		return nil, err
	}
	cs.records = rc
	cs.variants = map[int][]clientData{}
	for i := range worldC {
		if len(rc.OnClient(i)) == 0 {
			continue
		}
		v := make([]clientData, e.R)
		for p := 0; p < e.P; p++ {
			for w, world := range [2][]*datasets.Dataset{worldC, worldCP} {
				ds, err := rc.Apply(world[i], i, cs.bits[p])
				if err != nil {
					return nil, fmt.Errorf("train: canaries: %w", err)
				}
				v[2*p+w] = e.toDevice(ds)
			}
		}
		cs.variants[i] = v
	}
	rec := &datasets.Dataset{Name: "canaries", Shape: worldC[0].Shape, Classes: worldC[0].Classes}
	for _, s := range rc.Samples {
		rec.Features = append(rec.Features, s.Features...)
		rec.Labels = append(rec.Labels, s.Label)
	}
	cd := e.toDevice(rec)
	cs.recData = &cd
	alt := &datasets.Dataset{Name: "canary-slots", Shape: worldC[0].Shape, Classes: worldC[0].Classes}
	for _, sl := range rc.Slots {
		s := worldC[sl.Client].Sample(sl.Index)
		alt.Features = append(alt.Features, s.Features...)
		alt.Labels = append(alt.Labels, s.Label)
	}
	ad := e.toDevice(alt)
	cs.altData = &ad
	return cs, nil
}

// RecordCanariesOf builds the record canaries the engine places on the clients of world C for
// cfg.Canaries (dirac or relabel): deterministic from the master seed, never on the target
// sample (nor, for client-level adjacency, on the target client).
func RecordCanariesOf(cfg Config, worldC []*datasets.Dataset, target TargetInfo) (*datasets.RecordCanaries, error) {
	cc := cfg.Canaries
	if cc == nil || cc.Directions() {
		return nil, fmt.Errorf("train: canaries: no record canaries configured")
	}
	spec := datasets.RecordCanarySpec{Count: cc.Count, Kind: datasets.CanaryKind(cc.Kind), Pixels: cc.Pixels, Seed: cfg.Seed,
		Reserved: []datasets.Slot{{Client: target.Client, Index: target.Index}}}
	if target.WholeClient || target.Absent {
		spec.ReservedClients = []int{target.Client}
	}
	rc, err := datasets.NewRecordCanaries(worldC, spec)
	if err != nil {
		return nil, fmt.Errorf("train: canaries: %w", err)
	}
	return rc, nil
}

// initDirections draws the directions and allocates the statistics.
func (cs *canaryState) initDirections(e *engine, w0 []float32) {
	d := e.d
	if e.cfg.Canaries.Orthogonal {
		cs.dirs = canary.OrthonormalDirections(e.cfg.Seed, cs.k, d)
	} else {
		cs.dirs = canary.GaussianDirections(e.cfg.Seed, cs.k, d)
	}
	cs.w0 = w0
	cs.cosMax = make([][]float64, e.R)
	cs.llr = make([][]float64, e.R)
	for r := range cs.cosMax {
		cs.cosMax[r] = make([]float64, cs.k)
		for j := range cs.cosMax[r] {
			cs.cosMax[r][j] = -1 // no round seen yet: the smallest cosine
		}
		cs.llr[r] = make([]float64, cs.k)
	}
	cs.host, cs.next, cs.add = make([]float32, d), make([]float32, d), make([]float32, d)
	cs.addBuf = e.be.Alloc(e.R * e.pitch) // rows e.pitch apart, as the engine's buffers
}

// initGradientSums puts into addBuf, for every pair (both worlds alike), the sum of its
// included gradient canaries' directions: what every local step of the canaries' client adds
// to the mean gradient, times Norm / B (addGradientCanaries). The bits are the run's, so the
// sum is computed once.
func (cs *canaryState) initGradientSums(e *engine) {
	for p := 0; p < e.P; p++ {
		canary.Sum(cs.add, cs.dirs, cs.bits[p])
		e.be.Upload(cs.addBuf, 2*p*e.pitch, cs.add)
		e.be.Upload(cs.addBuf, (2*p+1)*e.pitch, cs.add)
	}
}

// addGradientCanaries adds each replica's sum of included gradient canaries to the gradients of
// pairs [p0, p1) when client i holds the canaries: -Norm / rows times it to the mean gradient of
// a step on rows samples, before fedavg's and fedprox's clipping; under dpsgd, whose gradient is
// the sum of the examples' clipped gradients, -min(Norm, clip) times it, each canary a record
// clipped like the others (it was divided by the rows too, so a canary moved the model rows
// times less than a record can: 40 times on 40 samples). The minus sign makes the step move the
// model along +u_j, as a direction canary's update does, so that canary-cos reads both kinds
// the same way.
func (e *engine) addGradientCanaries(i, p0, p1, rows int) {
	cs, cc := e.canary, e.cfg.Canaries
	if cs == nil || !cc.Gradients() || i != cc.Client || rows == 0 {
		return
	}
	scale := -cc.Norm / float64(rows)
	if e.perEx > 0 {
		// DP-SGD: each canary is a record, clipped per example like the others, in a sum.
		scale = -math.Min(cc.Norm, float64(e.perEx))
	}
	e.be.Axpby(float32(scale), e.rows(cs.addBuf, 2*p0, 2*(p1-p0), 1), 1, e.rows(e.grad, 2*p0, 2*(p1-p0), 1), nil)
}

// addDirections adds, to every replica's sum in e.acc, clip times the direction of every
// included canary that the pair's Poisson sampling takes in round t (rate q, from the pair's
// seed and the canary's index, so both worlds of a pair agree).
func (cs *canaryState) addDirections(e *engine, t int, q, clip float64) {
	d := e.d
	for p := 0; p < e.P; p++ {
		clear(cs.add)
		for j, in := range cs.bits[p] {
			if !in {
				continue
			}
			rng := philox.NewRand(e.seeds[2*p], uint32(t), uint32(j), philox.DomainCanarySampling, 0)
			if rng.Float() >= q {
				continue
			}
			u := cs.dirs[j*d : (j+1)*d]
			for i, x := range u {
				cs.add[i] += float32(clip) * x
			}
		}
		e.be.Upload(cs.addBuf, 2*p*e.pitch, cs.add)
		e.be.Upload(cs.addBuf, (2*p+1)*e.pitch, cs.add)
	}
	e.be.Axpby(1, e.all(cs.addBuf), 1, e.all(e.acc), nil)
}

// observeRound updates every replica's round statistics from its change w_{t+1} - w_t (e.acc
// holds w_{t+1}, e.g w_t): the cosine with each direction, and the projection in units of the
// clip norm, y_j = <w_{t+1} - w_t, u_j> divisor / (server_lr clip), whose law is N(0, z^2)
// plus 1 when canary j took part (z = noise std / clip; the other clients' and canaries'
// projections add to the noise). The log-likelihood ratio of "took part with probability q"
// against "absent" is log((1-q) + q exp((y - 1/2)/z^2)); without noise (z = 0) the sum of y
// stands in for it.
func (cs *canaryState) observeRound(e *engine, q, clip, std, scale float64) {
	d := e.d
	z := std / clip
	for r := 0; r < e.R; r++ {
		if e.diverged[r] {
			continue
		}
		e.be.Download(cs.host, e.g, r*e.pitch)
		e.be.Download(cs.next, e.acc, r*e.pitch)
		var nn float64
		for i := range cs.next {
			cs.next[i] -= cs.host[i]
			nn += float64(cs.next[i]) * float64(cs.next[i])
		}
		norm := math.Sqrt(nn)
		for j := 0; j < cs.k; j++ {
			dot := canary.Dot(cs.next, cs.dirs[j*d:(j+1)*d])
			if norm > 0 {
				cs.cosMax[r][j] = math.Max(cs.cosMax[r][j], dot/norm)
			}
			y := dot / (scale * clip)
			if z > 0 {
				cs.llr[r][j] += logMix(q, (y-0.5)/(z*z))
			} else {
				cs.llr[r][j] += y
			}
		}
	}
}

// observe returns replica r's canary observations at the current checkpoint, in the order of
// canary.Config.StatNames. For direction canaries the cosine of w_T - w_0 needs the replica's
// parameters (params, downloaded by the caller). Record canaries' loss and margin come from
// evalCanaryRecords.
func (cs *canaryState) observeDirections(r int, params []float32) [][]float64 {
	cos := canary.Cosines(params, cs.w0, cs.dirs, cs.k)
	if cs.gradients {
		return [][]float64{cos}
	}
	cosMax := make([]float64, cs.k)
	copy(cosMax, cs.cosMax[r])
	return [][]float64{cos, cosMax, append([]float64(nil), cs.llr[r]...)}
}

// variant is the data replica r trains on for client i, or nil when client i holds no
// canaries; flip takes the other world of the replica's pair (same canaries).
func (cs *canaryState) variant(i, r int, flip bool) *clientData {
	if cs == nil || cs.variants == nil {
		return nil
	}
	v, ok := cs.variants[i]
	if !ok {
		return nil
	}
	if flip {
		r ^= 1
	}
	return &v[r]
}

// hasVariants reports whether client i's data differ between runs by their canaries.
func (cs *canaryState) hasVariants(i int) bool {
	if cs == nil || cs.variants == nil {
		return false
	}
	_, ok := cs.variants[i]
	return ok
}

// localGradVariants is localGrad for a client whose data differ between replicas by their
// canaries: every replica steps on its own data, one call per replica. The batch indices are
// those of localGrad (the same draws), so a replica sees the rows its run would see anyway.
func (e *engine) localGradVariants(form groupStepper, t, i, k int, buf compute.Buffer, flip bool, p0, p1 int) error {
	cs := e.canary
	switch e.cfg.Batching {
	case algo.Full:
		for r := 2 * p0; r < 2*p1; r++ {
			cd := cs.variant(i, r, flip)
			form.step(buf, r, 1, 1, cd.x, cd.y)
		}
	case algo.Fixed:
		n := e.data[0][i].n
		rng := philox.NewRand(e.cfg.Seed, uint32(t), uint32(i), philox.DomainBatch, uint32(k))
		philox.SamplePrefix(&rng, e.perm[:n], e.cfg.BatchSize)
		idx := e.idx[:e.cfg.BatchSize]
		copy(idx, e.perm[:e.cfg.BatchSize])
		for r := 2 * p0; r < 2*p1; r++ {
			x, y := e.gather(cs.variant(i, r, flip), idx)
			form.step(buf, r, 1, 1, x, y)
		}
	case algo.Poisson:
		n := e.data[0][i].n
		q := float64(e.cfg.BatchSize) / float64(n)
		for p := p0; p < p1; p++ {
			rng := philox.NewRand(e.seeds[2*p], uint32(t), uint32(i), philox.DomainPoisson, uint32(k))
			idx := e.idx[:0]
			for j := 0; j < n; j++ {
				if e.poissonDraw(rng.Float() < q, i, j, k, p) {
					idx = append(idx, int32(j))
				}
			}
			if len(idx) > e.maxRows {
				return fmt.Errorf("poisson batch of %d samples (round %d, client %d, step %d, pair %d) exceeds the workspace of %d rows", len(idx), t, i, k, e.first+p, e.maxRows)
			}
			if len(idx) == 0 {
				e.be.Axpby(0, compute.Mat{}, 0, e.rows(e.grad, 2*p, 2, 1), nil)
				continue
			}
			for w := 0; w < 2; w++ {
				x, y := e.gather(cs.variant(i, 2*p+w, flip), idx)
				form.step(buf, 2*p+w, 1, 1, x, y)
			}
		}
	}
	return nil
}

// evalCanaryRecords returns every replica's observations of the record canaries, [stat][r][j]
// in the order of canary.Config.StatNames: loss and margin on every canary record, then on the
// sample each slot holds without its canary.
func (e *engine) evalCanaryRecords() [4][][]float64 {
	var out [4][][]float64
	for i, cd := range []*clientData{e.canary.recData, e.canary.altData} {
		loss, margin := make([][]float64, e.R), make([][]float64, e.R)
		for r := range loss {
			loss[r], margin[r] = make([]float64, cd.n), make([]float64, cd.n)
		}
		e.evalEach(cd, loss, margin)
		out[2*i], out[2*i+1] = loss, margin
	}
	return out
}

// evalEach writes every replica's loss and margin on each row of cd into loss[r][row] and
// margin[r][row] (evalRows keeps sums; the canaries need each row).
func (e *engine) evalEach(cd *clientData, loss, margin [][]float64) {
	eb := e.cfg.EvalBatch
	if e.eval.loss == nil {
		e.eval.loss, e.eval.margin = e.be.Alloc(e.R*eb), e.be.Alloc(e.R*eb)
		e.eval.hostLoss, e.eval.hostMargin = make([]float32, e.R*eb), make([]float32, e.R*eb)
	}
	params := e.rows(e.g, 0, e.R, 1)
	for r0 := 0; r0 < cd.n; r0 += eb {
		if e.stop.Load() {
			return
		}
		n := min(eb, cd.n-r0)
		x, y := rowRange(cd.x, r0, n), rowRange(cd.y, r0, n)
		lm := compute.Mat{Buf: e.eval.loss, Rows: n, Cols: 1, Stride: 1, Batch: e.R, BatchStride: n}
		mm := lm
		mm.Buf = e.eval.margin
		e.model.Eval(e.be, e.ws, params, x, y, lm, mm)
		e.be.Download(e.eval.hostLoss[:e.R*n], e.eval.loss, 0)
		e.be.Download(e.eval.hostMargin[:e.R*n], e.eval.margin, 0)
		for r := 0; r < e.R; r++ {
			for q := 0; q < n; q++ {
				loss[r][r0+q] = float64(e.eval.hostLoss[r*n+q])
				margin[r][r0+q] = float64(e.eval.hostMargin[r*n+q])
			}
		}
	}
}
