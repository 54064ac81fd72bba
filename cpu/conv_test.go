package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/internal/imgops"
)

// The Convolver operations of the CPU backend give, bit for bit, what package imgops computes
// for each batch element on one goroutine, for 1 and 3 workers, with the input shared by the
// batch (stride 0) or one per batch element, and sizes large enough to be split into tasks.
func TestConvolverMatchesImgops(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	wins := []compute.Window{{Size: 5, Stride: 1, Pad: 2}, {Size: 3, Stride: 2, Pad: 1}, {Size: 2, Stride: 2}}
	// Five samples, and 37: runs of samples long enough for the SIMD 2x2 max pooling (eight at
	// a time, then a tail), against imgops' portable kernels.
	for _, x0 := range []compute.Images{{C: 6, N: 5, H: 14, W: 13}, {C: 6, N: 37, H: 6, W: 7}} {
		testConvolverMatchesImgops(t, rng, fill, x0, wins)
	}
}

func testConvolverMatchesImgops(t *testing.T, rng *rand.Rand, fill func(int) []float32, x0 compute.Images, wins []compute.Window) {
	const R = 3
	for _, threads := range []int{1, 3} {
		be := New(threads)
		defer be.Close()
		for _, shared := range []bool{false, true} {
			for _, w := range wins {
				x, xs := replicaImages(be, fill, x0, R, shared)
				checkWindowOps(t, be, fill, x, xs, w)
			}
			x, xs := replicaImages(be, fill, x0, R, shared)
			checkGroupNorm(t, be, fill, x, xs)
			checkTranspose(t, be, fill, R, shared)
		}
	}
}

// replicaImages is x0 for R batch elements with fresh input xs: one image shared by the batch
// (stride 0) or one per element. It is its own piece because the window and GroupNorm checks
// each start from such an input, drawn in the same order from fill.
func replicaImages(be *Backend, fill func(int) []float32, x0 compute.Images, R int, shared bool) (compute.Images, []float32) {
	x := x0
	x.Batch = R
	per := x.Size()
	if !shared {
		x.BatchStride = per
	}
	xs := fill(per * R)
	x.Buf = be.Alias(xs)
	return x, xs
}

// checkWindowOps checks Im2col and Col2im for window w, then both poolings and their
// gradients where the window allows them, against imgops per batch element of x (input xs).
// It is its own piece because these are the operations of one window, which share its
// geometry and the column layout.
func checkWindowOps(t *testing.T, be *Backend, fill func(int) []float32, x compute.Images, xs []float32, w compute.Window) {
	t.Helper()
	R, per := x.Batch, x.Size()
	g := imgops.Geom{C: x.C, N: x.N, H: x.H, W: x.W}
	iw := imgops.Win{K: w.Size, S: w.Stride, P: w.Pad}
	OH, OW := w.Out(x.H), w.Out(x.W)
	rows, cols := x.C*w.Size*w.Size, x.N*OH*OW
	xAt := func(r int) []float32 { return xs[r*x.BatchStride:] }

	got := make([]float32, R*rows*cols)
	be.Im2col(x, w, compute.Mat{Buf: be.Alias(got), Rows: rows, Cols: cols, Stride: cols, Batch: R, BatchStride: rows * cols})
	want := make([]float32, len(got))
	for r := 0; r < R; r++ {
		imgops.Im2col(xAt(r), g, iw, want[r*rows*cols:], cols, 0, rows)
	}
	same(t, "im2col", got, want)

	d := fill(R * rows * cols)
	dx := make([]float32, R*per)
	be.Col2im(compute.Mat{Buf: be.Alias(d), Rows: rows, Cols: cols, Stride: cols, Batch: R, BatchStride: rows * cols}, w,
		compute.Images{Buf: be.Alias(dx), C: x.C, N: x.N, H: x.H, W: x.W, Batch: R, BatchStride: per})
	wantDX := make([]float32, R*per)
	for r := 0; r < R; r++ {
		imgops.Col2im(d[r*rows*cols:], cols, g, iw, wantDX[r*per:], 0, x.C, nil)
	}
	same(t, "col2im", dx, wantDX)

	if w.Pad >= w.Size {
		return
	}
	for _, p := range []compute.Pooling{compute.MaxPooling, compute.AvgPooling} {
		yper := x.C * x.N * OH * OW
		y := make([]float32, R*yper)
		yi := compute.Images{Buf: be.Alias(y), C: x.C, N: x.N, H: OH, W: OW, Batch: R, BatchStride: yper}
		be.Pool(p, w, x, yi)
		dy := fill(R * yper)
		be.PoolGrad(p, w, x, compute.Images{Buf: be.Alias(dy), C: x.C, N: x.N, H: OH, W: OW, Batch: R, BatchStride: yper},
			compute.Images{Buf: be.Alias(dx), C: x.C, N: x.N, H: x.H, W: x.W, Batch: R, BatchStride: per})
		wantY := make([]float32, len(y))
		for r := 0; r < R; r++ {
			if p == compute.MaxPooling {
				imgops.MaxPool(xAt(r), g, iw, wantY[r*yper:], 0, x.C*OH)
				imgops.MaxPoolGrad(xAt(r), g, iw, dy[r*yper:], wantDX[r*per:], 0, x.C)
			} else {
				imgops.AvgPool(xAt(r), g, iw, wantY[r*yper:], 0, x.C*OH)
				imgops.AvgPoolGrad(g, iw, dy[r*yper:], wantDX[r*per:], 0, x.C)
			}
		}
		same(t, "pool", y, wantY)
		same(t, "pool gradient", dx, wantDX)
	}
}

