package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

type memRecorder struct{ cps []*checkpoint.Checkpoint }

func (m *memRecorder) Checkpoint(_ context.Context, cp *checkpoint.Checkpoint) error {
	m.cps = append(m.cps, cp)
	return nil
}

// synthWorlds builds m clients of n samples (class-dependent means plus uniform noise) and C',
// where client target.Client's sample target.Index is replaced by another point of another
// class.
func synthWorlds(m, n, dim, classes int, target TargetInfo, seed uint64) (c, cp []*datasets.Dataset) {
	rnd := philox.NewRand(seed, 0, 0, 9, 3)
	for i := 0; i < m; i++ {
		ds := &datasets.Dataset{Name: "synth", Shape: []int{dim}, Classes: classes, Features: make([]float32, n*dim), Labels: make([]int32, n)}
		for j := 0; j < n; j++ {
			y := rnd.Below(classes)
			ds.Labels[j] = int32(y)
			for q := 0; q < dim; q++ {
				mu := 0.0
				if q%classes == y {
					mu = 1
				}
				ds.Features[j*dim+q] = float32(mu + rnd.Float() - 0.5)
			}
		}
		c = append(c, ds)
	}
	for i, ds := range c {
		if i != target.Client {
			cp = append(cp, ds)
			continue
		}
		alt := &datasets.Dataset{Name: "synth'", Shape: ds.Shape, Classes: classes, Features: slices.Clone(ds.Features), Labels: slices.Clone(ds.Labels)}
		j := target.Index
		alt.Labels[j] = (ds.Labels[j] + 1) % int32(classes)
		for q := 0; q < dim; q++ {
			alt.Features[j*dim+q] = 3 * float32(rnd.Float()-0.5)
		}
		cp = append(cp, alt)
	}
	return c, cp
}

func mlpConfig() Config {
	return Config{
		Algorithm: algo.FedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"},
		Rounds: 3, LocalSteps: 2, LearningRate: 0.3, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.05,
		Batching: "fixed", BatchSize: 4, Seed: 7, Checkpoints: []int{1, 3}, Informed: true,
		RecordParams: true, RecordUpload: true,
	}
}

func run(t *testing.T, cfg Config, c, cp []*datasets.Dataset, tgt TargetInfo, pairs PairRange) []*checkpoint.Checkpoint {
	t.Helper()
	rec := &memRecorder{}
	if err := Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: pairs, Recorder: rec}); err != nil {
		t.Fatal(err)
	}
	return rec.cps
}

// The exact reference instance of docs/theory.md: quadratic losses, full-batch local
// gradients, clipping never active. Then phi(w) = rho w + c and w_T is Gaussian with
// mean sum_{j<T} rho^j c (w_0 = 0) and covariance (sigma^2/m) sum_{j<T} rho^{2j} I; the coupled
// difference w_T - w'_T is exactly sum_{j<T} rho^j Delta; the realized mu^2 is
// (m/sigma^2) T ||Delta||^2 and the informed log-likelihood ratio is N(+-mu^2/2, mu^2).
func TestQuadraticReferenceInstance(t *testing.T) {
	const (
		m, n, dim, pairs = 4, 5, 4, 3000
		a, eta, sigma, V = 0.5, 0.1, 0.05, 100.0
		K, T             = 3, 4
	)
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(m, n, dim, 2, tgt, 21)
	cfg := Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "quadratic", Curvature: a},
		Rounds: T, LocalSteps: K, LearningRate: eta, Schedule: "constant", ClipNorm: V, NoiseStd: sigma,
		Batching: "full", Seed: 3, Checkpoints: []int{1, 2, 3, 4}, Informed: true, RecordParams: true}
	cps := run(t, cfg, c, cp, tgt, PairRange{0, pairs})

	rho := math.Pow(1-eta*a, K)
	gain := (1 - rho) / a // sum_k (1 - eta a)^k eta
	cvec := make([]float64, dim)
	delta := make([]float64, dim)
	for i := 0; i < m; i++ {
		b := clientMean(c[i])
		for q := range cvec {
			cvec[q] += gain * b[q] / m
		}
	}
	bt, btp := clientMean(c[tgt.Client]), clientMean(cp[tgt.Client])
	var dd float64
	for q := range delta {
		delta[q] = gain * (bt[q] - btp[q]) / m
		dd += delta[q] * delta[q]
	}
	checkQuadraticClipInactive(t, cps, c, cp, a, eta, V, K)

	final := cps[len(cps)-1]
	var sumRho, sumRho2 float64
	for j := 0; j < T; j++ {
		sumRho += math.Pow(rho, float64(j))
		sumRho2 += math.Pow(rho, 2*float64(j))
	}
	checkQuadraticFinal(t, final, cvec, delta, sumRho, sigma*sigma/m*sumRho2, pairs)
	checkInformedGaussian(t, final, m/(sigma*sigma)*T*dd, pairs)
}

