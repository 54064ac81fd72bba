package train

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
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

// PrivacyConfig gives the per-client budgets of idp-fedavg and adaptive-fedavg.
type PrivacyConfig struct {
	// Delta is the delta of every budget.
	Delta float64 `json:"delta" yaml:"delta"`
	// Groups partition the clients in index order: the first Groups[0].Clients clients form
	// group 0, and so on; the counts must add up to the number of clients.
	Groups []PrivacyGroup `json:"groups" yaml:"groups"`
	// Bookkeeping is adaptive-fedavg's "composed" (default: the remaining budget judged on the
	// composed RDP curve, clients end at their budgets) or "paper" (Alg. 1 line 8 as printed).
	Bookkeeping string `json:"bookkeeping,omitempty" yaml:"bookkeeping,omitempty"`
}

// PrivacyGroup is one privacy group: its size, its budget epsilon and, for adaptive-fedavg,
// its saving-phase sampling rate q_n and transition round T_n (1-based: the first spending
// round).
type PrivacyGroup struct {
	Clients    int     `json:"clients" yaml:"clients"`
	Epsilon    float64 `json:"epsilon" yaml:"epsilon"`
	SavingRate float64 `json:"saving_rate,omitempty" yaml:"saving_rate,omitempty"`
	Transition int     `json:"transition,omitempty" yaml:"transition,omitempty"`
}

// IsClientDP reports whether the algorithm is one of the DP-FedAvg family.
func (c *Config) IsClientDP() bool { return c.Algorithm.ClientDP() }

// PlanClaim is how the plans calibrate noise to budgets and how claims are computed: the
// default Rényi orders and Balle et al.'s conversion (as Opacus' get_privacy_spent does).
func PlanClaim(delta float64) accounting.Claim {
	return accounting.Claim{Delta: delta, Conversion: accounting.Balle}
}

// PrivacyPlan is what the DP-FedAvg family does in every round, indexed [round][client]
// (rounds 0-based).
type PrivacyPlan struct {
	// Q is each client's Poisson sampling rate.
	Q [][]float64
	// Clip is each client's update clip norm.
	Clip [][]float64
	// Std is the standard deviation of the server's noise on the sum.
	Std []float64
	// Divisor is q^t m, the expected number of sampled clients the sum is divided by.
	Divisor []float64
	// Group is each client's privacy group (all 0 for dp-fedavg).
	Group []int
}

// Schedule is client n's rounds for the accountant: sampling rate and noise multiplier
// (server noise over the client's clip norm).
func (p *PrivacyPlan) Schedule(n int) []accounting.Round {
	out := make([]accounting.Round, len(p.Std))
	for t := range out {
		out[t] = accounting.Round{Q: p.Q[t][n], Z: p.Std[t] / p.Clip[t][n]}
	}
	return out
}

