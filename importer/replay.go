package importer

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

// The informed adversary of imported runs. It knows everything but which world a run trained
// on (docs/theory.md): the data, the algorithm, and every global model. When a round is a
// function of w_t and the data alone (full batches, every client, Gaussian noise:
// train.Replayable) it replays round t from the imported w_t in both worlds without noise
// (train.ReplayRound), and what is left of the imported w_{t+1} is the noise, under either
// hypothesis. Its statistics are those training records with `informed: true` (docs/training.md),
// computed from residuals instead of the trainer's own noise draws:
//
//	e     = w_{t+1} - mean_own(w_t)            the residual in the run's own world
//	Delta = mean_own(w_t) - mean_other(w_t)    the worlds' difference of round t
//	llr_t = s (n / 2 sigma^2) (2 <e, Delta> + |Delta|^2),  s = +1 in C, -1 in C'
//
// summed over the rounds (informed_llr_all), the last round's (informed_llr_last), and
// mu^2 = (n / sigma^2) sum |Delta|^2; for the target's uploads U the same with U - target_own,
// the target's local results and sigma in place of sigma / sqrt(n). One more statistic is the
// importer's own, informed_llr_diff: the same ratio of the residuals differenced over
// consecutive rounds, e_t - e_{t-1} under either hypothesis (as if their noise were
// N(0, 2 sigma^2 / n)), summed over rounds 2..T. Fresh noise leaves it a weaker version of
// llr_all; noise drawn once and reused every round cancels in the differences, leaving the true
// world's exactly zero and telling the worlds apart without error.

// replayStats are the statistic columns of a replayed import, before the target's loss and
// margin, in this order; the upload columns only with uploads.
var replayStats = []string{runs.StatLLRAll, runs.StatLLRLast, runs.StatMu2, runs.StatLLRDiff}

var replayUploadStats = []string{runs.StatLLRUpload, runs.StatMu2Upload}

// canReplay says why the informed adversary cannot replay the imported runs (nil when it can):
// the config must ask for it (train.informed), the model be one fedaudit trains, the rounds be
// replayable, and every round from 0 to the last be a checkpoint.
func canReplay(cfg train.Config, clients int, known bool, rounds []int) error {
	if !cfg.Informed {
		return errors.New("the config does not ask for the informed adversary (train.informed)")
	}
	if !known {
		return errors.New("an external model cannot be replayed")
	}
	if err := train.Replayable(cfg, clients); err != nil {
		return err
	}
	for i, t := range rounds {
		if t != i {
			return fmt.Errorf("every round from 0 to %d must be a checkpoint (the checkpoints are %v)", rounds[len(rounds)-1], rounds)
		}
	}
	return nil
}

// replayer accumulates the informed statistics of every run over the rounds.
type replayer struct {
	k       float64 // n / sigma^2: the inverse noise variance of w_{t+1} per coordinate
	kUpload float64 // 1 / sigma^2: of an upload
	uploads bool
	// Per run: the sums so far, and the previous round's residual and difference (float32,
	// noise-sized values) for the differenced ratio.
	llrAll, mu2, llrDiff []float64
	prevE, prevDelta     [][]float32
	// last is each run's statistics at its latest checkpoint: what a run declared diverged
	// keeps from then on.
	last [][]float64
}

func newReplayer(cfg train.Config, runs, clients int, uploads bool) *replayer {
	n := cfg.Participants
	if n == 0 {
		n = clients
	}
	s2 := cfg.NoiseStd * cfg.NoiseStd
	return &replayer{k: float64(n) / s2, kUpload: 1 / s2, uploads: uploads,
		llrAll: make([]float64, runs), mu2: make([]float64, runs), llrDiff: make([]float64, runs),
		prevE: make([][]float32, runs), prevDelta: make([][]float32, runs), last: make([][]float64, runs)}
}

