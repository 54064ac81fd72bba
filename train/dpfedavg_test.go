package train

import (
	"context"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
	"github.com/fedaudit/fedaudit/train/privacy"
)

// quadClients builds m clients of n samples of dimension dim with known features, and a canary
// client (every sample the point canary).
func quadClients(m, n, dim int, canary float32) (clients []*datasets.Dataset, canaryClient *datasets.Dataset) {
	rnd := philox.NewRand(11, 0, 0, 9, 1)
	for i := 0; i < m; i++ {
		ds := &datasets.Dataset{Name: "q", Shape: []int{dim}, Classes: 2, Features: make([]float32, n*dim), Labels: make([]int32, n)}
		for j := range ds.Features {
			ds.Features[j] = float32(rnd.Float() - 0.5)
		}
		clients = append(clients, ds)
	}
	canaryClient = &datasets.Dataset{Name: "canary", Shape: []int{dim}, Classes: 2, Features: make([]float32, n*dim), Labels: make([]int32, n)}
	for j := 0; j < n; j++ {
		canaryClient.Features[j*dim] = canary
	}
	return clients, canaryClient
}

func dpConfig() Config {
	return Config{
		Algorithm: algo.DPFedAvg, Model: model.Config{Kind: "quadratic", Curvature: 1},
		Rounds: 2, LocalSteps: 3, LearningRate: 0.5, Schedule: "constant", Batching: "full", Seed: 5,
		Checkpoints: []int{1, 2}, RecordParams: true,
		SamplingRate: 0.5, NoiseMultiplier: 0, UpdateClip: 0.3, ServerLR: 0.8,
	}
}

// quadUpdate is the quadratic model's K full-batch local steps from w on client d (loss
// (a/2)||w||^2 - <mean x, w>), returned as the update w_K - w.
func quadUpdate(w []float64, d *datasets.Dataset, a, eta float64, K int) []float64 {
	dim := d.Dim()
	b := make([]float64, dim)
	for j := 0; j < d.Len(); j++ {
		for q, x := range d.Row(j) {
			b[q] += float64(x) / float64(d.Len())
		}
	}
	v := slices.Clone(w)
	for k := 0; k < K; k++ {
		for q := range v {
			v[q] -= eta * (a*v[q] - b[q])
		}
	}
	for q := range v {
		v[q] -= w[q]
	}
	return v
}

// TestDPFedAvgRoundMatchesAlgorithm4 replays Alg. 4 of the time-adaptive paper on the
// quadratic model with sigma = 0: the sampled clients' updates clipped to c, summed, divided by
// q m and scaled by the server learning rate, with the client sample read from the documented
// stream (Philox domain 7 of the pair's run seed). Tolerance 1e-5: float32 training against a
// float64 replay.
func TestDPFedAvgRoundMatchesAlgorithm4(t *testing.T) {
	const m, n, dim, pairs = 5, 4, 3, 6
	clients, canary := quadClients(m, n, dim, 2)
	cfg := dpConfig()
	for _, kind := range []string{"replace", "remove"} {
		t.Run(kind, func(t *testing.T) {
			tgt := TargetInfo{Client: 2, WholeClient: true}
			cp := slices.Clone(clients)
			cp[2] = canary
			if kind == "remove" {
				tgt.Absent = true
				cp = slices.Delete(cp, 2, 3)
			}
			cps := run(t, cfg, clients, cp, tgt, PairRange{0, pairs})
			sawBoth := replayAlg4(t, cfg, m, pairs, cps, func(w, i int, params []float64) []float64 {
				d := clients[i]
				if i == 2 && w == 1 {
					if kind == "remove" {
						return nil
					}
					d = canary
				}
				return quadUpdate(params, d, 1, cfg.LearningRate, cfg.LocalSteps)
			}, 2)
			if !sawBoth[0] || !sawBoth[1] {
				t.Fatal("the fixture never sampled the target or never another client: pick another seed")
			}
		})
	}
}

