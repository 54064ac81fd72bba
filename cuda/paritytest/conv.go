package paritytest

import (
	"fmt"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/internal/imgops"
)

// convCase is an image geometry (per batch element C channels of N samples of H x W) and a
// window.
type convCase struct {
	C, N, H, W int
	win        compute.Window
}

func (c convCase) String() string {
	return fmt.Sprintf("%dx%dx%dx%d/k%ds%dp%d", c.C, c.N, c.H, c.W, c.win.Size, c.win.Stride, c.win.Pad)
}

// pools reports whether the window is a valid pooling window (nn's rule, PyTorch's: the padding
// is at most half the window, so no window lies entirely in the padding).
func (c convCase) pools() bool { return 2*c.win.Pad <= c.win.Size }

// convCases cover one pixel, kernel 1, stride above 1 with padding, stride equal to the window,
// padding of window - 1 (convolutions only), odd sizes whose value counts are not multiples
// of either launch configuration's block, an odd extent under 2x2 pooling (a last row and
// column in no window), overlapping 3x3 windows at stride 2 (ResNet's max pooling), and sample
// counts for the threads that share a row of samples (conv.cu's GROUP_STRIDE_MD): 40 (groups
// of 32, some threads taking two samples of a row and some one), 32 (a warp, LeNet's batch)
// and 6 (groups of 4); and a 5 x 5 window at stride 1 over 36 samples, where the direct weight
// gradient's partial sums take two samples each (its forms for one sample a partial run where
// the sample count is at most 32), and one over 5 samples, where they take one each
// (conv_direct_dw_win2 and _win4 with Options.DirectDWRows); and 9 and 17 input channels,
// beyond the direct kernels' first tile of 8 (CONV_CT): with at most 6, a conv_direct_dx that
// dropped a tile's channel offset passed the whole suite (a review's mutation), and a ResNet's
// stride-2 blocks from 16 channels run there.
var convCases = []convCase{
	{1, 1, 1, 1, compute.Window{Size: 1, Stride: 1}},
	{3, 2, 7, 5, compute.Window{Size: 3, Stride: 2, Pad: 1}},
	{2, 3, 6, 9, compute.Window{Size: 1, Stride: 1}},
	{2, 1, 11, 13, compute.Window{Size: 5, Stride: 1, Pad: 2}},
	{4, 2, 8, 8, compute.Window{Size: 2, Stride: 2}},
	{1, 2, 9, 7, compute.Window{Size: 3, Stride: 3, Pad: 1}},
	{2, 1, 5, 6, compute.Window{Size: 4, Stride: 1, Pad: 3}},
	{1, 1, 17, 19, compute.Window{Size: 3, Stride: 1, Pad: 1}},
	{3, 2, 10, 11, compute.Window{Size: 3, Stride: 2, Pad: 1}},
	{2, 2, 5, 5, compute.Window{Size: 2, Stride: 2}},
	{2, 40, 6, 5, compute.Window{Size: 3, Stride: 1, Pad: 1}},
	{1, 32, 4, 4, compute.Window{Size: 2, Stride: 2}},
	{2, 6, 5, 5, compute.Window{Size: 3, Stride: 2, Pad: 1}},
	{2, 36, 9, 8, compute.Window{Size: 5, Stride: 1, Pad: 1}},
	{3, 5, 7, 6, compute.Window{Size: 5, Stride: 1, Pad: 2}},
	{9, 2, 5, 6, compute.Window{Size: 3, Stride: 1, Pad: 1}},
	{17, 1, 6, 5, compute.Window{Size: 3, Stride: 2, Pad: 1}},
}

// imgLayout places a batch of images in a buffer: shared by the batch (batch stride 0), or one
// per batch element with gap unused values between them, starting at off.
type imgLayout struct {
	shared   bool
	gap, off int
}

// convLayouts: per batch element with gaps and an offset, contiguous, and shared.
var convLayouts = []imgLayout{{gap: 5, off: 3}, {}, {shared: true, off: 1}}

func (l imgLayout) String() string {
	if l.shared {
		return "shared"
	}
	return fmt.Sprintf("gap%d-off%d", l.gap, l.off)
}

func (l imgLayout) images(C, N, H, W, batch int) compute.Images {
	x := compute.Images{Off: l.off, C: C, N: N, H: H, W: W, Batch: batch}
	if !l.shared {
		x.BatchStride = x.Size() + l.gap
	}
	return x
}

// imgLen is the buffer length that holds x, with a few values to spare after it.
func imgLen(x compute.Images) int {
	if x.Batch == 0 {
		return x.Off + 1
	}
	return x.Off + (x.Batch-1)*x.BatchStride + x.Size() + 3
}

// matLen is the buffer length that holds m, with a few values to spare after it.
func matLen(m compute.Mat) int {
	if m.Batch == 0 || m.Rows == 0 {
		return m.Off + 1
	}
	return m.Off + (m.Batch-1)*m.BatchStride + (m.Rows-1)*m.Stride + m.Cols + 3
}

// img returns x over buffer id on the CPU (0) and tested (1) side.
func (w *twin) img(id int, x compute.Images) [2]compute.Images {
	var out [2]compute.Images
	for s := 0; s < 2; s++ {
		out[s] = x
		out[s].Buf = w.bufs[id][s]
	}
	return out
}

