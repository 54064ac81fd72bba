package train

import (
	"context"
	"fmt"
	"math"
	"math/bits"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
)

// MaxPoissonMixtureSteps bounds the local steps of an informed audit with Poisson minibatches:
// the adversary's ratio sums over every pattern of steps whose minibatch held the target
// sample, 2^K patterns, each a replay of the target client's local training in both worlds.
const MaxPoissonMixtureSteps = 4

// poissonMixture is the informed adversary under Poisson minibatches with sample-level
// adjacency (docs/training.md, "Informed adversary"). Whether the target sample was in a local
// step's minibatch is secret (a deployment's accountant counts on it), so the adversary, who
// knows everything else, scores round t by the ratio of the mixtures over the 2^K patterns S of
// steps holding the target, log sum_S pi_S f(Y - Phi_S^C) - log sum_S pi_S f(Y - Phi_S^C'),
// pi_S = q^|S| (1-q)^(K-|S|), f the Gaussian density of the average's noise (the target's own
// noise for the uploads observer). informed_mu2 stays the realized mu^2 of the adversary who
// knows the draws, an upper yardstick.
type poissonMixture struct {
	K int
	q float64
	// force is the pattern of steps whose minibatch holds the target during a replay, or -1
	// for the draws as they fall (when the actual pattern is recorded).
	force int
	// actual[p] is pair p's actual pattern of the round.
	actual []uint32
	// noiseT is the target's own share of the average's noise (sigma/n Z), for the uploads
	// observer.
	noiseT compute.Buffer
	// Running log-sum-exp of the candidates' log-likelihoods per replica: [0] world C, [1]
	// world C'; lse for the models, lseUp for the uploads.
	lse, lseUp [2][]float64
	nd, ntd    []float64
}

// usesPoissonMixture reports whether the informed adversary of cfg's training must average
// over the Poisson minibatches' draws of the target sample (poissonMixture).
func usesPoissonMixture(cfg Config, target TargetInfo) bool {
	return cfg.Informed && cfg.Batching == algo.Poisson && !target.WholeClient && !cfg.IsClientDP()
}

// newPoissonMixture checks that the mixture can be computed and allocates it.
func (e *engine) newPoissonMixture() (*poissonMixture, error) {
	cfg := e.cfg
	switch {
	case cfg.LocalSteps > MaxPoissonMixtureSteps:
		return nil, fmt.Errorf("train: informed with poisson batching averages over the 2^K patterns of local steps holding the target sample, and K = %d is above %d: use fixed batching, fewer local steps, or informed: false", cfg.LocalSteps, MaxPoissonMixtureSteps)
	case cfg.mechanism() != algo.Gaussian:
		return nil, fmt.Errorf("train: informed with poisson batching needs the Gaussian mechanism (the mixture's density), not %s", cfg.mechanism())
	}
	mx := &poissonMixture{K: cfg.LocalSteps, force: -1, actual: make([]uint32, e.P),
		noiseT: e.be.Alloc(e.R * e.pitch), nd: make([]float64, e.R), ntd: make([]float64, e.R)}
	mx.q = float64(cfg.BatchSize) / float64(e.data[0][e.target.Client].n)
	for w := range mx.lse {
		mx.lse[w], mx.lseUp[w] = make([]float64, e.R), make([]float64, e.R)
	}
	return mx, nil
}

// roundNoise draws the round's noise before the clients train (the candidates' ratios need
// it): the target's share into noiseT and the whole average's into e.noise, the draws the
// round would make after training; it also clears the round's patterns and sums.
func (mx *poissonMixture) roundNoise(e *engine, t int, sigma float64, n float32) {
	be, tc := e.be, e.target.Client
	e.noiseScales(sigma, n)
	be.Axpby(0, compute.Mat{}, 0, e.all(e.noise), nil)
	be.AddGaussian(e.all(e.noise), e.seeds, e.scaleT, uint32(t), uint32(tc))
	be.Axpby(1, e.all(e.noise), 0, e.all(mx.noiseT), nil)
	be.AddGaussian(e.all(e.noise), e.seeds, e.scaleO, uint32(t), streamOthers)
	clear(mx.actual)
	for w := range mx.lse {
		for r := range mx.lse[w] {
			mx.lse[w][r], mx.lseUp[w][r] = math.Inf(-1), math.Inf(-1)
		}
	}
}

