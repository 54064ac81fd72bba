// Package noise holds the privacy noise of train's mechanisms apart from the engine: the
// distribution of each mechanism (Gaussian, Laplace, staircase) scaled to a standard
// deviation, its draws on the host from the Philox streams the backends use (the reference of
// their exact samplers), its description for a compute.NoiseSampler and its log density for
// the informed adversary's likelihood ratios.
package noise

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/philox"
)

// Of is the noise distribution of mechanism mech ("" is Gaussian) with standard deviation std:
// every mechanism is scaled to the same variance, so switching mechanisms changes only the
// shape of the noise. Laplace has scale std/sqrt(2); the staircase has epsilon eps, gamma
// gamma (0: Geng and Viswanath's optimal gamma*) and the step
// width Delta that gives variance std^2 (the variance is Delta^2 times a function of epsilon
// and gamma).
func Of(mech algo.Mechanism, std, eps, gamma float64) (accounting.Noise, error) {
	switch mech.OrGaussian() {
	case algo.Gaussian:
		return accounting.NewGaussian(std)
	case algo.Laplace:
		return accounting.NewLaplace(std / math.Sqrt2)
	case algo.Staircase:
		if gamma == 0 {
			gamma = accounting.OptimalStaircaseGamma(eps)
		}
		unit, err := accounting.NewStaircase(eps, 1, gamma)
		if err != nil {
			return nil, fmt.Errorf("config: staircase_epsilon, staircase_gamma: %w", err)
		}
		return accounting.NewStaircase(eps, std/math.Sqrt(unit.Variance()), gamma)
	}
	return nil, fmt.Errorf("config: mechanism: %q is not gaussian, laplace or staircase", mech)
}

// AddHost adds scale times len(dst) independent draws of noise (taken in order from the
// stream (seed, round, stream)) to dst. It is the host reference of the non-Gaussian
// mechanisms; both worlds of a pair share the seed and so the noise.
func AddHost(dst []float32, noise accounting.Noise, seed uint64, round, stream uint32, scale float64) {
	src := philox.NewUniforms(seed, round, stream)
	for i := range dst {
		dst[i] += float32(scale * accounting.Draw(noise, src))
	}
}

// SamplerDist is dist for a backend's compute.NoiseSampler.
func SamplerDist(dist accounting.Noise) (compute.NoiseDist, bool) {
	switch d := dist.(type) {
	case accounting.Laplace:
		return compute.NoiseDist{Kind: compute.LaplaceNoise, Scale: d.Scale()}, true
	case accounting.Staircase:
		return compute.NoiseDist{Kind: compute.StaircaseNoise, Epsilon: d.Epsilon(), Delta: d.Sensitivity(), Gamma: d.Gamma(), Inner: d.InnerProbability()}, true
	}
	return compute.NoiseDist{}, false
}

// LogDensity is the log density (up to a constant) of one coordinate of a non-Gaussian
// mechanism's noise dist; false for any other distribution.
func LogDensity(dist accounting.Noise) (func(float64) float64, bool) {
	switch d := dist.(type) {
	case accounting.Laplace:
		b := d.Scale()
		return func(x float64) float64 { return -math.Abs(x) / b }, true
	case accounting.Staircase:
		// log a - epsilon (k + [outer part]) in step k: the density a b^k underflows to 0
		// beyond about 745/epsilon steps, and its logarithm must stay finite there (a ratio
		// log f(y - u) - log f(y) of two -Inf is NaN). Where the density is a normal float64
		// its logarithm is used as it is.
		logA := math.Log(d.Density(0))
		delta, inner := d.Sensitivity(), d.Gamma()*d.Sensitivity()
		return func(x float64) float64 {
			if p := d.Density(x); p >= 0x1p-1022 {
				return math.Log(p)
			}
			ax := math.Abs(x)
			k := math.Floor(ax / delta)
			if max(ax-k*delta, 0) >= inner { // the outer part, as Density splits |x|
				k++
			}
			return logA - d.Epsilon()*k
		}, true
	}
	return nil, false
}
