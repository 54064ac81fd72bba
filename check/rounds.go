package check

import (
	"context"
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/train"
)

// Float tolerances of the exact checks. A recorded float32 value carries its rounding (2^-24 of
// itself) and the trainer's sums of n clients a few more; floatSlack of the norms involved covers
// both with a margin of two orders of magnitude. Replaying a round on another trainer (PyTorch
// against fedaudit's engine) differs by float32 rounding of each local step; replaySlack of the
// update is a thousand times what was measured between the two (docs/check.md), and far below
// what any change to the algorithm leaves.
const (
	floatSlack  = 1e-5
	replaySlack = 1e-3
	// coupledCorrelation is the correlation of a pair's residuals below which its worlds are taken
	// not to share their noise: shared noise correlates near 1, independent noise near 0.
	coupledCorrelation = 0.5
)

// updateBound is the declared bound on the norm of one client's update in round t: K local steps
// of clipped gradients of norm at most V, each shrunk by FedProx's pull |1 - eta alpha| toward
// w_t (docs/training.md).
func (c *checker) updateBound(t int) float64 {
	alpha := 0.0
	if c.cfg.Algorithm == algo.FedProx {
		alpha = c.cfg.ProxAlpha
	}
	b := 0.0
	for k := 0; k < c.cfg.LocalSteps; k++ {
		eta := c.cfg.LearningRateAt(t, k)
		b = math.Abs(1-eta*alpha)*b + eta*c.cfg.ClipNorm
	}
	return b
}

// coupledDifferences compares the difference of a pair's rounds with the declared sensitivity:
// the noise is shared, so it cancels, and what is left is the difference of two updates of norm
// at most updateBound each.
func (c *checker) coupledDifferences(p *pairRuns) {
	for i := 0; i+1 < len(c.rounds); i++ {
		t, next := c.rounds[i], c.rounds[i+1]
		if next != t+1 {
			continue
		}
		bound := 2 * c.updateBound(t)
		from := [2][]float32{p.runs[0].params[t], p.runs[1].params[t]}
		observed := [2][2][]float32{{p.runs[0].params[next], p.runs[1].params[next]}}
		if c.hasUpload {
			observed[upload] = [2][]float32{p.runs[0].upload[next], p.runs[1].upload[next]}
		}
		for obs, to := range observed {
			if to[0] == nil || to[1] == nil {
				continue
			}
			var diff, scale float64
			for j := range to[0] {
				d := (float64(to[0][j]) - float64(from[0][j])) - (float64(to[1][j]) - float64(from[1][j]))
				diff += d * d
			}
			scale = norm(to[0]) + norm(to[1]) + norm(from[0]) + norm(from[1])
			ratio := math.Sqrt(diff) / (bound + floatSlack*scale)
			c.diffN[obs]++
			if ratio > c.diffRatio[obs] || c.diffAt[obs] == "" {
				c.diffRatio[obs] = ratio
				c.diffAt[obs] = fmt.Sprintf("pair %d, round %d", p.id, t)
			}
		}
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// couplingTally accumulates how alike the residuals of a pair's two worlds are.
type couplingTally struct {
	cross, sq0, sq1 float64 // sums of <e_C, e_C'>, |e_C|^2, |e_C'|^2
	worst           float64 // the largest |e_C - e_C'| over its tolerance
	worstAt         string
	n               int
}

// residuals replays every round of the pair without noise and tallies what is left.
func (c *checker) residuals(ctx context.Context, p *pairRuns) error {
	job := c.job
	job.Pairs = train.PairRange{First: int(p.id), Count: 1}
	c.lastResidue = [2][]float32{}
	for i := 0; i+1 < len(c.rounds); i++ {
		t := c.rounds[i]
		rep, err := train.ReplayRound(ctx, job, t, [][]float32{p.runs[0].params[t], p.runs[1].params[t]})
		if err != nil {
			return err
		}
		observed := [2][2][]float32{{p.runs[0].params[t+1], p.runs[1].params[t+1]}}
		replayed := [2][2][]float32{{rep.Mean[0][0], rep.Mean[1][1]}}
		if c.hasUpload {
			observed[upload] = [2][]float32{p.runs[0].upload[t+1], p.runs[1].upload[t+1]}
			replayed[upload] = [2][]float32{rep.Target[0][0], rep.Target[1][1]}
		}
		for obs := range observed {
			if observed[obs][0] == nil || observed[obs][1] == nil {
				c.lastResidue[obs] = nil
				continue
			}
			var e [2][]float32
			for w := range e {
				e[w] = subtract(observed[obs][w], replayed[obs][w])
			}
			c.tally(obs, e[0], c.lastResidue[obs])
			c.lastResidue[obs] = e[0]
			upd := norm(subtract(replayed[obs][0], p.runs[0].params[t])) + norm(subtract(replayed[obs][1], p.runs[1].params[t]))
			slack := replaySlack*upd + floatSlack*(norm(observed[obs][0])+norm(observed[obs][1]))
			c.couple(obs, e, slack, fmt.Sprintf("pair %d, round %d", p.id, t))
		}
	}
	return nil
}

func subtract(a, b []float32) []float32 {
	out := make([]float32, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

// tally hands each tensor's slice of world C's residual to its tally. Only world C's: the
// pair's worlds share their noise, so world C' adds no independent draws.
func (c *checker) tally(obs int, e, prev []float32) {
	if c.tallies[obs] == nil {
		sigma := c.noiseStd(obs)
		rounds := len(c.rounds) - 1
		for _, s := range c.layout.Slots {
			size := 1
			for _, n := range s.Shape {
				size *= n
			}
			name := s.Role
			if s.Name != "" {
				name = s.Name
			}
			c.tallies[obs] = append(c.tallies[obs], newNoiseTally(observerNames[obs], name, sigma, size*rounds*c.pairs))
		}
	}
	for i, s := range c.layout.Slots {
		size := 1
		for _, n := range s.Shape {
			size *= n
		}
		var p []float32
		if prev != nil {
			p = prev[s.Offset : s.Offset+size]
		}
		c.tallies[obs][i].add(e[s.Offset:s.Offset+size], p)
	}
}

// couple records how alike a round's residuals of the pair's two worlds are.
func (c *checker) couple(obs int, e [2][]float32, slack float64, at string) {
	ct := &c.coupling[obs]
	var dd float64
	for i := range e[0] {
		a, b := float64(e[0][i]), float64(e[1][i])
		ct.cross += a * b
		ct.sq0 += a * a
		ct.sq1 += b * b
		dd += (a - b) * (a - b)
	}
	ratio := math.Sqrt(dd) / slack
	if ratio > ct.worst || ct.worstAt == "" {
		ct.worst, ct.worstAt = ratio, at
	}
	ct.n++
}