// clientMean is the mean of a client's samples' features, b_i of the quadratic model.
func clientMean(ds *datasets.Dataset) []float64 {
	b := make([]float64, ds.Dim())
	for j := 0; j < ds.Len(); j++ {
		for q, v := range ds.Row(j) {
			b[q] += float64(v) / float64(ds.Len())
		}
	}
	return b
}

// checkQuadraticClipInactive replays every round's local steps from the recorded w_t in
// float64 and fails when a gradient's norm reaches the clip norm V: the reference instance
// assumes clipping is never active.
func checkQuadraticClipInactive(t *testing.T, cps []*checkpoint.Checkpoint, c, cp []*datasets.Dataset, a, eta, V float64, K int) {
	t.Helper()
	m, dim := len(c), c[0].Dim()
	prev := make([][]float32, len(cps[0].Replicas))
	for r := range prev {
		prev[r] = make([]float32, dim)
	}
	for _, ck := range cps {
		for r, rs := range ck.Replicas {
			ds := c
			if rs.World == 1 {
				ds = cp
			}
			for i := 0; i < m; i++ {
				b := clientMean(ds[i])
				w := to64(prev[r])
				for k := 0; k < K; k++ {
					var g2 float64
					for q := range w {
						g := a*w[q] - b[q]
						g2 += g * g
						w[q] -= eta * g
					}
					if math.Sqrt(g2) >= V {
						t.Fatalf("round %d replica %d client %d: gradient norm %g reaches V = %g", ck.Round, r, i, math.Sqrt(g2), V)
					}
				}
			}
			prev[r] = rs.Params
		}
	}
}

// checkQuadraticFinal checks w_T of the reference instance: per world and coordinate the mean
// sumRho c (minus sumRho Delta in world 1), the variance pooled over coordinates, and the
// coupled difference w_T - w'_T = sumRho Delta exactly.
func checkQuadraticFinal(t *testing.T, final *checkpoint.Checkpoint, cvec, delta []float64, sumRho, variance float64, pairs int) {
	t.Helper()
	dim := len(cvec)
	// Coordinates are independent with equal variance: pool them (world 0 only; world 1 shares
	// its noise) so that the variance is checked to 5 standard errors = 5 sqrt(2/(pairs dim)),
	// about 6.5%.
	var pooled float64
	for w := 0; w < 2; w++ {
		for q := 0; q < dim; q++ {
			want := sumRho * cvec[q]
			if w == 1 {
				want -= sumRho * delta[q]
			}
			var s, ss float64
			for p := 0; p < pairs; p++ {
				v := float64(final.Replicas[2*p+w].Params[q])
				s += v
				ss += (v - want) * (v - want)
			}
			mu := s / float64(pairs)
			if se := math.Sqrt(variance / float64(pairs)); math.Abs(mu-want) > 5*se {
				t.Errorf("world %d coordinate %d: mean %g, exact %g (5 se = %g)", w, q, mu, want, 5*se)
			}
			if w == 0 {
				pooled += ss / float64(pairs*dim)
			}
		}
	}
	if tol := 5 * math.Sqrt(2.0/float64(pairs*dim)) * variance; math.Abs(pooled-variance) > tol {
		t.Errorf("variance %g, exact %g (tolerance %g)", pooled, variance, tol)
	}
	// The coupled difference is deterministic; float32 rounding of values of size ~1 over
	// T K m steps allows 1e-5 absolute.
	for p := 0; p < pairs; p++ {
		for q := 0; q < dim; q++ {
			diff := float64(final.Replicas[2*p].Params[q] - final.Replicas[2*p+1].Params[q])
			if want := sumRho * delta[q]; math.Abs(diff-want) > 1e-5 {
				t.Fatalf("pair %d coordinate %d: w_T - w'_T = %g, exact %g", p, q, diff, want)
			}
		}
	}
}