// convolvers returns both sides' compute.Convolver; the backend under test must implement it.
func (w *twin) convolvers() [2]compute.Convolver {
	cv, ok := w.ops.(compute.Convolver)
	if !ok {
		w.t.Fatalf("%T does not implement compute.Convolver", w.ops)
	}
	return [2]compute.Convolver{w.cpu, cv}
}

func nanFill(int) float32 { return float32(math.NaN()) }

// sameBits fails unless every value of buffer id is the same float32 on both sides, bit for
// bit (so -0 and +0 differ), except that any two NaNs match: a GPU's arithmetic NaN is the
// canonical one while the host's keeps the payload of its operand. Values outside the
// operation's views are compared too (the tests fill them with NaN).
func (w *twin) sameBits(id int, what string) {
	w.t.Helper()
	cpu, got := w.get(id)
	bad := 0
	for i := range cpu {
		if math.Float32bits(cpu[i]) == math.Float32bits(got[i]) || (cpu[i] != cpu[i] && got[i] != got[i]) {
			continue
		}
		if bad < 5 {
			w.t.Errorf("%s: element %d: cpu %v (%08x), kernels %v (%08x)", what, i, cpu[i], math.Float32bits(cpu[i]), got[i], math.Float32bits(got[i]))
		}
		bad++
	}
	if bad > 5 {
		w.t.Errorf("%s: %d elements differ in all", what, bad)
	}
}

// forEachConv runs body for every launch configuration and convolution case (pooling cases
// only when pooling), with a fresh twin per case.
func forEachConv(t *testing.T, f Factory, pooling bool, body func(t *testing.T, w *twin, c convCase)) {
	forEachConvWith(t, f, launchConfigs, pooling, body)
}

// forEachConvWith is forEachConv over the given configurations.
func forEachConvWith(t *testing.T, f Factory, configs []cuda.Options, pooling bool, body func(t *testing.T, w *twin, c convCase)) {
	for _, o := range configs {
		for _, c := range convCases {
			if pooling && !c.pools() {
				continue
			}
			t.Run(cfgName(o)+"/"+c.String(), func(t *testing.T) { body(t, newTwin(t, f, o), c) })
		}
	}
}

// convBatches are the batch sizes: one replica and three.
var convBatches = []int{1, 3}

// Im2col copies values: bit for bit, with the input shared by the batch or one per batch
// element, the patches contiguous or in a strided view with an offset (its padding stays NaN).
func testIm2col(t *testing.T, f Factory) {
	forEachConv(t, f, false, func(t *testing.T, w *twin, c convCase) {
		cv := w.convolvers()
		OH, OW := c.win.Out(c.H), c.win.Out(c.W)
		rows, cols := c.C*c.win.Size*c.win.Size, c.N*OH*OW
		for _, R := range convBatches {
			for _, l := range convLayouts {
				x := l.images(c.C, c.N, c.H, c.W, R)
				xi := w.img(w.normal(imgLen(x)), x)
				cm := compute.Mat{Rows: rows, Cols: cols, Stride: cols, Batch: R, BatchStride: rows * cols}
				if R > 1 {
					cm = compute.Mat{Off: 1, Rows: rows, Cols: cols, Stride: cols + 2, Batch: R, BatchStride: rows*(cols+2) + 1}
				}
				id := w.buf(matLen(cm), nanFill)
				cms := w.mat(id, cm)
				for s := 0; s < 2; s++ {
					cv[s].Im2col(xi[s], c.win, cms[s])
				}
				w.sameBits(id, fmt.Sprintf("R %d x %v", R, l))
			}
		}
	})
}

// Col2im gathers in the contract's order (rows of the patches ascending, each pixel's sum from
// 0): bit for bit, patches one per batch element (strided) or shared by the batch.
func testCol2im(t *testing.T, f Factory) {
	forEachConv(t, f, false, func(t *testing.T, w *twin, c convCase) {
		cv := w.convolvers()
		OH, OW := c.win.Out(c.H), c.win.Out(c.W)
		rows, cols := c.C*c.win.Size*c.win.Size, c.N*OH*OW
		for _, R := range convBatches {
			for _, shared := range []bool{false, true} {
				cm := compute.Mat{Off: 2, Rows: rows, Cols: cols, Stride: cols + 1, Batch: R, BatchStride: rows*(cols+1) + 3}
				if shared {
					cm.BatchStride = 0
				}
				cms := w.mat(w.normal(matLen(cm)), cm)
				dx := imgLayout{gap: 4, off: 1}.images(c.C, c.N, c.H, c.W, R)
				id := w.buf(imgLen(dx), nanFill)
				dxs := w.img(id, dx)
				for s := 0; s < 2; s++ {
					cv[s].Col2im(cms[s], c.win, dxs[s])
				}
				w.sameBits(id, fmt.Sprintf("R %d shared patches %v", R, shared))
			}
		}
	})
}

