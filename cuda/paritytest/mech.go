package paritytest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/noise"
)

// mechCase is a non-Gaussian mechanism with its host sampler and the backend's parameters.
type mechCase struct {
	name string
	host accounting.Noise
	dist compute.NoiseDist
}

// mechCases: Laplace, and the staircase at small and large epsilon (many steps, few steps) with
// the optimal gamma, gamma 0 and gamma 1 (a single part per step).
func mechCases(t *testing.T) []mechCase {
	t.Helper()
	var cs []mechCase
	lap, err := accounting.NewLaplace(0.7)
	if err != nil {
		t.Fatal(err)
	}
	cs = append(cs, mechCase{"laplace", lap, compute.NoiseDist{Kind: compute.LaplaceNoise, Scale: lap.Scale()}})
	for _, p := range []struct{ eps, delta, gamma float64 }{
		{0.3, 1.1, accounting.OptimalStaircaseGamma(0.3)}, {3, 0.4, accounting.OptimalStaircaseGamma(3)}, {1, 1, 0}, {1, 2, 1},
	} {
		s, err := accounting.NewStaircase(p.eps, p.delta, p.gamma)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, mechCase{fmt.Sprintf("staircase-eps%g-gamma%.3g", p.eps, p.gamma), s,
			compute.NoiseDist{Kind: compute.StaircaseNoise, Epsilon: s.Epsilon(), Delta: s.Sensitivity(), Gamma: s.Gamma(), Inner: s.InnerProbability()}})
	}
	return cs
}

