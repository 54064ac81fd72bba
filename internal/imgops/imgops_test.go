package imgops

import (
	"math"
	"math/rand/v2"
	"testing"
)

type geomCase struct {
	name string
	g    Geom
	w    Win
}

func geomCases() []geomCase {
	return []geomCase{
		{"k3", Geom{2, 3, 6, 5}, Win{3, 1, 0}},
		{"k3_pad1", Geom{2, 2, 5, 5}, Win{3, 1, 1}},
		{"k3_s2_pad1", Geom{3, 2, 7, 6}, Win{3, 2, 1}},
		{"k5_pad2", Geom{1, 4, 8, 8}, Win{5, 1, 2}},
		{"k2_s2", Geom{2, 3, 6, 6}, Win{2, 2, 0}},
		{"k2_s2_odd", Geom{2, 2, 7, 5}, Win{2, 2, 0}},
		{"k3_s2_overlap", Geom{2, 2, 7, 7}, Win{3, 2, 0}},
		{"k1_s2", Geom{4, 2, 5, 5}, Win{1, 2, 0}},
		{"k2_s2_pad1", Geom{2, 2, 5, 5}, Win{2, 2, 1}},
		{"tiny_pad", Geom{2, 2, 1, 2}, Win{3, 1, 1}},
		{"n70", Geom{2, 70, 5, 4}, Win{3, 1, 1}}, // more samples than a pooling block
		{"n70_2x2", Geom{1, 70, 4, 5}, Win{2, 2, 0}},
		{"k3_s3_pad1", Geom{1, 2, 4, 7}, Win{3, 3, 1}},
	}
}

func randVec(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// at is the offset of x(c, y, x, n) in the layout [C][H][W][N].
func at(g Geom, c, y, xx, n int) int { return ((c*g.H+y)*g.W+xx)*g.N + n }

// pixel is x(c, y, x, n) with zero padding; ok false in the padding.
func pixel(x []float64, g Geom, c, n, y, xx int) (float64, bool) {
	if y < 0 || y >= g.H || xx < 0 || xx >= g.W {
		return 0, false
	}
	return x[at(g, c, y, xx, n)], true
}

// Im2col against its definition, and Col2im as its adjoint: <im2col(x), c> = <x, col2im(c)>
// to 1e-12 relative (both sides are sums of the same products in float64).
func TestIm2colCol2im(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range geomCases() {
		t.Run(tc.name, func(t *testing.T) {
			g, w := tc.g, tc.w
			OH, OW := w.Out(g.H), w.Out(g.W)
			rows, cols := g.C*w.K*w.K, g.N*OH*OW
			ld := cols + 3 // a row stride larger than the row
			x := randVec(rng, g.C*g.N*g.H*g.W)
			p := make([]float64, rows*ld)
			Im2col(x, g, w, p, ld, 0, rows/2)
			Im2col(x, g, w, p, ld, rows/2, rows)
			for c := 0; c < g.C; c++ {
				for i := 0; i < w.K; i++ {
					for j := 0; j < w.K; j++ {
						q := (c*w.K+i)*w.K + j
						for n := 0; n < g.N; n++ {
							for oy := 0; oy < OH; oy++ {
								for ox := 0; ox < OW; ox++ {
									want, _ := pixel(x, g, c, n, oy*w.S-w.P+i, ox*w.S-w.P+j)
									if got := p[q*ld+(oy*OW+ox)*g.N+n]; got != want {
										t.Fatalf("row %d col (%d,%d,%d): %g, want %g", q, n, oy, ox, got, want)
									}
								}
							}
						}
					}
				}
			}
			d := randVec(rng, rows*ld)
			dx := make([]float64, len(x))
			for i := range dx {
				dx[i] = math.NaN() // Col2im overwrites
			}
			Col2im(d, ld, g, w, dx, 0, 1, nil)
			Col2im(d, ld, g, w, dx, 1, g.C, nil)
			var lhs float64
			for q := 0; q < rows; q++ {
				lhs += dot(p[q*ld:q*ld+cols], d[q*ld:q*ld+cols])
			}
			if rhs := dot(x, dx); math.Abs(lhs-rhs) > 1e-12*(math.Abs(lhs)+1) {
				t.Fatalf("<im2col x, d> = %.15g, <x, col2im d> = %.15g", lhs, rhs)
			}
		})
	}
}

// Pooling against the definition (max over the window's pixels inside the image; the average
// over K*K with padding as zeros), and the backward passes: average pooling as the adjoint to
// 1e-12, max pooling routing each gradient to the window's first maximum.
func TestPooling(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range geomCases() {
		if tc.w.P >= tc.w.K {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			g, w := tc.g, tc.w
			OH, OW := w.Out(g.H), w.Out(g.W)
			P := g.C * g.N
			x := randVec(rng, P*g.H*g.W)
			mx := make([]float64, P*OH*OW)
			av := make([]float64, P*OH*OW)
			MaxPool(x, g, w, mx, 0, g.C*OH)
			AvgPool(x, g, w, av, 0, 1)
			AvgPool(x, g, w, av, 1, g.C*OH)
			og := Geom{C: g.C, N: g.N, H: OH, W: OW}
			dy := randVec(rng, len(mx))
			dy[0] = math.Copysign(0, -1) // a -0 sent to a pixel of no other window arrives as 0 + -0 = +0
			wantDX := make([]float64, len(x))
			for p := 0; p < P; p++ {
				c, n := p/g.N, p%g.N
				for oy := 0; oy < OH; oy++ {
					for ox := 0; ox < OW; ox++ {
						best, bi, sum := math.Inf(-1), -1, 0.0
						for i := 0; i < w.K; i++ {
							for j := 0; j < w.K; j++ {
								yy, xx := oy*w.S-w.P+i, ox*w.S-w.P+j
								v, in := pixel(x, g, c, n, yy, xx)
								sum += v
								if in && v > best {
									best, bi = v, at(g, c, yy, xx, n)
								}
							}
						}
						o := at(og, c, oy, ox, n)
						if mx[o] != best {
							t.Fatalf("max pool plane %d (%d,%d): %g, want %g", p, oy, ox, mx[o], best)
						}
						if want := sum / float64(w.K*w.K); math.Abs(av[o]-want) > 1e-14 {
							t.Fatalf("avg pool plane %d (%d,%d): %g, want %g", p, oy, ox, av[o], want)
						}
						wantDX[bi] += dy[o]
					}
				}
			}
			dx := make([]float64, len(x))
			for i := range dx {
				dx[i] = math.NaN() // every pixel must be written
			}
			MaxPoolGrad(x, g, w, dy, dx, 0, 1)
			MaxPoolGrad(x, g, w, dy, dx, 1, g.C)
			for i := range dx {
				if math.Abs(dx[i]-wantDX[i]) > 1e-14 || (wantDX[i] == 0 && math.Signbit(dx[i]) != math.Signbit(wantDX[i])) {
					t.Fatalf("max pool gradient %d: %g, want %g", i, dx[i], wantDX[i])
				}
			}
			AvgPoolGrad(g, w, dy, dx, 0, g.C)
			if lhs, rhs := dot(av, dy), dot(x, dx); math.Abs(lhs-rhs) > 1e-12*(math.Abs(lhs)+1) {
				t.Fatalf("<avgpool x, dy> = %.15g, <x, avgpoolgrad dy> = %.15g", lhs, rhs)
			}
		})
	}
}

