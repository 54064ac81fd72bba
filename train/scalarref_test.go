package train

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
	"github.com/fedaudit/fedaudit/train/noise"
)

// refSoftmax is a float64 scalar re-implementation of docs/training.md's Noisy-FedAvg,
// Noisy-FedProx and DP-SGD for softmax regression or a tanh MLP (hidden widths), one replica
// at a time: every step written out as the document states it.
type refSoftmax struct {
	cfg          Config
	dim, classes int
	hidden       []int
}

func (r refSoftmax) sizes() []int {
	return append(append([]int{r.dim}, r.hidden...), r.classes)
}

func (r refSoftmax) d() int {
	s, d := r.sizes(), 0
	for l := 0; l+1 < len(s); l++ {
		d += s[l]*s[l+1] + s[l+1]
	}
	return d
}

// forward gives the activations of sample j at w, the input first and the logits last, and
// the offset of each layer's weights in w.
func (r refSoftmax) forward(w []float64, ds *datasets.Dataset, j int) (acts [][]float64, offs []int) {
	s := r.sizes()
	L := len(s) - 1
	acts = [][]float64{make([]float64, r.dim)}
	for q, v := range ds.Row(j) {
		acts[0][q] = float64(v)
	}
	off := 0
	for l := 0; l < L; l++ {
		offs = append(offs, off)
		in, out := s[l], s[l+1]
		z := make([]float64, out)
		for o := 0; o < out; o++ {
			z[o] = w[off+in*out+o]
			for q := 0; q < in; q++ {
				z[o] += w[off+o*in+q] * acts[l][q]
			}
			if l+1 < L {
				z[o] = math.Tanh(z[o])
			}
		}
		acts = append(acts, z)
		off += in*out + out
	}
	return acts, offs
}

// exampleLoss is sample j's cross-entropy loss at w.
func (r refSoftmax) exampleLoss(w []float64, ds *datasets.Dataset, j int) float64 {
	acts, _ := r.forward(w, ds, j)
	z := acts[len(acts)-1]
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range z {
		sum += math.Exp(v - mx)
	}
	return mx + math.Log(sum) - z[ds.Labels[j]]
}

// trainLoss is the mean loss at params over every sample of every client of world.
func (r refSoftmax) trainLoss(params []float32, world []*datasets.Dataset) float64 {
	w := make([]float64, len(params))
	for q, v := range params {
		w[q] = float64(v)
	}
	var sum float64
	n := 0
	for _, ds := range world {
		for j := range ds.Len() {
			sum += r.exampleLoss(w, ds, j)
		}
		n += ds.Len()
	}
	return sum / float64(n)
}

// checkTrainLoss holds a replica's recorded TrainLoss to the reference's mean loss over its
// world at its recorded parameters. Tolerance 1e-4 relative: the engine's float32 forward pass
// and sum against float64 here, on losses of order 1.
func (r refSoftmax) checkTrainLoss(t *testing.T, where string, rs checkpoint.ReplicaState, world []*datasets.Dataset) {
	t.Helper()
	if want := r.trainLoss(rs.Params, world); math.Abs(rs.TrainLoss-want) > 1e-4*max(1, math.Abs(want)) {
		t.Errorf("%s train loss: engine %g, reference %g", where, rs.TrainLoss, want)
	}
}

// exampleGrad adds scale times sample j's loss gradient at w to g.
func (r refSoftmax) exampleGrad(w []float64, ds *datasets.Dataset, j int, scale float64, g []float64) {
	acts, offs := r.forward(w, ds, j)
	s := r.sizes()
	L := len(s) - 1
	z := acts[L]
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, v)
	}
	var sum float64
	p := make([]float64, len(z))
	for c, v := range z {
		p[c] = math.Exp(v - mx)
		sum += p[c]
	}
	delta := make([]float64, len(z))
	for c := range p {
		delta[c] = p[c] / sum
		if c == int(ds.Labels[j]) {
			delta[c]--
		}
	}
	for l := L - 1; l >= 0; l-- {
		in, out, off := s[l], s[l+1], offs[l]
		prev := make([]float64, in)
		for o := 0; o < out; o++ {
			for q := 0; q < in; q++ {
				g[off+o*in+q] += scale * delta[o] * acts[l][q]
				prev[q] += delta[o] * w[off+o*in+q]
			}
			g[off+in*out+o] += scale * delta[o]
		}
		if l > 0 {
			for q := range prev {
				prev[q] *= 1 - acts[l][q]*acts[l][q]
			}
		}
		delta = prev
	}
}