// checkInformedGaussian checks the informed adversary's statistics at the last checkpoint:
// every replica's realized mu^2 is mu2, and the log-likelihood ratio is N(+-mu2/2, mu2) in the
// two worlds.
func checkInformedGaussian(t *testing.T, final *checkpoint.Checkpoint, mu2 float64, pairs int) {
	t.Helper()
	var llr [2][]float64
	for _, rs := range final.Replicas {
		if rs.Diverged {
			t.Fatalf("pair %d world %d diverged", rs.Pair, rs.World)
		}
		if got := rs.Stats[2]; math.Abs(got-mu2) > 1e-4*mu2 {
			t.Fatalf("pair %d world %d: realized mu^2 %g, exact %g", rs.Pair, rs.World, got, mu2)
		}
		llr[rs.World] = append(llr[rs.World], rs.Stats[0])
	}
	t.Logf("exact mu^2 = %g (mu_comp = %g)", mu2, math.Sqrt(mu2))
	for w, sign := range []float64{1, -1} {
		var s, ss float64
		for _, v := range llr[w] {
			s += v
			ss += v * v
		}
		mu := s / float64(pairs)
		vr := ss/float64(pairs) - mu*mu
		if se := math.Sqrt(mu2 / float64(pairs)); math.Abs(mu-sign*mu2/2) > 5*se {
			t.Errorf("world %d: mean LLR %g, want %g (5 se %g)", w, mu, sign*mu2/2, 5*se)
		}
		if tol := 5 * math.Sqrt(2.0/float64(pairs)) * mu2; math.Abs(vr-mu2) > tol {
			t.Errorf("world %d: LLR variance %g, want %g (tolerance %g)", w, vr, mu2, tol)
		}
	}
}

// sigma = 0 and epsilon' = epsilon: the two runs of a pair are the same computation.
func TestSigmaZeroSameWorlds(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 1}
	c, _ := synthWorlds(3, 8, 5, 3, tgt, 4)
	for _, alg := range []algo.Algorithm{algo.FedAvg, algo.FedProx} {
		cfg := mlpConfig()
		cfg.Algorithm, cfg.NoiseStd, cfg.Informed = alg, 0, false
		if alg == algo.FedProx {
			cfg.ProxAlpha = 0.5
		}
		cps := run(t, cfg, c, c, tgt, PairRange{0, 3})
		for _, ck := range cps {
			for p := 0; p < 3; p++ {
				a, b := ck.Replicas[2*p], ck.Replicas[2*p+1]
				if !slices.Equal(a.Params, b.Params) || a.TrainLoss != b.TrainLoss {
					t.Fatalf("%s round %d pair %d: worlds differ with sigma = 0 and C = C'", alg, ck.Round, p)
				}
			}
		}
	}
}

