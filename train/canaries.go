package train

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
)

// Many canaries per run, for the one-run audits (Steinke, Nasr and Jagielski 2023; Mahloujifar,
// Melis and Chaudhuri 2025) and the one-shot estimate (Andrew, Kairouz, Oh, Oprea, McMahan and
// Suriyakumar 2024). Every run of pair p carries the same k canaries, canary j included with
// probability 1/2 by the bit datasets.InclusionBits(seed, p, k)[j]; both worlds of a pair
// carry the same bits (the pair's coupling is about its target, not its canaries). Runs of
// different pairs have independent seeds and bits, so the world-C runs of several pairs are
// independent runs of one experiment with k canaries each.
//
// Two kinds of canary:
//
//   - Direction canaries (CanaryDirection; the DP-FedAvg algorithm): k canary clients whose
//     update is a fixed random direction u_j of norm the update clip norm c. An included canary
//     is Poisson-sampled every round like any client (rate q, from the pair's seed) and adds c
//     u_j to the server's sum; the sum's divisor q m stays the deployment's constant. The
//     directions are public: Gaussian vectors normalized, drawn from the master seed. At every
//     round the engine projects the model change on every direction and records, per canary,
//     the cosine of w_T - w_0 with u_j (canary_cos_final), the largest cosine of a round's
//     change w_{t+1} - w_t with u_j (canary_cos_max) and the log-likelihood ratio of "canary j
//     took part" in each round's projected sum, summed over the rounds (canary_llr_all).
//   - Record canaries (CanaryDirac, CanaryRelabel; every algorithm): k canary samples placed at
//     sample slots of the clients (datasets.NewRecordCanaries): in a run that includes canary j
//     its slot holds the canary, otherwise the client's own sample, so the client's size and
//     its batches do not depend on the bits. Each checkpoint records the model's loss and logit
//     margin on every canary (canary_loss, canary_margin) and on the sample the slot holds when
//     the canary is excluded (canary_loss_alt, canary_margin_alt): as for the target of a
//     replace adjacency, the auditor knows both candidates of a slot.

// Canary kinds of CanaryConfig.Kind.
const (
	CanaryDirection = "direction"
	CanaryDirac     = "dirac"
	CanaryRelabel   = "relabel"
)

// Names of the canary observations in ReplicaState.CanaryStats (the run-file column names).
const (
	CanaryStatCosFinal  = "canary_cos_final"
	CanaryStatCosMax    = "canary_cos_max"
	CanaryStatLLRAll    = "canary_llr_all"
	CanaryStatLoss      = "canary_loss"
	CanaryStatMargin    = "canary_margin"
	CanaryStatLossAlt   = "canary_loss_alt"
	CanaryStatMarginAlt = "canary_margin_alt"
)

// CanaryConfig puts k canaries into every run.
type CanaryConfig struct {
	// Count is k.
	Count int `json:"count" yaml:"count"`
	// Kind is "direction" (canary clients of the DP-FedAvg algorithm whose update is a fixed
	// random direction of norm update_clip), "dirac" (canary records: a blank input with a few
	// saturated features and a random label, each canary its own) or "relabel" (canary records:
	// the slot's own sample with another label).
	Kind string `json:"kind" yaml:"kind"`
	// Pixels is the number of saturated features of a dirac canary (0: the builder's default).
	Pixels int `json:"pixels,omitempty" yaml:"pixels,omitempty"`
	// Orthogonal makes direction canaries orthonormal: rows of a randomized orthonormal basis
	// (orthonormalDirections; needs k < d) instead of independent Gaussian directions, which
	// overlap by about 1/sqrt(d). In a model of few parameters the included canaries' overlaps add
	// up to noise in every canary's projection, the same in every round when q = 1; orthonormal
	// directions remove it.
	Orthogonal bool `json:"orthogonal,omitempty" yaml:"orthogonal,omitempty"`
}

