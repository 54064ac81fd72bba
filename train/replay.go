package train

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cpu"
)

// Replay is one round replayed without noise from given global models, in both worlds: what
// the informed adversary computes of a round (docs/training.md), for runs trained elsewhere.
type Replay struct {
	// Mean[r][w] is replica r's w_{t+1} without its noise had the round run in world w (0 = C,
	// 1 = C'): the average of the participants' local results.
	Mean [][2][]float32
	// Target[r][w] is the target client's local result in world w: its upload without its noise.
	Target [][2][]float32
}

// Replayable says why round t of cfg is not a function of w_t and the data alone (nil when it
// is): only then can a round trained elsewhere be replayed. That needs the Noisy-FedAvg family
// (Noisy-FedAvg, Noisy-FedProx, DP-SGD) with Gaussian noise, full batches and every client in
// every round: minibatches and participation are drawn from seeds another trainer does not
// share, and the DP-FedAvg family's server adds its noise to clipped updates of sampled clients.
func Replayable(cfg Config, clients int) error {
	var why []error
	if cfg.IsClientDP() {
		why = append(why, fmt.Errorf("%s samples clients and noises on the server", cfg.Algorithm))
	}
	if cfg.Batching != algo.Full {
		why = append(why, fmt.Errorf("batching %s draws minibatches from fedaudit's seeds (full batches replay)", cfg.Batching))
	}
	if cfg.Participants != 0 && cfg.Participants != clients {
		why = append(why, fmt.Errorf("%d of %d clients take part in a round, drawn from fedaudit's seeds", cfg.Participants, clients))
	}
	if cfg.GradientCanary != nil {
		// The worlds hold the same data and the canary follows the replica's world, which the
		// replay's swap of the worlds' data does not move: both replays gave one mean, and
		// every imported informed statistic was 0 (native mu 1.27, imported 0).
		why = append(why, errors.New("adjacency kind gradient: the canary follows the replica's world, not the data the replay swaps"))
	}
	if cfg.mechanism() != algo.Gaussian {
		why = append(why, fmt.Errorf("the %s mechanism's likelihood ratio is not the Gaussian one", cfg.mechanism()))
	}
	if !(cfg.NoiseStd > 0) && !cfg.IsClientDP() {
		// The DP-FedAvg family's noise is noise_multiplier's, on the server: said above.
		why = append(why, errors.New("noise_std is 0: without noise there is no likelihood ratio"))
	}
	return errors.Join(why...)
}

// ReplayRound replays round t (0-based: from w_t, given by params, to w_{t+1}) of every
// replica of job.Pairs in both worlds without noise, with the engine's own local training on
// the CPU backend: the result is bit for bit what training computes before it adds the noise.
// params holds one vector per replica, pair job.Pairs.First+p's world w at index 2p+w. The round
// must be Replayable.
func ReplayRound(ctx context.Context, job Job, t int, params [][]float32) (*Replay, error) {
	if err := Replayable(job.Config, len(job.WorldC)); err != nil {
		return nil, fmt.Errorf("train: replay: %w", err)
	}
	if len(params) != 2*job.Pairs.Count {
		return nil, fmt.Errorf("train: replay: %d parameter vectors for %d pairs (want two per pair)", len(params), job.Pairs.Count)
	}
	job.Config.NoiseStd = 0
	job.Config.Informed, job.Config.RecordParams, job.Config.RecordUpload = false, false, true
	// The noise-free step is replayed whatever its norm: with the run's divergence_norm, a
	// replica whose noise-free mean passed the bound kept w_t as its "mean", so the residual of
	// a run that had not diverged was its whole step (an import's informed statistics 10 times
	// the trainer's, audit check's clipping test misled). Whether a run diverged is its
	// trainer's record, not the replay's.
	job.Config.DivergenceNorm = math.MaxFloat64
	// The replay is float32 on the CPU: runs trained with TF32 or bfloat16 products differ from
	// it by their rounding, as GPU runs differ from CPU ones by float32 rounding.
	job.Config.Precision = ""
	out := &Replay{Mean: make([][2][]float32, len(params)), Target: make([][2][]float32, len(params))}
	be := cpu.New(job.Config.Threads)
	defer be.Close()
	// The replica of world w trains on world w's data; with the worlds swapped, on the other's.
	for swap := 0; swap < 2; swap++ {
		j := job
		if swap == 1 {
			j.WorldC, j.WorldCPrime = job.WorldCPrime, job.WorldC
		}
		e, err := newEngine(be, j)
		if err != nil {
			return nil, err
		}
		for r, w := range params {
			if len(w) != e.d {
				return nil, fmt.Errorf("train: replay: replica %d has %d parameters, the model %d", r, len(w), e.d)
			}
			be.Upload(e.g, r*e.pitch, w)
		}
		stop := context.AfterFunc(ctx, func() { e.stop.Store(true) })
		err = e.rounds.round(ctx, t, true)
		stop()
		if err == nil && e.stop.Load() {
			err = context.Cause(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("train: replay round %d: %w", t, err)
		}
		for r := range params {
			world := (r % 2) ^ swap
			out.Mean[r][world] = make([]float32, e.d)
			out.Target[r][world] = make([]float32, e.d)
			be.Download(out.Mean[r][world], e.g, r*e.pitch)
			be.Download(out.Target[r][world], e.upload, r*e.pitch)
		}
	}
	return out, nil
}
