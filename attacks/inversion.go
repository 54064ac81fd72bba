package attacks

import (
	"math"

	"github.com/fedaudit/fedaudit/attacks/inversion"
	"github.com/fedaudit/fedaudit/runs"
)

// inversionAttack recovers the target client's input from its update through the first dense
// layer. With one sample x, K local steps change the first layer's weight by (sum_k d_k) x^T and
// its bias by sum_k d_k (d_k the step's back-propagated error times minus the step size): the
// weight update is rank one, and every row j gives x = dW_j / db_j. Under noise the
// least-squares solution over all rows, x = dW^T db / (db^T db), weighs rows by their signal
// (inversion.Analytic).
// With more samples it returns a mixture of them, weighted by their errors.
//
// Its score is ||x^ - epsilon'||^2 - ||x^ - epsilon||^2 (or -||x^ - epsilon||^2 without
// epsilon'): the reconstruction lies nearer the sample the client holds. That holds with one
// sample a client, and at T = 1; with several, from T = 2 on the model of world C has partly
// learned its sample, whose error, and so weight in the mixture, is then the smaller: the
// score can turn the other way (AUC 0.25 to 0.46 at T = 2 to 4 against 0.94 at T = 1, on a
// softmax model with 6 samples a client). The analysis flags such rows as reversed
// (findings.Finding.Reversed), and their verdicts say nothing of the claim; invgrad can turn
// the same way, and upload-lda, which fits the direction on the shadow pairs, is the uploads
// observer's attack there.
type inversionAttack struct{}

// Names of the reconstruction metrics, computed against the target sample of the run's world
// with the reconstruction clipped to the box [0, 1] of image data (NaN for data outside it),
// and the baseline: the PSNR of the flat image at the sample's mean (inversion.Metrics).
const (
	MetricMSE      = "inversion_mse"
	MetricPSNR     = "inversion_psnr"
	MetricSSIM     = "inversion_ssim"
	MetricL2       = "inversion_l2"
	MetricPSNRFlat = "inversion_psnr_flat"
)

// inversionMetrics are the inversion attacks' metrics, in inversion.Metrics' order.
var inversionMetrics = []string{MetricMSE, MetricPSNR, MetricSSIM, MetricL2, MetricPSNRFlat}

func (inversionAttack) Info() Info {
	return Info{Name: "inversion", Threat: runs.ThreatUploads,
		Needs:   Needs{Upload: true, Target: true, Model: true, Classes: true, FirstDense: true},
		Metrics: inversionMetrics,
		Summary: "analytic input recovery through the first dense layer of the target client's update; score = ||x^-epsilon'||^2 - ||x^-epsilon||^2"}
}

func (inversionAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	u, err := update(obs)
	if err != nil {
		return Observed{}, err
	}
	if err := checkParamLen(env, u); err != nil {
		return Observed{}, err
	}
	x := inversion.Analytic(env.model, u)
	if x == nil {
		return Observed{}, errMissing
	}
	eps := to64(env.Target.Features)
	score := -sqDist(x, eps)
	if env.TargetPrime.Present() {
		score += sqDist(x, to64(env.TargetPrime.Features))
	}
	metrics := nanMetrics()
	truth := env.Target
	if obs.World == runs.WorldCPrime {
		truth = env.TargetPrime
	}
	clipped := make([]float64, len(x))
	for i, v := range x {
		clipped[i] = math.Min(math.Max(v, 0), 1)
	}
	if truth.Present() {
		metrics = inversion.Metrics(clipped, to64(truth.Features), inversion.ImageShape(env.Shape, env.Dim))
	}
	return Observed{Score: score, Metrics: metrics, Reconstruction: clipped}, nil
}

// nanMetrics is the inversion metrics of a run without a reconstruction or a sample.
func nanMetrics() []float64 {
	out := make([]float64, len(inversionMetrics))
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

func sqDist(a, b []float64) float64 {
	var s float64
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}