// Results are the same whatever the shard layout and thread count: one shard of 6 pairs on 2
// threads against shards {0,1}, {2..5} on 1 and 3 threads, bit for bit. Covers fixed batches
// (the target sample is drawn in some steps), partial participation, informed statistics,
// FedProx, and DP-SGD with Poisson sampling.
func TestShardInvariance(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 0}
	c, cp := synthWorlds(3, 6, 5, 3, tgt, 8)
	fedavg := mlpConfig()
	fedavg.Participants = 2
	prox := mlpConfig()
	prox.Algorithm, prox.ProxAlpha = algo.FedProx, 0.3
	c1, cp1 := synthWorlds(1, 12, 5, 3, TargetInfo{Client: 0, Index: 3}, 9)
	dp := mlpConfig()
	dp.Algorithm, dp.Batching, dp.BatchSize, dp.LearningRate = algo.DPSGD, "poisson", 4, 0.1
	cases := []struct {
		name  string
		cfg   Config
		c, cp []*datasets.Dataset
		tgt   TargetInfo
	}{{"fedavg-partial", fedavg, c, cp, tgt}, {"fedprox", prox, c, cp, tgt}, {"dpsgd-poisson", dp, c1, cp1, TargetInfo{Client: 0, Index: 3}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Threads = 2
			whole := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 6})
			// The whole run on many-core thread counts (more helpers than this machine's cores).
			for _, threads := range []int{1, 3, 8, 16, 64} {
				cfg.Threads = threads
				other := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 6})
				for k, ck := range whole {
					for r, rs := range ck.Replicas {
						os := other[k].Replicas[r]
						if !slices.Equal(rs.Params, os.Params) || !slices.Equal(rs.Upload, os.Upload) ||
							!slices.Equal(rs.Stats, os.Stats) || rs.TrainLoss != os.TrainLoss || rs.TargetLoss != os.TargetLoss {
							t.Fatalf("%d threads: round %d replica %d differs from 2 threads", threads, ck.Round, r)
						}
					}
				}
			}
			cfg.Threads, cfg.ChunkPairs = 1, 1
			a := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{0, 2})
			cfg.Threads, cfg.ChunkPairs = 3, 3
			b := run(t, cfg, tc.c, tc.cp, tc.tgt, PairRange{2, 4})
			for k, ck := range whole {
				parts := append(slices.Clone(a[k].Replicas), b[k].Replicas...)
				for r, rs := range ck.Replicas {
					ps := parts[r]
					if rs.Pair != ps.Pair || rs.World != ps.World || rs.Seed != ps.Seed ||
						!slices.Equal(rs.Params, ps.Params) || !slices.Equal(rs.Upload, ps.Upload) ||
						!slices.Equal(rs.Stats, ps.Stats) || rs.TrainLoss != ps.TrainLoss || rs.TargetLoss != ps.TargetLoss {
						t.Fatalf("round %d replica %d differs between the whole run and the shards", ck.Round, r)
					}
				}
			}
			// The worlds must actually differ and the pairs must differ from each other.
			last := whole[len(whole)-1].Replicas
			if slices.Equal(last[0].Params, last[1].Params) || slices.Equal(last[0].Params, last[2].Params) {
				t.Error("worlds or pairs gave identical parameters: the test would not see a layout bug")
			}
		})
	}
}

// A diverging configuration (huge learning rate and sigma = 1) flags replicas, never returns
// an error, and keeps every recorded value finite; a NaN injected into one replica leaves the
// others bit for bit unchanged.
func TestDivergence(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := synthWorlds(2, 6, 5, 3, tgt, 10)
	cfg := mlpConfig()
	cfg.Model = model.Config{Kind: "quadratic", Curvature: -4}
	cfg.LearningRate, cfg.NoiseStd, cfg.ClipNorm, cfg.Rounds, cfg.Checkpoints = 1, 1, 0, 12, []int{12}
	cps := run(t, cfg, c, cp, tgt, PairRange{0, 3})
	for _, rs := range cps[0].Replicas {
		if !rs.Diverged {
			t.Errorf("pair %d world %d not flagged", rs.Pair, rs.World)
		}
		for _, v := range rs.Params {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("pair %d world %d: frozen parameters hold %g", rs.Pair, rs.World, v)
			}
		}
	}

	cfg = mlpConfig()
	ctx := context.Background()
	build := func() *engine {
		e, err := newEngine(cpu.New(2), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 3}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	clean, poisoned := build(), build()
	for tr := 0; tr < cfg.Rounds; tr++ {
		if tr == 1 {
			cpu.HostData(poisoned.g)[2*poisoned.d+5] = float32(math.NaN())
		}
		if err := clean.rounds.round(ctx, tr, true); err != nil {
			t.Fatal(err)
		}
		if err := poisoned.rounds.round(ctx, tr, true); err != nil {
			t.Fatal(err)
		}
	}
	if !poisoned.diverged[2] || slices.Contains(poisoned.diverged[:2], true) || slices.Contains(poisoned.diverged[3:], true) {
		t.Fatalf("diverged flags %v, want only replica 2", poisoned.diverged)
	}
	d := clean.d
	for r := 0; r < clean.R; r++ {
		if r == 2 {
			continue
		}
		if !slices.Equal(cpu.HostData(clean.g)[r*d:(r+1)*d], cpu.HostData(poisoned.g)[r*d:(r+1)*d]) {
			t.Fatalf("replica %d changed when replica 2 became NaN", r)
		}
		if clean.stats.llrAll[r] != poisoned.stats.llrAll[r] {
			t.Fatalf("replica %d's statistics changed when replica 2 became NaN", r)
		}
	}
}