// GroupNorm: each (sample, group) of the output has mean beta and standard deviation gamma
// (for constant gamma, beta over the group, up to eps), and both gradients match central finite
// differences of sum(dy * y) (h = 1e-6: truncation ~1e-12, tolerance 1e-6 relative plus the
// sum's rounding), for a few samples and for more than one block of 64.
func TestGroupNorm(t *testing.T) {
	for _, g := range []Geom{{C: 6, N: 3, H: 3, W: 4}, {C: 6, N: 67, H: 2, W: 2}} {
		testGroupNorm(t, g)
	}
}

func testGroupNorm(t *testing.T, g Geom) {
	rng := rand.New(rand.NewPCG(5, 6))
	const groups, eps, h = 3, 1e-5, 1e-6
	x := randVec(rng, g.C*g.N*g.H*g.W)
	for i := range x {
		x[i] = 2*x[i] + 1
	}
	gamma, beta := randVec(rng, g.C), randVec(rng, g.C)
	stats := func(x []float64) ([]float64, []float64) {
		m, r := make([]float64, g.N*groups), make([]float64, g.N*groups)
		GroupStats(x, g, groups, eps, m, r, 0, 1)
		GroupStats(x, g, groups, eps, m, r, 1, groups)
		return m, r
	}
	forward := func(x, gamma, beta []float64) []float64 {
		y := make([]float64, len(x))
		m, r := stats(x)
		GroupNorm(x, g, groups, m, r, gamma, beta, y, 0, 1)
		GroupNorm(x, g, groups, m, r, gamma, beta, y, 1, groups)
		return y
	}
	// Unit gamma, zero beta: every group normalised.
	ones, zeros := make([]float64, g.C), make([]float64, g.C)
	for i := range ones {
		ones[i] = 1
	}
	y := forward(x, ones, zeros)
	hw, cg := g.H*g.W, g.C/groups
	for n := 0; n < g.N; n++ {
		for gr := 0; gr < groups; gr++ {
			var s, ss float64
			for c := gr * cg; c < (gr+1)*cg; c++ {
				for p := 0; p < hw; p++ {
					v := y[(c*hw+p)*g.N+n]
					s += v
					ss += v * v
				}
			}
			cnt := float64(cg * hw)
			if mean, v := s/cnt, ss/cnt-(s/cnt)*(s/cnt); math.Abs(mean) > 1e-12 || math.Abs(v-1) > 1e-4 {
				t.Fatalf("sample %d group %d: mean %g variance %g, want 0 and 1 - O(eps)", n, gr, mean, v)
			}
		}
	}
	dy := randVec(rng, len(x))
	obj := func(x, gamma, beta []float64) float64 { return dot(forward(x, gamma, beta), dy) }
	m, r := stats(x)
	dx := make([]float64, len(x))
	GroupNormGradX(x, g, groups, m, r, gamma, dy, dx, 0, groups)
	dg, db := make([]float64, g.C), make([]float64, g.C)
	GroupNormGradParams(x, g, groups, m, r, dy, dg, db, 0, 2)
	GroupNormGradParams(x, g, groups, m, r, dy, dg, db, 2, g.C)
	check := func(what string, v []float64, i int, an float64) {
		old := v[i]
		v[i] = old + h
		up := obj(x, gamma, beta)
		v[i] = old - h
		down := obj(x, gamma, beta)
		v[i] = old
		// The objective sums len(x) terms: its rounding, ~1e-16 per term, divided by h, is the
		// differences' noise floor.
		if fd := (up - down) / (2 * h); math.Abs(fd-an) > 1e-6*math.Abs(fd)+1e-10*float64(len(x)) {
			t.Fatalf("%s %d: analytic %.10g, finite differences %.10g", what, i, an, fd)
		}
	}
	for i := range x {
		check("dx", x, i, dx[i])
	}
	for c := 0; c < g.C; c++ {
		check("dgamma", gamma, c, dg[c])
		check("dbeta", beta, c, db[c])
	}
}

