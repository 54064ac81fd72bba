package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/noise"
	"github.com/fedaudit/fedaudit/train/privacy"
)

// The client-level DP-FL systems of Kiani, Kulkarni, Dziedzic, Draper and Boenisch,
// "Differentially Private Federated Learning with Time-Adaptive Privacy Spending" (ICLR 2025),
// App. A.1 and Sec. 3: every round each client is Poisson-sampled, the sampled clients train locally
// from w_t, clip their model update w_local - w_t to a norm, the server sums the clipped
// updates, adds noise to the sum and steps by the sum over the expected number of clients.
//
//   - algo.DPFedAvg is Alg. 4: sampling rate q, clip norm c, server noise N(0, (z c)^2 I), step
//     w_t + server_lr sum / (q m).
//   - algo.IDPFedAvg is Alg. 5: per-group budgets give per-client noise multipliers z_n
//     (GetNoise), the server's z is their harmonic mean and client n clips to c z / z_n, so
//     the server noise c z is z_n times client n's clip norm.
//   - algo.AdaptiveFedAvg is the time-adaptive framework, Alg. 1 (spend-as-you-go) and Alg. 2:
//     per-round, per-group sampling rates q_n^t (q_n while saving, q after the transition
//     round T_n), clip norms c_n^t and server noise c sigma^t, step sum / (q^t m).

// IsClientDP reports whether the algorithm is one of the DP-FedAvg family.
func (c *Config) IsClientDP() bool { return c.Algorithm.ClientDP() }

// Noisy reports whether the config's rounds add noise: noise_std, noise_multiplier, or the
// budgets of idp-fedavg and adaptive-fedavg (train.privacy), whose noise is calibrated to them
// with both fields 0.
func (c *Config) Noisy() bool {
	return c.NoiseStd > 0 || c.NoiseMultiplier > 0 || (c.IsClientDP() && c.Privacy != nil)
}

// Plan checks the fields of the DP-FedAvg family and computes the privacy plan for m clients
// (privacy.NewPlan: idp-fedavg and adaptive-fedavg calibrate their noise to the budgets there).
func (c *Config) Plan(ctx context.Context, m int) (*privacy.Plan, error) {
	if !c.IsClientDP() {
		return nil, fmt.Errorf("config: algorithm: %q has no client-level privacy plan", c.Algorithm)
	}
	if err := c.validateClientDP(m); err != nil {
		return nil, err
	}
	pp := c.privacyParams(m)
	// Every group of pairs of a job (and every shard of a process) asks for the same plan, and
	// calibrating idp-fedavg's or adaptive-fedavg's noise to the budgets takes seconds: 30
	// groups of one pair of adaptive-fedavg trained in 188 s against 7 s in one group. The
	// last plan is kept, keyed by its parameters, and handed out as copies.
	key, keyErr := json.Marshal(pp)
	if keyErr == nil {
		lastPlan.Lock()
		hit := lastPlan.key == string(key)
		var p *privacy.Plan
		if hit {
			p = lastPlan.plan.Clone()
		}
		lastPlan.Unlock()
		if hit {
			return p, nil
		}
	}
	plan, err := privacy.NewPlan(ctx, pp)
	if err != nil || keyErr != nil {
		return plan, err
	}
	lastPlan.Lock()
	lastPlan.key, lastPlan.plan = string(key), plan.Clone()
	lastPlan.Unlock()
	return plan, nil
}

// lastPlan is the privacy plan Config.Plan computed last, with its parameters as JSON.
var lastPlan struct {
	sync.Mutex
	key  string
	plan *privacy.Plan
}

// validateClientDP checks the fields of the DP-FedAvg family for m clients
// (privacy.Params.Check); every error names its field.
func (c *Config) validateClientDP(m int) error {
	return c.privacyParams(m).Check(privacy.Fields{ServerLR: c.ServerLR, NoiseStd: c.NoiseStd,
		Participants: c.Participants, RecordUpload: c.RecordUpload, Informed: c.Informed})
}