func norm64(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// batch is the sample indices of client i's minibatch of (round t, step k) for run seed seed.
func (r refSoftmax) batch(seed uint64, t, i, k, n int) []int {
	cfg := r.cfg
	var idx []int
	switch cfg.Batching {
	case algo.Full:
		for j := 0; j < n; j++ {
			idx = append(idx, j)
		}
	case algo.Fixed:
		perm := make([]int32, n)
		rng := philox.NewRand(cfg.Seed, uint32(t), uint32(i), philox.DomainBatch, uint32(k))
		philox.SamplePrefix(&rng, perm, cfg.BatchSize)
		for _, j := range perm[:cfg.BatchSize] {
			idx = append(idx, int(j))
		}
	case algo.Poisson:
		q := float64(cfg.BatchSize) / float64(n)
		rng := philox.NewRand(seed, uint32(t), uint32(i), philox.DomainPoisson, uint32(k))
		for j := 0; j < n; j++ {
			if rng.Float() < q {
				idx = append(idx, j)
			}
		}
	}
	return idx
}

// local is client i's K local steps of round t from wt on ds.
func (r refSoftmax) local(seed uint64, t, i int, wt []float64, ds *datasets.Dataset) []float64 {
	cfg := r.cfg
	w := append([]float64(nil), wt...)
	for k := 0; k < cfg.LocalSteps; k++ {
		idx := r.batch(seed, t, i, k, ds.Len())
		g := make([]float64, r.d())
		if cfg.Algorithm == algo.DPSGD {
			for _, j := range idx {
				gj := make([]float64, r.d())
				r.exampleGrad(w, ds, j, 1, gj)
				c := 1 / max(1, norm64(gj)/cfg.ClipNorm)
				for q := range g {
					g[q] += c * gj[q]
				}
			}
		} else {
			for _, j := range idx {
				r.exampleGrad(w, ds, j, 1/float64(len(idx)), g)
			}
			if cfg.ClipNorm > 0 {
				c := 1 / max(1, norm64(g)/cfg.ClipNorm)
				for q := range g {
					g[q] *= c
				}
			}
		}
		eta := cfg.LearningRateAt(t, k)
		for q := range w {
			step := g[q]
			if cfg.Algorithm == algo.FedProx {
				step += cfg.ProxAlpha * (w[q] - wt[q])
			}
			w[q] -= eta * step
		}
	}
	return w
}

func gauss(seed uint64, t int, stream uint32, d int) []float64 {
	z := make([]float32, d)
	philox.AddGaussian(z, seed, uint32(t), stream, 0, 1)
	out := make([]float64, d)
	for q, v := range z {
		out[q] = float64(v)
	}
	return out
}

type refReplica struct {
	params, upload []float64
	llrAll, mu2    float64
	llrUp, mu2Up   float64
}

// run trains pair p's world w and returns its state at every round 0..T.
func (r refSoftmax) run(p, w int, worlds [2][]*datasets.Dataset, tgt TargetInfo, w0 []float32) []refReplica {
	cfg := r.cfg
	m := len(worlds[0])
	n := cfg.Participants
	if n == 0 {
		n = m
	}
	seed := RunSeed(cfg.Seed, p)
	wt := make([]float64, r.d())
	for q, v := range w0 {
		wt[q] = float64(v)
	}
	out := []refReplica{{params: wt}}
	var llrAll, mu2 float64
	sgn := float64(1 - 2*w)
	for t := 0; t < cfg.Rounds; t++ {
		part := make([]bool, m)
		if n == m {
			for i := range part {
				part[i] = true
			}
		} else {
			perm := make([]int32, m)
			rng := philox.NewRand(seed, uint32(t), 0, philox.DomainParticipation, 0)
			philox.SamplePrefix(&rng, perm, n)
			for _, i := range perm[:n] {
				part[i] = true
			}
		}
		avg := make([]float64, r.d())
		var mine, other []float64
		for i := 0; i < m; i++ {
			if !part[i] {
				continue
			}
			wl := r.local(seed, t, i, wt, worlds[w][i])
			if i == tgt.Client {
				mine, other = wl, r.local(seed, t, i, wt, worlds[1-w][i])
			}
			for q := range avg {
				avg[q] += wl[q] / float64(n)
			}
		}
		in := part[tgt.Client]
		next := append([]float64(nil), avg...)
		var upload []float64
		var llrUp, mu2Up float64
		sigma := cfg.NoiseStd
		if sigma > 0 && cfg.mechanism() != algo.Gaussian {
			dist, err := cfg.NoiseOf(1)
			if err != nil {
				panic(err)
			}
			for i := 0; i < m; i++ {
				if !part[i] {
					continue
				}
				z := make([]float32, r.d())
				noise.AddHost(z, dist, seed, uint32(t), uint32(i), 1)
				for q := range next {
					next[q] += sigma / float64(n) * float64(z[q])
				}
				if i == tgt.Client {
					upload = make([]float64, r.d())
					for q := range upload {
						upload[q] = mine[q] + sigma*float64(z[q])
					}
				}
			}
		} else if sigma > 0 {
			others := n
			if in {
				others--
				zt := gauss(seed, t, uint32(tgt.Client), r.d())
				upload = make([]float64, r.d())
				for q := range next {
					next[q] += sigma / float64(n) * zt[q]
					upload[q] = mine[q] + sigma*zt[q]
				}
			}
			zo := gauss(seed, t, streamOthers, r.d())
			for q := range next {
				next[q] += sigma * math.Sqrt(float64(others)) / float64(n) * zo[q]
			}
			if in {
				// D = phi(w_t) - phi'(w_t) (C minus C'), the statistic of docs/training.md.
				var dot, dd float64
				for q := range next {
					dq := sgn * (mine[q] - other[q]) / float64(n)
					phiC := avg[q]
					if w == 1 {
						phiC = avg[q] + dq
					}
					mid := phiC - dq/2
					dot += (next[q] - mid) * dq
					dd += dq * dq
				}
				llrAll += float64(n) / (sigma * sigma) * dot
				mu2 += float64(n) / (sigma * sigma) * dd
				// The uploads observer: U = phi_i(w_t) + sigma z, shift phi_i^C - phi_i^C'.
				var udot, udd float64
				for q := range upload {
					diff := sgn * (mine[q] - other[q])
					mid := (mine[q] + other[q]) / 2
					udot += (upload[q] - mid) * diff
					udd += diff * diff
				}
				llrUp, mu2Up = udot/(sigma*sigma), udd/(sigma*sigma)
			}
		}
		wt = next
		out = append(out, refReplica{params: wt, upload: upload, llrAll: llrAll, mu2: mu2, llrUp: llrUp, mu2Up: mu2Up})
	}
	return out
}

// compareToReference trains cfg with the engine and checks every recorded replica against the
// scalar reference.
func compareToReference(t *testing.T, cfg Config, m, N, dim, classes int, tgt TargetInfo, pairs PairRange) {
	t.Helper()
	c, cp := synthWorlds(m, N, dim, classes, tgt, 5)
	compareToReferenceOn(t, cfg, c, cp, dim, classes, tgt, pairs)
}

// refPlain makes compareToReferenceOn train on the CPU backend with its optional interfaces
// hidden (the host paths of the noise and of the steps).
var refPlain bool

func compareToReferenceOn(t *testing.T, cfg Config, c, cp []*datasets.Dataset, dim, classes int, tgt TargetInfo, pairs PairRange) {
	t.Helper()
	cps := refTrainRun(t, cfg, c, cp, tgt, pairs)
	compareToReferenceCps(t, cps, cfg, c, cp, dim, classes, tgt)
}

func refTrainRun(t *testing.T, cfg Config, c, cp []*datasets.Dataset, tgt TargetInfo, pairs PairRange) []*checkpoint.Checkpoint {
	t.Helper()
	var cps []*checkpoint.Checkpoint
	if refPlain {
		be := cpu.New(2)
		defer be.Close()
		rec := &memRecorder{}
		if err := TrainOn(context.Background(), struct{ compute.Backend }{be}, Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: rec}); err != nil {
			t.Fatal(err)
		}
		cps = rec.cps
	} else {
		cps = run(t, cfg, c, cp, tgt, pairs)
	}
	return cps
}