// The device samplers of the Laplace and staircase mechanisms (compute.NoiseSampler) against
// the host's (noise.AddHost, accounting's FromUniforms over philox.Uniforms): the same
// uniforms, the same double operations in the same order (Go's amd64 logarithm ported
// operation by operation) and the same roundings, so every value must be equal bit for bit,
// for AddNoise (into nonzero rows, per-replica scales, pairs sharing a seed, strided rows) and
// SumNoise (over streams with per-pair participation, and the server's single stream).
func testMechNoise(t *testing.T, f Factory) {
	for _, o := range launchConfigs {
		for _, mc := range mechCases(t) {
			t.Run(cfgName(o)+"/"+mc.name, func(t *testing.T) {
				w := newTwin(t, f, o)
				ns, ok := w.ops.(compute.NoiseSampler)
				if !ok {
					t.Skip("the backend draws no mechanism noise")
				}
				const R, cols, round = 5, 1031, 6
				const stride = cols + 9
				seeds := make([]uint64, R)
				scale := make([]float32, R)
				for r := range seeds {
					seeds[r] = train.RunSeed(42, r/2) // pairs share a seed; the last replica is alone
					scale[r] = float32(0.5 + 0.25*float64(r))
				}
				init := make([]float32, R*stride)
				for i := range init {
					init[i] = float32(math.Sin(float64(i)))
				}
				rows := compute.Mat{Rows: 1, Cols: cols, Stride: cols, Batch: R, BatchStride: stride}

				// AddNoise: host reference row by row, as train's host path computes it.
				dst := w.buf(len(init), func(i int) float32 { return init[i] })
				ns.AddNoise(w.mat(dst, rows)[1], mc.dist, seeds, scale, round, 77)
				_, got := w.get(dst)
				want := slices.Clone(init)
				unit := make([]float32, cols)
				for r := 0; r < R; r++ {
					clear(unit)
					noise.AddHost(unit, mc.host, seeds[r], round, 77, 1)
					for j, v := range unit {
						want[r*stride+j] += scale[r] * v
					}
				}
				sameBitsF32(t, "AddNoise", got, want)

				// SumNoise over three streams with participation per pair, and over one.
				streams := []uint32{0, 3, 0xFFFFFFFE}
				use := make([]bool, R*len(streams))
				for r := 0; r < R; r++ {
					for k := range streams {
						use[r*len(streams)+k] = (r/2+k)%3 != 0
					}
				}
				// The second pair's replicas (one seed) take part in different streams: the
				// kernel must draw each its own sum, not share the pair's.
				use[3*len(streams)] = !use[3*len(streams)]
				for _, sc := range []struct {
					name    string
					streams []uint32
					use     []bool
					total   float32
				}{{"participants", streams, use, 0.37}, {"server", streams[2:], nil, 1}} {
					dst := w.buf(len(init), func(i int) float32 { return init[i] })
					ns.SumNoise(w.mat(dst, rows)[1], mc.dist, seeds, sc.streams, sc.use, sc.total, round)
					_, got := w.get(dst)
					want := slices.Clone(init)
					for r := 0; r < R; r++ {
						sum := make([]float32, cols)
						for k, s := range sc.streams {
							if sc.use == nil || sc.use[r*len(sc.streams)+k] {
								noise.AddHost(sum, mc.host, seeds[r], round, s, 1)
							}
						}
						for j := range sum {
							want[r*stride+j] = sum[j] * sc.total
						}
					}
					sameBitsF32(t, "SumNoise "+sc.name, got, want)
				}
				if err := w.ops.Err(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// sameBitsF32 fails unless got and want are equal bit for bit.
func sameBitsF32(t *testing.T, what string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 3 {
				t.Errorf("%s: element %d: kernels %v (%08x), host %v (%08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}

// The device draws have the mechanism's distribution: 200,000 draws of one row (the float32
// values, as the engine uses them) against accounting's exact CDF by the Kolmogorov-Smirnov
// statistic, which must stay below its 0.1% critical value 1.9495 / sqrt(n); and the draws of
// 4000 seeds' first coordinates (the noise of different pairs) likewise against the CDF. A
// wrong scale fails the first: a Laplace scale 3% too large gives D = 0.0061 against the
// threshold 0.0044 (measured); the second catches draws that depend on the seed wrongly.
func testMechNoiseKS(t *testing.T, f Factory) {
	for _, mc := range mechCases(t) {
		t.Run(mc.name, func(t *testing.T) {
			ops := f(t, cuda.Options{})
			defer ops.Close()
			ns, ok := ops.(compute.NoiseSampler)
			if !ok {
				t.Skip("the backend draws no mechanism noise")
			}
			const n = 200000
			buf := ops.Alloc(n)
			ns.AddNoise(compute.Mat{Buf: buf, Rows: 1, Cols: n, Stride: n, Batch: 1}, mc.dist, []uint64{train.RunSeed(5, 0)}, []float32{1}, 2, 3)
			x := make([]float32, n)
			ops.Download(x, buf, 0)
			if err := ops.Err(); err != nil {
				t.Fatal(err)
			}
			if d, crit := ksStatistic(x, mc.host.CDF), 1.9495/math.Sqrt(n); !(d < crit) {
				t.Errorf("one stream: Kolmogorov-Smirnov D = %.5f, above the 0.1%% critical value %.5f", d, crit)
			} else {
				t.Logf("one stream: D = %.5f (critical %.5f)", d, crit)
			}
			// Across seeds: coordinate 0 of 4000 pairs' streams.
			const pairs = 4000
			seeds := make([]uint64, pairs)
			for p := range seeds {
				seeds[p] = train.RunSeed(11, p)
			}
			col := ops.Alloc(pairs)
			ns.SumNoise(compute.Mat{Buf: col, Rows: 1, Cols: 1, Stride: 1, Batch: pairs, BatchStride: 1}, mc.dist, seeds, []uint32{9}, nil, 1, 4)
			y := make([]float32, pairs)
			ops.Download(y, col, 0)
			if d, crit := ksStatistic(y, mc.host.CDF), 1.9495/math.Sqrt(pairs); !(d < crit) {
				t.Errorf("across seeds: Kolmogorov-Smirnov D = %.5f, above the 0.1%% critical value %.5f", d, crit)
			} else {
				t.Logf("across seeds: D = %.5f (critical %.5f)", d, crit)
			}
		})
	}
}

// ksStatistic is sup |F_n - F| of the sample against cdf.
func ksStatistic(x []float32, cdf func(float64) float64) float64 {
	v := make([]float64, len(x))
	for i, s := range x {
		v[i] = float64(s)
	}
	slices.Sort(v)
	n := float64(len(v))
	var d float64
	for i, s := range v {
		c := cdf(s)
		d = max(d, float64(i+1)/n-c, c-float64(i)/n)
	}
	return d
}
