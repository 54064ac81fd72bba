package train

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/accounting"
)

// Mechanism names: the distribution of the noise added to uploads (Noisy-FedAvg, FedProx) or to
// the server's sum of clipped updates (the DP-FedAvg family).
const (
	MechGaussian  = "gaussian"
	MechLaplace   = "laplace"
	MechStaircase = "staircase"
)

// domainMechanism separates the uniforms of the non-Gaussian mechanisms from every other use of
// a run's key; domainClientSampling the Poisson client sampling of the DP-FedAvg family.
const (
	domainMechanism      = 6
	domainClientSampling = 7
)

// streamServer is the client slot of the DP-FedAvg server's noise.
const streamServer = 0xFFFFFFFE

// mechanism returns the configured mechanism's name ("" is Gaussian).
func (c *Config) mechanism() string {
	if c.Mechanism == "" {
		return MechGaussian
	}
	return c.Mechanism
}

// NoiseOf is the noise distribution of the configured mechanism with standard deviation std:
// every mechanism is scaled to the same variance, so switching mechanisms changes only the
// shape of the noise. Laplace has scale std/sqrt(2); the staircase has epsilon
// StaircaseEpsilon, gamma StaircaseGamma (0: Geng and Viswanath's optimal gamma*) and the step
// width Delta that gives variance std^2 (the variance is Delta^2 times a function of epsilon
// and gamma).
func (c *Config) NoiseOf(std float64) (accounting.Noise, error) {
	switch c.mechanism() {
	case MechGaussian:
		return accounting.NewGaussian(std)
	case MechLaplace:
		return accounting.NewLaplace(std / math.Sqrt2)
	case MechStaircase:
		eps, gamma := c.StaircaseEpsilon, c.StaircaseGamma
		if gamma == 0 {
			gamma = accounting.OptimalStaircaseGamma(eps)
		}
		unit, err := accounting.NewStaircase(eps, 1, gamma)
		if err != nil {
			return nil, fmt.Errorf("config: staircase_epsilon, staircase_gamma: %w", err)
		}
		return accounting.NewStaircase(eps, std/math.Sqrt(unit.Variance()), gamma)
	}
	return nil, fmt.Errorf("config: mechanism: %q is not gaussian, laplace or staircase", c.Mechanism)
}

// philoxUniforms is the uniform source of the exact samplers: 53-bit uniforms on (0, 1), two
// per Philox block of the counter (n, round, stream, domainMechanism), so a draw is a pure
// function of (seed, round, stream, position) like the Gaussian stream.
type philoxUniforms struct {
	key           [2]uint32
	round, stream uint32
	n             uint32
	buf           [4]uint32
	have          int
}

func newPhiloxUniforms(seed uint64, round, stream uint32) *philoxUniforms {
	return &philoxUniforms{key: keyOf(seed), round: round, stream: stream}
}

// Float64 implements accounting.Uniform: (k + 1/2) / 2^53 for a uniform 53-bit k, never 0 or 1.
func (u *philoxUniforms) Float64() float64 {
	if u.have == 0 {
		u.buf = philox4x32([4]uint32{u.n, u.round, u.stream, domainMechanism << 24}, u.key)
		u.n++
		u.have = 4
	}
	u.have -= 2
	k := (uint64(u.buf[u.have])<<32 | uint64(u.buf[u.have+1])) >> 11
	return (float64(k) + 0.5) * (1.0 / (1 << 53))
}

// AddNoiseHost adds scale times len(dst) independent draws of noise (taken in order from the
// stream (seed, round, stream)) to dst. It is the host reference of the non-Gaussian
// mechanisms; both worlds of a pair share the seed and so the noise.
func AddNoiseHost(dst []float32, noise accounting.Noise, seed uint64, round, stream uint32, scale float64) {
	src := newPhiloxUniforms(seed, round, stream)
	for i := range dst {
		dst[i] += float32(scale * accounting.Draw(noise, src))
	}
}

// addNoise adds scale[r] times unit-variance noise of the configured mechanism, drawn from
// the stream (replica seed, t, stream), to every replica r of dst: the Gaussian stream of
// AddGaussian, or host draws of the exact samplers.
func (e *engine) addNoise(dst Buffer, t int, stream uint32, scale []float32) error {
	if e.cfg.mechanism() == MechGaussian {
		e.be.AddGaussian(e.all(dst), e.seeds, scale, uint32(t), stream)
		return nil
	}
	dist, err := e.cfg.NoiseOf(1)
	if err != nil {
		return err
	}
	unit, host := make([]float32, e.d), make([]float32, e.d)
	for p := 0; p < e.P; p++ {
		clear(unit)
		AddNoiseHost(unit, dist, e.seeds[2*p], uint32(t), stream, 1)
		for r := 2 * p; r < 2*p+2; r++ {
			for j, v := range unit {
				host[j] = scale[r] * v
			}
			e.be.Upload(e.hostTmp(), r*e.d, host)
		}
	}
	e.be.Axpby(1, e.all(e.tmp), 1, e.all(dst), nil)
	return nil
}

// addParticipantNoise writes into e.noise, for every pair, scale times the sum of the unit
// noise of every client taking part in round t, each from its own stream (client i's is
// (seed, t, i), the stream its recorded upload uses).
func (e *engine) addParticipantNoise(t int, scale float32) error {
	dist, err := e.cfg.NoiseOf(1)
	if err != nil {
		return err
	}
	sum := make([]float32, e.d)
	for p := 0; p < e.P; p++ {
		clear(sum)
		for i := 0; i < e.m; i++ {
			if e.part[p*e.m+i] {
				AddNoiseHost(sum, dist, e.seeds[2*p], uint32(t), uint32(i), 1)
			}
		}
		for j := range sum {
			sum[j] *= scale
		}
		e.be.Upload(e.noise, 2*p*e.d, sum)
		e.be.Upload(e.noise, (2*p+1)*e.d, sum)
	}
	return nil
}

// hostTmp returns e.tmp, allocating it on first use.
func (e *engine) hostTmp() Buffer {
	if e.tmp == nil {
		e.tmp = e.be.Alloc(e.R * e.d)
	}
	return e.tmp
}