func compareToReferenceCps(t *testing.T, cps []*checkpoint.Checkpoint, cfg Config, c, cp []*datasets.Dataset, dim, classes int, tgt TargetInfo) {
	t.Helper()
	mdl, err := model.New(cfg.Model, []int{dim}, dim, classes)
	if err != nil {
		t.Fatal(err)
	}
	w0 := seededInitial(mdl, cfg.Seed)
	ref := refSoftmax{cfg: cfg, dim: dim, classes: classes, hidden: cfg.Model.Hidden}
	worlds := [2][]*datasets.Dataset{c, cp}
	refs := map[[2]int][]refReplica{}
	for _, ck := range cps {
		for _, rs := range ck.Replicas {
			key := [2]int{rs.Pair, rs.World}
			if refs[key] == nil {
				refs[key] = ref.run(rs.Pair, rs.World, worlds, tgt, w0)
			}
			want := refs[key][ck.Round]
			where := fmt.Sprintf("round %d pair %d world %d", ck.Round, rs.Pair, rs.World)
			closeTo(t, where+" params", rs.Params, want.params, 1e-4)
			ref.checkTrainLoss(t, where, rs, worlds[rs.World])
			if cfg.RecordUpload && ck.Round > 0 {
				closeTo(t, where+" upload", rs.Upload, want.upload, 1e-4)
			}
			if cfg.Informed {
				stats := map[string]float64{}
				for j, name := range ck.StatNames {
					stats[name] = rs.Stats[j]
				}
				for name, v := range map[string]float64{checkpoint.StatLLRAll: want.llrAll, checkpoint.StatMu2: want.mu2,
					checkpoint.StatLLRUpload: want.llrUp, checkpoint.StatMu2Upload: want.mu2Up} {
					if math.Abs(stats[name]-v) > 1e-3*max(1, math.Abs(v)) {
						t.Errorf("%s %s: engine %g, reference %g", where, name, stats[name], v)
					}
				}
			}
		}
	}
}

