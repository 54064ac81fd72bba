package accounting

import (
	"errors"
	"fmt"
	"math"
)

// Uniform is a source of independent uniforms on the open interval (0, 1). The samplers
// nudge a value of exactly 0 or 1 (which some generators return) just inside the interval,
// which moves at most 2^-53 of probability.
type Uniform interface {
	Float64() float64
}

// Noise is an additive noise mechanism's distribution, sampled exactly from a fixed number
// of uniforms per draw.
type Noise interface {
	// UniformsPerDraw is how many uniforms FromUniforms consumes.
	UniformsPerDraw() int
	// FromUniforms maps UniformsPerDraw uniforms in (0, 1) to one draw.
	FromUniforms(u []float64) float64
	// CDF is the exact distribution function.
	CDF(x float64) float64
	// Variance is the exact variance.
	Variance() float64
}

// maxUniforms bounds UniformsPerDraw over the mechanisms of this package, so Draw can keep
// its buffer on the stack.
const maxUniforms = 4

// Draw takes UniformsPerDraw uniforms from src and returns one draw of n.
func Draw(n Noise, src Uniform) float64 {
	var buf [maxUniforms]float64
	k := n.UniformsPerDraw()
	u := buf[:k]
	for i := range u {
		u[i] = src.Float64()
	}
	return n.FromUniforms(u)
}

// open maps u into (0, 1): the samplers take logarithms of u and of 1-u.
func open(u float64) float64 {
	const lo = 0x1p-64
	const hi = 1 - 0x1p-53
	switch {
	case !(u > lo): // also NaN
		return lo
	case u > hi:
		return hi
	}
	return u
}

// Gaussian is N(0, Sigma^2), sampled by the Box-Muller transform (two uniforms per draw;
// only the cosine branch is used so that every draw costs the same).
type Gaussian struct {
	sigma float64
}

// NewGaussian returns N(0, sigma^2).
func NewGaussian(sigma float64) (Gaussian, error) {
	if !(sigma > 0) || math.IsInf(sigma, 1) {
		return Gaussian{}, fmt.Errorf("gaussian: sigma %v must be positive and finite", sigma)
	}
	return Gaussian{sigma: sigma}, nil
}

// Sigma is the standard deviation.
func (g Gaussian) Sigma() float64 { return g.sigma }

// UniformsPerDraw implements Noise.
func (Gaussian) UniformsPerDraw() int { return 2 }

// FromUniforms implements Noise: sigma sqrt(-2 log u0) cos(2 pi u1).
func (g Gaussian) FromUniforms(u []float64) float64 {
	r := math.Sqrt(-2 * math.Log(open(u[0])))
	return g.sigma * r * math.Cos(2*math.Pi*open(u[1]))
}

// CDF implements Noise.
func (g Gaussian) CDF(x float64) float64 {
	return 0.5 * math.Erfc(-x/(g.sigma*math.Sqrt2))
}

// Variance implements Noise.
func (g Gaussian) Variance() float64 { return g.sigma * g.sigma }

// Laplace is the Laplace distribution with density exp(-|x|/b)/(2b), sampled by inversion
// of its CDF (one uniform per draw).
type Laplace struct {
	scale float64
}

// NewLaplace returns the Laplace distribution of scale b.
func NewLaplace(scale float64) (Laplace, error) {
	if !(scale > 0) || math.IsInf(scale, 1) {
		return Laplace{}, fmt.Errorf("laplace: scale %v must be positive and finite", scale)
	}
	return Laplace{scale: scale}, nil
}

// Scale is b.
func (l Laplace) Scale() float64 { return l.scale }

// UniformsPerDraw implements Noise.
func (Laplace) UniformsPerDraw() int { return 1 }

// FromUniforms implements Noise. Each half of (0, 1) is inverted separately so that the
// argument of the logarithm, 2u or 2(1-u), is computed without cancellation.
func (l Laplace) FromUniforms(u []float64) float64 {
	v := open(u[0])
	if v < 0.5 {
		return l.scale * math.Log(2*v)
	}
	return -l.scale * math.Log(2*(1-v))
}

// CDF implements Noise.
func (l Laplace) CDF(x float64) float64 {
	if x < 0 {
		return 0.5 * math.Exp(x/l.scale)
	}
	return 1 - 0.5*math.Exp(-x/l.scale)
}

// Variance implements Noise.
func (l Laplace) Variance() float64 { return 2 * l.scale * l.scale }

// Staircase is the staircase distribution of Geng and Viswanath (2016) for an
// epsilon-DP query of sensitivity Delta, with step parameter gamma in [0, 1]. With
// b = exp(-epsilon) its density is symmetric and, for x >= 0 in the k-th step
// [k Delta, (k+1) Delta),
//
//	f(x) = a b^k       for x - k Delta <  gamma Delta,
//	f(x) = a b^(k+1)   for x - k Delta >= gamma Delta,
//
// with a = (1-b) / (2 Delta (gamma + (1-gamma) b)). It is sampled from four uniforms: the
// sign, the step k (geometric, P(k) = (1-b) b^k), which part of the step (the inner part
// [0, gamma Delta) with probability gamma / (gamma + (1-gamma) b)) and the position inside
// that part (uniform). docs/accounting.md derives this.
type Staircase struct {
	eps, delta, gamma float64
	b                 float64 // exp(-eps)
	a                 float64 // density on the central step
	pInner            float64 // P(inner part of a step)
}