// A training round (every client's K steps, noise, averaging, informed statistics) allocates
// nothing.
func TestRoundAllocatesNothing(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 0}
	c, cp := synthWorlds(3, 20, 12, 3, tgt, 11)
	for _, batching := range []algo.Batching{algo.Fixed, algo.Full, algo.Poisson} {
		cfg := mlpConfig()
		cfg.Batching = batching
		cfg.Rounds = 100
		e, err := newEngine(cpu.New(2), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 4}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		tr := 0
		step := func() {
			if err := e.rounds.round(ctx, tr, true); err != nil {
				t.Fatal(err)
			}
			tr++
		}
		step()
		if allocs := testing.AllocsPerRun(5, step); allocs != 0 {
			t.Errorf("%s: %g allocations per round, want 0", batching, allocs)
		}
	}
}

func TestConfigErrorsNameFields(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := synthWorlds(2, 6, 5, 3, tgt, 10)
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"algorithm", func(c *Config) { c.Algorithm = "sgd" }},
		{"rounds", func(c *Config) { c.Rounds = 0 }},
		{"local_steps", func(c *Config) { c.LocalSteps = 0 }},
		{"learning_rate", func(c *Config) { c.LearningRate = -1 }},
		{"schedule", func(c *Config) { c.Schedule = "cosine" }},
		{"schedule_table", func(c *Config) { c.Schedule = "table" }},
		{"batch_size", func(c *Config) { c.BatchSize = 7 }},
		{"participants", func(c *Config) { c.Participants = 3 }},
		{"prox_alpha", func(c *Config) { c.Algorithm = algo.FedProx }},
		{"checkpoints", func(c *Config) { c.Checkpoints = []int{4} }},
		{"informed", func(c *Config) { c.NoiseStd = 0 }},
		{"model.activation", func(c *Config) { c.Model.Activation = "gelu" }},
		{"algorithm", func(c *Config) { c.Algorithm = algo.DPSGD }}, // two clients
	}
	for _, tc := range cases {
		cfg := mlpConfig()
		tc.edit(&cfg)
		err := Train(context.Background(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
		if err == nil || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: error %v does not name the field", tc.field, err)
		}
	}
}