// poolInputs are the pooling inputs: small integers and signed zeros, so that windows hold
// ties (the first maximum must win, and -0 and +0 are different bits), the same with a few
// NaNs (a NaN wins only as its window's first value, by the contract's > comparisons, on every
// path), and normal values.
var poolInputs = []struct {
	name string
	fill func(w *twin) func(int) float32
}{
	{"ties", func(w *twin) func(int) float32 {
		return func(i int) float32 {
			switch v := w.rng.IntN(7); v {
			case 5:
				return float32(math.Copysign(0, -1))
			case 6:
				return 0
			default:
				return float32(v - 2)
			}
		}
	}},
	{"nan", func(w *twin) func(int) float32 {
		return func(i int) float32 {
			if w.rng.IntN(9) == 0 {
				return float32(math.NaN())
			}
			return float32(w.rng.IntN(4))
		}
	}},
	{"normal", func(w *twin) func(int) float32 {
		return func(int) float32 { return float32(w.rng.NormFloat64()) }
	}},
}

// signedZeros fills gradients with normal values and every 11th a -0: a pixel that one window
// sends -0 gets 0 + -0 = +0 (the contract adds what reaches a pixel, from 0), not -0.
func signedZeros(w *twin) func(int) float32 {
	return func(i int) float32 {
		if i%11 == 5 {
			return float32(math.Copysign(0, -1))
		}
		return float32(w.rng.NormFloat64())
	}
}

// Pool and PoolGrad: a window's first maximum is a comparison and its value a copy; the
// average's sum is float32 in row-major window order times the float32 1/(K K); the gradients
// are float32 sums from 0 in row-major window order: bit for bit, for max and average pooling,
// shared or per-element inputs, one or three batch elements.
func testPool(t *testing.T, f Factory) {
	forEachConv(t, f, true, func(t *testing.T, w *twin, c convCase) {
		cv := w.convolvers()
		OH, OW := c.win.Out(c.H), c.win.Out(c.W)
		for _, p := range []compute.Pooling{compute.MaxPooling, compute.AvgPooling} {
			for _, in := range poolInputs {
				for _, R := range convBatches {
					for _, l := range convLayouts {
						what := fmt.Sprintf("pooling %d, %s, R %d, x %v", p, in.name, R, l)
						x := l.images(c.C, c.N, c.H, c.W, R)
						xi := w.img(w.buf(imgLen(x), in.fill(w)), x)
						y := imgLayout{gap: 2, off: 1}.images(c.C, c.N, OH, OW, R)
						yid := w.buf(imgLen(y), nanFill)
						ys := w.img(yid, y)
						dy := imgLayout{gap: 3}.images(c.C, c.N, OH, OW, R)
						dys := w.img(w.buf(imgLen(dy), signedZeros(w)), dy)
						dx := imgLayout{gap: 1, off: 2}.images(c.C, c.N, c.H, c.W, R)
						dxid := w.buf(imgLen(dx), nanFill)
						dxs := w.img(dxid, dx)
						for s := 0; s < 2; s++ {
							cv[s].Pool(p, c.win, xi[s], ys[s])
							cv[s].PoolGrad(p, c.win, xi[s], dys[s], dxs[s])
						}
						w.sameBits(yid, what+": y")
						w.sameBits(dxid, what+": dx")
					}
				}
			}
		}
	})
}

// Transpose copies values: bit for bit, for single values and blocks, a strided source with an
// offset or one shared by the batch.
func testTranspose(t *testing.T, f Factory) {
	for _, o := range launchConfigs {
		for _, sh := range []struct{ rows, cols, block int }{{1, 1, 1}, {5, 3, 1}, {7, 300, 1}, {4, 6, 7}, {3, 2, 16}, {1, 9, 5}} {
			t.Run(fmt.Sprintf("%s/%dx%d/block%d", cfgName(o), sh.rows, sh.cols, sh.block), func(t *testing.T) {
				w := newTwin(t, f, o)
				cv := w.convolvers()
				for _, R := range convBatches {
					for _, shared := range []bool{false, true} {
						sm := compute.Mat{Off: 2, Rows: sh.rows, Cols: sh.cols, Stride: sh.cols*sh.block + 3, Batch: R}
						sm.BatchStride = sh.rows*sm.Stride + 1
						if shared {
							sm.BatchStride = 0
						}
						// Rows and Cols count blocks; the buffers hold Cols * block values a row.
						values := func(m compute.Mat) compute.Mat { m.Cols *= sh.block; return m }
						sms := w.mat(w.normal(matLen(values(sm))), sm)
						dm := compute.Mat{Off: 1, Rows: sh.cols, Cols: sh.rows, Stride: sh.rows*sh.block + 2, Batch: R}
						dm.BatchStride = sh.cols*dm.Stride + 2
						id := w.buf(matLen(values(dm)), nanFill)
						dms := w.mat(id, dm)
						for s := 0; s < 2; s++ {
							cv[s].Transpose(sh.block, sms[s], dms[s])
						}
						w.sameBits(id, fmt.Sprintf("R %d shared %v", R, shared))
					}
				}
			})
		}
	}
}

// gnCase is a GroupNorm geometry: C channels in groups, N samples of H x W.
type gnCase struct{ C, N, H, W, groups int }