// privacyParams are the privacy plan's parameters of cfg for m clients.
func (c *Config) privacyParams(m int) privacy.Params {
	return privacy.Params{Algorithm: c.Algorithm, Clients: m, Rounds: c.Rounds, SamplingRate: c.SamplingRate,
		UpdateClip: c.UpdateClip, NoiseMultiplier: c.NoiseMultiplier, Privacy: c.Privacy}
}

// clientDPRounds is the round of the DP-FedAvg family, with its privacy plan, the server
// learning rate, the target's own clipped update (informed) and per-replica inner products.
type clientDPRounds struct {
	e        *engine
	plan     *privacy.Plan
	serverLR float64
	tu       compute.Buffer
	dpDots   [5][]float64
}

// statNames: the family's adversary sees only the model sequence, not an upload.
func (dp *clientDPRounds) statNames() []string {
	return []string{checkpoint.StatLLRAll, checkpoint.StatLLRLast, checkpoint.StatMu2}
}

// init computes the plan and the buffers of the DP-FedAvg family.
func (dp *clientDPRounds) init(ctx context.Context) error {
	e := dp.e
	plan, err := e.cfg.Plan(ctx, e.m)
	if err != nil {
		return err
	}
	dp.plan = plan
	dp.serverLR = e.cfg.ServerLR
	if dp.serverLR == 0 {
		dp.serverLR = 1
	}
	if e.cfg.Informed {
		dp.tu = e.be.Alloc(e.R * e.pitch)
		for i := range dp.dpDots {
			dp.dpDots[i] = make([]float64, e.R)
		}
	}
	return nil
}

// sampleClients draws every pair's Poisson client sample of round t from the pair's seed: part
// of the mechanism, so each pair (both worlds alike) draws its own.
func (dp *clientDPRounds) sampleClients(t int) {
	e := dp.e
	m := e.m
	for p := 0; p < e.P; p++ {
		for i := 0; i < m; i++ {
			rng := philox.NewRand(e.seeds[2*p], uint32(t), uint32(i), philox.DomainClientSampling, 0)
			e.part[p*m+i] = rng.Float() < dp.plan.Q[t][i]
		}
		e.hasTarget[p] = e.part[p*m+e.target.Client]
	}
}

// clipFactors writes into out[r] the factor min(1, clip/||u_r||) that clips replica r's update
// u_r in buf (1 with skip_update_clip).
func (e *engine) clipFactors(buf compute.Buffer, clip float64, out []float32) {
	e.be.Dots(e.all(buf), e.all(buf), e.dd)
	for r := range out {
		out[r] = 1
		if nn := math.Sqrt(e.dd[r]); !e.cfg.SkipUpdateClip && nn > clip {
			out[r] = float32(clip / nn)
		}
	}
}

