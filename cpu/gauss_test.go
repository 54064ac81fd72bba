package cpu

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/internal/philox"
)

// mulSmall (SIMD where the shape allows) against a float64 triple loop, on shapes with 32- and
// 8-column parts, transposed (strided) coefficients and padded rows; tolerance k 2^-22 sum|a||v|.
func TestMulSmall(t *testing.T) {
	rng := philox.NewRand(4, 0, 0, 9, 0)
	for _, sh := range [][3]int{{1, 1, 8}, {32, 10, 64}, {10, 32, 64}, {32, 32, 72}, {3, 7, 40}, {5, 64, 16}, {4, 3, 5}} {
		rows, k, cols := sh[0], sh[1], sh[2]
		for _, trans := range []bool{false, true} {
			ars, acs := k+1, 1
			if trans {
				ars, acs = 1, rows+2
			}
			a := make([]float32, rows*k*4+8)
			v := make([]float32, k*(cols+3))
			for i := range a {
				a[i] = float32(rng.Float() - 0.5)
			}
			for i := range v {
				v[i] = float32(rng.Float() - 0.5)
			}
			out := make([]float32, rows*(cols+5))
			mulSmall(rows, k, cols, a, ars, acs, v, cols+3, out, cols+5)
			for i := 0; i < rows; i++ {
				for j := 0; j < cols; j++ {
					var s, abs float64
					for c := 0; c < k; c++ {
						p := float64(a[i*ars+c*acs]) * float64(v[c*(cols+3)+j])
						s += p
						abs += math.Abs(p)
					}
					if d := math.Abs(float64(out[i*(cols+5)+j]) - s); d > float64(k)*math.Ldexp(abs, -22) {
						t.Fatalf("%v trans %v: out[%d][%d] = %v, want %v", sh, trans, i, j, out[i*(cols+5)+j], s)
					}
				}
			}
		}
	}
}

// dot32 and the portable dotLanes against float64 sums, on lengths with and without a SIMD part:
// within n 2^-23 sum|x y| (n roundings of at most that size).
func TestDot32(t *testing.T) {
	rng := philox.NewRand(8, 0, 0, 9, 0)
	for _, n := range []int{1, 15, 16, 64, 77} {
		x, y := make([]float32, n), make([]float32, n)
		var want, abs float64
		for i := range x {
			x[i], y[i] = float32(rng.Float()-0.5), float32(rng.Float()-0.5)
			want += float64(x[i]) * float64(y[i])
			abs += math.Abs(float64(x[i]) * float64(y[i]))
		}
		if got := float64(dot32(x, y)); math.Abs(got-want) > float64(n)*math.Ldexp(abs, -23) {
			t.Fatalf("n %d: dot32 = %v, want %v", n, got, want)
		}
		m := n &^ 15 // the portable form of the SIMD part
		var wantM float64
		for i := 0; i < m; i++ {
			wantM += float64(x[i]) * float64(y[i])
		}
		if got := float64(dotLanes(x[:m], y[:m])); math.Abs(got-wantM) > float64(m)*math.Ldexp(abs, -23) {
			t.Fatalf("n %d: dotLanes = %v, want %v", n, got, wantM)
		}
	}
}