// Directions reports whether the canaries are canary clients with fixed update directions.
func (c *CanaryConfig) Directions() bool { return c != nil && c.Kind == CanaryDirection }

// StatNames names the observations every checkpoint records per canary.
func (c *CanaryConfig) StatNames() []string {
	switch {
	case c == nil || c.Count == 0:
		return nil
	case c.Directions():
		return []string{CanaryStatCosFinal, CanaryStatCosMax, CanaryStatLLRAll}
	}
	return []string{CanaryStatLoss, CanaryStatMargin, CanaryStatLossAlt, CanaryStatMarginAlt}
}

// checkCanaries checks the canaries for m clients of at least n samples each.
func (c *Config) checkCanaries(p *problems, m, n int) {
	cc := c.Canaries
	if cc == nil {
		return
	}
	if cc.Count < 1 || cc.Count > MaxCanaries {
		p.add("canaries.count", "need 1 to %d, got %d", MaxCanaries, cc.Count)
	}
	switch cc.Kind {
	case CanaryDirection:
		if c.Algorithm != algo.DPFedAvg {
			p.add("canaries.kind", "direction canaries are canary clients of dp-fedavg (its sampling rate and clip norm are every client's); %s takes dirac or relabel canary records", c.Algorithm)
		}
		if cc.Pixels != 0 {
			p.add("canaries.pixels", "only dirac canaries take pixels")
		}
		if c.mechanism() != algo.Gaussian {
			p.add("canaries.kind", "the direction canaries' likelihood ratio is Gaussian; mechanism %s has none", c.mechanism())
		}
	case CanaryDirac, CanaryRelabel:
		if cc.Orthogonal {
			p.add("canaries.orthogonal", "only direction canaries have directions to orthonormalize")
		}
		if cc.Kind == CanaryRelabel && cc.Pixels != 0 {
			p.add("canaries.pixels", "only dirac canaries take pixels")
		}
		if cc.Pixels < 0 {
			p.add("canaries.pixels", "need >= 0, got %d", cc.Pixels)
		}
		// Each record takes one sample slot; one slot belongs to the target.
		if m > 0 && n > 0 && cc.Count > m*n-1 {
			p.add("canaries.count", "%d canary records need as many sample slots; the clients have about %d", cc.Count, m*n-1)
		}
	default:
		p.add("canaries.kind", "%q is not direction, dirac or relabel", cc.Kind)
	}
}

// MaxCanaries bounds k: every replica keeps k values per canary statistic and the engine k
// directions of d parameters.
const MaxCanaries = 1 << 20

