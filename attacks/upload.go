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
	if runs.UploadAbsent(up) {
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

func checkParamLen(env *Env, v []float64) error {
	if len(v) != env.model.NumParams() {
		return fmt.Errorf("run file holds %d parameters, the model of the config has %d", len(v), env.model.NumParams())
	}
	return nil
}

// labelAttack reconstructs the labels of the target client's samples from the last dense
// layer in its update u = upload - w_{T-1}, which is minus the client's accumulated gradient
// plus noise. For softmax cross-entropy the last layer's bias gradient of one sample is
// p - onehot(y), negative only at the true label, so with one sample the true label is the only
// positive bias component of u (iDLG's rule, taken as the argmax, which also works under
// noise). For larger clients it runs two estimators of the label histogram:
//
//   - counts (its label_accuracy): averaged over the client's samples the bias component c of
//     u is -(sum of step sizes) (pbar_c - n_c/N), so n_c = N (pbar_c + u_c / sum eta), with pbar
//     the mean prediction of w_{T-1} on public samples (Env.Aux; uniform without them),
//     clipped at 0 and rounded to N by largest remainders. Exact for full batches, one local
//     step and a known pbar.
//   - LLG (Wainakh et al. 2022, "User-level label leakage from gradients in federated
//     learning"; its llg_accuracy): from the row sums g_c of the last layer's weight gradient
//     (-u), which for non-negative features (ReLU before the last layer) are negative for the
//     labels present; every label with g_c < 0 is taken once and g_c reduced by the impact
//     m = (1 + 1/C) (sum of the negative g_c) / N, then the label of least g_c is taken and
//     reduced by m until N labels are taken.
//
// Its score is the bias component at y(epsilon) minus that at y(epsilon'): world C's client
// holds epsilon, which pushes its label's component up.
type labelAttack struct{}

// Label reconstruction metrics: the order-free accuracy sum_c min(n^_c, n_c) / N and the
// count error sum_c |n^_c - n_c| of each estimator, against the client's labels in the run's
// world. For histograms of N labels the count error is 2N (1 - accuracy): reported because
// label-recovery papers report counts errors.
const (
	MetricLabelAccuracy   = "label_accuracy"
	MetricLabelCountError = "label_count_error"
	MetricLLGAccuracy     = "llg_accuracy"
	MetricLLGCountError   = "llg_count_error"
)

func (labelAttack) Info() Info {
	return Info{Name: "label", Threat: runs.ThreatUploads,
		Needs:   Needs{Upload: true, Target: true, Model: true, Classes: true, LastDense: true},
		Metrics: []string{MetricLabelAccuracy, MetricLabelCountError, MetricLLGAccuracy, MetricLLGCountError},
		Summary: "label reconstruction from the last dense layer of the target client's update (iDLG sign rule for one sample; bias counts with the mean prediction, and LLG, for more); score = bias component at y(epsilon) - at y(epsilon')"}
}

func (labelAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	u, err := update(obs)
	if err != nil {
		return Observed{}, err
	}
	if err := checkParamLen(env, u); err != nil {
		return Observed{}, err
	}
	woff, boff, in, _ := env.model.LastDense()
	b := u[boff:]
	score := b[env.Target.Label]
	if env.TargetPrime.Present() {
		score -= b[env.TargetPrime.Label]
	}
	nan := math.NaN()
	metrics := []float64{nan, nan, nan, nan}
	if truth := trueLabelCounts(env, obs.World); truth != nil {
		counts := estimateLabelCounts(env, obs, b)
		metrics[0], metrics[1] = histogramMatch(counts, truth), countError(counts, truth)
		if env.model.LastDenseReadsNonNegative() {
			// LLG's sign rule holds only there: with tanh features (the classic LeNet-5) it
			// published an accuracy of 0 at sigma 0 beside the counts estimator's 1.
			llg := llgCounts(u[woff:boff], len(b), in, max(env.ClientSize, 1))
			metrics[2], metrics[3] = histogramMatch(llg, truth), countError(llg, truth)
		}
	}
	return Observed{Score: score, Metrics: metrics}, nil
}

// cnnAuxSamples caps the public samples the counts estimator evaluates a CNN on per run: the
// mean prediction of 64 samples costs a LeNet-5 about 55 MFLOP (a tenth of a second on the
// host), 256 four times that for every run and checkpoint.
const cnnAuxSamples = 64

// estimateLabelCounts returns the estimated label histogram of the target client's samples
// from the last layer's bias update b: iDLG's argmax for one sample, the counts estimator for
// more.
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
		aux := env.Aux
		if env.model.IsCNN() && len(aux) > cnnAuxSamples {
			aux = aux[:cnnAuxSamples]
		}
		xs := make([][]float32, len(aux))
		for i, s := range aux {
			xs[i] = s.Features
		}
		pbar = env.model.MeanProbabilities(to64(obs.Prev.Params), xs)
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

// llgCounts is LLG's label histogram of n samples (Wainakh et al. 2022) from the last layer's
// weight update uW (classes x in, row-major; minus the gradient): g_c = -sum_j uW[c][j]; stage 1
// takes every label with g_c < 0 (at most n of them, the most negative) and lowers each by the
// impact m = (1 + 1/C) sum_{g_c < 0} g_c / n; stage 2 takes the label of least g_c and lowers it
// by m until n labels are taken. Non-finite row sums are never taken before finite ones.
func llgCounts(uW []float64, classes, in, n int) []int {
	g := make([]float64, classes)
	var neg float64
	for c := range g {
		var s float64
		for _, v := range uW[c*in : (c+1)*in] {
			s -= v
		}
		if math.IsNaN(s) || math.IsInf(s, 0) {
			s = math.Inf(1)
		}
		g[c] = s
		if s < 0 {
			neg += s
		}
	}
	m := (1 + 1/float64(classes)) * neg / float64(n)
	counts := make([]int, classes)
	order := make([]int, classes)
	for c := range order {
		order[c] = c
	}
	sort.SliceStable(order, func(i, j int) bool { return g[order[i]] < g[order[j]] })
	taken := 0
	for _, c := range order {
		if g[c] >= 0 || taken == n {
			break
		}
		counts[c]++
		taken++
	}
	for c := range g {
		if counts[c] > 0 {
			g[c] -= m
		}
	}
	for ; taken < n; taken++ {
		best := 0
		for c, v := range g {
			if v < g[best] {
				best = c
			}
		}
		counts[best]++
		g[best] -= m
	}
	return counts
}

// countError is sum_c |est_c - truth_c|.
func countError(est, truth []int) float64 {
	var s int
	for c, t := range truth {
		e := 0
		if c < len(est) {
			e = est[c]
		}
		s += max(e-t, t-e)
	}
	return float64(s)
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
