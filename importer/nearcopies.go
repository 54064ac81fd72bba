package importer

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/privacy"
)

// nearCopyLevel is the probability, for two runs of different pairs compared, that their
// independent noise alone puts them closer than checkNearCopies' limit.
const nearCopyLevel = 1e-30

// nearCopyCoords is how many of the model's parameters checkNearCopies compares, and
// nearCopyNeighbours how many runs after each in its order.
const (
	nearCopyCoords     = 64
	nearCopyNeighbours = 8
)

// checkNearCopies refuses runs of different pairs that lie closer together after a round than
// the round's noise allows (s: the standard deviation of its draw in one parameter of the
// global model; 0, unknown, checks nothing). The last round's draw is independent between
// pairs and of everything before it, so the difference of two pairs' runs is a Gaussian of
// variance 2 s^2 a parameter shifted by the rest, and a centred Gaussian puts at least as much
// mass near 0 as a shifted one (Anderson's inequality): on k parameters their squared distance
// is below 2 s^2 x with probability at most P[chi2_k < x] <= (x/2)^(k/2) / Gamma(k/2 + 1),
// nearCopyLevel at the x used. Runs that share one noise draw (every pair's generator seeded
// alike) but differ by float rounding, from a server that sums the uploads in arrival order,
// pass checkCopies' test of equal bits; audited as independent pairs they separate the worlds
// perfectly (a deployment whose own training certifies mu >= 0.27 was VIOLATED at 3.75).
// Near copies sit next to each other in the order of their coordinates' sum, so each run is
// compared with the few after it there. Bit-equal runs are checkCopies' to name.
//
// Runs that close are one of two things: copies up to float rounding (within nearCopyULPs at
// every parameter compared: refused), or runs whose noise is smaller than declared (a
// deployment that draws the variance as the standard deviation): a violation the audit must
// find, not a file to refuse, so the import goes on and the returned warning says so.
func (rd *reader) checkNearCopies(params [][]float32, ri int, s float64, probs *problems) string {
	if !(s > 0) || math.IsInf(s, 0) {
		return ""
	}
	d := 0
	for _, p := range params {
		if p != nil {
			d = len(p)
			break
		}
	}
	if d == 0 {
		return ""
	}
	k := min(d, nearCopyCoords)
	coords := make([]int, k) // spread over the model: every parameter gets its own draw
	for j := range coords {
		coords[j] = j * d / k
	}
	limit := 2 * s * s * chiSquareSmallBall(k, nearCopyLevel) // of the squared distance on the k parameters
	type point struct {
		run int
		sum float64
	}
	var pts []point
	for r, p := range params {
		if p == nil || rd.diverged(r, ri) {
			continue
		}
		var sum float64
		for _, i := range coords {
			sum += float64(p[i])
		}
		pts = append(pts, point{r, sum})
	}
	slices.SortFunc(pts, func(a, b point) int { return cmp.Or(cmp.Compare(a.sum, b.sum), cmp.Compare(a.run, b.run)) })
	dist2 := func(a, b []float32) float64 {
		var ss float64
		for _, i := range coords {
			v := float64(a[i]) - float64(b[i])
			ss += v * v
		}
		return ss
	}
	norm2 := func(a []float32) float64 {
		var ss float64
		for _, i := range coords {
			ss += float64(a[i]) * float64(a[i])
		}
		return ss
	}
	type found struct {
		runs  map[int]bool
		first [2]int
		dist  float64
	}
	copies := found{runs: map[int]bool{}, first: [2]int{-1, -1}}
	quiet := found{runs: map[int]bool{}, first: [2]int{-1, -1}}
	for i, a := range pts {
		for _, b := range pts[i+1 : min(len(pts), i+1+nearCopyNeighbours)] {
			if a.run/2 == b.run/2 {
				continue // one pair's runs share their noise
			}
			pa, pb := params[a.run], params[b.run]
			dd := dist2(pa, pb)
			if dd >= limit || firstDiff(pa, pb) < 0 {
				continue
			}
			f := &quiet
			if roundingApart(pa, pb, coords, math.Sqrt(max(norm2(pa), norm2(pb))/float64(k))) {
				f = &copies
			}
			f.runs[a.run], f.runs[b.run] = true, true
			if f.first[0] < 0 {
				f.first, f.dist = [2]int{min(a.run, b.run), max(a.run, b.run)}, math.Sqrt(dd)
			}
		}
	}
	round := rd.plan.Rounds[ri]
	file := func(r int) string { return rd.plan.Files[r/2][r%2][ri] }
	where := func(f found) string {
		a, b := f.first[0], f.first[1]
		return fmt.Sprintf("round %d: pair %d world %s (%s) and pair %d world %s (%s) lie %.3g apart on %d of the model's %d parameters (%d runs of %d have such a neighbour in another pair), where the round's noise, of standard deviation %.3g a parameter and independent between pairs, puts two runs of different pairs closer than %.3g there with probability below %g",
			round, a/2, runs.WorldName(int8(a%2)), file(a), b/2, runs.WorldName(int8(b%2)), file(b), f.dist, k, d, len(f.runs), len(pts), s, math.Sqrt(limit), nearCopyLevel)
	}
	if copies.first[0] >= 0 {
		probs.add("%s, and within float rounding of each other: the pairs share their noise draws (is every pair's noise generator seeded alike?), and one training's noise would be audited as independent ones; seed each pair's noise with its own seed (docs/import.md)", where(copies))
	}
	if quiet.first[0] >= 0 {
		return where(quiet) + ": the deployment may add less noise than it declares (a variance taken for the standard deviation, a noise scaled twice), which is what the audit is to find; `audit check` measures the noise of each round"
	}
	return ""
}