// Plan computes the privacy plan for m clients; idp-fedavg and adaptive-fedavg calibrate
// their noise to the budgets here (accounting.IDPFedAvg, accounting.SpendAsYouGo).
func (c *Config) Plan(ctx context.Context, m int) (*PrivacyPlan, error) {
	if !c.IsClientDP() {
		return nil, fmt.Errorf("config: algorithm: %q has no client-level privacy plan", c.Algorithm)
	}
	if err := c.validateClientDP(m); err != nil {
		return nil, err
	}
	T, q, clip := c.Rounds, c.SamplingRate, c.UpdateClip
	p := &PrivacyPlan{Q: make([][]float64, T), Clip: make([][]float64, T), Std: make([]float64, T),
		Divisor: make([]float64, T), Group: make([]int, m)}
	for t := range p.Q {
		p.Q[t], p.Clip[t] = make([]float64, m), make([]float64, m)
	}
	var counts []int
	if c.Privacy != nil {
		n := 0
		for g, grp := range c.Privacy.Groups {
			for k := 0; k < grp.Clients; k++ {
				p.Group[n] = g
				n++
			}
			counts = append(counts, grp.Clients)
		}
	}
	claim := func() accounting.Claim { return PlanClaim(c.Privacy.Delta) }
	switch c.Algorithm {
	case algo.DPFedAvg:
		for t := 0; t < T; t++ {
			for n := 0; n < m; n++ {
				p.Q[t][n], p.Clip[t][n] = q, clip
			}
			p.Std[t], p.Divisor[t] = c.NoiseMultiplier*clip, q*float64(m)
		}
	case algo.IDPFedAvg:
		budgets := make([]float64, m)
		for n := range budgets {
			budgets[n] = c.Privacy.Groups[p.Group[n]].Epsilon
		}
		idp, err := accounting.IDPFedAvg(ctx, budgets, q, T, clip, claim())
		if err != nil {
			return nil, fmt.Errorf("config: privacy: %w", err)
		}
		for t := 0; t < T; t++ {
			for n := 0; n < m; n++ {
				p.Q[t][n], p.Clip[t][n] = q, idp.Clips[n]
			}
			p.Std[t], p.Divisor[t] = idp.Sigma*clip, q*float64(m)
		}
	case algo.AdaptiveFedAvg:
		clients := make([]accounting.SpendClient, len(c.Privacy.Groups))
		for g, grp := range c.Privacy.Groups {
			clients[g] = accounting.SpendClient{Epsilon: grp.Epsilon, SavingRate: grp.SavingRate, Transition: grp.Transition, Count: counts[g]}
		}
		book := accounting.ComposedBookkeeping
		if c.Privacy.Bookkeeping == "paper" {
			book = accounting.PaperBookkeeping
		}
		sp, err := accounting.SpendAsYouGo(ctx, clients, q, clip, T, book, claim())
		if err != nil {
			return nil, fmt.Errorf("config: privacy: %w", err)
		}
		for t := 0; t < T; t++ {
			for n := 0; n < m; n++ {
				g := p.Group[n]
				p.Q[t][n], p.Clip[t][n] = sp.ClientQ[g][t], sp.ClientClip[g][t]
			}
			// Alg. 2 line 8: sampled clients add N(0, (c_n^t sigma_n^t)^2 / N) = N(0, c^2
			// (sigma^t)^2 / N) each and the server the same for every unsampled client, so the
			// sum always carries N(0, c^2 (sigma^t)^2): drawn here once, at the server.
			p.Std[t], p.Divisor[t] = clip*sp.Sigma[t], sp.Q[t]*float64(m)
		}
	}
	return p, nil
}

// validateClientDP checks the fields of the DP-FedAvg family for m clients; every error names
// its field.
func (c *Config) validateClientDP(m int) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, a...)))
	}
	if !(c.SamplingRate > 0 && c.SamplingRate <= 1) {
		bad("sampling_rate", "%s samples each client with probability q in (0, 1], got %g", c.Algorithm, c.SamplingRate)
	}
	if !(c.UpdateClip > 0) || math.IsInf(c.UpdateClip, 0) {
		bad("update_clip", "%s clips every client's update: need a finite c > 0, got %g", c.Algorithm, c.UpdateClip)
	}
	if !(c.ServerLR >= 0) || math.IsInf(c.ServerLR, 0) {
		bad("server_lr", "need a finite value >= 0 (0: 1), got %g", c.ServerLR)
	}
	if c.NoiseStd != 0 {
		bad("noise_std", "%s adds noise at the server: set noise_multiplier (dp-fedavg) or privacy budgets, not noise_std", c.Algorithm)
	}
	if c.Participants != 0 {
		bad("participants", "%s samples clients with probability sampling_rate; participants must be 0", c.Algorithm)
	}
	if c.RecordUpload {
		bad("record_upload", "%s uploads clipped updates without noise (the noise is the server's): nothing private to record", c.Algorithm)
	}
	if c.Algorithm == algo.DPFedAvg {
		if !(c.NoiseMultiplier >= 0) || math.IsInf(c.NoiseMultiplier, 0) {
			bad("noise_multiplier", "need a finite z >= 0, got %g", c.NoiseMultiplier)
		}
		if c.Informed && !(c.NoiseMultiplier > 0) {
			bad("informed", "the likelihood ratio needs noise_multiplier > 0")
		}
		if c.Privacy != nil {
			bad("privacy", "dp-fedavg has one noise multiplier for everyone; per-client budgets are idp-fedavg or adaptive-fedavg")
		}
		return errors.Join(errs...)
	}
	if c.NoiseMultiplier != 0 {
		bad("noise_multiplier", "%s calibrates its noise to the privacy budgets; leave it 0", c.Algorithm)
	}
	if c.Privacy == nil || len(c.Privacy.Groups) == 0 {
		bad("privacy", "%s needs privacy.groups with budgets", c.Algorithm)
		return errors.Join(errs...)
	}
	pc := c.Privacy
	if !(pc.Delta > 0 && pc.Delta < 1) {
		bad("privacy.delta", "need a value in (0, 1), got %g", pc.Delta)
	}
	switch pc.Bookkeeping {
	case "", "composed", "paper":
	default:
		bad("privacy.bookkeeping", "%q is not composed or paper", pc.Bookkeeping)
	}
	total := 0
	for g, grp := range pc.Groups {
		total += grp.Clients
		if grp.Clients < 1 {
			bad(fmt.Sprintf("privacy.groups[%d].clients", g), "need at least 1, got %d", grp.Clients)
		}
		if !(grp.Epsilon > 0) || math.IsInf(grp.Epsilon, 0) {
			bad(fmt.Sprintf("privacy.groups[%d].epsilon", g), "need a finite budget > 0, got %g", grp.Epsilon)
		}
		if c.Algorithm == algo.AdaptiveFedAvg {
			if !(grp.SavingRate > 0 && grp.SavingRate <= c.SamplingRate) {
				bad(fmt.Sprintf("privacy.groups[%d].saving_rate", g), "need q_n in (0, sampling_rate = %g], got %g", c.SamplingRate, grp.SavingRate)
			}
			if grp.Transition < 1 || grp.Transition > c.Rounds {
				bad(fmt.Sprintf("privacy.groups[%d].transition", g), "need a round in [1, %d], got %d", c.Rounds, grp.Transition)
			}
		} else if grp.SavingRate != 0 || grp.Transition != 0 {
			bad(fmt.Sprintf("privacy.groups[%d]", g), "saving_rate and transition are adaptive-fedavg's")
		}
	}
	if total != m {
		bad("privacy.groups", "the groups hold %d clients, the data has %d", total, m)
	}
	return errors.Join(errs...)
}