// gnCases cover groups of one value (fewer values than partial sums), one channel per group,
// one group, 1 x 1 images (after global pooling), groups longer than the partial-sum count
// times the launch configurations' blocks, and images of enough pixels for the gradients' sums
// to split a channel into runs (kernels.GroupNormPixelSlices): 24 x 24 into 8 runs of 72, 13 x
// 11 into 2 runs of 72 and 71.
var gnCases = []gnCase{
	{1, 1, 1, 1, 1},
	{6, 2, 5, 7, 3},
	{4, 3, 3, 3, 4},
	{8, 1, 9, 9, 1},
	{3, 2, 1, 1, 3},
	{16, 2, 8, 8, 4},
	{2, 8, 24, 24, 1},
	{4, 3, 13, 11, 2},
}

// gnStats returns imgops.GroupStats of batch element b of x (host values xs).
func gnStats(xs []float32, x compute.Images, b, groups int, eps float32) (mean, rstd []float64) {
	g := imgops.Geom{C: x.C, N: x.N, H: x.H, W: x.W}
	mean, rstd = make([]float64, x.N*groups), make([]float64, x.N*groups)
	imgops.GroupStats(xs[x.Off+b*x.BatchStride:], g, groups, float64(eps), mean, rstd, 0, groups)
	return mean, rstd
}

// gnParams places gamma and beta, interleaved in one buffer per batch element (gamma at 1,
// beta at C + 2, batch stride 2C + 3: strided rows with offsets), or shared by the batch.
func gnParams(C, R int, shared bool) (gamma, beta compute.Mat) {
	gamma = compute.Mat{Off: 1, Rows: 1, Cols: C, Stride: C, Batch: R, BatchStride: 2*C + 3}
	if shared {
		gamma.BatchStride = 0
	}
	beta = gamma
	beta.Off = C + 2
	return gamma, beta
}

// The GroupNorm tests compare within tolerances, not bit for bit: both sides sum the
// statistics in float64 (s, ss, and the gradients' sums) but in different orders (the CPU
// sequentially, the kernels in GroupNormPartials strided partial sums), so the float64 values
// differ by relative amounts below cnt 2^-53 of the sums of magnitudes (about 1e-13 here;
// the variance's cancellation E[x^2] - E[x]^2 multiplies that by (mean^2 + var) / var, below
// 3e3 in the offset case, still far below float32's 6e-8). What reaches float32 can then
// differ where a value lies next to a float32 rounding boundary:
//   - y = a x + b with a = f32(rstd) gamma and b = beta - f32(mean rstd) gamma: f32(rstd) and
//     f32(mean rstd) may differ by 1 ulp, which moves a and b by at most 2^-22 of |rstd gamma|
//     and |mean rstd gamma|, and the products and sums round once more: |dy| <= 2^-21 (|a x|
//     + |mean rstd gamma| + |b| + |y|);
//   - dx, dgamma, dbeta are float64 expressions rounded once: 1 float32 ulp (2^-23 |ref|) plus
//     the float64 difference, bounded by 1e-10 of the magnitudes of their terms (M below;
//     1e3 times the estimate above, 6e2 times below float32 resolution).
// Everything else in the buffers (NaN-filled) must stay bit for bit. Any real error (a wrong
// group, sample, channel, a missing term) moves values by far more than these bounds, and the
// tests log how many values differ at all.

// gnCompare fails where |cpu - kernels| > tol(i) for the values in view (in reports whether
// value i of the buffer is one of the operation's outputs), and where values outside the views
// differ in bits; it returns how many values in view differ in bits.
func (w *twin) gnCompare(id int, what string, in func(i int) bool, tol func(i int, ref float64) float64) int {
	w.t.Helper()
	cpu, got := w.get(id)
	bad, differ := 0, 0
	for i := range cpu {
		sameBits := math.Float32bits(cpu[i]) == math.Float32bits(got[i]) || (cpu[i] != cpu[i] && got[i] != got[i])
		if sameBits {
			continue
		}
		ok := false
		if in(i) {
			differ++
			d := math.Abs(float64(cpu[i]) - float64(got[i]))
			ok = d <= tol(i, float64(cpu[i]))
		}
		if !ok {
			if bad < 5 {
				w.t.Errorf("%s: element %d (in view %v): cpu %v, kernels %v", what, i, in(i), cpu[i], got[i])
			}
			bad++
		}
	}
	if bad > 5 {
		w.t.Errorf("%s: %d elements out of tolerance in all", what, bad)
	}
	return differ
}

// inImages reports whether buffer index i holds a value of x, and returns its batch element,
// channel, sample and pixel offset.
func inImages(x compute.Images, i int) (ok bool, b, c, n, px int) {
	i -= x.Off
	if i < 0 {
		return false, 0, 0, 0, 0
	}
	size := x.Size()
	if x.BatchStride == 0 {
		b = 0
	} else {
		b = i / x.BatchStride
		i -= b * x.BatchStride
	}
	if b >= x.Batch || i >= size {
		return false, 0, 0, 0, 0
	}
	hw := x.H * x.W
	c, px, n = i/(hw*x.N), i/x.N%hw, i%x.N // [C][H W][N], the samples innermost
	return true, b, c, n, px
}

