package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The AVX2 2x2 max-pooling kernels give max4Go's bits, on ties of small integers, signed
// zeros, NaN in every position and normal values, for lengths with and without a tail of
// fewer than 8.
func TestMax4MatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 8, 33, 64} {
		for trial := 0; trial < 50; trial++ {
			vals := make([][]float32, 5)
			for k := range vals {
				vals[k] = make([]float32, n)
				for i := range vals[k] {
					switch rng.IntN(8) {
					case 0:
						vals[k][i] = float32(math.NaN())
					case 1:
						vals[k][i] = float32(math.Copysign(0, -1))
					case 2:
						vals[k][i] = 0
					case 3, 4:
						vals[k][i] = float32(rng.IntN(3) - 1)
					default:
						vals[k][i] = float32(rng.NormFloat64())
					}
				}
			}
			a, b, c, d, g := vals[0], vals[1], vals[2], vals[3], vals[4]
			got, want := make([]float32, n), make([]float32, n)
			Max4(a, b, c, d, got)
			max4Go(a, b, c, d, want)
			same(t, "max", got, want)
			gd := make([][]float32, 8)
			for k := range gd {
				gd[k] = make([]float32, n)
				for i := range gd[k] {
					gd[k][i] = float32(math.NaN()) // every value must be written
				}
			}
			Max4Grad(a, b, c, d, g, gd[0], gd[1], gd[2], gd[3])
			max4GradGo(a, b, c, d, g, gd[4], gd[5], gd[6], gd[7])
			for k := 0; k < 4; k++ {
				same(t, "gradient", gd[k], gd[4+k])
			}
		}
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s %d: %g (%#x), want %g (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// The row kernels (a row pair's windows in one call, the AVX2 loop over windows where runs
// are whole vectors) give the per-window kernels' bits, with and without whole vectors.
func TestMax4RowsMatchWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	val := func() float32 {
		switch rng.IntN(8) {
		case 0:
			return float32(math.NaN())
		case 1:
			return float32(math.Copysign(0, -1))
		case 2:
			return 0
		case 3, 4:
			return float32(rng.IntN(3) - 1)
		}
		return float32(rng.NormFloat64())
	}
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = val()
		}
		return v
	}
	for _, n := range []int{5, 8, 16, 32} {
		for _, windows := range []int{1, 2, 7} {
			m := 2 * windows * n
			row0, row1, g := fill(m), fill(m), fill(windows*n)
			got, want := make([]float32, windows*n), make([]float32, windows*n)
			Max4Rows(row0, row1, got, windows, n)
			for w := 0; w < windows; w++ {
				max4Go(row0[2*w*n:][:n], row0[(2*w+1)*n:][:n], row1[2*w*n:][:n], row1[(2*w+1)*n:][:n], want[w*n:][:n])
			}
			same(t, "max rows", got, want)
			g0, g1 := fill(m), fill(m) // overwritten everywhere
			w0, w1 := make([]float32, m), make([]float32, m)
			Max4GradRows(row0, row1, g, g0, g1, windows, n)
			for w := 0; w < windows; w++ {
				a, b := 2*w*n, (2*w+1)*n
				max4GradGo(row0[a:][:n], row0[b:][:n], row1[a:][:n], row1[b:][:n], g[w*n:][:n], w0[a:][:n], w0[b:][:n], w1[a:][:n], w1[b:][:n])
			}
			same(t, "grad rows, top", g0, w0)
			same(t, "grad rows, bottom", g1, w1)
		}
	}
}