// clientDPRounds is the round of the DP-FedAvg family, with its privacy plan, the server
// learning rate, the target's own clipped update (informed) and per-replica inner products.
type clientDPRounds struct {
	e        *engine
	plan     *PrivacyPlan
	serverLR float64
	tu       compute.Buffer
	dpDots   [5][]float64
}

// statNames: the family's adversary sees only the model sequence, not an upload.
func (dp *clientDPRounds) statNames() []string { return []string{StatLLRAll, StatLLRLast, StatMu2} }

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
		if err := e.localTrain(ctx, t, i, e.l, false, true); err != nil {
			return err
		}
		be.Axpby(-1, e.all(e.g), 1, e.all(e.l), nil) // the update w_local - w_t
		e.clipFactors(e.l, plan.Clip[t][i], e.coef)
		if isTarget && e.target.Absent {
			for r := 1; r < e.R; r += 2 {
				e.coef[r] = 0 // remove-client: C' has no such client
			}
		}
		if isTarget && e.cfg.Informed {
			// tu: the replica's own clipped target update; shadow: the other world's.
			be.Axpby(1, e.all(e.l), 0, e.all(dp.tu), e.coef)
			if err := e.localTrain(ctx, t, i, e.shadow, true, true); err != nil {
				return err
			}
			be.Axpby(-1, e.all(e.g), 1, e.all(e.shadow), nil)
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
		AddNoiseHost(host, dist, e.seeds[2*p], uint32(t), streamServer, 1)
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
	x, y := math.Log1p(-q), math.Log(q)+a
	if x < y {
		x, y = y, x
	}
	return x + math.Log1p(math.Exp(y-x))
}

// logDensity is the log density (up to a constant) of one coordinate of the configured
// non-Gaussian mechanism with standard deviation std.
func (e *engine) logDensity(std float64) (func(float64) float64, error) {
	dist, err := e.cfg.NoiseOf(std)
	if err != nil {
		return nil, err
	}
	switch d := dist.(type) {
	case accounting.Laplace:
		b := d.Scale()
		return func(x float64) float64 { return -math.Abs(x) / b }, nil
	case accounting.Staircase:
		return func(x float64) float64 { return math.Log(d.Density(x)) }, nil
	}
	return nil, fmt.Errorf("train: no density for mechanism %q", e.cfg.mechanism())
}