func TestTranspose(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, block := range []int{1, 3} {
		const rows, cols = 5, 4
		lds, ldd := cols*block+2, rows*block+1
		src := randVec(rng, rows*lds)
		dst := make([]float64, cols*ldd)
		Transpose(block, src, lds, cols, dst, ldd, 0, 2)
		Transpose(block, src, lds, cols, dst, ldd, 2, rows)
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				for k := 0; k < block; k++ {
					if got, want := dst[j*ldd+i*block+k], src[i*lds+j*block+k]; got != want {
						t.Fatalf("block %d: (%d,%d)[%d] = %g, want %g", block, i, j, k, got, want)
					}
				}
			}
		}
	}
}

// orderKey orders values as the floats compare (-0 equal to +0), in float32 and float64,
// including infinities and subnormals.
func TestOrderKey(t *testing.T) {
	special := []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), 1e-40, -1e-40, 5e-324, -5e-324, math.MaxFloat32, -math.MaxFloat32}
	rng := rand.New(rand.NewPCG(11, 12))
	vals := append([]float64(nil), special...)
	for i := 0; i < 500; i++ {
		vals = append(vals, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(20)-10)))
	}
	for _, a := range vals {
		for _, b := range vals {
			if ka, kb := orderKey(a), orderKey(b); (ka < kb) != (a < b) || (ka == kb) != (a == b) {
				t.Fatalf("float64 %g, %g: keys %d, %d", a, b, ka, kb)
			}
			a32, b32 := float32(a), float32(b)
			if ka, kb := orderKey(a32), orderKey(b32); (ka < kb) != (a32 < b32) || (ka == kb) != (a32 == b32) {
				t.Fatalf("float32 %g, %g: keys %d, %d", a32, b32, ka, kb)
			}
		}
	}
}

// The 2x2 path (window 2, stride 2) and the general one (the same single window at stride 1)
// agree on windows holding NaN: a NaN wins only as its window's first value.
func TestMaxPoolNaN(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		win  [4]float64
		want int // position of the winner
	}{
		{[4]float64{1, nan, 0, 0}, 0},
		{[4]float64{nan, 1, 2, 3}, 0},
		{[4]float64{0, 1, nan, 3}, 3},
		{[4]float64{-1, -2, -3, nan}, 0},
		{[4]float64{math.Copysign(nan, -1), 5, 6, 7}, 0},
		{[4]float64{2, math.Copysign(nan, -1), 1, 0}, 0},
	} {
		g := Geom{C: 1, N: 1, H: 2, W: 2} // one sample: [C][H][W][N] is the window in row-major order
		x := []float64{tc.win[0], tc.win[1], tc.win[2], tc.win[3]}
		y := make([]float64, 1)
		MaxPool(x, g, Win{2, 2, 0}, y, 0, 1)
		if got := y[0]; math.Float64bits(got) != math.Float64bits(x[tc.want]) {
			t.Fatalf("%v: pooled %v, want %v", tc.win, got, x[tc.want])
		}
		// The general path on the same window (stride 1 gives one 2x2 window too).
		MaxPool(x, g, Win{2, 1, 0}, y, 0, 1)
		if math.Float64bits(y[0]) != math.Float64bits(x[tc.want]) {
			t.Fatalf("%v: general path pooled %v, want %v", tc.win, y[0], x[tc.want])
		}
		dx := make([]float64, 4)
		MaxPoolGrad(x, g, Win{2, 2, 0}, []float64{1}, dx, 0, 1)
		for k, v := range dx {
			if want := map[bool]float64{true: 1, false: 0}[k == tc.want]; v != want {
				t.Fatalf("%v: gradient %v, want the winner %d", tc.win, dx, tc.want)
			}
		}
	}
}
