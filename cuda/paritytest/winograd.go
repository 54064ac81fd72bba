package paritytest

import (
	"fmt"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
)

// winoCase is a convolution of C channels of H x W pixels of N samples into K channels by a
// 3 x 3 window at stride 1 with padding 1.
type winoCase struct{ C, K, N, H, W int }

// winoCases: a single pixel (one tile, mostly padding), odd sizes (tiles cut by the image's
// edge), one sample and several, more output channels than input and fewer, and (for
// F(4x4, 3x3)) an image of 3 x 3 tiles, the last row and column cut.
var winoCases = []winoCase{
	{16, 16, 1, 1, 1},
	{16, 17, 3, 5, 7},
	{17, 16, 2, 4, 4},
	{16, 18, 9, 6, 3},
	{16, 16, 2, 9, 10},
}

// winoForm is one of Winograd's minimal filterings with its transforms in float64.
type winoForm struct {
	tile      compute.WinogradTile
	bt, g, at grid
	// exact: on small integers every step is exact in float32 (F(2x2, 3x3)'s entries are
	// multiples of 1/2; F(4x4, 3x3)'s G has sixths).
	exact bool
	// roundings is the tolerance's allowance for the roundings a result takes besides its
	// product's terms (the transforms and the tiles' sum, counted on the kernels'
	// expressions, each inexact constant a rounding): 16 for F(2x2, 3x3), which takes at most
	// 12; 32 for F(4x4, 3x3), which takes at most 25 (the filters' transform 8, the input's 6,
	// the output's 6 and the bias 1 for y; the output gradient's 6, the filters' 8, B's 8 and
	// the four tiles' sum 3 for dx; 6, 6 and G^T's 10 for dw).
	roundings int
}