func closeTo(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, reference %d", what, len(got), len(want))
		return
	}
	for q := range got {
		if math.Abs(float64(got[q])-want[q]) > tol*max(1, math.Abs(want[q])) {
			t.Errorf("%s[%d]: engine %g, reference %g", what, q, got[q], want[q])
			return
		}
	}
}

// TestScalarReference holds the engine (every local-step form, batching, schedule, clipping,
// participation and mechanism) to refSoftmax on tiny configurations: parameters, uploads and
// the informed statistics of every checkpoint, 1e-4 (float32 training against float64).
// refBase is the configuration the scalar reference cases edit: model m, FedAvg at a constant
// rate, clipped, fixed batches, every checkpoint recorded with the informed statistics.
func refBase(m model.Config) Config {
	return Config{Algorithm: algo.FedAvg, Model: m, Rounds: 3, LocalSteps: 3,
		LearningRate: 0.5, Schedule: "constant", ClipNorm: 0.3, NoiseStd: 0.05, Batching: algo.Fixed, BatchSize: 3,
		Seed: 11, Checkpoints: []int{0, 1, 2, 3}, RecordParams: true, RecordUpload: true, Informed: true}
}

// refCase is one scalar reference case: input dimension, clients m of N samples, pairs, and the
// edit of refBase.
type refCase struct {
	name        string
	dim         int
	m, N, pairs int
	edit        func(*Config)
}

