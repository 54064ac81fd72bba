package attacks

import (
	"fmt"
	"math"
	"sort"

	"github.com/fedaudit/fedaudit/runs"
)

// update returns the target client's update in round T-1, upload - w_{T-1}: its local descent
// plus its noise. Descent makes it point along minus the gradient.
func update(obs *Observation) ([]float64, error) {
	up := obs.Row.Upload
	if uploadAbsent(up) {
		// The target client did not take part in round T-1.
		return nil, errMissing
	}
	prev := obs.Prev.Params
	if len(prev) != len(up) {
		return nil, fmt.Errorf("upload has %d values, w_%d has %d", len(up), obs.Round-1, len(prev))
	}
	u := make([]float64, len(up))
	for i := range up {
		u[i] = float64(up[i]) - float64(prev[i])
	}
	return u, nil
}

// uploadAbsent reports whether a row's upload stands for "no upload": empty, or, since a run
// file that declares uploads needs a vector in every row, filled with NaN (or zeros, which no
// trained and noised parameter vector is).
func uploadAbsent(up []float32) bool {
	if len(up) == 0 {
		return true
	}
	nan, zero := true, true
	for _, v := range up {
		nan = nan && v != v
		zero = zero && v == 0
		if !nan && !zero {
			return false
		}
	}
	return true
}

func checkParamLen(env *Env, v []float64) error {
	if len(v) != env.model.numParams() {
		return fmt.Errorf("run file holds %d parameters, the model of the config has %d", len(v), env.model.numParams())
	}
	return nil
}

// labelAttack reconstructs the labels of the target client's batch from the last layer's bias in
// its update. For softmax cross-entropy the bias gradient of one sample is p - onehot(y),
// negative only at the true label; the update is minus the accumulated gradient, so with one
// sample the true label is the only positive component (iDLG's rule, taken as the argmax). For
// larger clients it estimates counts as LLG does: averaged over the client's samples the
// component c is -(sum of step sizes) (pbar_c - n_c/N), so n_c = N (pbar_c + u_c / sum eta),
// with pbar the model's mean prediction on public samples (Env.Aux; uniform without them). This
// needs no dummy data or optimization and is exact for full batches, one local step and a known
// pbar; the histogram is rounded to N by largest remainders.
//
// Its score is the bias component at y(epsilon) minus that at y(epsilon'): world C's client
// holds epsilon, which pushes its label's component up.
type labelAttack struct{}

func (labelAttack) Info() Info {
	return Info{Name: "label", Threat: runs.ThreatUploads,
		Needs:   Needs{Upload: true, Target: true, Model: true, Classes: true},
		Metrics: []string{"label_accuracy"},
		Summary: "label reconstruction from the last-layer bias of the target client's update (iDLG sign rule, LLG-style counts); score = component at y(epsilon) - at y(epsilon')"}
}

func (labelAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	u, err := update(obs)
	if err != nil {
		return Observed{}, err
	}
	if err := checkParamLen(env, u); err != nil {
		return Observed{}, err
	}
	lo, hi := env.model.lastBias()
	b := u[lo:hi]
	score := b[env.Target.Label]
	if env.TargetPrime.Present() {
		score -= b[env.TargetPrime.Label]
	}
	counts := estimateLabelCounts(env, obs, b)
	acc := math.NaN()
	if truth := trueLabelCounts(env, obs.World); truth != nil {
		acc = histogramMatch(counts, truth)
	}
	return Observed{Score: score, Metrics: []float64{acc}}, nil
}

// estimateLabelCounts returns the estimated label histogram of the target client's samples.
func estimateLabelCounts(env *Env, obs *Observation, b []float64) []int {
	C := len(b)
	n := env.ClientSize
	counts := make([]int, C)
	if n <= 1 {
		best := 0
		for c, v := range b {
			if v > b[best] {
				best = c
			}
		}
		counts[best] = 1
		return counts
	}
	var etaSum float64
	for k := 0; k < max(env.Config.LocalSteps, 1); k++ {
		etaSum += env.Config.LearningRateAt(int(obs.Round)-1, k)
	}
	pbar := make([]float64, C)
	if len(env.Aux) > 0 && obs.Prev.Params != nil {
		w := to64(obs.Prev.Params)
		for _, s := range env.Aux {
			for c, p := range env.model.probabilities(w, to64(s.Features)) {
				pbar[c] += p / float64(len(env.Aux))
			}
		}
	} else {
		for c := range pbar {
			pbar[c] = 1 / float64(C)
		}
	}
	est := make([]float64, C)
	for c := range est {
		est[c] = float64(n) * (pbar[c] + b[c]/etaSum)
		if !(est[c] > 0) { // also NaN
			est[c] = 0
		}
	}
	return roundToTotal(est, n)
}

// roundToTotal rounds non-negative x to integers summing to n by largest remainders, after
// rescaling x to sum n (an all-zero x gives all to the first class).
func roundToTotal(x []float64, n int) []int {
	var s float64
	for _, v := range x {
		s += v
	}
	out := make([]int, len(x))
	if !(s > 0) {
		out[0] = n
		return out
	}
	type rem struct {
		c int
		r float64
	}
	rems := make([]rem, len(x))
	total := 0
	for c, v := range x {
		f := v * float64(n) / s
		out[c] = int(math.Floor(f))
		total += out[c]
		rems[c] = rem{c, f - math.Floor(f)}
	}
	sort.SliceStable(rems, func(i, j int) bool { return rems[i].r > rems[j].r })
	for i := 0; total < n; i++ {
		out[rems[i%len(rems)].c]++
		total++
	}
	return out
}

// trueLabelCounts is the histogram of the target client's labels in a world, or nil when unknown.
func trueLabelCounts(env *Env, world int8) []int {
	labels := env.ClientLabels
	if labels == nil && env.ClientSize <= 1 {
		labels = []int32{env.Target.Label}
	}
	if labels == nil {
		return nil
	}
	counts := make([]int, env.Classes)
	for _, y := range labels {
		if y < 0 || int(y) >= env.Classes {
			return nil
		}
		counts[y]++
	}
	if world == runs.WorldCPrime {
		if counts[env.Target.Label] == 0 {
			return nil
		}
		counts[env.Target.Label]--
		if env.TargetPrime.Present() {
			counts[env.TargetPrime.Label]++
		}
	}
	return counts
}

// histogramMatch is the order-free label accuracy: the fraction of true labels matched by the
// estimate, sum_c min(est_c, true_c) / sum_c true_c.
func histogramMatch(est, truth []int) float64 {
	var hit, total int
	for c, t := range truth {
		total += t
		if c < len(est) {
			hit += min(est[c], t)
		}
	}
	if total == 0 {
		return math.NaN()
	}
	return float64(hit) / float64(total)
}