// replayAlg4 replays Alg. 4 of the time-adaptive paper in float64 without noise for every pair
// and world of cps: the clients sampled from the documented stream (Philox domain 7 of the
// pair's run seed), update(w, i, params) giving client i's update in world w (nil: not in that
// world), clipped to c, summed, divided by q m and scaled by the server learning rate; every
// round is compared with the engine's replica (1e-5: float32 training). It reports whether
// client target, and whether another client, was ever sampled.
func replayAlg4(t *testing.T, cfg Config, m, pairs int, cps []*checkpoint.Checkpoint, update func(w, i int, params []float64) []float64, target int) (sampled [2]bool) {
	t.Helper()
	dim := len(cps[0].Replicas[0].Params)
	for p := 0; p < pairs; p++ {
		seed := RunSeed(cfg.Seed, p)
		for w := 0; w < 2; w++ {
			params := make([]float64, dim)
			for round := 0; round < cfg.Rounds; round++ {
				sum := make([]float64, dim)
				for i := 0; i < m; i++ {
					rng := philox.NewRand(seed, uint32(round), uint32(i), philox.DomainClientSampling, 0)
					if rng.Float() >= cfg.SamplingRate {
						continue
					}
					sampled[b2i(i == target)] = true
					u := update(w, i, params)
					if u == nil {
						continue
					}
					f := math.Min(1, cfg.UpdateClip/math.Sqrt(dot(u, u)))
					for q := range sum {
						sum[q] += f * u[q]
					}
				}
				for q := range params {
					params[q] += cfg.ServerLR * sum[q] / (cfg.SamplingRate * float64(m))
				}
				got := cps[round].Replicas[2*p+w].Params
				for q := range params {
					if math.Abs(float64(got[q])-params[q]) > 1e-5 {
						t.Fatalf("pair %d world %d round %d coordinate %d: engine %g, Alg. 4 %g", p, w, round+1, q, got[q], params[q])
					}
				}
			}
		}
	}
	return sampled
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// TestClientSamplingPerReplicaAndShardInvariant: client samples differ between pairs (the
// sampling is part of the mechanism), the frequency matches q, and a pair's results do not
// depend on the shard it is trained in.
func TestClientSamplingPerReplicaAndShardInvariant(t *testing.T) {
	const m, n, dim, pairs = 4, 3, 2, 12
	clients, canary := quadClients(m, n, dim, 2)
	cp := slices.Clone(clients)
	cp[1] = canary
	cfg := dpConfig()
	cfg.NoiseMultiplier, cfg.Informed = 1.5, true
	tgt := TargetInfo{Client: 1, WholeClient: true}
	whole := run(t, cfg, clients, cp, tgt, PairRange{0, pairs})
	var parts [][]*checkpoint.Checkpoint
	for _, r := range []PairRange{{0, 5}, {5, 7}} {
		parts = append(parts, run(t, cfg, clients, cp, tgt, r))
	}
	distinct := map[float32]bool{}
	for c := range whole {
		for r, rs := range whole[c].Replicas {
			part, off := parts[0], 0
			if r >= 10 {
				part, off = parts[1], 10
			}
			other := part[c].Replicas[r-off]
			if !slices.Equal(rs.Params, other.Params) || !slices.Equal(rs.Stats, other.Stats) || rs.Pair != other.Pair {
				t.Fatalf("checkpoint %d replica %d differs between one shard and two", c, r)
			}
			distinct[rs.Params[0]] = true
		}
	}
	if len(distinct) < pairs {
		t.Fatalf("only %d distinct parameter values over %d pairs and 2 checkpoints: sampling or noise not per pair", len(distinct), pairs)
	}
	// Frequency: 4000 pairs x 4 clients, q = 0.5. The count is Binomial(16000, 0.5): 5
	// standard deviations (316) bound a false failure at 6e-7.
	e := &engine{m: m, P: 4000, target: tgt}
	dp := &clientDPRounds{e: e, plan: &privacy.Plan{Q: [][]float64{{0.5, 0.5, 0.5, 0.5}}}}
	e.seeds = make([]uint64, 2*e.P)
	for r := range e.seeds {
		e.seeds[r] = RunSeed(3, r/2)
	}
	e.part, e.hasTarget = make([]bool, e.P*m), make([]bool, e.P)
	dp.sampleClients(0)
	count := 0
	for _, b := range e.part {
		count += b2i(b)
	}
	if math.Abs(float64(count)-8000) > 5*math.Sqrt(4000) {
		t.Fatalf("%d of 16000 client slots sampled at q = 0.5", count)
	}
}

// TestDPFedAvgInformedLLR: with q = 1 every round is the Gaussian mechanism with the target's
// clipped updates as the means, so the summed ratio is N(+mu^2/2, mu^2) in C and
// N(-mu^2/2, mu^2) in C', mu^2 the recorded informed_mu2. Over 400 pairs the mean of
// llr/mu2 is 1/2 (resp. -1/2) within 5 standard errors (sd of llr/mu2 is 1/mu).
func TestDPFedAvgInformedLLR(t *testing.T) {
	const m, n, dim, pairs = 3, 3, 2, 400
	clients, canary := quadClients(m, n, dim, 2)
	cp := slices.Clone(clients)
	cp[0] = canary
	cfg := dpConfig()
	cfg.SamplingRate, cfg.NoiseMultiplier, cfg.Informed, cfg.RecordParams = 1, 1, true, false
	cps := run(t, cfg, clients, cp, TargetInfo{Client: 0, WholeClient: true}, PairRange{0, pairs})
	last := cps[len(cps)-1]
	var sum [2]float64
	mu2 := last.Replicas[0].Stats[2]
	for _, rs := range last.Replicas {
		sum[rs.World] += rs.Stats[0] / rs.Stats[2]
	}
	se := 5 / math.Sqrt(mu2) / math.Sqrt(pairs)
	for w, want := range []float64{0.5, -0.5} {
		if got := sum[w] / pairs; math.Abs(got-want) > se {
			t.Fatalf("world %d: mean llr/mu^2 %g, want %g within %g (mu^2 %g)", w, got, want, se, mu2)
		}
	}
	if !(mu2 > 0.1) {
		t.Fatalf("mu^2 %g: the canary does not move the update", mu2)
	}
	// With Laplace noise no mu^2 describes the ratio: informed_mu2 is NaN (a 0 would read as a
	// realized mu of 0 in the round summaries), and the ratio itself stays finite.
	cfg.Mechanism = algo.Laplace
	cps = run(t, cfg, clients, cp, TargetInfo{Client: 0, WholeClient: true}, PairRange{0, 20})
	for _, rs := range cps[len(cps)-1].Replicas {
		if !math.IsNaN(rs.Stats[2]) || math.IsNaN(rs.Stats[0]) || math.IsInf(rs.Stats[0], 0) {
			t.Fatalf("Laplace: informed_llr_all %g, informed_mu2 %g; want a finite ratio and NaN", rs.Stats[0], rs.Stats[2])
		}
	}
}

// TestUploadNoiseMechanisms: the noise on a Noisy-FedAvg upload has the configured
// distribution. Uploads of 3000 pairs after one full-batch round differ from the noiseless
// upload only by sigma times one draw per pair; coordinate 0 is KS-tested against the exact
// CDF at the 1e-3 level (sqrt(n) D < 1.9495), and for Laplace the excess kurtosis (3) is told
// apart from the Gaussian's (0): its standard error at n = 3000 is about 0.4, so > 1.5 fails
// with probability below 1e-4.
func TestUploadNoiseMechanisms(t *testing.T) {
	const m, n, dim, pairs, sigma = 2, 3, 2, 3000, 0.7
	tgt := TargetInfo{Client: 0, Index: 1}
	c, cp := synthWorlds(m, n, dim, 2, tgt, 3)
	base := Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "quadratic", Curvature: 1}, Rounds: 1, LocalSteps: 1,
		LearningRate: 0.5, Schedule: "constant", Batching: "full", Seed: 9, Checkpoints: []int{1}, RecordUpload: true}
	clean := run(t, base, c, cp, tgt, PairRange{0, 1})[0].Replicas[0].Upload
	for _, mech := range []struct {
		name algo.Mechanism
		eps  float64
	}{{algo.Gaussian, 0}, {algo.Laplace, 0}, {algo.Staircase, 1}, {algo.Staircase, 3}} {
		t.Run(string(mech.name), func(t *testing.T) {
			cfg := base
			cfg.NoiseStd, cfg.Mechanism, cfg.StaircaseEpsilon = sigma, mech.name, mech.eps
			dist, err := cfg.NoiseOf(sigma)
			if err != nil {
				t.Fatal(err)
			}
			cps := run(t, cfg, c, cp, tgt, PairRange{0, pairs})
			x := make([]float64, 0, pairs)
			for _, rs := range cps[0].Replicas {
				if rs.World == 0 {
					x = append(x, float64(rs.Upload[0]-clean[0]))
				}
			}
			sort.Float64s(x)
			var d float64
			for i, v := range x {
				f := dist.CDF(v)
				d = math.Max(d, math.Max(float64(i+1)/pairs-f, f-float64(i)/pairs))
			}
			if s := math.Sqrt(pairs) * d; s > 1.9495 {
				t.Fatalf("KS statistic sqrt(n) D = %g against the %s CDF", s, mech.name)
			}
			if mech.name == algo.Laplace {
				var m2, m4 float64
				for _, v := range x {
					m2 += v * v / pairs
					m4 += v * v * v * v / pairs
				}
				if k := m4/(m2*m2) - 3; k < 1.5 {
					t.Fatalf("excess kurtosis %g: Laplace's is 3", k)
				}
			}
		})
	}
}

