package noise

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
)

// The staircase's log density is log a - epsilon (k + [outer part]) for |x| in step k
// (docs/accounting.md), finite at every x: far in the tails, where the density itself
// underflows to 0 (beyond about 745/epsilon steps), it must not be -Inf, or the informed
// adversary's ratio log f(y - u) - log f(y) (train/dpfedavg.go) is NaN. Checked against
// log(Density) near 0 and against the exact difference of epsilon per step far out.
func TestStaircaseLogDensityTails(t *testing.T) {
	for _, c := range [][2]float64{{3, 0}, {1, 0.3}, {0.2, 0}} {
		eps, gamma := c[0], c[1]
		d, err := Of(algo.Staircase, 1, eps, gamma)
		if err != nil {
			t.Fatal(err)
		}
		s := d.(interface {
			Density(float64) float64
			Sensitivity() float64
			Gamma() float64
		})
		lf, ok := LogDensity(d)
		if !ok {
			t.Fatal("no log density for the staircase")
		}
		delta, g := s.Sensitivity(), s.Gamma()
		logA := math.Log(s.Density(0))
		for _, k := range []float64{0, 1, 7, 100, math.Floor(2000 / eps), math.Floor(5000 / eps), 1e5} {
			for _, frac := range []float64{g / 2, (1 + g) / 2} {
				x := (k + frac) * delta
				steps := k
				if frac > g {
					steps++
				}
				want := logA - eps*steps
				for _, v := range []float64{x, -x} {
					got := lf(v)
					if math.IsNaN(got) || math.IsInf(got, 0) || math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) {
						t.Errorf("eps %g gamma %g: log density at %g (step %g) = %v, want %v", eps, g, v, k, got, want)
					}
				}
			}
		}
	}
}