func TestScalarReference(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	base := refBase(model.Config{Kind: "softmax"})
	cases := []refCase{
		{"fixed-deferred", 12, 3, 8, 3, func(c *Config) {}},
		{"fixed-fused", 4, 3, 8, 3, func(c *Config) {}},
		{"fixed-direct", 2, 3, 8, 3, func(c *Config) {}},
		{"full", 4, 3, 6, 3, func(c *Config) { c.Batching, c.BatchSize = algo.Full, 0 }},
		{"poisson", 4, 3, 8, 3, func(c *Config) { c.Batching = algo.Poisson; c.Informed = false }},
		{"participation", 4, 4, 8, 4, func(c *Config) { c.Participants = 2 }},
		{"participation-deferred", 12, 4, 8, 4, func(c *Config) { c.Participants = 2 }},
		{"fedprox-cyclic", 12, 3, 8, 3, func(c *Config) { c.Algorithm, c.ProxAlpha, c.Schedule = algo.FedProx, 0.5, "cyclic" }},
		{"fedprox-fused", 4, 3, 8, 3, func(c *Config) { c.Algorithm, c.ProxAlpha, c.Schedule = algo.FedProx, 0.5, "stagewise" }},
		{"iterative", 4, 3, 8, 3, func(c *Config) { c.Schedule = "iterative" }},
		{"noclip", 4, 3, 8, 3, func(c *Config) { c.ClipNorm = 0 }},
		{"table", 12, 3, 8, 3, func(c *Config) {
			c.Schedule, c.ScheduleTable = "table", [][]float64{{0.1, 0.2, 0.3}, {0.4, 0.5, 0.6}, {0.7, 0.8, 0.9}}
		}},
		{"dpsgd-fixed", 4, 1, 10, 3, func(c *Config) { c.Algorithm, c.LearningRate, c.ClipNorm = algo.DPSGD, 0.1, 0.5 }},
		{"dpsgd-poisson", 4, 1, 10, 3, func(c *Config) {
			c.Algorithm, c.LearningRate, c.ClipNorm, c.Batching, c.Informed = algo.DPSGD, 0.1, 0.5, algo.Poisson, false
		}},
		{"dpsgd-full", 4, 1, 6, 3, func(c *Config) {
			c.Algorithm, c.LearningRate, c.ClipNorm, c.Batching, c.BatchSize = algo.DPSGD, 0.1, 0.5, algo.Full, 0
		}},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			cfg := base
			k.edit(&cfg)
			tg := tgt
			if k.m == 1 {
				tg.Client = 0
			}
			compareToReference(t, cfg, k.m, k.N, k.dim, 3, tg, PairRange{First: 2, Count: k.pairs})
		})
	}
}

func TestScalarReferencePlain(t *testing.T) {
	refPlain = true
	defer func() { refPlain = false }()
	t.Run("softmax", TestScalarReference)
	t.Run("mlp", TestScalarReferenceMLP)
	t.Run("whole", TestScalarReferenceWholeClient)
	t.Run("dp", TestScalarReferenceDPFedAvg)
}

func TestScalarReferenceMLP(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	base := refBase(model.Config{Kind: "mlp", Hidden: []int{5}, Activation: "tanh"})
	cases := []refCase{
		{"fixed-deferred", 12, 3, 8, 3, func(c *Config) {}},
		{"fixed-deferred-2", 12, 3, 8, 3, func(c *Config) { c.Model.Hidden = []int{5, 4} }},
		{"fixed-fused", 4, 3, 8, 3, func(c *Config) {}},
		{"fixed-direct", 2, 3, 8, 3, func(c *Config) {}},
		{"full", 4, 3, 6, 3, func(c *Config) { c.Batching, c.BatchSize = algo.Full, 0 }},
		{"poisson", 4, 3, 8, 3, func(c *Config) { c.Batching = algo.Poisson; c.Informed = false }},
		{"participation-deferred", 12, 4, 8, 4, func(c *Config) { c.Participants = 2 }},
		{"participation-fused", 4, 4, 8, 4, func(c *Config) { c.Participants = 3 }},
		{"fedprox-deferred", 12, 3, 8, 3, func(c *Config) { c.Algorithm, c.ProxAlpha, c.Schedule = algo.FedProx, 0.5, "cyclic" }},
		{"fedprox-deferred-2", 12, 3, 8, 3, func(c *Config) {
			c.Algorithm, c.ProxAlpha, c.Schedule, c.Model.Hidden = algo.FedProx, 0.5, "iterative", []int{4, 3}
		}},
		{"fedprox-fused", 4, 3, 8, 3, func(c *Config) { c.Algorithm, c.ProxAlpha, c.Schedule = algo.FedProx, 0.5, "stagewise" }},
		{"noclip-deferred", 12, 3, 8, 3, func(c *Config) { c.ClipNorm = 0 }},
		{"laplace", 12, 4, 8, 3, func(c *Config) { c.Mechanism, c.Informed, c.Participants = algo.Laplace, false, 3 }},
		{"staircase", 4, 3, 8, 3, func(c *Config) { c.Mechanism, c.Informed, c.StaircaseEpsilon = algo.Staircase, false, 2 }},
		{"dpsgd-fixed", 4, 1, 10, 3, func(c *Config) { c.Algorithm, c.LearningRate, c.ClipNorm = algo.DPSGD, 0.1, 0.5 }},
		{"dpsgd-poisson-2", 4, 1, 10, 3, func(c *Config) {
			c.Algorithm, c.LearningRate, c.ClipNorm, c.Batching, c.Informed, c.Model.Hidden = algo.DPSGD, 0.1, 0.5, algo.Poisson, false, []int{4, 3}
		}},
	}
	for _, k := range cases {
		for _, client := range []int{0, 1, 2, 4} {
			if client >= k.m {
				continue
			}
			t.Run(fmt.Sprintf("%s-target%d", k.name, client), func(t *testing.T) {
				cfg := base
				k.edit(&cfg)
				tg := tgt
				tg.Client = client
				compareToReference(t, cfg, k.m, k.N, k.dim, 3, tg, PairRange{First: 2, Count: k.pairs})
			})
		}
	}
}