// TestClientDPPlans: the IDP plan gives client n the noise multiplier of its budget; the
// adaptive plan keeps every client within its budget; both claims come from the plan.
func TestClientDPPlans(t *testing.T) {
	ctx := context.Background()
	cfg := dpConfig()
	cfg.Rounds, cfg.SamplingRate = 4, 0.6
	cfg.Algorithm, cfg.Privacy = algo.IDPFedAvg, &privacy.Config{Delta: 1e-5, Groups: []privacy.Group{{Clients: 2, Epsilon: 2}, {Clients: 3, Epsilon: 6}}}
	p, err := cfg.Plan(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 5; n++ {
		g, err := accounting.ScheduleEpsilon(p.Schedule(n), privacy.PlanClaim(1e-5))
		if err != nil {
			t.Fatal(err)
		}
		budget := cfg.Privacy.Groups[p.Group[n]].Epsilon
		if g.Epsilon > budget || g.Epsilon < budget*(1-1e-3) {
			t.Fatalf("idp client %d: claim %g for budget %g", n, g.Epsilon, budget)
		}
	}
	if !(p.Clip[0][0] < p.Clip[0][4]) {
		t.Fatalf("idp: the stricter group clips to %g, the looser to %g", p.Clip[0][0], p.Clip[0][4])
	}
	cfg.Algorithm = algo.AdaptiveFedAvg
	cfg.Privacy.Groups[0].SavingRate, cfg.Privacy.Groups[0].Transition = 0.3, 3
	cfg.Privacy.Groups[1].SavingRate, cfg.Privacy.Groups[1].Transition = 0.4, 2
	p, err = cfg.Plan(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 5; n++ {
		g, err := accounting.ScheduleEpsilon(p.Schedule(n), privacy.PlanClaim(1e-5))
		if err != nil {
			t.Fatal(err)
		}
		if budget := cfg.Privacy.Groups[p.Group[n]].Epsilon; g.Epsilon > budget*(1+1e-9) {
			t.Fatalf("adaptive client %d: claim %g over budget %g", n, g.Epsilon, budget)
		}
	}
	if p.Q[0][0] != 0.3 || p.Q[3][0] != 0.6 || math.Abs(p.Divisor[0]-(2*0.3+3*0.4)) > 1e-12 {
		t.Fatalf("adaptive: rates %v / %v, divisor %g", p.Q[0], p.Q[3], p.Divisor[0])
	}

	// The plan is kept for the next group of pairs: the same parameters need no calibration
	// (a cancelled context, which stops one, does not matter), and each caller gets its own
	// copy. Other budgets are calibrated afresh.
	want := p.Clone()
	p.Std[0], p.Q[0][0] = -1, -1
	done, cancel := context.WithCancel(ctx)
	cancel()
	again, err := cfg.Plan(done, 5)
	if err != nil {
		t.Fatalf("the same plan again: %v", err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Fatalf("the kept plan differs from the one computed, or shares its memory: %+v, want %+v", again, want)
	}
	cfg.Privacy.Groups[0].Epsilon *= 2
	if _, err := cfg.Plan(done, 5); err == nil {
		t.Fatalf("a plan of other budgets under a cancelled context: no error, so it was not calibrated")
	}
}

func TestClientDPConfigErrorsNameFields(t *testing.T) {
	clients, canary := quadClients(3, 2, 2, 1)
	cp := slices.Clone(clients)
	cp[0] = canary
	for _, c := range []struct {
		want string
		mod  func(*Config)
	}{
		{"sampling_rate", func(c *Config) { c.SamplingRate = 0 }},
		{"sampling_rate", func(c *Config) { c.SamplingRate = 1.5 }},
		{"update_clip", func(c *Config) { c.UpdateClip = 0 }},
		{"noise_std", func(c *Config) { c.NoiseStd = 1 }},
		{"participants", func(c *Config) { c.Participants = 2 }},
		{"record_upload", func(c *Config) { c.RecordUpload = true }},
		{"informed", func(c *Config) { c.Informed = true }},
		{"noise_multiplier", func(c *Config) { c.NoiseMultiplier = -1 }},
		{"privacy", func(c *Config) { c.Algorithm = algo.IDPFedAvg }},
		{"privacy.groups", func(c *Config) {
			c.Algorithm, c.Privacy = algo.IDPFedAvg, &privacy.Config{Delta: 1e-5, Groups: []privacy.Group{{Clients: 2, Epsilon: 1}}}
		}},
		{"privacy.groups[0].saving_rate", func(c *Config) {
			c.Algorithm, c.Privacy = algo.AdaptiveFedAvg, &privacy.Config{Delta: 1e-5, Groups: []privacy.Group{{Clients: 3, Epsilon: 1, SavingRate: 0.9, Transition: 1}}}
		}},
		{"privacy.delta", func(c *Config) {
			c.Algorithm, c.Privacy = algo.IDPFedAvg, &privacy.Config{Groups: []privacy.Group{{Clients: 3, Epsilon: 1}}}
		}},
		{"mechanism", func(c *Config) { c.Mechanism = "cauchy" }},
		{"staircase_epsilon", func(c *Config) { c.Mechanism = algo.Staircase }},
		{"sampling_rate", func(c *Config) { c.Algorithm = algo.FedAvg; c.NoiseStd = 1 }},
	} {
		t.Run(c.want, func(t *testing.T) {
			cfg := dpConfig()
			c.mod(&cfg)
			err := Train(context.Background(), Job{Config: cfg, WorldC: clients, WorldCPrime: cp, Target: TargetInfo{Client: 0, WholeClient: true}, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
			if err == nil || !strings.Contains(err.Error(), c.want+":") {
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
		})
	}
	// Informed fedavg with a non-Gaussian mechanism has no Gaussian likelihood ratio.
	cfg := mlpConfig()
	cfg.Mechanism = algo.Laplace
	c2, cp2 := synthWorlds(3, 6, 4, 3, TargetInfo{Client: 1, Index: 2}, 1)
	err := Train(context.Background(), Job{Config: cfg, WorldC: c2, WorldCPrime: cp2, Target: TargetInfo{Client: 1, Index: 2}, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "informed:") {
		t.Fatalf("informed fedavg with Laplace noise: error %v", err)
	}
	// remove-client needs server-side noise.
	cfg = mlpConfig()
	err = Train(context.Background(), Job{Config: cfg, WorldC: c2, WorldCPrime: c2[:2], Target: TargetInfo{Client: 2, Absent: true}, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "remove-client") {
		t.Fatalf("remove-client with fedavg: error %v", err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
