package accounting

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// openUniform draws from (0, 1) with 53 random bits, centred in their cell.
type openUniform struct{ r *rand.Rand }

func newOpenUniform(seed uint64) openUniform {
	return openUniform{rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

func (o openUniform) Float64() float64 {
	return (float64(o.r.Uint64()>>11) + 0.5) * 0x1p-53
}

// ksCritical is the Kolmogorov critical value for sqrt(n) D at level 1e-3
// (P(K > 1.9495) = 0.001 asymptotically; for n = 1e5 the finite-n correction is below 1%).
// Each KS assertion below therefore fails by chance with probability about 1e-3 for a
// fresh seed; the seeds are fixed, so the tests are deterministic.
const ksCritical = 1.9495

// ksStatistic is sup |F_n - F| of the sample against cdf.
func ksStatistic(sample []float64, cdf func(float64) float64) float64 {
	x := slices.Clone(sample)
	slices.Sort(x)
	n := float64(len(x))
	d := 0.0
	for i, v := range x {
		f := cdf(v)
		d = math.Max(d, math.Max(float64(i+1)/n-f, f-float64(i)/n))
	}
	return d
}

func drawMany(n Noise, src Uniform, count int) []float64 {
	out := make([]float64, count)
	for i := range out {
		out[i] = Draw(n, src)
	}
	return out
}

func mustNoise(t *testing.T, n Noise, err error) Noise {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func noiseCases(t *testing.T) []struct {
	name string
	n    Noise
} {
	g1, e1 := NewGaussian(1)
	g2, e2 := NewGaussian(0.37)
	l1, e3 := NewLaplace(1)
	l2, e4 := NewLaplace(4.5)
	s1, e5 := NewStaircase(1, 1, OptimalStaircaseGamma(1))
	s2, e6 := NewStaircase(0.1, 2, OptimalStaircaseGamma(0.1))
	s3, e7 := NewStaircase(5, 0.5, 0.3)
	s4, e8 := NewStaircase(2, 1, 0.9)
	s5, e9 := NewStaircase(0.5, 1, 0)
	return []struct {
		name string
		n    Noise
	}{
		{"gauss1", mustNoise(t, g1, e1)},
		{"gauss0.37", mustNoise(t, g2, e2)},
		{"laplace1", mustNoise(t, l1, e3)},
		{"laplace4.5", mustNoise(t, l2, e4)},
		{"stair eps1 opt", mustNoise(t, s1, e5)},
		{"stair eps0.1 opt", mustNoise(t, s2, e6)},
		{"stair eps5 g0.3", mustNoise(t, s3, e7)},
		{"stair eps2 g0.9", mustNoise(t, s4, e8)},
		{"stair eps0.5 g0", mustNoise(t, s5, e9)},
	}
}

// TestNoiseKS checks each sampler against its exact CDF on 1e5 draws (level 1e-3 each).
func TestNoiseKS(t *testing.T) {
	const count = 100000
	for i, c := range noiseCases(t) {
		t.Run(c.name, func(t *testing.T) {
			x := drawMany(c.n, newOpenUniform(uint64(1000+i)), count)
			d := ksStatistic(x, c.n.CDF)
			if s := math.Sqrt(count) * d; s > ksCritical {
				t.Errorf("sqrt(n) D = %.3f > %.4f", s, ksCritical)
			}
		})
	}
}

// TestNoiseKSDetectsWrongScale makes sure the KS assertion has power: the same draws fail
// against a CDF whose scale is off by 3%.
func TestNoiseKSDetectsWrongScale(t *testing.T) {
	s, err := NewStaircase(1, 1, OptimalStaircaseGamma(1))
	if err != nil {
		t.Fatal(err)
	}
	x := drawMany(s, newOpenUniform(7), 100000)
	d := ksStatistic(x, func(v float64) float64 { return s.CDF(v / 1.03) })
	if math.Sqrt(1e5)*d <= ksCritical {
		t.Errorf("KS does not reject a 3%% scale error: sqrt(n) D = %.3f", math.Sqrt(1e5)*d)
	}
}

// TestNoiseVariance compares the sample variance with Variance. The tolerance is 5
// standard errors of the sample second moment, estimated from the sample's fourth moment
// (false failure about 6e-7 each).
func TestNoiseVariance(t *testing.T) {
	const count = 100000
	for i, c := range noiseCases(t) {
		t.Run(c.name, func(t *testing.T) {
			x := drawMany(c.n, newOpenUniform(uint64(2000+i)), count)
			var m2, m4 float64
			for _, v := range x {
				m2 += v * v
				m4 += v * v * v * v
			}
			m2 /= count
			m4 /= count
			se := math.Sqrt((m4 - m2*m2) / count)
			if want := c.n.Variance(); math.Abs(m2-want) > 5*se {
				t.Errorf("sample E X^2 = %.6g, Variance() = %.6g, 5 SE = %.3g", m2, want, 5*se)
			}
		})
	}
}

// TestStaircaseMomentsBySteps checks Variance and MeanAbs against a direct sum over the
// steps of the density (each step is two constant pieces, integrated exactly), and the CDF
// against the same sum.
func TestStaircaseMomentsBySteps(t *testing.T) {
	for _, p := range []struct{ eps, delta, gamma float64 }{
		{1, 1, OptimalStaircaseGamma(1)}, {0.1, 2, 0.3}, {5, 0.5, 0.3}, {2, 1, 0.9}, {0.5, 1, 0}, {3, 1, 1},
	} {
		s, err := NewStaircase(p.eps, p.delta, p.gamma)
		if err != nil {
			t.Fatal(err)
		}
		var mass, m1, m2 float64
		piece := func(lo, hi, dens float64) {
			mass += dens * (hi - lo)
			m1 += dens * (hi*hi - lo*lo) / 2
			m2 += dens * (hi*hi*hi - lo*lo*lo) / 3
		}
		for k := 0; k < 100000; k++ {
			lo := float64(k) * p.delta
			mid := lo + p.gamma*p.delta
			hi := lo + p.delta
			piece(lo, mid, s.Density(lo))
			piece(mid, hi, s.Density(hi-1e-12*p.delta))
			if mass > 0.5-1e-17 && float64(k) > 40/p.eps {
				break
			}
		}
		const tol = 1e-9
		if math.Abs(2*mass-1) > tol {
			t.Errorf("%+v: total mass %.12g", p, 2*mass)
		}
		if v := s.Variance(); math.Abs(2*m2-v) > tol*v {
			t.Errorf("%+v: Variance %.12g, sum over steps %.12g", p, v, 2*m2)
		}
		if v := s.MeanAbs(); math.Abs(2*m1-v) > tol*v {
			t.Errorf("%+v: MeanAbs %.12g, sum over steps %.12g", p, v, 2*m1)
		}
		if c := s.CDF(p.delta * 2.5); math.Abs(c-(1-s.CDF(-p.delta*2.5))) > 1e-15 {
			t.Errorf("%+v: CDF not symmetric", p)
		}
	}
}

// TestStaircaseOptimalMeanAbs checks E|X| at the optimal gamma against the closed form
// Delta e^{eps/2}/(e^eps - 1) of Geng and Viswanath (UDP-FL Lemma 1), and that gamma* is a
// minimum of E|X| over gamma.
func TestStaircaseOptimalMeanAbs(t *testing.T) {
	for _, eps := range []float64{0.05, 0.5, 1, 3, 8} {
		g := OptimalStaircaseGamma(eps)
		s, _ := NewStaircase(eps, 1.7, g)
		want := 1.7 * math.Exp(eps/2) / math.Expm1(eps)
		if got := s.MeanAbs(); math.Abs(got-want) > 1e-12*want {
			t.Errorf("eps %v: E|X| %.15g, closed form %.15g", eps, got, want)
		}
		for _, dg := range []float64{-0.01, 0.01} {
			o, _ := NewStaircase(eps, 1.7, g+dg)
			if o.MeanAbs() < s.MeanAbs() {
				t.Errorf("eps %v: gamma %v beats gamma* %v", eps, g+dg, g)
			}
		}
	}
}

// TestSamplerEnds feeds the samplers the ends of [0, 1] (which Philox-style generators can
// return): the draws must stay finite.
func TestSamplerEnds(t *testing.T) {
	for _, c := range noiseCases(t) {
		for _, v := range []float64{0, 1, math.NaN(), 0x1p-60, 1 - 0x1p-53} {
			u := make([]float64, c.n.UniformsPerDraw())
			for i := range u {
				u[i] = v
			}
			if x := c.n.FromUniforms(u); math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("%s: uniforms %v give %v", c.name, v, x)
			}
		}
	}
}

func TestNoiseConstructorsReject(t *testing.T) {
	bad := []float64{0, -1, math.NaN(), math.Inf(1)}
	for _, v := range bad {
		if _, err := NewGaussian(v); err == nil {
			t.Errorf("NewGaussian(%v) accepted", v)
		}
		if _, err := NewLaplace(v); err == nil {
			t.Errorf("NewLaplace(%v) accepted", v)
		}
		if _, err := NewStaircase(v, 1, 0.5); err == nil {
			t.Errorf("NewStaircase(eps=%v) accepted", v)
		}
		if _, err := NewStaircase(1, v, 0.5); err == nil {
			t.Errorf("NewStaircase(delta=%v) accepted", v)
		}
	}
	for _, g := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := NewStaircase(1, 1, g); err == nil {
			t.Errorf("NewStaircase(gamma=%v) accepted", g)
		}
	}
}