// candidates replays the target client's local training of round t under every pattern, in
// both worlds where the pattern holds the target, and adds each candidate's log-likelihood of
// what the replica's run shows (e.l holds its actual update) to the running sums. It also adds
// the realized mu^2 of the adversary who knows the draws (the other world's update under the
// pair's actual pattern).
func (mx *poissonMixture) candidates(ctx context.Context, e *engine, t int, n float32, sigma float64) error {
	be, st := e.be, e.stats
	k := float64(n) / (sigma * sigma)
	ku := float64(n) * k
	for S := 0; S < 1<<mx.K; S++ {
		included := bits.OnesCount(uint(S))
		logPi := float64(included)*math.Log(mx.q) + float64(mx.K-included)*math.Log1p(-mx.q)
		if math.IsInf(logPi, -1) {
			continue // q = 1: the target is in every minibatch
		}
		flips := []bool{false, true}
		if S == 0 {
			flips = flips[:1] // without the target both worlds train alike
		}
		for _, flip := range flips {
			mx.force = S
			err := e.localTrain(ctx, t, e.target.Client, e.shadow, flip, true)
			mx.force = -1
			if err != nil {
				return err
			}
			// shadow <- Delta = (Phi_act - Phi_S)/n, the run's shift from the candidate.
			be.Axpby(1/n, e.all(e.l), -1/n, e.all(e.shadow), nil)
			be.Dots(e.all(e.noise), e.all(e.shadow), mx.nd)
			be.Dots(e.all(mx.noiseT), e.all(e.shadow), mx.ntd)
			be.Dots(e.all(e.shadow), e.all(e.shadow), e.dd)
			for r := 0; r < e.R; r++ {
				a := -k * (mx.nd[r] + e.dd[r]/2)
				aUp := -ku * (mx.ntd[r] + e.dd[r]/2)
				own := r % 2
				for w := 0; w < 2; w++ {
					if S != 0 && w != own^int(b2f(flip)) {
						continue
					}
					mx.lse[w][r] = accounting.LogAddExp(mx.lse[w][r], logPi+a)
					mx.lseUp[w][r] = accounting.LogAddExp(mx.lseUp[w][r], logPi+aUp)
				}
				if flip && uint32(S) == mx.actual[r/2] && e.hasTarget[r/2] {
					st.mu2[r] += k * e.dd[r]
					st.mu2Up[r] = ku * e.dd[r]
				}
			}
		}
	}
	for r := 0; r < e.R; r++ {
		if mx.actual[r/2] == 0 || !e.hasTarget[r/2] {
			st.mu2Up[r] = 0 // no draw held the target: the worlds' runs agree this round
		}
	}
	return nil
}

// observe sets the round's ratios from the running sums: a pair whose target client sat the
// round out shows nothing of the world.
func (mx *poissonMixture) observe(e *engine) {
	st := e.stats
	for r := 0; r < e.R; r++ {
		if e.diverged[r] {
			continue
		}
		st.llrLast[r], st.llrUp[r] = 0, 0
		if e.hasTarget[r/2] {
			st.llrLast[r] = mx.lse[0][r] - mx.lse[1][r]
			st.llrUp[r] = mx.lseUp[0][r] - mx.lseUp[1][r]
		}
		st.llrAll[r] += st.llrLast[r]
	}
}

// poissonDraw is whether sample j of client i is in pair p's minibatch of local step k, given
// the draw drawn: the draw itself, except for the target sample while the informed adversary
// replays a pattern (mix.force), and the training records the target's draws (mix.actual).
func (e *engine) poissonDraw(drawn bool, i, j, k, p int) bool {
	mx := e.mix
	if mx == nil || i != e.target.Client || j != e.target.Index {
		return drawn
	}
	if mx.force >= 0 {
		return mx.force>>k&1 == 1
	}
	if drawn {
		mx.actual[p] |= 1 << k
	}
	return drawn
}
