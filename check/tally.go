package check

import (
	"fmt"
	"github.com/fedaudit/fedaudit/findings"
	"math"
)

// adSample is how many residuals of one tensor the shape test keeps: Anderson-Darling on 5,000
// values sees a departure from normality of a few percent in the tails, and sorting them costs
// nothing beside the replay.
const adSample = 5000

// noiseTally accumulates what one observer (the global model or the target's uploads) saw of the
// noise in one tensor, over the pairs and rounds checked: the residuals standardized by the
// declared noise, their moments, the products of consecutive rounds' residuals and a
// deterministic sample for the shape test.
type noiseTally struct {
	observer, tensor string
	sigma            float64 // the declared standard deviation of one residual coordinate

	n          int     // coordinates seen
	sum, sumSq float64 // of x / sigma
	// The independence test: for consecutive rounds of one run, s_t = <u_t, u_{t-1}> / |u_{t-1}|
	// with u the standardized residuals. Given every earlier round, s_t is exactly N(0, 1) when
	// u_t is fresh noise, so the s_t are independent N(0, 1) and their sum over lagN lags is
	// N(0, lagN): an exact test at any tensor size (the normal approximation of a sum of
	// products is not, in the far tail where the family's threshold lies). cosSum adds up the
	// cosines of consecutive residuals, the statistic shown.
	lagSum, cosSum float64
	lagN           int
	stride         int // keep every stride-th coordinate for the shape test
	sample         []float64
}

func newNoiseTally(observer, tensor string, sigma float64, expected int) *noiseTally {
	return &noiseTally{observer: observer, tensor: tensor, sigma: sigma, stride: max(1, (expected+adSample-1)/adSample)}
}

// add takes one round's residual x (this tensor's coordinates) and, when prev is not nil, the
// same run's residual of the round before.
func (t *noiseTally) add(x, prev []float32) {
	inv := 1 / t.sigma
	for _, v := range x {
		u := float64(v) * inv
		t.sum += u
		t.sumSq += u * u
		if t.n%t.stride == 0 {
			t.sample = append(t.sample, u)
		}
		t.n++
	}
	if prev != nil {
		var dot, pp, xx float64
		for i, v := range x {
			a, b := float64(v)*inv, float64(prev[i])*inv
			dot += a * b
			pp += b * b
			xx += a * a
		}
		if pp > 0 && xx > 0 {
			t.lagSum += dot / math.Sqrt(pp)
			t.cosSum += dot / math.Sqrt(pp*xx)
			t.lagN++
		}
	}
}

// results are the tally's four tests. Their p-values are exact under the hypothesis that the
// residuals are independent N(0, sigma^2) draws (the shape test's to Marsaglia and Marsaglia's
// approximation).
func (t *noiseTally) results() []findings.CheckResult {
	where := t.observer + " residual"
	if t.n == 0 {
		return nil
	}
	n := float64(t.n)
	z := t.sum / math.Sqrt(n)
	ratio := t.sumSq / n
	a2, pShape := andersonDarling(append([]float64(nil), t.sample...))
	out := []findings.CheckResult{
		{Name: "noise-mean", Observer: t.observer, Tensor: t.tensor, Statistic: z, PValue: normalTwoSided(z), N: t.n,
			Meaning: fmt.Sprintf("mean of the %s over its declared standard deviation, times sqrt(n) (N(0,1) when the noise is centred): %.3g", where, z)},
		{Name: "noise-scale", Observer: t.observer, Tensor: t.tensor, Statistic: ratio, PValue: chiSquareTwoSided(t.sumSq, t.n), N: t.n,
			Meaning: fmt.Sprintf("variance of the %s over the declared one (1 when the deployment adds the noise it declares; below 1 is less noise than the claim assumes): %.4g", where, ratio)},
		{Name: "noise-shape", Observer: t.observer, Tensor: t.tensor, Statistic: a2, PValue: pShape, N: len(t.sample),
			Meaning: fmt.Sprintf("Anderson-Darling A^2 of %d standardized %ss against N(0,1): %.3g", len(t.sample), where, a2)},
	}
	if t.lagN > 0 {
		r := t.cosSum / float64(t.lagN)
		zl := t.lagSum / math.Sqrt(float64(t.lagN))
		out = append(out, findings.CheckResult{Name: "noise-independence", Observer: t.observer, Tensor: t.tensor, Statistic: r, PValue: normalTwoSided(zl), N: t.lagN,
			Meaning: fmt.Sprintf("mean cosine of one run's %ss in consecutive rounds (near 0 when every round draws fresh noise; 1 when a draw is reused): %.3g", where, r)})
	}
	return out
}