// round is round t of the DP-FedAvg family (Alg. 4, 5 and 2 of the time-adaptive paper).
func (dp *clientDPRounds) round(ctx context.Context, t int, _ bool) error {
	e := dp.e
	be, m, tc, plan := e.be, e.m, e.target.Client, dp.plan
	dp.sampleClients(t)
	be.Axpby(0, compute.Mat{}, 0, e.all(e.acc), nil)
	for i := 0; i < m; i++ {
		sampled := false
		for p := 0; p < e.P && !sampled; p++ {
			sampled = e.part[p*m+i]
		}
		isTarget := i == tc
		if !sampled && !(isTarget && e.cfg.Informed) {
			continue // no replica needs this client's update
		}
		if err := dp.clientUpdate(ctx, t, i, e.l, false); err != nil {
			return err
		}
		e.clipFactors(e.l, plan.Clip[t][i], e.coef)
		if isTarget && e.target.Absent {
			for r := 1; r < e.R; r += 2 {
				e.coef[r] = 0 // remove-client: C' has no such client
			}
		}
		if isTarget && e.cfg.Informed {
			// tu: the replica's own clipped target update; shadow: the other world's.
			be.Axpby(1, e.all(e.l), 0, e.all(dp.tu), e.coef)
			if err := dp.clientUpdate(ctx, t, i, e.shadow, true); err != nil {
				return err
			}
			e.clipFactors(e.shadow, plan.Clip[t][i], e.scaleT)
			if e.target.Absent {
				for r := 0; r < e.R; r += 2 {
					e.scaleT[r] = 0 // a C replica's other world lacks the client
				}
			}
			be.Axpby(1, e.all(e.shadow), 0, e.all(e.shadow), e.scaleT)
		}
		for r := range e.coef {
			e.coef[r] *= b2f(e.part[(r/2)*m+i])
		}
		be.Axpby(1, e.all(e.l), 1, e.all(e.acc), e.coef)
	}
	cs := e.canary
	if cs != nil && cs.dirs != nil {
		cs.addDirections(e, t, plan.Q[t][0], plan.Clip[t][0])
	}
	be.Axpby(0, compute.Mat{}, 0, e.all(e.noise), nil)
	if std := plan.Std[t]; std > 0 {
		if err := e.addServerNoise(t, std); err != nil {
			return err
		}
	}
	if e.stats != nil {
		if err := dp.informed(t); err != nil {
			return err
		}
	}
	be.Axpby(1, e.all(e.noise), 1, e.all(e.acc), nil)
	// w_{t+1} = w_t + server_lr (sum of clipped updates + noise) / (q^t m)
	be.Axpby(1, e.all(e.g), float32(dp.serverLR/plan.Divisor[t]), e.all(e.acc), nil)
	if cs != nil && cs.dirs != nil {
		cs.observeRound(e, plan.Q[t][0], plan.Clip[t][0], plan.Std[t], dp.serverLR/plan.Divisor[t])
	}
	e.commit()
	return nil
}

// clientUpdate writes client i's update of round t into buf for every replica: w_local - w_t
// after its local training (on the other world's data when replay is set: the informed
// adversary's shadow), or, for the canary client of a crafted update
// (train.Config.CraftedUpdate), clip_t u in both worlds whatever the model.
func (dp *clientDPRounds) clientUpdate(ctx context.Context, t, i int, buf compute.Buffer, replay bool) error {
	e := dp.e
	if e.crafted != nil && i == e.target.Client {
		u := compute.Mat{Buf: e.crafted, Rows: 1, Cols: e.d, Stride: e.d, Batch: e.R}
		e.be.Axpby(float32(dp.plan.Clip[t][i]), u, 0, e.all(buf), nil)
		return nil
	}
	if err := e.localTrain(ctx, t, i, buf, replay, true); err != nil {
		return err
	}
	e.be.Axpby(-1, e.all(e.g), 1, e.all(buf), nil)
	return nil
}

// addServerNoise writes the server's noise of round t (standard deviation std, the
// configured mechanism) into e.noise; both replicas of a pair get the same draw.
func (e *engine) addServerNoise(t int, std float64) error {
	if e.cfg.mechanism() == algo.Gaussian {
		for r := range e.scaleT {
			e.scaleT[r] = float32(std)
		}
		e.be.AddGaussian(e.all(e.noise), e.seeds, e.scaleT, uint32(t), streamServer)
		return nil
	}
	dist, err := e.cfg.NoiseOf(std)
	if err != nil {
		return err
	}
	if ns, nd, ok := e.sampler(dist); ok {
		ns.SumNoise(e.all(e.noise), nd, e.seeds, serverStreams, nil, 1, uint32(t))
		return nil
	}
	host := make([]float32, e.d)
	for p := 0; p < e.P; p++ {
		clear(host)
		noise.AddHost(host, dist, e.seeds[2*p], uint32(t), streamServer, 1)
		e.be.Upload(e.noise, 2*p*e.pitch, host)
		e.be.Upload(e.noise, (2*p+1)*e.pitch, host)
	}
	return nil
}