// nearCopyULPs is how many float32 units in the last place two runs' parameters may differ by
// and still be one training up to float rounding (the uploads summed in another order moved
// them by a unit or two). A relative distance of 1e-4 took a deployment with a thousandth of its
// declared noise for copies, and refused what the audit was to find.
const nearCopyULPs = 16

// roundingApart reports whether a and b differ at every compared parameter by at most
// nearCopyULPs units in the last place of the larger of the two values and scale (the
// parameters' typical size: a value near 0 that sums cancel has rounding errors of its
// summands' size, not its own).
func roundingApart(a, b []float32, coords []int, scale float64) bool {
	for _, i := range coords {
		m := math.Max(math.Max(math.Abs(float64(a[i])), math.Abs(float64(b[i]))), scale)
		ulp := float64(math.Nextafter32(float32(m), float32(math.Inf(1)))) - float64(float32(m))
		if math.Abs(float64(a[i])-float64(b[i])) > nearCopyULPs*ulp {
			return false
		}
	}
	return true
}

// chiSquareSmallBall is an x with P[chi2_k < x] <= level: P[chi2_k < x] is at most
// (x/2)^(k/2) / Gamma(k/2 + 1) (the density's exponential factor is at most 1), which this x
// makes level.
func chiSquareSmallBall(k int, level float64) float64 {
	lg, _ := math.Lgamma(float64(k)/2 + 1)
	return 2 * math.Exp(2/float64(k)*(math.Log(level)+lg))
}

// roundNoiseStd is the standard deviation, in one parameter of the global model, of the noise
// the deployment draws in the round that ends at round (0: none, or not known): sigma/sqrt(n)
// for the n noisy uploads fedavg, fedprox and dpsgd average, and server_lr std/divisor for the
// DP-FedAvg family's server noise on the sum.
//
// Only Gaussian noise is measured: the check's small-ball bound is the Gaussian's, and a
// staircase draw of the same standard deviation puts far more mass near 0 (correct staircase
// runs at epsilon 8 were warned of as too quiet).
func (rd *reader) roundNoiseStd(ctx context.Context, round int) float64 {
	cfg := &rd.job.Config
	if round < 1 || !cfg.Noisy() || cfg.Mechanism.OrGaussian() != algo.Gaussian {
		return 0
	}
	m := len(rd.job.WorldC)
	if cfg.IsClientDP() {
		plan := rd.privacyPlan(ctx)
		if plan == nil || round > len(plan.Std) || !(plan.Divisor[round-1] > 0) {
			return 0
		}
		return cmp.Or(cfg.ServerLR, 1) * plan.Std[round-1] / plan.Divisor[round-1]
	}
	n := cfg.Participants
	if n <= 0 || n > m {
		n = m
	}
	return cfg.NoiseStd / math.Sqrt(float64(n))
}

// privacyPlan is the DP-FedAvg family's plan of the deployment (nil where it cannot be made: the
// config's checks list why), made once.
func (rd *reader) privacyPlan(ctx context.Context) *privacy.Plan {
	if !rd.planMade {
		rd.planMade = true
		if p, err := rd.job.Config.Plan(ctx, len(rd.job.WorldC)); err == nil {
			rd.dpPlan = p
		}
	}
	return rd.dpPlan
}

// targetAlwaysTrains reports whether the worlds of every pair must differ after round 1: the
// target client takes part in every round (every client does, or the DP-FedAvg family samples
// it with probability 1) and its differing data enters its training (client-level adjacency,
// or full batches, where a sample is in every step).
func (rd *reader) targetAlwaysTrains(ctx context.Context) bool {
	cfg := &rd.job.Config
	if !rd.job.Target.WholeClient && cfg.Batching != algo.Full {
		return false
	}
	if cfg.IsClientDP() {
		plan := rd.privacyPlan(ctx)
		if plan == nil {
			return false
		}
		for _, q := range plan.Q {
			if rd.job.Target.Client >= len(q) || q[rd.job.Target.Client] < 1 {
				return false
			}
		}
		return true
	}
	return cfg.Participants == 0 || cfg.Participants >= len(rd.job.WorldC)
}

// worldsApart records whether some pair's two runs differ at a checkpoint after round 0
// (params, run 2 pair + world), among the pairs neither of whose runs is missing or declared
// diverged; compared counts those pairs.
func (rd *reader) worldsApart(params [][]float32, ri int, apart *bool, compared *int) {
	for p := 0; p+1 < len(params); p += 2 {
		a, b := params[p], params[p+1]
		if a == nil || b == nil || rd.diverged(p, ri) || rd.diverged(p+1, ri) {
			continue
		}
		*compared++
		if !*apart && firstDiff(a, b) >= 0 {
			*apart = true
		}
	}
}