// runDP is the DP-FedAvg (Alg. 4) reference with the server's noise: the clients sampled from
// Philox domain 7 of the run seed, their local training as refSoftmax.local, updates clipped
// to c, the sum plus N(0, (z c)^2) from the server's stream, divided by q m.
func (r refSoftmax) runDP(p, w int, worlds [2][]*datasets.Dataset, tgt TargetInfo, w0 []float32) []refReplica {
	cfg := r.cfg
	m := len(worlds[0])
	seed := RunSeed(cfg.Seed, p)
	wt := make([]float64, r.d())
	for q, v := range w0 {
		wt[q] = float64(v)
	}
	out := []refReplica{{params: wt}}
	var llrAll, mu2 float64
	for t := 0; t < cfg.Rounds; t++ {
		sum := make([]float64, r.d())
		// The target's clipped update in each world (zero where absent).
		var u [2][]float64
		for ww := 0; ww < 2; ww++ {
			u[ww] = make([]float64, r.d())
			if ww == 1 && tgt.Absent {
				continue
			}
			wl := r.local(seed, t, tgt.Client, wt, worlds[ww][tgt.Client])
			for q := range wl {
				wl[q] -= wt[q]
			}
			f := math.Min(1, cfg.UpdateClip/norm64(wl))
			for q := range wl {
				u[ww][q] = f * wl[q]
			}
		}
		in := false
		for i := 0; i < m; i++ {
			rng := philox.NewRand(seed, uint32(t), uint32(i), philox.DomainClientSampling, 0)
			if rng.Float() >= cfg.SamplingRate {
				continue
			}
			if i == tgt.Client {
				in = true
			}
			if w == 1 && tgt.Absent && i == tgt.Client {
				continue
			}
			wl := r.local(seed, t, i, wt, worlds[w][i])
			for q := range wl {
				wl[q] -= wt[q]
			}
			f := math.Min(1, cfg.UpdateClip/norm64(wl))
			for q := range sum {
				sum[q] += f * wl[q]
			}
		}
		z := gauss(seed, t, streamServer, r.d())
		std := cfg.NoiseMultiplier * cfg.UpdateClip
		if cfg.mechanism() != algo.Gaussian {
			dist, err := cfg.NoiseOf(std)
			if err != nil {
				panic(err)
			}
			z32 := make([]float32, r.d())
			noise.AddHost(z32, dist, seed, uint32(t), streamServer, 1)
			for q := range z {
				z[q] = float64(z32[q]) / std
			}
		}
		next := make([]float64, r.d())
		for q := range next {
			next[q] = wt[q] + cfg.ServerLR*(sum[q]+std*z[q])/(cfg.SamplingRate*float64(m))
		}
		if cfg.Informed && cfg.mechanism() == algo.Gaussian {
			var a [2]float64
			var dd float64
			for q := range z {
				y := std * z[q]
				if in {
					y += u[w][q]
				}
				for ww := 0; ww < 2; ww++ {
					a[ww] += (y*u[ww][q] - u[ww][q]*u[ww][q]/2) / (std * std)
				}
				dd += (u[0][q] - u[1][q]) * (u[0][q] - u[1][q])
			}
			llrAll += logMix(cfg.SamplingRate, a[0]) - logMix(cfg.SamplingRate, a[1])
			mu2 += dd / (std * std)
		}
		wt = next
		out = append(out, refReplica{params: wt, llrAll: llrAll, mu2: mu2})
	}
	return out
}

