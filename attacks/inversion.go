package attacks

import (
	"math"

	"github.com/fedaudit/fedaudit/runs"
)

// inversionAttack recovers the target client's input from its update through the first dense
// layer. With one sample x, K local steps change the first layer's weight by (sum_k d_k) x^T and
// its bias by sum_k d_k (d_k the step's back-propagated error times minus the step size): the
// weight update is rank one, and every row j gives x = dW_j / db_j. Under noise the
// least-squares solution over all rows, x = dW^T db / (db^T db), weighs rows by their signal.
// With more samples it returns a mixture of them, weighted by their errors.
//
// Its score is ||x^ - epsilon'||^2 - ||x^ - epsilon||^2 (or -||x^ - epsilon||^2 without
// epsilon'): the reconstruction lies nearer the sample the client holds.
type inversionAttack struct{}

// Names of the reconstruction metrics, computed against the target sample of the run's world
// with the reconstruction clipped to the box [0, 1] of image data.
const (
	MetricMSE  = "inversion_mse"
	MetricPSNR = "inversion_psnr"
	MetricSSIM = "inversion_ssim"
	MetricL2   = "inversion_l2"
)

func (inversionAttack) Info() Info {
	return Info{Name: "inversion", Threat: runs.ThreatUploads,
		Needs:   Needs{Upload: true, Target: true, Model: true, Classes: true},
		Metrics: []string{MetricMSE, MetricPSNR, MetricSSIM, MetricL2},
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
	x := analyticInversion(env.model, u)
	if x == nil {
		return Observed{}, errMissing
	}
	eps := to64(env.Target.Features)
	score := -sqDist(x, eps)
	if env.TargetPrime.Present() {
		score += sqDist(x, to64(env.TargetPrime.Features))
	}
	metrics := []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	truth := env.Target
	if obs.World == runs.WorldCPrime {
		truth = env.TargetPrime
	}
	if truth.Present() {
		clipped := make([]float64, len(x))
		for i, v := range x {
			clipped[i] = math.Min(math.Max(v, 0), 1)
		}
		ref := to64(truth.Features)
		mse := sqDist(clipped, ref) / float64(len(ref))
		metrics = []float64{mse, psnr(mse, 1), ssimGlobal(clipped, ref, 1), math.Sqrt(sqDist(clipped, ref))}
	}
	return Observed{Score: score, Metrics: metrics}, nil
}

// analyticInversion returns x = dW^T db / (db^T db) for the first layer of update u, or nil
// when the bias did not move.
func analyticInversion(m *hostModel, u []float64) []float64 {
	woff, boff, rows, in := m.firstLayer()
	db := u[boff : boff+rows]
	var bb float64
	for _, v := range db {
		bb += v * v
	}
	if !(bb > 0) || math.IsInf(bb, 0) {
		return nil
	}
	x := make([]float64, in)
	for j, b := range db {
		row := u[woff+j*in : woff+(j+1)*in]
		for i, v := range row {
			x[i] += b * v
		}
	}
	for i := range x {
		x[i] /= bb
	}
	return x
}

func sqDist(a, b []float64) float64 {
	var s float64
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}

// psnr is the peak signal-to-noise ratio in dB of a mean squared error for data of range peak:
// 10 log10(peak^2 / mse); +Inf for an exact reconstruction.
func psnr(mse, peak float64) float64 {
	return 10 * math.Log10(peak*peak/mse)
}

// ssimGlobal is the structural similarity of Wang et al. (2004) computed over the whole vector
// as a single window (no Gaussian windowing), with their constants C1 = (0.01 L)^2 and
// C2 = (0.03 L)^2 for data range L:
//
//	SSIM = (2 mu_a mu_b + C1)(2 cov_ab + C2) / ((mu_a^2 + mu_b^2 + C1)(var_a + var_b + C2))
//
// with population (1/n) moments. It equals 1 only for identical inputs.
func ssimGlobal(a, b []float64, L float64) float64 {
	n := float64(len(a))
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= n
	mb /= n
	var va, vb, cov float64
	for i := range a {
		da, db := a[i]-ma, b[i]-mb
		va += da * da
		vb += db * db
		cov += da * db
	}
	va /= n
	vb /= n
	cov /= n
	c1, c2 := (0.01*L)*(0.01*L), (0.03*L)*(0.03*L)
	return (2*ma*mb + c1) * (2*cov + c2) / ((ma*ma + mb*mb + c1) * (va + vb + c2))
}