func TestContextCancel(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := synthWorlds(2, 6, 5, 3, tgt, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Train(ctx, Job{Config: mlpConfig(), WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}}); err == nil {
		t.Error("cancelled context: no error")
	}
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// compareClients accepts two worlds' copies of a client exactly when they hold the same labels
// and float32 bits everywhere but the target sample (anywhere, for a whole-client target), and
// otherwise names the first sample that differs. The samples are compared as memory, so the
// cases include what a comparison by value would get wrong: -0 against +0, and a NaN against
// itself.
func TestCompareClients(t *testing.T) {
	base := func() *datasets.Dataset {
		d := &datasets.Dataset{Name: "c", Shape: []int{3}, Classes: 2}
		for j := range 5 {
			d.Features = append(d.Features, float32(j), float32(-j), float32(j)/3)
			d.Labels = append(d.Labels, int32(j%2))
		}
		d.Features[7] = float32(math.NaN())
		return d
	}
	with := func(f func(d *datasets.Dataset)) *datasets.Dataset {
		d := base()
		f(d)
		return d
	}
	shared := base()
	negZero := with(func(d *datasets.Dataset) { d.Features[0] = float32(math.Copysign(0, -1)) })
	cases := []struct {
		name   string
		a, b   *datasets.Dataset
		target TargetInfo
		bad    string // "" when accepted, else the sample the error names
	}{
		{"the same dataset", shared, shared, TargetInfo{Client: 0, Index: 1}, ""},
		{"equal copies, NaN included", base(), base(), TargetInfo{Client: 0, Index: 1}, ""},
		{"the target's features", base(), with(func(d *datasets.Dataset) { d.Features[4] = 9 }), TargetInfo{Client: 0, Index: 1}, ""},
		{"the target's label", base(), with(func(d *datasets.Dataset) { d.Labels[1] = 0 }), TargetInfo{Client: 0, Index: 1}, ""},
		{"the first sample as target", base(), with(func(d *datasets.Dataset) { d.Features[0] = 9 }), TargetInfo{Client: 0, Index: 0}, ""},
		{"the last sample as target", base(), with(func(d *datasets.Dataset) { d.Labels[4] = 1 }), TargetInfo{Client: 0, Index: 4}, ""},
		{"another sample's features", base(), with(func(d *datasets.Dataset) { d.Features[10] = 9 }), TargetInfo{Client: 0, Index: 1}, "sample 3"},
		{"another sample's label", base(), with(func(d *datasets.Dataset) { d.Labels[4] = 1 }), TargetInfo{Client: 0, Index: 1}, "sample 4"},
		{"-0 against +0", base(), negZero, TargetInfo{Client: 0, Index: 1}, "sample 0"},
		{"the target sample of another client", base(), with(func(d *datasets.Dataset) { d.Features[4] = 9 }), TargetInfo{Client: 1, Index: 1}, "sample 1"},
		{"a whole-client target", base(), with(func(d *datasets.Dataset) { d.Labels[2] = 1 }), TargetInfo{Client: 0, WholeClient: true}, ""},
		{"the target and a later sample", base(), with(func(d *datasets.Dataset) { d.Features[3] = 9; d.Features[12] = 9 }), TargetInfo{Client: 0, Index: 1}, "sample 4"},
		{"two differences", base(), with(func(d *datasets.Dataset) { d.Features[13] = 9; d.Labels[2] = 1 }), TargetInfo{Client: 0, Index: 1}, "sample 2"},
		{"different sizes", base(), with(func(d *datasets.Dataset) { d.Features, d.Labels = d.Features[:12], d.Labels[:4] }), TargetInfo{Client: 0, Index: 1}, "5 samples in C and 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := compareClients(tc.a, tc.b, 0, tc.target)
			switch {
			case tc.bad == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
				t.Errorf("got %v, want an error naming %s", err, tc.bad)
			}
		})
	}
}

// BenchmarkCompareClients is the adjacency check of a training's set-up on W1's sizes (10
// clients of 600 samples of 784 features, 18.8 MB) where C' holds copies of C's clients,
// not the same datasets (which are not compared at all).
func BenchmarkCompareClients(b *testing.B) {
	tgt := TargetInfo{Client: 0, Index: 0}
	c, cp := synthWorlds(10, 600, 784, 10, tgt, 1)
	for i := range cp {
		d := *cp[i]
		d.Features, d.Labels = slices.Clone(d.Features), slices.Clone(d.Labels)
		cp[i] = &d
	}
	b.SetBytes(int64(10 * 600 * 784 * 4))
	for b.Loop() {
		for i := range c {
			if err := compareClients(c[i], cp[i], i, tgt); err != nil {
				b.Fatal(err)
			}
		}
	}
}