func TestScalarReferenceDPFedAvg(t *testing.T) {
	const m, N, dim, classes, pairs = 4, 8, 12, 3, 4
	for _, kind := range []string{"sample", "replace-client", "remove-client", "laplace"} {
		for _, batching := range []algo.Batching{algo.Fixed, algo.Full, algo.Poisson} {
			t.Run(kind+"-"+string(batching), func(t *testing.T) {
				cfg := Config{Algorithm: algo.DPFedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{5}, Activation: "tanh"},
					Rounds: 3, LocalSteps: 3, LearningRate: 0.5, Schedule: "cyclic", ClipNorm: 0.5, Batching: batching, BatchSize: 3,
					Seed: 9, Checkpoints: []int{1, 2, 3}, RecordParams: true, SamplingRate: 0.6, NoiseMultiplier: 0.7,
					UpdateClip: 0.05, ServerLR: 0.9, Informed: true}
				if batching == algo.Full {
					cfg.BatchSize = 0
				}
				tgt := TargetInfo{Client: 1, Index: 2}
				c, cp := synthWorlds(m, N, dim, classes, tgt, 5)
				worlds := [2][]*datasets.Dataset{c, cp}
				switch kind {
				case "laplace":
					cfg.Mechanism = algo.Laplace
				case "replace-client":
					tgt.WholeClient = true
					other, _ := synthWorlds(m, N, dim, classes, tgt, 99)
					cp = slices.Clone(c)
					cp[1] = other[0]
					worlds[1] = cp
				case "remove-client":
					tgt.Absent = true
					cp = slices.Delete(slices.Clone(c), 1, 2)
					worlds[1] = slices.Clone(c)
				}
				cps := refTrainRun(t, cfg, c, cp, tgt, PairRange{First: 1, Count: pairs})
				mdl, err := model.New(cfg.Model, []int{dim}, dim, classes)
				if err != nil {
					t.Fatal(err)
				}
				w0 := seededInitial(mdl, cfg.Seed)
				ref := refSoftmax{cfg: cfg, dim: dim, classes: classes, hidden: cfg.Model.Hidden}
				for _, ck := range cps {
					for _, rs := range ck.Replicas {
						want := ref.runDP(rs.Pair, rs.World, worlds, tgt, w0)[ck.Round]
						where := fmt.Sprintf("round %d pair %d world %d", ck.Round, rs.Pair, rs.World)
						closeTo(t, where+" params", rs.Params, want.params, 1e-4)
						// The world a replica trains in: under remove-client, C' without client 1.
						ref.checkTrainLoss(t, where, rs, [2][]*datasets.Dataset{c, cp}[rs.World])
						if cfg.Informed && cfg.mechanism() == algo.Gaussian {
							for j, v := range []float64{want.llrAll, want.mu2} {
								name := []string{checkpoint.StatLLRAll, checkpoint.StatMu2}[j]
								got := rs.Stats[slices.Index(ck.StatNames, name)]
								if math.Abs(got-v) > 1e-3*max(1, math.Abs(v)) {
									t.Errorf("%s %s: engine %g, reference %g", where, name, got, v)
								}
							}
						}
					}
				}
			})
		}
	}
}

func TestScalarReferenceWholeClient(t *testing.T) {
	const m, N, classes = 3, 8, 3
	for _, k := range []struct {
		name string
		dim  int
		b    algo.Batching
	}{{"deferred", 12, algo.Fixed}, {"fused", 4, algo.Fixed}, {"full", 4, algo.Full}, {"poisson", 4, algo.Poisson}} {
		t.Run(k.name, func(t *testing.T) {
			cfg := refBase(model.Config{Kind: "mlp", Hidden: []int{5}, Activation: "tanh"})
			cfg.Batching, cfg.Checkpoints, cfg.Informed = k.b, []int{1, 3}, k.b != algo.Poisson
			if k.b == algo.Full {
				cfg.BatchSize = 0
			}
			tgt := TargetInfo{Client: 1, Index: 2, WholeClient: true}
			c, _ := synthWorlds(m, N, k.dim, classes, tgt, 5)
			other, _ := synthWorlds(m, N, k.dim, classes, tgt, 77)
			cp := slices.Clone(c)
			cp[1] = other[2]
			compareToReferenceOn(t, cfg, c, cp, k.dim, classes, tgt, PairRange{First: 0, Count: 3})
		})
	}
}