// inRow reports whether buffer index i holds a value of the 1 x C rows m, and its batch
// element and column.
func inRow(m compute.Mat, i int) (ok bool, b, c int) {
	i -= m.Off
	if i < 0 || m.BatchStride == 0 {
		return i >= 0 && i < m.Cols, 0, i
	}
	b, c = i/m.BatchStride, i%m.BatchStride
	return b < m.Batch && c < m.Cols, b, c
}

// gnOffset is the mean added to x in the cases that test the variance's cancellation.
var gnOffsets = []float32{0, 30}

func testGroupNorm(t *testing.T, f Factory) {
	const eps = 1e-5
	for _, o := range launchConfigs {
		for _, gc := range gnCases {
			t.Run(fmt.Sprintf("%s/%+v", cfgName(o), gc), func(t *testing.T) {
				w := newTwin(t, f, o)
				cv := w.convolvers()
				differ, total := 0, 0
				for _, R := range convBatches {
					for _, l := range convLayouts {
						for _, sharedParams := range []bool{false, true} {
							for _, shift := range gnOffsets {
								what := fmt.Sprintf("R %d x %v shared params %v offset %v", R, l, sharedParams, shift)
								x := l.images(gc.C, gc.N, gc.H, gc.W, R)
								xid := w.buf(imgLen(x), func(int) float32 { return shift + float32(w.rng.NormFloat64()) })
								xs, _ := w.get(xid)
								gm, bt := gnParams(gc.C, R, sharedParams)
								pid := w.normal(matLen(gm) + gc.C + 2)
								ps, _ := w.get(pid)
								y := imgLayout{gap: 2, off: 3}.images(gc.C, gc.N, gc.H, gc.W, R)
								yid := w.buf(imgLen(y), nanFill)
								xi, gms, bts, ys := w.img(xid, x), w.mat(pid, gm), w.mat(pid, bt), w.img(yid, y)
								for s := 0; s < 2; s++ {
									cv[s].GroupNorm(gc.groups, eps, xi[s], gms[s], bts[s], ys[s])
								}
								ycpu, _ := w.get(yid)
								stats := make([][2][]float64, R)
								for b := range stats {
									stats[b][0], stats[b][1] = gnStats(xs, x, b, gc.groups, eps)
								}
								cg := gc.C / gc.groups
								differ += w.gnCompare(yid, what, func(i int) bool { ok, _, _, _, _ := inImages(y, i); return ok },
									func(i int, ref float64) float64 {
										_, b, c, n, px := inImages(y, i)
										r := n*gc.groups + c/cg
										mu, rs := stats[b][0][r], stats[b][1][r]
										g := float64(ps[gm.Off+b*gm.BatchStride+c])
										be := float64(ps[bt.Off+b*bt.BatchStride+c])
										xv := float64(xs[x.Off+b*x.BatchStride+(c*gc.H*gc.W+px)*gc.N+n])
										scale := math.Abs(rs*g*xv) + math.Abs(mu*rs*g) + math.Abs(be-mu*rs*g) + math.Abs(float64(ycpu[i]))
										return math.Ldexp(scale, -21) + 1e-30
									})
								total += R * x.Size()
							}
						}
					}
				}
				t.Logf("y: %d of %d values differ from the CPU's in bits (all within tolerance)", differ, total)
			})
		}
	}
}

func testGroupNormGrad(t *testing.T, f Factory) {
	for _, o := range launchConfigs {
		for _, gc := range gnCases {
			t.Run(fmt.Sprintf("%s/%+v", cfgName(o), gc), func(t *testing.T) {
				w := newTwin(t, f, o)
				cv := w.convolvers()
				var differ, total [2]int // dx; dgamma and dbeta
				for _, R := range convBatches {
					for _, l := range convLayouts {
						for _, wantDX := range []bool{true, false} {
							for _, shift := range gnOffsets {
								d, n := gnGradCase(w, cv, gc, R, l, wantDX, shift)
								differ[0], differ[1] = differ[0]+d[0], differ[1]+d[1]
								total[0], total[1] = total[0]+n[0], total[1]+n[1]
							}
						}
					}
				}
				t.Logf("dx: %d of %d values differ from the CPU's in bits; dgamma, dbeta: %d of %d (all within tolerance)",
					differ[0], total[0], differ[1], total[1])
			})
		}
	}
}