var winoForms = []winoForm{
	{compute.WinogradF2,
		grid{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
		grid{{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}},
		grid{{1, 1, 1, 0}, {0, 1, -1, -1}},
		true, 16},
	{compute.WinogradF4,
		grid{{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}},
		grid{{1. / 4, 0, 0}, {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6}, {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}},
		grid{{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
		false, 32},
}

// Winograd's F(2x2, 3x3) and F(4x4, 3x3) (compute.Winograder: the wino_* and wino4_* kernels
// with the products between them on the backend's Gemm), forward and backward, against the
// convolution's definition in float64, with the operands in strided views (gaps between rows
// and batch elements) whose surroundings stay NaN, on one replica and three, under every
// launch configuration.
//
//   - On small integers (inputs and output gradients in [-3, 3], weights and biases in [-2, 2])
//     every value of every step of F(2x2, 3x3) is a multiple of 1/4 below 2^22 (the filters'
//     transforms are at most 18 in magnitude, the inputs' 12; the largest sum, a transformed
//     filter's gradient over 54 tiles and samples of terms of at most 144, is below 2^13), so
//     each step is exact in float32 whatever order the products sum in, and the results must
//     equal the convolution's exactly. An index or transform off anywhere moves a value by at least
//     1/4. F(4x4, 3x3)'s filters' transform has sixths, so it is held to the tolerance below.
//   - On normal values each result is the float64 value of a chain of float32 sums: at most C
//     (or K, or the tiles times samples) terms in a product and the form's roundings more
//     in the transforms and the tiles' sum. Its error is at most (terms + roundings) 2^-24
//     times the same chain evaluated on the operands' and transforms' magnitudes, computed in
//     float64 beside the reference (to first order: the second-order terms are below 2^-40
//     of it): that is the tolerance.
func testWinograd(t *testing.T, f Factory) {
	for _, form := range winoForms {
		for _, o := range launchConfigs {
			for _, c := range winoCases {
				for _, integers := range []bool{true, false} {
					name := fmt.Sprintf("F%d/%s/%dx%dx%dx%d-to-%d/integers=%v", form.tile, cfgName(o), c.C, c.N, c.H, c.W, c.K, integers)
					t.Run(name, func(t *testing.T) {
						for _, R := range convBatches {
							checkWinograd(t, newTwin(t, f, o), form, c, R, integers)
						}
					})
				}
			}
		}
	}
}

func checkWinograd(t *testing.T, w *twin, form winoForm, c winoCase, R int, integers bool) {
	wg, ok := w.ops.(compute.Winograder)
	if !ok {
		t.Fatalf("%T does not implement compute.Winograder", w.ops)
	}
	fill := func(n, lim int) int {
		if !integers {
			return w.normal(n)
		}
		return w.buf(n, func(int) float32 { return float32(w.rng.IntN(2*lim+1) - lim) })
	}
	ft := form.tile
	tiles, nt, alpha := ft.Positions(), int(ft), int(ft)+2
	th, tw := ft.Grid(c.H, c.W)
	cols := th * tw * c.N
	// A transformed operand: 16 (36) rows x cols matrices per replica, rows and batch elements
	// with gaps.
	tmat := func(rows, cols int) compute.Mat {
		return compute.Mat{Off: 1, Rows: rows, Cols: cols, Stride: cols + 2, Batch: tiles * R, BatchStride: rows*(cols+2) + 3}
	}
	x := imgLayout{gap: 5, off: 3}.images(c.C, c.N, c.H, c.W, R)
	xid := fill(imgLen(x), 3)
	wm := compute.Mat{Off: 2, Rows: c.K, Cols: 9 * c.C, Stride: 9*c.C + 3, Batch: R, BatchStride: c.K*(9*c.C+3) + 1}
	wid := fill(matLen(wm), 2)
	bm := compute.Mat{Off: 1, Rows: c.K, Cols: 1, Stride: 2, Batch: R, BatchStride: 2*c.K + 1}
	bid := fill(matLen(bm), 2)
	dy := imgLayout{gap: 3, off: 2}.images(c.K, c.N, c.H, c.W, R)
	dyid := fill(imgLen(dy), 3)
	y := imgLayout{gap: 2, off: 1}.images(c.K, c.N, c.H, c.W, R)
	yid := w.buf(imgLen(y), nanFill)
	dx := imgLayout{gap: 4, off: 1}.images(c.C, c.N, c.H, c.W, R)
	dxid := w.buf(imgLen(dx), nanFill)
	dwm := compute.Mat{Off: 3, Rows: c.K, Cols: 9 * c.C, Stride: 9*c.C + 1, Batch: R, BatchStride: c.K*(9*c.C+1) + 2}
	dwid := w.buf(matLen(dwm), nanFill)
	u, v, m := tmat(c.K, c.C), tmat(c.C, cols), tmat(c.K, cols)
	dm, du, dv := tmat(c.K, cols), tmat(c.K, c.C), tmat(c.C, cols)
	dev := func(mt compute.Mat) compute.Mat { return w.mat(w.buf(matLen(mt), nanFill), mt)[1] }
	ud, vd, md, dmd, dud, dvd := dev(u), dev(v), dev(m), dev(dm), dev(du), dev(dv)

	wt := w.mat(wid, wm)[1]
	wg.WinogradFilter(ft, wt, ud)
	wg.WinogradInput(ft, w.img(xid, x)[1], vd)
	w.ops.Gemm(false, false, 1, ud, vd, 0, md)
	wg.WinogradOutput(ft, md, w.mat(bid, bm)[1], w.img(yid, y)[1])
	wg.WinogradOutputGrad(ft, w.img(dyid, dy)[1], dmd)
	w.ops.Gemm(false, true, 1, dmd, vd, 0, dud)
	wg.WinogradFilterGrad(ft, dud, w.mat(dwid, dwm)[1])
	w.ops.Gemm(true, false, 1, ud, dmd, 0, dvd)
	wg.WinogradInputGrad(ft, dvd, w.img(dxid, dx)[1])
	if err := w.ops.Err(); err != nil {
		t.Fatal(err)
	}

	host := func(id int) []float32 { v, _ := w.get(id); return v }
	xs, ws, bs, dys := host(xid), host(wid), host(bid), host(dyid)
	_, ys := w.get(yid)
	_, dxs := w.get(dxid)
	_, dws := w.get(dwid)
	at := func(im compute.Images, b, ch, yy, xx, n int) int {
		return im.Off + b*im.BatchStride + ((ch*im.H+yy)*im.W+xx)*im.N + n
	}
	// Values and magnitudes: a padding value is 0.
	xv := func(b, ch, iy, ix, n int) float64 {
		if iy < 0 || iy >= c.H || ix < 0 || ix >= c.W {
			return 0
		}
		return float64(xs[at(x, b, ch, iy, ix, n)])
	}
	dyv := func(b, k, oy, ox, n int) float64 {
		if oy < 0 || oy >= c.H || ox < 0 || ox >= c.W {
			return 0
		}
		return float64(dys[at(dy, b, k, oy, ox, n)])
	}
	wv := func(b, k, ch, i, j int) float64 {
		return float64(ws[wm.Off+b*wm.BatchStride+k*wm.Stride+ch*9+3*i+j])
	}

	seen := map[string]map[int]bool{"y": {}, "dx": {}, "dw": {}}
	check := func(what string, got []float32, i int, ref, mag float64, terms int) {
		t.Helper()
		seen[what][i] = true
		tol := float64(terms+form.roundings) * 0x1p-24 * mag
		if integers && form.exact {
			tol = 0
		}
		if d := math.Abs(float64(got[i]) - ref); !(d <= tol) {
			t.Errorf("R %d: %s element %d: Winograd %v, float64 reference %v, difference %g above %g", R, what, i, got[i], ref, d, tol)
		}
	}
	for b := 0; b < R; b++ {
		// The magnitudes of each filter's, input tile's and output gradient tile's transforms.
		magU := make([]grid, c.K*c.C)
		for k := 0; k < c.K; k++ {
			for ch := 0; ch < c.C; ch++ {
				g := absGrid(3, 3, func(i, j int) float64 { return wv(b, k, ch, i, j) })
				magU[k*c.C+ch] = absSandwich(form.g, g, false)
			}
		}
		magV, magDM := make([]grid, c.C*th*tw*c.N), make([]grid, c.K*th*tw*c.N)
		for p := 0; p < th*tw; p++ {
			ty, tx := p/tw, p%tw
			for n := 0; n < c.N; n++ {
				for ch := 0; ch < c.C; ch++ {
					d := absGrid(alpha, alpha, func(i, j int) float64 { return xv(b, ch, nt*ty-1+i, nt*tx-1+j, n) })
					magV[(ch*th*tw+p)*c.N+n] = absSandwich(form.bt, d, false)
				}
				for k := 0; k < c.K; k++ {
					g := absGrid(nt, nt, func(i, j int) float64 { return dyv(b, k, nt*ty+i, nt*tx+j, n) })
					magDM[(k*th*tw+p)*c.N+n] = absSandwich(form.at, g, true)
				}
			}
		}
		// The output: the direct sum, and the magnitudes through the tile's transforms.
		for k := 0; k < c.K; k++ {
			bias := float64(bs[bm.Off+b*bm.BatchStride+k*bm.Stride])
			for oy := 0; oy < c.H; oy++ {
				for ox := 0; ox < c.W; ox++ {
					p := (oy/nt)*tw + ox/nt
					for n := 0; n < c.N; n++ {
						ref, mm := bias, newGrid(alpha, alpha)
						for ch := 0; ch < c.C; ch++ {
							for i := range 3 {
								for j := range 3 {
									ref += wv(b, k, ch, i, j) * xv(b, ch, oy-1+i, ox-1+j, n)
								}
							}
							addProduct(mm, magU[k*c.C+ch], magV[(ch*th*tw+p)*c.N+n])
						}
						mag := math.Abs(bias) + absSandwich(form.at, mm, false)[oy%nt][ox%nt]
						check("y", ys, at(y, b, k, oy, ox, n), ref, mag, c.C)
					}
				}
			}
		}
		// The input gradient: every output pixel whose window reads (iy, ix).
		for ch := 0; ch < c.C; ch++ {
			for iy := 0; iy < c.H; iy++ {
				for ix := 0; ix < c.W; ix++ {
					for n := 0; n < c.N; n++ {
						ref, mag := 0.0, 0.0
						for k := 0; k < c.K; k++ {
							for i := range 3 {
								for j := range 3 {
									ref += wv(b, k, ch, i, j) * dyv(b, k, iy+1-i, ix+1-j, n)
								}
							}
						}
						// The tiles whose input reaches the pixel, each its (B dv B^T) entry.
						for ty := 0; ty < th; ty++ {
							for tx := 0; tx < tw; tx++ {
								i, j := iy+1-nt*ty, ix+1-nt*tx
								if i < 0 || i >= alpha || j < 0 || j >= alpha {
									continue
								}
								p, dvm := ty*tw+tx, newGrid(alpha, alpha)
								for k := 0; k < c.K; k++ {
									addProduct(dvm, magU[k*c.C+ch], magDM[(k*th*tw+p)*c.N+n])
								}
								mag += absSandwich(form.bt, dvm, true)[i][j]
							}
						}
						check("dx", dxs, at(dx, b, ch, iy, ix, n), ref, mag, c.K)
					}
				}
			}
		}
		// The weight gradient: dy times the patches, summed over every pixel and sample.
		for k := 0; k < c.K; k++ {
			for ch := 0; ch < c.C; ch++ {
				dum := newGrid(alpha, alpha)
				for p := 0; p < th*tw; p++ {
					for n := 0; n < c.N; n++ {
						addProduct(dum, magDM[(k*th*tw+p)*c.N+n], magV[(ch*th*tw+p)*c.N+n])
					}
				}
				magDW := absSandwich(form.g, dum, true)
				for i := range 3 {
					for j := range 3 {
						ref := 0.0
						for oy := 0; oy < c.H; oy++ {
							for ox := 0; ox < c.W; ox++ {
								for n := 0; n < c.N; n++ {
									ref += dyv(b, k, oy, ox, n) * xv(b, ch, oy-1+i, ox-1+j, n)
								}
							}
						}
						check("dw", dws, dwm.Off+b*dwm.BatchStride+k*dwm.Stride+ch*9+3*i+j, ref, magDW[i][j], th*tw*c.N)
					}
				}
			}
		}
	}
	// Nothing outside the outputs' views is written.
	for what, got := range map[string][]float32{"y": ys, "dx": dxs, "dw": dws} {
		for i, v := range got {
			if !seen[what][i] && v == v {
				t.Errorf("R %d: %s element %d outside the view was written (%v)", R, what, i, v)
				break
			}
		}
	}
}

// grid is a small matrix of float64, row by row.
type grid = [][]float64

func newGrid(rows, cols int) grid {
	g := make(grid, rows)
	for i := range g {
		g[i] = make([]float64, cols)
	}
	return g
}

// absGrid is the rows x cols grid of the magnitudes |f(i, j)|.
func absGrid(rows, cols int, f func(i, j int) float64) grid {
	g := newGrid(rows, cols)
	for i := range g {
		for j := range g[i] {
			g[i][j] = math.Abs(f(i, j))
		}
	}
	return g
}

// absSandwich is |L| x |L|^T with L = l, or L = l^T when transposed: a transform of Winograd's
// form applied to magnitudes x, with its entries' magnitudes.
func absSandwich(l, x grid, transposed bool) grid {
	at := func(r, i int) float64 { return math.Abs(l[r][i]) }
	rows := len(l)
	if transposed {
		at = func(r, i int) float64 { return math.Abs(l[i][r]) }
		rows = len(l[0])
	}
	out := newGrid(rows, rows)
	for r := range rows {
		for s := range rows {
			for i := range x {
				for j := range x[i] {
					out[r][s] += at(r, i) * x[i][j] * at(s, j)
				}
			}
		}
	}
	return out
}

// addProduct adds the elementwise product of a and b to dst.
func addProduct(dst, a, b grid) {
	for i := range dst {
		for j := range dst[i] {
			dst[i][j] += a[i][j] * b[i][j]
		}
	}
}