// informed adds round t's log-likelihood ratio log p_C(S)/p_C'(S) of the informed adversary
// to every replica's statistics. The adversary knows everything but the world, whether the
// target was sampled and the noise: with y = S - (sum of the other sampled clients' clipped
// updates) = I u + N, I ~ Bernoulli(q) and u the target's clipped update in the replica's
// world, p_W(y) = (1-q) f(y) + q f(y - u_W) for the noise density f, so the ratio is
// log((1-q) + q e^{a_C}) - log((1-q) + q e^{a_C'}), a_W = log f(y - u_W) - log f(y). This is
// the Neyman-Pearson statistic of one round; summed over rounds it is that of the whole
// transcript, since each round's law given the past is this mixture.
func (dp *clientDPRounds) informed(t int) error {
	e, st := dp.e, dp.e.stats
	q := dp.plan.Q[t][e.target.Client]
	std := dp.plan.Std[t]
	aC, aCP := dp.dpDots[3], dp.dpDots[4]
	if e.cfg.mechanism() == algo.Gaussian {
		e.be.Dots(e.all(e.noise), e.all(dp.tu), dp.dpDots[0])
		e.be.Dots(e.all(e.noise), e.all(e.shadow), dp.dpDots[1])
		e.be.Dots(e.all(dp.tu), e.all(e.shadow), dp.dpDots[2])
		e.be.Dots(e.all(dp.tu), e.all(dp.tu), e.dots)
		e.be.Dots(e.all(e.shadow), e.all(e.shadow), e.dd)
		s2 := std * std
		for r := 0; r < e.R; r++ {
			in := float64(b2f(e.hasTarget[r/2]))
			nOwn, nSh, ownSh, ownOwn, shSh := dp.dpDots[0][r], dp.dpDots[1][r], dp.dpDots[2][r], e.dots[r], e.dd[r]
			own := (in*ownOwn + nOwn - ownOwn/2) / s2 // a for the replica's own world
			oth := (in*ownSh + nSh - shSh/2) / s2     // a for the other world
			aC[r], aCP[r] = own, oth
			if r%2 == 1 {
				aC[r], aCP[r] = oth, own
			}
			// The mu^2 of the target sampled in every round, whatever this pair's draws: the
			// adversary does not know them, and the sampled mechanism is weaker than this
			// yardstick (docs/training.md, "Informed adversary").
			st.mu2[r] += (ownOwn + shSh - 2*ownSh) / s2
		}
	} else {
		logf, err := e.logDensity(std)
		if err != nil {
			return err
		}
		noise, own, sh := make([]float32, e.d), make([]float32, e.d), make([]float32, e.d)
		for r := 0; r < e.R; r++ {
			e.be.Download(noise, e.noise, r*e.pitch)
			e.be.Download(own, dp.tu, r*e.pitch)
			e.be.Download(sh, e.shadow, r*e.pitch)
			in := b2f(e.hasTarget[r/2])
			var aOwn, aSh float64
			for j := range noise {
				y := float64(in*own[j] + noise[j])
				l0 := logf(y)
				aOwn += logf(y-float64(own[j])) - l0
				aSh += logf(y-float64(sh[j])) - l0
			}
			aC[r], aCP[r] = aOwn, aSh
			if r%2 == 1 {
				aC[r], aCP[r] = aSh, aOwn
			}
			// Without Gaussian noise no mu^2 describes the ratio: NaN, which the round
			// summaries skip, rather than the 0 a realized mu would read as "no privacy loss".
			st.mu2[r] = math.NaN()
		}
	}
	for r := 0; r < e.R; r++ {
		if e.diverged[r] {
			continue
		}
		st.llrLast[r] = logMix(q, aC[r]) - logMix(q, aCP[r])
		st.llrAll[r] += st.llrLast[r]
	}
	return nil
}

// logMix is log((1-q) + q e^a), computed without overflow.
func logMix(q, a float64) float64 {
	if q >= 1 {
		return a
	}
	return accounting.LogAddExp(math.Log1p(-q), math.Log(q)+a)
}

// logDensity is the log density (up to a constant) of one coordinate of the configured
// non-Gaussian mechanism with standard deviation std.
func (e *engine) logDensity(std float64) (func(float64) float64, error) {
	dist, err := e.cfg.NoiseOf(std)
	if err != nil {
		return nil, err
	}
	if f, ok := noise.LogDensity(dist); ok {
		return f, nil
	}
	return nil, fmt.Errorf("train: no density for mechanism %q", e.cfg.mechanism())
}