// gnGradCase runs GroupNormGrad on both backends for one batch size, layout, choice of dx and
// offset of x, and compares dx (or that it is untouched) and dgamma, dbeta within tolerances
// built from the host's magnitudes of each sum's terms. It returns how many values differ in
// bits from the CPU's and how many were compared, for dx and for dgamma and dbeta.
func gnGradCase(w *twin, cv [2]compute.Convolver, gc gnCase, R int, l imgLayout, wantDX bool, shift float32) (differ, total [2]int) {
	const eps = 1e-5
	what := fmt.Sprintf("R %d x %v dx %v offset %v", R, l, wantDX, shift)
	x := l.images(gc.C, gc.N, gc.H, gc.W, R)
	xid := w.buf(imgLen(x), func(int) float32 { return shift + float32(w.rng.NormFloat64()) })
	xs, _ := w.get(xid)
	// gamma shared by the batch in the shared-x case (as a model's
	// parameters never are, but the contract allows it).
	gm, _ := gnParams(gc.C, R, l.shared)
	gid := w.normal(matLen(gm))
	gs, _ := w.get(gid)
	dy := imgLayout{gap: 1}.images(gc.C, gc.N, gc.H, gc.W, R)
	dyid := w.normal(imgLen(dy))
	dys, _ := w.get(dyid)
	dx := imgLayout{gap: 2, off: 1}.images(gc.C, gc.N, gc.H, gc.W, R)
	dxid := w.buf(imgLen(dx), nanFill)
	dgm, dbt := gnParams(gc.C, R, false)
	pid := w.buf(matLen(dgm)+gc.C+2, nanFill)
	xi, gms, dyi, dxi := w.img(xid, x), w.mat(gid, gm), w.img(dyid, dy), w.img(dxid, dx)
	dgms, dbts := w.mat(pid, dgm), w.mat(pid, dbt)
	if !wantDX {
		dxi = [2]compute.Images{}
	}
	for s := 0; s < 2; s++ {
		cv[s].GroupNormGrad(gc.groups, eps, xi[s], gms[s], dyi[s], dxi[s], dgms[s], dbts[s])
	}
	v := gnGradView{gc: gc, xs: xs, dys: dys, gs: gs, x: x, dy: dy, gm: gm}
	st, sdy, sdyx := v.magnitudes(R, eps)
	cg := gc.C / gc.groups
	if wantDX {
		differ[0] += w.gnCompare(dxid, what+": dx", func(i int) bool { ok, _, _, _, _ := inImages(dx, i); return ok },
			func(i int, ref float64) float64 {
				_, b, c, n, px := inImages(dx, i)
				s := st[b][n*gc.groups+c/cg]
				xh := (v.xAt(b, c, n, px) - s.mu) * s.rs
				m := s.rs * (math.Abs(v.dyAt(b, c, n, px)*v.gAt(b, c)) + s.mg + math.Abs(xh)*s.mgx)
				return math.Ldexp(math.Abs(ref), -23) + 1e-10*m + 1e-30
			})
		total[0] += R * x.Size()
	} else {
		w.sameBits(dxid, what+": dx untouched")
	}
	differ[1] += w.gnCompare(pid, what+": dgamma, dbeta", func(i int) bool {
		okg, _, _ := inRow(dgm, i)
		okb, _, _ := inRow(dbt, i)
		return okg || okb
	}, func(i int, ref float64) float64 {
		if ok, b, c := inRow(dgm, i); ok {
			return math.Ldexp(math.Abs(ref), -23) + 1e-10*sdyx[b][c] + 1e-30
		}
		_, b, c := inRow(dbt, i)
		return math.Ldexp(math.Abs(ref), -23) + 1e-10*sdy[b][c] + 1e-30
	})
	total[1] += 2 * R * gc.C
	return differ, total
}

// gnGradView reads the host copies of GroupNormGrad's inputs by replica, channel, image and
// pixel, so that the tolerances can be written in those terms.
type gnGradView struct {
	gc      gnCase
	xs, dys []float32
	gs      []float32
	x, dy   compute.Images
	gm      compute.Mat
}

func (v *gnGradView) xAt(b, c, n, px int) float64 {
	hw := v.gc.H * v.gc.W
	return float64(v.xs[v.x.Off+b*v.x.BatchStride+(c*hw+px)*v.gc.N+n])
}

func (v *gnGradView) dyAt(b, c, n, px int) float64 {
	hw := v.gc.H * v.gc.W
	return float64(v.dys[v.dy.Off+b*v.dy.BatchStride+(c*hw+px)*v.gc.N+n])
}

func (v *gnGradView) gAt(b, c int) float64 { return float64(v.gs[v.gm.Off+b*v.gm.BatchStride+c]) }

// gnGradStat is a group's host statistics (mean, reciprocal standard deviation) and the mean
// magnitudes of the terms of dx's two sums over the group.
type gnGradStat struct{ mu, rs, mg, mgx float64 }

// magnitudes computes, on the host, each replica's group statistics and the magnitudes of the
// terms of every sum the gradient takes (dx's per group, dgamma's and dbeta's per channel):
// the scales the float32 sums' rounding is measured against.
func (v *gnGradView) magnitudes(R int, eps float32) (st [][]gnGradStat, sdy, sdyx [][]float64) {
	gc := v.gc
	cg, hw := gc.C/gc.groups, gc.H*gc.W
	st = make([][]gnGradStat, R)
	sdy, sdyx = make([][]float64, R), make([][]float64, R)
	for b := 0; b < R; b++ {
		mean, rstd := gnStats(v.xs, v.x, b, gc.groups, eps)
		st[b] = make([]gnGradStat, gc.N*gc.groups)
		sdy[b], sdyx[b] = make([]float64, gc.C), make([]float64, gc.C)
		for n := 0; n < gc.N; n++ {
			for g := 0; g < gc.groups; g++ {
				r := n*gc.groups + g
				s := gnGradStat{mu: mean[r], rs: rstd[r]}
				for c := g * cg; c < (g+1)*cg; c++ {
					for px := 0; px < hw; px++ {
						gy := v.dyAt(b, c, n, px) * v.gAt(b, c)
						xh := (v.xAt(b, c, n, px) - s.mu) * s.rs
						s.mg += math.Abs(gy)
						s.mgx += math.Abs(gy * xh)
						sdy[b][c] += math.Abs(v.dyAt(b, c, n, px))
						sdyx[b][c] += math.Abs(v.dyAt(b, c, n, px) * xh)
					}
				}
				s.mg /= float64(cg * hw)
				s.mgx /= float64(cg * hw)
				st[b][r] = s
			}
		}
	}
	return st, sdy, sdyx
}