// checkGroupNorm checks GroupNorm and GroupNormGrad with per-element gamma and beta (replica
// stride C+1, an odd layout) against imgops per batch element of x (input xs). It is its own
// piece because it is the normalisation layer, with its own parameters, apart from the
// windowed operations.
func checkGroupNorm(t *testing.T, be *Backend, fill func(int) []float32, x compute.Images, xs []float32) {
	t.Helper()
	R, per := x.Batch, x.Size()
	g := imgops.Geom{C: x.C, N: x.N, H: x.H, W: x.W}
	const groups, eps = 3, 1e-5
	ps := fill(R * (2*x.C + 1))
	gm := compute.Mat{Buf: be.Alias(ps), Rows: 1, Cols: x.C, Stride: x.C, Batch: R, BatchStride: 2*x.C + 1}
	bt := gm
	bt.Off = x.C
	y := make([]float32, R*per)
	yi := compute.Images{Buf: be.Alias(y), C: x.C, N: x.N, H: x.H, W: x.W, Batch: R, BatchStride: per}
	be.GroupNorm(groups, eps, x, gm, bt, yi)
	dy := fill(R * per)
	dx := make([]float32, R*per)
	dps := make([]float32, R*2*x.C)
	dgm := compute.Mat{Buf: be.Alias(dps), Rows: 1, Cols: x.C, Stride: x.C, Batch: R, BatchStride: 2 * x.C}
	dbt := dgm
	dbt.Off = x.C
	dyi := yi
	dyi.Buf = be.Alias(dy)
	dxi := yi
	dxi.Buf = be.Alias(dx)
	be.GroupNormGrad(groups, eps, x, gm, dyi, dxi, dgm, dbt)
	wantY, wantDX, wantP := make([]float32, len(y)), make([]float32, len(dx)), make([]float32, len(dps))
	m, s := make([]float64, x.N*groups), make([]float64, x.N*groups)
	for r := 0; r < R; r++ {
		xr := xs[r*x.BatchStride:]
		gamma, beta := ps[r*(2*x.C+1):][:x.C], ps[r*(2*x.C+1)+x.C:][:x.C]
		imgops.GroupStats(xr, g, groups, eps, m, s, 0, groups)
		imgops.GroupNorm(xr, g, groups, m, s, gamma, beta, wantY[r*per:], 0, groups)
		imgops.GroupNormGradX(xr, g, groups, m, s, gamma, dy[r*per:], wantDX[r*per:], 0, groups)
		imgops.GroupNormGradParams(xr, g, groups, m, s, dy[r*per:], wantP[r*2*x.C:], wantP[r*2*x.C+x.C:], 0, x.C)
	}
	same(t, "groupnorm", y, wantY)
	same(t, "groupnorm dx", dx, wantDX)
	same(t, "groupnorm dgamma, dbeta", dps, wantP)
}

// checkTranspose checks the transpose of blocks and a plain matrix transpose (sample rows
// into [C][H][W][N]) for R batch elements, the source shared by the batch or not. It is its
// own piece because it works on matrices, not on the images of the other checks.
func checkTranspose(t *testing.T, be *Backend, fill func(int) []float32, R int, shared bool) {
	t.Helper()
	for _, block := range []int{1, 7} {
		rows, cols := 40, 30
		src := fill(R * rows * cols * block)
		dst := make([]float32, len(src))
		sm := compute.Mat{Buf: be.Alias(src), Rows: rows, Cols: cols, Stride: cols * block, Batch: R, BatchStride: rows * cols * block}
		if shared {
			sm.BatchStride = 0
		}
		be.Transpose(block, sm, compute.Mat{Buf: be.Alias(dst), Rows: cols, Cols: rows, Stride: rows * block, Batch: R, BatchStride: rows * cols * block})
		want := make([]float32, len(dst))
		for r := 0; r < R; r++ {
			imgops.Transpose(block, src[r*sm.BatchStride:], cols*block, cols, want[r*rows*cols*block:], rows*block, 0, rows)
		}
		same(t, "transpose", dst, want)
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if !slices.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: value %d is %g, want %g", what, i, got[i], want[i])
			}
		}
	}
}
