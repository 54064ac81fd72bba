package train

import (
	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/train/noise"
)

// streamServer is the client slot of the DP-FedAvg server's noise.
const streamServer = 0xFFFFFFFE

// serverStreams is the server noise's one stream, for compute.NoiseSampler.SumNoise.
var serverStreams = []uint32{streamServer}

// mechanism returns the configured mechanism ("" is Gaussian): the distribution of the noise
// added to uploads (Noisy-FedAvg, FedProx) or to the server's sum of clipped updates (the
// DP-FedAvg family).
func (c *Config) mechanism() algo.Mechanism { return c.Mechanism.OrGaussian() }

// NoiseOf is the noise distribution of the configured mechanism with standard deviation std
// (noise.Of with the configuration's mechanism and staircase shape).
func (c *Config) NoiseOf(std float64) (accounting.Noise, error) {
	return noise.Of(c.Mechanism, std, c.StaircaseEpsilon, c.StaircaseGamma)
}

// sampler returns the backend's noise sampler and dist in its terms, when it has one.
func (e *engine) sampler(dist accounting.Noise) (compute.NoiseSampler, compute.NoiseDist, bool) {
	ns, ok := e.be.(compute.NoiseSampler)
	if !ok {
		return nil, compute.NoiseDist{}, false
	}
	nd, ok := noise.SamplerDist(dist)
	return ns, nd, ok
}

// addNoise adds scale[r] times unit-variance noise of the configured mechanism, drawn from
// the stream (replica seed, t, stream), to every replica r of dst: the Gaussian stream of
// AddGaussian, or the exact samplers' draws, on the backend when it is a
// compute.NoiseSampler (the same bits), else drawn on the host and uploaded.
func (e *engine) addNoise(dst compute.Buffer, t int, stream uint32, scale []float32) error {
	if e.cfg.mechanism() == algo.Gaussian {
		e.be.AddGaussian(e.all(dst), e.seeds, scale, uint32(t), stream)
		return nil
	}
	dist, err := e.cfg.NoiseOf(1)
	if err != nil {
		return err
	}
	if ns, nd, ok := e.sampler(dist); ok {
		ns.AddNoise(e.all(dst), nd, e.seeds, scale, uint32(t), stream)
		return nil
	}
	unit, host := make([]float32, e.d), make([]float32, e.d)
	for p := 0; p < e.P; p++ {
		clear(unit)
		noise.AddHost(unit, dist, e.seeds[2*p], uint32(t), stream, 1)
		for r := 2 * p; r < 2*p+2; r++ {
			for j, v := range unit {
				host[j] = scale[r] * v
			}
			e.be.Upload(e.hostTmp(), r*e.pitch, host)
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
	if ns, nd, ok := e.sampler(dist); ok {
		// Streams 0..m-1, replica r using client i's when its pair's round includes i.
		if e.use == nil {
			e.use = make([]bool, e.R*e.m)
			e.streams = make([]uint32, e.m)
			for i := range e.streams {
				e.streams[i] = uint32(i)
			}
		}
		for r := 0; r < e.R; r++ {
			copy(e.use[r*e.m:(r+1)*e.m], e.part[(r/2)*e.m:(r/2+1)*e.m])
		}
		ns.SumNoise(e.all(e.noise), nd, e.seeds, e.streams, e.use, scale, uint32(t))
		return nil
	}
	sum := make([]float32, e.d)
	for p := 0; p < e.P; p++ {
		clear(sum)
		for i := 0; i < e.m; i++ {
			if e.part[p*e.m+i] {
				noise.AddHost(sum, dist, e.seeds[2*p], uint32(t), uint32(i), 1)
			}
		}
		for j := range sum {
			sum[j] *= scale
		}
		e.be.Upload(e.noise, 2*p*e.pitch, sum)
		e.be.Upload(e.noise, (2*p+1)*e.pitch, sum)
	}
	return nil
}

// hostTmp returns e.tmp, allocating it on first use.
func (e *engine) hostTmp() compute.Buffer {
	if e.tmp == nil {
		e.tmp = e.be.Alloc(e.R * e.pitch)
	}
	return e.tmp
}