// GroupNorm refuses a channel count that its groups do not divide, with an error and no launch;
// Close reports the error again (the harness checks it).
func testGroupNormBadGroups(t *testing.T, f Factory) {
	w := newTwin(t, f, cuda.Options{})
	cv := w.convolvers()
	x := compute.Images{C: 6, N: 1, H: 2, W: 2, Batch: 1}
	x.Buf = w.bufs[w.normal(x.Size())][1]
	g := compute.Mat{Buf: w.bufs[w.normal(6)][1], Rows: 1, Cols: 6, Stride: 6, Batch: 1}
	cv[1].GroupNorm(4, 1e-5, x, g, g, x)
	if w.ops.Err() == nil {
		t.Fatal("6 channels in 4 groups gave no error")
	}
	w.expectErr(w.ops.Err()) // Close reports it again, on every device
	t.Logf("error as reported: %v", w.ops.Err())
}

// directOutputs are the output channel counts of the direct convolution's cases: one (conv_direct's
// tile of 8 channels, conv_direct_dw's of CONV_COT = 8, each with one), nine (a tile of 16
// with nine; a full tile of 8 and a partial one) and twenty (a full tile of 16 and a partial
// one; two full tiles of 8 and a partial one).
var directOutputs = []int{1, 9, 20}

// The direct convolution (compute.DirectConvolver: conv_direct, conv_direct_dw with
// splitk_reduce, conv_direct_dx) against a float64 evaluation of the patch form's definition
// (Im2col's patches with a row of ones times [w | bias]; dy times the patches' transpose; Col2im
// of w's transpose times dy), on every convolution case, input shared by the batch or one per
// batch element with gaps, weights and bias in strided views, outputs in strided views whose
// surroundings stay NaN. Each value is a float32 sum of n terms added in order, whose error is
// at most n 2^-24 times the sum of the terms' magnitudes (plus one rounding of each product):
// the tolerance is (n + 2) 2^-24 times that sum, computed in float64 beside the reference. An
// index off by one moves a value by the size of a term, far above it.
//
// The weight gradient runs by conv_direct_dw and, with Options.DirectDWRows 2 and 4, by
// conv_direct_dw_win2 and _win4 where they apply (stride 1, a 3 or 5 window, one sample a
// partial: the cases of 1 to 32 samples at stride 1 with those windows).
func testConvDirect(t *testing.T, f Factory) {
	var configs []cuda.Options
	for _, rows := range []int{0, 2, 4} {
		for _, o := range launchConfigs {
			o.DirectDWRows = rows
			configs = append(configs, o)
		}
	}
	forEachConvWith(t, f, configs, false, func(t *testing.T, w *twin, c convCase) {
		dc, ok := w.ops.(compute.DirectConvolver)
		if !ok {
			t.Fatalf("%T does not implement compute.DirectConvolver", w.ops)
		}
		OH, OW := c.win.Out(c.H), c.win.Out(c.W)
		K, S, P := c.win.Size, c.win.Stride, c.win.Pad
		rows := c.C * K * K
		for _, R := range convBatches {
			for _, l := range convLayouts {
				for _, co := range directOutputs {
					name := fmt.Sprintf("R %d x %v, %d outputs", R, l, co)
					x := l.images(c.C, c.N, c.H, c.W, R)
					xid := w.normal(imgLen(x))
					wm := compute.Mat{Off: 2, Rows: co, Cols: rows, Stride: rows + 3, Batch: R, BatchStride: co*(rows+3) + 1}
					wid := w.normal(matLen(wm))
					bm := compute.Mat{Off: 1, Rows: co, Cols: 1, Stride: 2, Batch: R, BatchStride: 2*co + 1}
					bid := w.normal(matLen(bm))
					y := imgLayout{gap: 2, off: 1}.images(co, c.N, OH, OW, R)
					yid := w.buf(imgLen(y), nanFill)
					dy := imgLayout{gap: 3, off: 2}.images(co, c.N, OH, OW, R)
					dyid := w.normal(imgLen(dy))
					dwm := compute.Mat{Off: 3, Rows: co, Cols: rows, Stride: rows + 1, Batch: R, BatchStride: co*(rows+1) + 2}
					dwid := w.buf(matLen(dwm), nanFill)
					dbm := compute.Mat{Off: 1, Rows: co, Cols: 1, Stride: 3, Batch: R, BatchStride: 3*co + 2}
					dbid := w.buf(matLen(dbm), nanFill)
					dx := imgLayout{gap: 4, off: 1}.images(c.C, c.N, c.H, c.W, R)
					dxid := w.buf(imgLen(dx), nanFill)

					wt, bt := w.mat(wid, wm)[1], w.mat(bid, bm)[1]
					dc.ConvDirect(wt, bt, w.img(xid, x)[1], c.win, w.img(yid, y)[1])
					dc.ConvDirectGrad(wt, w.img(xid, x)[1], c.win, w.img(dyid, dy)[1], w.mat(dwid, dwm)[1], w.mat(dbid, dbm)[1], w.img(dxid, dx)[1])
					if err := w.ops.Err(); err != nil {
						t.Fatal(err)
					}
					host := func(id int) []float32 { v, _ := w.get(id); return v } // the CPU side holds the inputs as uploaded
					xs, ws, bs, dys := host(xid), host(wid), host(bid), host(dyid)
					_, ys := w.get(yid)
					_, dws := w.get(dwid)
					_, dbs := w.get(dbid)
					_, dxs := w.get(dxid)

					at := func(im compute.Images, b, ch, yy, xx, n int) int {
						return im.Off + b*im.BatchStride + ((ch*im.H+yy)*im.W+xx)*im.N + n
					}
					xv := func(b, ch, iy, ix, n int) float64 { // a padding value is 0
						if iy < 0 || iy >= c.H || ix < 0 || ix >= c.W {
							return 0
						}
						return float64(xs[at(x, b, ch, iy, ix, n)])
					}
					wv := func(b, o, k int) float64 { return float64(ws[wm.Off+b*wm.BatchStride+o*wm.Stride+k]) }
					dyv := func(b, o, oy, ox, n int) float64 { return float64(dys[at(dy, b, o, oy, ox, n)]) }
					seen := map[string]map[int]bool{"y": {}, "dw": {}, "dbias": {}, "dx": {}}
					check := func(what string, got []float32, i int, ref, mag float64, terms int) {
						t.Helper()
						seen[what][i] = true
						tol := float64(terms+2) * 0x1p-24 * mag
						if d := math.Abs(float64(got[i]) - ref); !(d <= tol) {
							t.Errorf("%s: %s element %d: kernels %v, float64 reference %v, difference %g above %g", name, what, i, got[i], ref, d, tol)
						}
					}
					for b := 0; b < R; b++ {
						for o := 0; o < co; o++ {
							// The output and the weight gradient.
							bias := float64(bs[bm.Off+b*bm.BatchStride+o*bm.Stride])
							for oy := 0; oy < OH; oy++ {
								for ox := 0; ox < OW; ox++ {
									for n := 0; n < c.N; n++ {
										ref, mag := bias, math.Abs(bias)
										for k := 0; k < rows; k++ {
											ch, i, j := k/(K*K), k/K%K, k%K
											v := wv(b, o, k) * xv(b, ch, oy*S-P+i, ox*S-P+j, n)
											ref, mag = ref+v, mag+math.Abs(v)
										}
										check("y", ys, at(y, b, o, oy, ox, n), ref, mag, rows+1)
									}
								}
							}
							for k := 0; k <= rows; k++ {
								ref, mag := 0.0, 0.0
								for oy := 0; oy < OH; oy++ {
									for ox := 0; ox < OW; ox++ {
										for n := 0; n < c.N; n++ {
											p := 1.0
											if k < rows {
												ch, i, j := k/(K*K), k/K%K, k%K
												p = xv(b, ch, oy*S-P+i, ox*S-P+j, n)
											}
											v := dyv(b, o, oy, ox, n) * p
											ref, mag = ref+v, mag+math.Abs(v)
										}
									}
								}
								if k < rows {
									check("dw", dws, dwm.Off+b*dwm.BatchStride+o*dwm.Stride+k, ref, mag, OH*OW*c.N)
								} else {
									check("dbias", dbs, dbm.Off+b*dbm.BatchStride+o*dbm.Stride, ref, mag, OH*OW*c.N)
								}
							}
						}
						// The input gradient: every (output pixel, window offset) that reads pixel (iy, ix).
						for ch := 0; ch < c.C; ch++ {
							for iy := 0; iy < c.H; iy++ {
								for ix := 0; ix < c.W; ix++ {
									for n := 0; n < c.N; n++ {
										ref, mag := 0.0, 0.0
										for oy := 0; oy < OH; oy++ {
											for ox := 0; ox < OW; ox++ {
												i, j := iy-(oy*S-P), ix-(ox*S-P)
												if i < 0 || i >= K || j < 0 || j >= K {
													continue
												}
												for o := 0; o < co; o++ {
													v := wv(b, o, (ch*K+i)*K+j) * dyv(b, o, oy, ox, n)
													ref, mag = ref+v, mag+math.Abs(v)
												}
											}
										}
										check("dx", dxs, at(dx, b, ch, iy, ix, n), ref, mag, K*K*co)
									}
								}
							}
						}
					}
					// Nothing outside the outputs' views is written.
					for what, got := range map[string][]float32{"y": ys, "dw": dws, "dbias": dbs, "dx": dxs} {
						for i, v := range got {
							if !seen[what][i] && v == v {
								t.Errorf("%s: %s element %d outside the view was written (%v)", name, what, i, v)
								break
							}
						}
					}
				}
			}
		}
	})
}