// names are the replayer's statistic columns.
func (rp *replayer) names() []string {
	if rp.uploads {
		return append(append([]string(nil), replayStats...), replayUploadStats...)
	}
	return replayStats
}

// zero is the statistics of round 0, before any round: all zero, as training records them.
func (rp *replayer) zero() []float64 { return make([]float64, len(rp.names())) }

// round returns every run's statistics at checkpoint t+1 from the replay of round t (rp, from
// the imported w_t) and the imported w_{t+1} (next) and uploads of round t (nil where absent).
//
// A run declared diverged at checkpoint t+1 (frozen) keeps its statistics of checkpoint t, as
// fedaudit's trainer freezes a diverged replica's: its w_{t+1} is the w_t it kept (or
// anything else its trainer left), not a noisy step of round t, so a residual computed from it
// would be no draw of the noise at all. The trainer still adds the round in which the run
// diverged, from the noise it drew; an import cannot, having no record of that step, so the two
// audits of such a run differ by that one round's term.
func (rp *replayer) round(ctx context.Context, job train.Job, t int, prev, next, uploads [][]float32, group int, frozen func(r int) bool) ([][]float64, error) {
	out := make([][]float64, len(next))
	pairs := len(next) / 2
	for first := 0; first < pairs; first += group {
		job.Pairs = train.PairRange{First: first, Count: min(group, pairs-first)}
		lo, hi := 2*first, 2*(first+job.Pairs.Count)
		rep, err := train.ReplayRound(ctx, job, t, prev[lo:hi])
		if err != nil {
			return nil, fmt.Errorf("import: replay pairs %d..%d: %w", first, first+job.Pairs.Count-1, err)
		}
		for j := range rep.Mean {
			r := lo + j
			if frozen(r) {
				if rp.last[r] == nil {
					rp.last[r] = rp.zero()
				}
				out[r] = slices.Clone(rp.last[r])
				continue
			}
			out[r] = rp.run(r, t, rep.Mean[j], rep.Target[j], next[r], uploads[r])
			rp.last[r] = slices.Clone(out[r])
		}
	}
	return out, nil
}

// run computes run r's statistics at checkpoint t+1.
func (rp *replayer) run(r, t int, mean, target [2][]float32, next, upload []float32) []float64 {
	own := r % 2
	s := 1.0
	if own == 1 {
		s = -1
	}
	d := len(next)
	e, delta := make([]float32, d), make([]float32, d)
	var eDelta, dd float64
	for i := range next {
		e[i] = next[i] - mean[own][i]
		delta[i] = mean[own][i] - mean[1-own][i]
		eDelta += float64(e[i]) * float64(delta[i])
		dd += float64(delta[i]) * float64(delta[i])
	}
	last := s * rp.k / 2 * (2*eDelta + dd)
	rp.llrAll[r] += last
	rp.mu2[r] += rp.k * dd
	if t >= 1 {
		// Round t's residuals minus round t-1's, under either hypothesis.
		var rd, ddd float64
		for i := range e {
			dr := float64(e[i]) - float64(rp.prevE[r][i])
			dlt := float64(delta[i]) - float64(rp.prevDelta[r][i])
			rd += dr * dlt
			ddd += dlt * dlt
		}
		rp.llrDiff[r] += s * rp.k / 4 * (2*rd + ddd)
	}
	rp.prevE[r], rp.prevDelta[r] = e, delta
	stats := []float64{rp.llrAll[r], last, rp.mu2[r], rp.llrDiff[r]}
	if !rp.uploads {
		return stats
	}
	var llrUp, mu2Up float64
	if upload != nil {
		var ed, du float64
		for i := range upload {
			eu := float64(upload[i]) - float64(target[own][i])
			dl := float64(target[own][i]) - float64(target[1-own][i])
			ed += eu * dl
			du += dl * dl
		}
		llrUp = s * rp.kUpload / 2 * (2*ed + du)
		mu2Up = rp.kUpload * du
	}
	return append(stats, llrUp, mu2Up)
}
