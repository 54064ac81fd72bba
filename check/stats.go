package check

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// The distribution tests of the noise residuals. Each takes residuals that, for a deployment
// doing what it declares, are independent N(0, s^2) draws with s known (the declared noise), and
// returns a p-value that is exact under that hypothesis (the Anderson-Darling one to the accuracy
// of Marsaglia and Marsaglia's approximation, about 1e-6).

// normalTwoSided is the two-sided p-value of a standard normal statistic.
func normalTwoSided(z float64) float64 {
	if math.IsNaN(z) {
		return 0
	}
	return math.Erfc(math.Abs(z) / math.Sqrt2)
}

// chiSquareTwoSided is the two-sided p-value of q under the chi-square distribution with k
// degrees of freedom: too little noise is as much a finding as too much.
func chiSquareTwoSided(q float64, k int) float64 {
	if k <= 0 || math.IsNaN(q) {
		return 0
	}
	if q <= 0 {
		// Exactly zero residuals: no noise at all in k coordinates.
		return 0
	}
	d := distuv.ChiSquared{K: float64(k)}
	p := 2 * math.Min(d.CDF(q), d.Survival(q))
	return math.Min(p, 1)
}

// andersonDarling returns the Anderson-Darling statistic A^2 of standardized values u against
// N(0, 1) (parameters known, not estimated) and its p-value. u is sorted in place.
func andersonDarling(u []float64) (a2, p float64) {
	n := len(u)
	if n == 0 {
		return math.NaN(), 1
	}
	slices.Sort(u)
	var s float64
	for i := range u {
		lo := logPhi(u[i])
		hi := logPhi(-u[n-1-i]) // log(1 - Phi(u_(n-i)))
		s += float64(2*i+1) * (lo + hi)
	}
	a2 = -float64(n) - s/float64(n)
	return a2, math.Max(0, 1-adCDF(n, a2))
}

// logPhi is log Phi(x), accurate in the far left tail where Phi underflows.
func logPhi(x float64) float64 {
	if x > -5 {
		return math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
	}
	// Mills' ratio expansion: Phi(x) ~ phi(x)/|x| (1 - 1/x^2 + 3/x^4).
	x2 := x * x
	return -x2/2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log1p(-1/x2+3/(x2*x2))
}

// adCDF is P(A^2_n < z) for n values from the hypothesised distribution: Marsaglia and Marsaglia,
// "Evaluating the Anderson-Darling distribution", Journal of Statistical Software 9(2), 2004:
// the limiting distribution adinf plus their correction for finite n.
func adCDF(n int, z float64) float64 {
	if z <= 0 {
		return 0
	}
	x := adInf(z)
	nf := float64(n)
	if x > 0.8 {
		return x + (-130.2137+(745.2337-(1705.091-(1950.646-(1116.360-255.7844*x)*x)*x)*x)*x)/nf
	}
	c := 0.01265 + 0.1757/nf
	if x < c {
		v := x / c
		v = math.Sqrt(v) * (1 - v) * (49*v - 102)
		return x + v*(0.0037/(nf*nf)+0.00078/nf+0.00006)/nf
	}
	v := (x - c) / (0.8 - c)
	v = -0.00022633 + (6.54034-(14.6538-(14.458-(8.259-1.91864*v)*v)*v)*v)*v
	return x + v*(0.04213/nf+0.01365/(nf*nf))/nf
}

// adInf is the limiting distribution of A^2 (Marsaglia and Marsaglia 2004; error below 2e-6).
func adInf(z float64) float64 {
	if z < 2 {
		return math.Exp(-1.2337141/z) / math.Sqrt(z) * (2.00012 + (0.247105-(0.0649821-(0.0347962-(0.011672-0.00168691*z)*z)*z)*z)*z)
	}
	return math.Exp(-math.Exp(1.0776 - (2.30695-(0.43424-(0.082433-(0.008056-0.0003146*z)*z)*z)*z)*z))
}
