package train

import (
	"context"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// rounds is an algorithm family's round, chosen once per engine (chooseRounds): Noisy-FedAvg,
// Noisy-FedProx and DP-SGD (fedRounds: every client uploads its noisy local result) or the
// DP-FedAvg family (clientDPRounds in dpfedavg.go: sampled clients, clipped updates, server
// noise).
type rounds interface {
	// init runs once before round 0.
	init(ctx context.Context) error
	// round runs round t (0-based); record says that w_{t+1} is a checkpoint.
	round(ctx context.Context, t int, record bool) error
	// statNames names the informed adversary's statistics the family records.
	statNames() []string
}

// chooseRounds returns the configured family's round.
func (e *engine) chooseRounds() rounds {
	if e.cfg.IsClientDP() {
		return &clientDPRounds{e: e}
	}
	return &fedRounds{e: e}
}

// fedRounds is the round of Noisy-FedAvg, Noisy-FedProx and DP-SGD (docs/training.md).
type fedRounds struct{ e *engine }

func (f *fedRounds) init(context.Context) error { return nil }

func (f *fedRounds) statNames() []string {
	return []string{checkpoint.StatLLRAll, checkpoint.StatLLRLast, checkpoint.StatMu2, checkpoint.StatLLRUpload, checkpoint.StatMu2Upload}
}

// round runs round t: every client's K local steps from w_t for every replica, the noise and
// the average, the informed adversary's statistics, and the divergence check.
func (f *fedRounds) round(ctx context.Context, t int, record bool) error {
	e := f.e
	be, m, tc := e.be, e.m, e.target.Client
	e.chooseParticipants(t)
	n := float32(e.n)
	sigma := e.cfg.NoiseStd
	if e.mix != nil {
		e.mix.roundNoise(e, t, sigma, n)
	}
	e.steps.startRound()
	for i := 0; i < m; i++ {
		keep := i == tc && (e.cfg.Informed || record && e.upload != nil) // l's first matrix is read
		if err := e.localTrain(ctx, t, i, e.l, false, keep); err != nil {
			return err
		}
		for r := range e.coef {
			e.coef[r] = b2f(e.part[(r/2)*m+i])
		}
		e.steps.accumulate(i, e.coef)
		if i != tc {
			continue
		}
		if record && e.upload != nil {
			for r := range e.coef {
				e.scaleT[r] = float32(e.cfg.NoiseStd)
				e.uploaded[r] = e.hasTarget[r/2]
			}
			be.Axpby(1, e.all(e.l), 0, e.all(e.upload), nil)
			if err := e.addNoise(e.upload, t, uint32(tc), e.scaleT); err != nil {
				return err
			}
		}
		if e.mix != nil {
			if err := e.mix.candidates(ctx, e, t, n, sigma); err != nil {
				return err
			}
		} else if e.cfg.Informed {
			// The shadow phi' (w_t) is the target client trained on the other world's data. Where
			// its minibatches were the same in both worlds this round, that training would
			// repeat the target's (kept whole in l: keep) to the bit: copy it instead (D is then
			// 0 this round; W1's target sample is in 3 of its 20 rounds' minibatches).
			if e.steps.sameWorlds(t, i) {
				be.Axpby(1, e.all(e.l), 0, e.all(e.shadow), nil)
			} else if err := e.localTrain(ctx, t, i, e.shadow, true, true); err != nil {
				return err
			}
			// shadow <- D = phi(w_t) - phi'(w_t) = s (L - shadow)/n, s = +1 in C, -1 in C'.
			be.Axpby(-1, e.all(e.l), 1, e.all(e.shadow), nil)
			for r := range e.coef {
				s := float32(1 - 2*(r%2))
				e.coef[r] = -s * b2f(e.hasTarget[r/2]) / float32(e.n)
			}
			be.Axpby(1, e.all(e.shadow), 0, e.all(e.shadow), e.coef)
		}
	}
	e.steps.average(n)
	if e.mix != nil {
		// The noise was drawn before the clients trained (roundNoise).
		if e.stats != nil {
			e.mix.observe(e)
		}
		be.Axpby(1, e.all(e.noise), 1, e.all(e.acc), nil)
		e.commit()
		return nil
	}
	e.noiseScales(sigma, n)
	be.Axpby(0, compute.Mat{}, 0, e.all(e.noise), nil)
	if sigma > 0 && e.cfg.mechanism() == algo.Gaussian {
		be.AddGaussian(e.all(e.noise), e.seeds, e.scaleT, uint32(t), uint32(tc))
		if e.stats != nil {
			// Before the others' noise: the target's own draw, which its upload carries times n.
			be.Dots(e.all(e.noise), e.all(e.shadow), e.stats.upDots)
		}
		be.AddGaussian(e.all(e.noise), e.seeds, e.scaleO, uint32(t), streamOthers)
	} else if sigma > 0 {
		// A sum of Laplace or staircase draws has no closed form: every participant's noise
		// is drawn from its own stream (the target's is the one its recorded upload carries).
		if err := e.addParticipantNoise(t, float32(sigma)/n); err != nil {
			return err
		}
	}
	if e.stats != nil {
		f.observe(n, sigma)
	}
	be.Axpby(1, e.all(e.noise), 1, e.all(e.acc), nil)
	e.commit()
	return nil
}

// noiseScales sets, per replica, scaleT to the standard deviation of the target's share of
// the average's noise (sigma/n when it takes part, else 0) and scaleO to the other
// participants' together (sigma sqrt(others)/n).
func (e *engine) noiseScales(sigma float64, n float32) {
	for r := range e.scaleT {
		tgt := e.hasTarget[r/2]
		e.scaleT[r] = float32(sigma/float64(n)) * b2f(tgt)
		others := e.n - int(b2f(tgt))
		e.scaleO[r] = float32(sigma * math.Sqrt(float64(others)) / float64(n))
	}
}

// observe adds this round's statistics of the informed adversary to every replica's (e.shadow
// holds D, e.noise the average's noise): the observer of the model sequence and the observer
// of the target's uploads.
func (f *fedRounds) observe(n float32, sigma float64) {
	e, st := f.e, f.e.stats
	be := e.be
	be.Dots(e.all(e.noise), e.all(e.shadow), e.dots)
	be.Dots(e.all(e.shadow), e.all(e.shadow), e.dd)
	k := float64(n) / (sigma * sigma)
	for r := range e.dots {
		if e.diverged[r] {
			continue
		}
		s := float64(1 - 2*(r%2))
		st.llrLast[r] = k * (e.dots[r] + s*e.dd[r]/2)
		st.llrAll[r] += st.llrLast[r]
		st.mu2[r] += k * e.dd[r]
		// The uploads observer (w_t and the target's upload U = phi_i(w_t) + sigma Z): the
		// upload's shift is n D and its noise sigma Z = n (sigma/n) Z, so its ratio is
		// (n^2/sigma^2)(<(sigma/n) Z, D> + s ||D||^2/2), with mu^2 = n^2 ||D||^2/sigma^2.
		ku := float64(n) * k
		st.llrUp[r] = ku * (st.upDots[r] + s*e.dd[r]/2)
		st.mu2Up[r] = ku * e.dd[r]
	}
}

// chooseParticipants draws each pair's n of m clients for round t from the run seed.
func (e *engine) chooseParticipants(t int) {
	m := e.m
	for p := 0; p < e.P; p++ {
		part := e.part[p*m : (p+1)*m]
		if e.n == m {
			for i := range part {
				part[i] = true
			}
		} else {
			clear(part)
			rng := philox.NewRand(e.seeds[2*p], uint32(t), 0, philox.DomainParticipation, 0)
			philox.SamplePrefix(&rng, e.perm[:m], e.n)
			for _, i := range e.perm[:e.n] {
				part[i] = true
			}
		}
		e.hasTarget[p] = part[e.target.Client]
	}
}
