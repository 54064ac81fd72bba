//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The exact samplers of the non-Gaussian mechanisms take logarithms of uniforms in
// [2^-64, 1); the kernels' go_log must be Go's math.Log (amd64's archLog) bit for bit there:
// 4 million random arguments spread over the whole range of exponents, every power of two,
// and the neighbours of 1, 1/2, sqrt(2)/2 (where the reduction switches) and the ends.
func TestGoLogIsMathLog(t *testing.T) {
	d := device(t)
	rng := rand.New(rand.NewPCG(8, 9))
	var x []float64
	for i := 0; i < 4000000; i++ {
		x = append(x, math.Ldexp(0.5+0.5*rng.Float64(), -rng.IntN(65)))
	}
	for e := -64; e <= 0; e++ {
		x = append(x, math.Ldexp(1, e))
	}
	for _, c := range []float64{1, 0.5, math.Sqrt2 / 2, math.Sqrt2 / 4, 0x1p-64, 1 - 0x1p-53} {
		v := c
		for k := 0; k < 40; k++ {
			x = append(x, v, math.Nextafter(c, 0), math.Nextafter(c, 2))
			v = math.Nextafter(v, 0)
		}
	}
	got := d.GoLog(x)
	bad := 0
	for i, v := range x {
		if w := math.Log(v); math.Float64bits(got[i]) != math.Float64bits(w) {
			if bad < 5 {
				t.Errorf("log(%v = %x): go_log %x, math.Log %x", v, math.Float64bits(v), math.Float64bits(got[i]), math.Float64bits(w))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d logarithms differ", bad, len(x))
	}
}