// canaryState is the engine's canaries: the inclusion bits of each pair and, by kind, the
// directions with their per-replica statistics, or the record canaries with each replica's
// copy of the clients that hold them.
type canaryState struct {
	k    int
	bits [][]bool // per pair (local index), k each

	// Direction canaries.
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
	if cc.Directions() {
		if cc.Orthogonal && cs.k >= e.d {
			return nil, fmt.Errorf("train: canaries.orthogonal: %d orthonormal directions need a model of more parameters than that; it has %d", cs.k, e.d)
		}
		cs.initDirections(e, w0)
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

// canaryDirectionSeed separates the directions' stream from every other use of the master seed.
const canaryDirectionSeed = 0x63616e6172796469 // "canarydi"

// canaryDirections returns the k public directions of an experiment with master seed seed in
// R^d, k x d row-major: canary j is the standard Gaussian vector of the Philox stream of round
// j under a key derived from the seed alone, normalized in float64. Independent Gaussian
// directions are nearly orthogonal in high dimension (|<u_i, u_j>| about 1/sqrt(d)).
func canaryDirections(seed uint64, k, d int) []float32 {
	dirs := make([]float32, k*d)
	key := philox.Key(philox.SplitMix64(seed ^ canaryDirectionSeed))
	for j := 0; j < k; j++ {
		u := dirs[j*d : (j+1)*d]
		philox.GaussianFloats(u, key, 0, uint32(j), 0)
		var ss float64
		for _, x := range u {
			ss += float64(x) * float64(x)
		}
		inv := 1 / math.Sqrt(ss)
		for i, x := range u {
			u[i] = float32(float64(x) * inv)
		}
	}
	return dirs
}

// initDirections draws the directions and allocates the statistics.
func (cs *canaryState) initDirections(e *engine, w0 []float32) {
	d := e.d
	if e.cfg.Canaries.Orthogonal {
		cs.dirs = orthonormalDirections(e.cfg.Seed, cs.k, d)
	} else {
		cs.dirs = canaryDirections(e.cfg.Seed, cs.k, d)
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
			dot := dot32(cs.next, cs.dirs[j*d:(j+1)*d])
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

// orthonormalDirections returns k orthonormal directions in R^d (k < d), k x d row-major:
// rows of a randomized orthonormal basis. Row j is the DCT-II basis vector of a frequency f_j,
// sqrt(2/d) cos(pi f_j (t + 1/2) / d) at coordinate t, with the frequencies drawn without
// replacement from 1..d-1, every coordinate multiplied by a random sign and the coordinates
// randomly permuted, all from the master seed. The DCT-II basis is orthonormal and signs and a
// permutation are an orthogonal map, so the rows are orthonormal to float rounding (their
// overlaps are about 1e-7, where independent Gaussian directions overlap by 1/sqrt(d)); every
// entry has magnitude at most sqrt(2/d), so like a random direction each row spreads over all
// parameters, and with the random signs the projection of any fixed vector on it is a sum of
// terms of random sign. Cost: k d cosines, against k^2 d for Gram-Schmidt.
func orthonormalDirections(seed uint64, k, d int) []float32 {
	rng := philox.NewRand(philox.SplitMix64(seed^canaryDirectionSeed), 0, 0, philox.DomainCanarySampling, 1)
	freq := make([]int32, d-1)
	philox.SamplePrefix(&rng, freq, k) // freq[:k]: k distinct values of 0..d-2
	perm := make([]int32, d)
	philox.SamplePrefix(&rng, perm, d)
	sign := make([]float64, d)
	for t := range sign {
		sign[t] = 1
		if rng.Uint64()>>63 == 1 {
			sign[t] = -1
		}
	}
	dirs := make([]float32, k*d)
	scale := math.Sqrt(2 / float64(d))
	for j := 0; j < k; j++ {
		f := float64(freq[j] + 1)
		u := dirs[j*d : (j+1)*d]
		for t := 0; t < d; t++ {
			u[perm[t]] = float32(sign[t] * scale * math.Cos(math.Pi*f*(float64(t)+0.5)/float64(d)))
		}
	}
	return dirs
}

// dot32 is the inner product of two float32 vectors in float64.
func dot32(a, b []float32) float64 {
	var s float64
	for i, x := range a {
		s += float64(x) * float64(b[i])
	}
	return s
}

// observe returns replica r's canary observations at the current checkpoint, in the order of
// CanaryConfig.StatNames. For direction canaries the cosine of w_T - w_0 needs the replica's
// parameters (params, downloaded by the caller). Record canaries' loss and margin come from
// evalCanaryRecords.
func (cs *canaryState) observeDirections(r int, params []float32) [][]float64 {
	d := len(cs.w0)
	delta := make([]float32, d)
	var nn float64
	for i := range delta {
		delta[i] = params[i] - cs.w0[i]
		nn += float64(delta[i]) * float64(delta[i])
	}
	norm := math.Sqrt(nn)
	cos := make([]float64, cs.k)
	for j := range cos {
		if norm > 0 {
			cos[j] = dot32(delta, cs.dirs[j*d:(j+1)*d]) / norm
		}
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
				if rng.Float() < q {
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
// in the order of CanaryConfig.StatNames: loss and margin on every canary record, then on the
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
		e.model.eval(e.be, e.ws, params, x, y, lm, mm)
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