// NewStaircase returns the staircase distribution for privacy epsilon, sensitivity delta
// and step parameter gamma in [0, 1].
func NewStaircase(epsilon, sensitivity, gamma float64) (Staircase, error) {
	switch {
	case !(epsilon > 0) || math.IsInf(epsilon, 1):
		return Staircase{}, fmt.Errorf("staircase: epsilon %v must be positive and finite", epsilon)
	case !(sensitivity > 0) || math.IsInf(sensitivity, 1):
		return Staircase{}, fmt.Errorf("staircase: sensitivity %v must be positive and finite", sensitivity)
	case !(gamma >= 0 && gamma <= 1):
		return Staircase{}, fmt.Errorf("staircase: gamma %v must lie in [0, 1]", gamma)
	}
	b := math.Exp(-epsilon)
	mass := gamma + (1-gamma)*b
	return Staircase{
		eps: epsilon, delta: sensitivity, gamma: gamma, b: b,
		a:      -math.Expm1(-epsilon) / (2 * sensitivity * mass),
		pInner: gamma / mass,
	}, nil
}

// OptimalStaircaseGamma is the gamma that minimises E|X| (the L1 cost) of the staircase
// distribution for privacy epsilon: 1/(1 + exp(epsilon/2)) (Geng and Viswanath 2016,
// Theorem 7; UDP-FL Lemma 1).
func OptimalStaircaseGamma(epsilon float64) float64 {
	return 1 / (1 + math.Exp(epsilon/2))
}

// Epsilon, Sensitivity and Gamma are the parameters.
func (s Staircase) Epsilon() float64     { return s.eps }
func (s Staircase) Sensitivity() float64 { return s.delta }
func (s Staircase) Gamma() float64       { return s.gamma }

// InnerProbability is the probability that a draw lies in the inner part [0, gamma Delta) of
// its step, gamma / (gamma + (1-gamma) exp(-epsilon)): what FromUniforms compares u[2] with
// (for samplers outside this package that must draw the same values).
func (s Staircase) InnerProbability() float64 { return s.pInner }

// UniformsPerDraw implements Noise.
func (Staircase) UniformsPerDraw() int { return 4 }

// FromUniforms implements Noise. u[0] gives the sign, u[1] the step by inversion of the
// geometric law (P(k >= j) = b^j, so k = floor(log u / log b)), u[2] the part of the step
// and u[3] the position in it.
func (s Staircase) FromUniforms(u []float64) float64 {
	k := math.Floor(-math.Log(open(u[1])) / s.eps)
	w := open(u[3])
	var x float64
	if open(u[2]) < s.pInner {
		x = (k + s.gamma*w) * s.delta
	} else {
		x = (k + s.gamma + (1-s.gamma)*w) * s.delta
	}
	if open(u[0]) < 0.5 {
		return -x
	}
	return x
}

// Density is the staircase density at x.
func (s Staircase) Density(x float64) float64 {
	k, r := s.step(math.Abs(x))
	d := s.a * math.Pow(s.b, k)
	if r >= s.gamma*s.delta {
		d *= s.b
	}
	return d
}

// step splits |x| into the step index k and the offset r in [0, Delta).
func (s Staircase) step(ax float64) (k, r float64) {
	k = math.Floor(ax / s.delta)
	r = ax - k*s.delta
	if r < 0 { // rounding of k*delta
		r = 0
	}
	return k, r
}

// CDF implements Noise. The mass of the steps before k is (1 - b^k)/2, each side.
func (s Staircase) CDF(x float64) float64 {
	if math.IsInf(x, 0) {
		if x > 0 {
			return 1
		}
		return 0
	}
	k, r := s.step(math.Abs(x))
	bk := math.Pow(s.b, k)
	var in float64 // integral over [k Delta, |x|]
	if r < s.gamma*s.delta {
		in = s.a * bk * r
	} else {
		in = s.a * bk * (s.gamma*s.delta + s.b*(r-s.gamma*s.delta))
	}
	upper := 0.5*(1-bk) + in // P(0 <= X <= |x|)
	if x < 0 {
		return 0.5 - upper
	}
	return 0.5 + upper
}

// Variance implements Noise. With X = Delta (k + W) on the positive side, k geometric and
// W the position within the step (independent of k),
// E X^2 = Delta^2 (E k^2 + 2 E k E W + E W^2), E k = b/(1-b), E k^2 = b(1+b)/(1-b)^2,
// E W = p gamma/2 + (1-p)(1+gamma)/2 and E W^2 = p gamma^2/3 + (1-p)(1+gamma+gamma^2)/3
// with p = P(inner part).
func (s Staircase) Variance() float64 {
	ek, ek2 := s.geometricMoments()
	ew, ew2 := s.positionMoments()
	return s.delta * s.delta * (ek2 + 2*ek*ew + ew2)
}

// MeanAbs is E|X| = Delta (E k + E W); at the optimal gamma it equals
// Delta exp(epsilon/2) / (exp(epsilon) - 1) (Geng and Viswanath 2016).
func (s Staircase) MeanAbs() float64 {
	ek, _ := s.geometricMoments()
	ew, _ := s.positionMoments()
	return s.delta * (ek + ew)
}

func (s Staircase) geometricMoments() (ek, ek2 float64) {
	omb := -math.Expm1(-s.eps) // 1-b without cancellation for small epsilon
	return s.b / omb, s.b * (1 + s.b) / (omb * omb)
}

func (s Staircase) positionMoments() (ew, ew2 float64) {
	p, g := s.pInner, s.gamma
	return p*g/2 + (1-p)*(1+g)/2, p*g*g/3 + (1-p)*(1+g+g*g)/3
}

// errNoSolution reports a calibration whose target cannot be met inside the search range.
var errNoSolution = errors.New("no parameter in the search range meets the target")
