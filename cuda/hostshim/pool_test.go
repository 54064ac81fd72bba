//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/nn"
)

// noKeptIndex, embedded beside a backend one level deeper, shadows compute.PoolIndexKeeper's
// PoolKeep with a method of another signature: the backend's max pooling gradient then finds
// each window's maximum again in x.
type noKeptIndex struct{}

func (noKeptIndex) PoolKeep() {}

// LeNet-5's max pooling keeps each window's maximum's place from the forward pass for the
// gradient (compute.PoolIndexKeeper): the losses and gradients have the bits of finding it
// again (pool_grad_tiled), and both poolings' gradients run pool_grad_kept instead.
func TestKeptPoolIndicesKeepModelBits(t *testing.T) {
	type shimOps struct{ *cuda.Ops }
	g0, l0, k0 := lenetLossGrad(t, func(ops *cuda.Ops) compute.Backend {
		return struct {
			shimOps
			noKeptIndex
		}{shimOps{ops}, noKeptIndex{}}
	})
	g1, l1, k1 := lenetLossGrad(t, nil)
	if k0[kernels.PoolGradTiled] != 2 || k0[kernels.PoolGradKept] != 0 || k1[kernels.PoolGradTiled] != 0 || k1[kernels.PoolGradKept] != 2 {
		t.Errorf("pool_grad_tiled %d and pool_grad_kept %d launches finding the maxima again, %d and %d keeping them: want 2 and 0, 0 and 2",
			k0[kernels.PoolGradTiled], k0[kernels.PoolGradKept], k1[kernels.PoolGradTiled], k1[kernels.PoolGradKept])
	}
	requireSameBits(t, "kept window indices", "found again", g1, g0, l1, l0)
}

// lenetLossGrad is LeNet-5's losses and gradients for 2 replicas on the shim, on the backend
// hide makes of it (nil: the backend itself), and the launches of each kernel.
func lenetLossGrad(t *testing.T, hide func(*cuda.Ops) compute.Backend) (grad []float32, loss []float64, per map[kernels.Kernel]int) {
	cd := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
	ops := cuda.NewOps(cd, cuda.Options{})
	defer ops.Close()
	var be compute.Backend = ops
	if hide != nil {
		be = hide(ops)
	}
	grad, loss = modelLossGrad(t, nn.LeNet5(10, false), ops, be, 2, 5, 3, []int32{1, 8, 0, 3})
	return grad, loss, cd.perKernel
}

// An index buffer shorter than PoolIndexLen, or one for a pooling that keeps none, is refused
// with an error, and no launch.
func TestKeptPoolIndicesNeedTheirLength(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		win        compute.Window
		short      int
	}{
		{"one value short", "index buffer", compute.Window{Size: 2, Stride: 2}, 1},
		{"windows that overlap", "no window indices kept", compute.Window{Size: 3, Stride: 2}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
			ops := cuda.NewOps(cd, cuda.Options{})
			defer ops.Close()
			x := compute.Images{Buf: ops.Alloc(2 * 3 * 4 * 4 * 5), C: 3, N: 5, H: 4, W: 4, Batch: 2, BatchStride: 3 * 4 * 4 * 5}
			y := compute.Images{Buf: ops.Alloc(2 * 3 * 2 * 2 * 5), C: 3, N: 5, H: 2, W: 2, Batch: 2, BatchStride: 3 * 2 * 2 * 5}
			n := ops.PoolIndexLen(compute.MaxPooling, tc.win, x)
			if tc.short > 0 && n != (2*3*2*2*5+3)/4 {
				t.Fatalf("PoolIndexLen = %d, want %d (a byte a window and sample, four to a unit)", n, (2*3*2*2*5+3)/4)
			}
			ops.PoolKeep(tc.win, x, y, ops.Alloc(max(n-tc.short, 1)))
			if err := ops.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if len(cd.perKernel) != 0 {
				t.Errorf("launched %v after refusing", cd.perKernel)
			}
		})
	}
}

// noPoolReLU, embedded beside a backend one level deeper, shadows compute.PoolReLUKeeper's
// PoolKeepReLU with a method of another signature: the model then runs LeNet-5's max poolings
// and the ReLUs after them apart.
type noPoolReLU struct{}

func (noPoolReLU) PoolKeepReLU() {}

// LeNet-5's max poolings and the ReLUs after them run in the poolings' passes
// (compute.PoolReLUKeeper): the losses and gradients have the bits of running them apart, and
// the two ReLUs' activate and activate_grad launches are not made.
func TestPoolReLUKeepsModelBits(t *testing.T) {
	type shimOps struct{ *cuda.Ops }
	g0, l0, k0 := lenetLossGrad(t, func(ops *cuda.Ops) compute.Backend {
		return struct {
			shimOps
			noPoolReLU
		}{shimOps{ops}, noPoolReLU{}}
	})
	g1, l1, k1 := lenetLossGrad(t, nil)
	for _, k := range []kernels.Kernel{kernels.Activate, kernels.ActivateGrad} {
		if k0[k]-k1[k] != 2 {
			t.Errorf("%v: %d launches apart, %d fused: want 2 fewer", k, k0[k], k1[k])
		}
	}
	if k0[kernels.PoolGradKept] != 2 || k1[kernels.PoolGradKept] != 2 || k0[kernels.Pool] != k1[kernels.Pool] {
		t.Errorf("pool %d and pool_grad_kept %d launches apart, %d and %d fused: want the same, 2 pool_grad_kept each",
			k0[kernels.Pool], k0[kernels.PoolGradKept], k1[kernels.Pool], k1[kernels.PoolGradKept])
	}
	requireSameBits(t, "pooling and ReLU in one pass", "apart", g1, g0, l1, l0)
}

// PoolKeepReLU and PoolGradKeptReLU give the bits of PoolKeep, Activate's ReLU, ActivateGrad's
// ReLU and PoolGradKept, on windows that are all negative (the ReLU's input 0 or below: no
// gradient), hold -0 and +0, a NaN first (it wins the window and passes dy) or later (it
// loses), or a positive maximum twice (the first wins).
func TestPoolReLUKeepsOpBits(t *testing.T) {
	ops := cuda.NewOps(device(t), cuda.Options{})
	defer ops.Close()
	const R, C, N, H, W = 2, 3, 5, 4, 4
	win := compute.Window{Size: 2, Stride: 2}
	rng := rand.New(rand.NewPCG(7, 9))
	xv := normals(rng, R*C*H*W*N)
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	at := func(b, c, i, j, n int) int { return (((b*C+c)*H+i)*W+j)*N + n }
	for _, v := range []struct {
		b, c, i, j, n int
		v             float32
	}{
		{0, 0, 0, 0, 0, -1}, {0, 0, 0, 1, 0, -2}, {0, 0, 1, 0, 0, -0.5}, {0, 0, 1, 1, 0, -3}, // all negative
		{0, 1, 2, 2, 1, negZero}, {0, 1, 2, 3, 1, 0}, {0, 1, 3, 2, 1, -1}, {0, 1, 3, 3, 1, -2}, // -0 and +0
		{1, 2, 0, 2, 3, nan},                   // NaN first in its window
		{1, 0, 1, 1, 4, nan},                   // NaN last in its window
		{1, 1, 2, 0, 2, 4}, {1, 1, 3, 1, 2, 4}, // a positive maximum twice
	} {
		xv[at(v.b, v.c, v.i, v.j, v.n)] = v.v
	}
	mk := poolImages{ops, R, C, N}
	upload, img := mk.upload, mk.img
	flat := func(x compute.Images) compute.Mat {
		n := x.C * x.N * x.H * x.W
		return compute.Mat{Buf: x.Buf, Rows: 1, Cols: n, Stride: n, Batch: x.Batch, BatchStride: x.BatchStride}
	}
	x := img(upload(xv), H, W)
	dyv := normals(rng, R*C*2*2*N)
	n := ops.PoolIndexLen(compute.MaxPooling, win, x)

	// Apart.
	pre, post := img(ops.Alloc(R*C*4*N), 2, 2), img(ops.Alloc(R*C*4*N), 2, 2)
	idx := ops.Alloc(n)
	ops.PoolKeep(win, x, pre, idx)
	ops.Activate(compute.ReLU, flat(pre), flat(post))
	dyA := img(upload(dyv), 2, 2)
	ops.ActivateGrad(compute.ReLU, flat(pre), flat(post), flat(dyA))
	dxA := img(ops.Alloc(R*C*H*W*N), H, W)
	ops.PoolGradKept(win, x, idx, dyA, dxA)

	// In one pass each.
	y := img(ops.Alloc(R*C*4*N), 2, 2)
	idx2 := ops.Alloc(n)
	ops.PoolKeepReLU(win, x, y, idx2)
	dy := img(upload(dyv), 2, 2)
	dx := img(ops.Alloc(R*C*H*W*N), H, W)
	ops.PoolGradKeptReLU(win, x, idx2, y, dy, dx)
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	read := func(b compute.Buffer) []float32 {
		v := make([]float32, b.Len())
		ops.Download(v, b, 0)
		return v
	}
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"y", read(y.Buf), read(post.Buf)}, {"dx", read(dx.Buf), read(dxA.Buf)}, {"dy", read(dy.Buf), dyv}} {
		for i := range c.want {
			if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
				t.Errorf("%s[%d] = %v in one pass, %v apart", c.name, i, c.got[i], c.want[i])
			}
		}
	}
	// The special windows did what they are there for.
	yv, dxv := read(y.Buf), read(dx.Buf)
	oat := func(b, c, i, j, n int) int { return (((b*C+c)*2+i)*2+j)*N + n }
	if v := yv[oat(0, 0, 0, 0, 0)]; math.Float32bits(v) != 0 {
		t.Errorf("all-negative window: y = %v, want +0", v)
	}
	if v := yv[oat(1, 2, 0, 1, 3)]; !math.IsNaN(float64(v)) || dxv[at(1, 2, 0, 2, 3)] != 0+dyv[oat(1, 2, 0, 1, 3)] {
		t.Errorf("NaN first in its window: y = %v, dx = %v; want NaN and dy %v", v, dxv[at(1, 2, 0, 2, 3)], dyv[oat(1, 2, 0, 1, 3)])
	}
	if dxv[at(1, 1, 2, 0, 2)] != dyv[oat(1, 1, 1, 0, 2)] || dxv[at(1, 1, 3, 1, 2)] != 0 {
		t.Errorf("a maximum twice: dx %v at the first, %v at the second; want dy %v and 0", dxv[at(1, 1, 2, 0, 2)], dxv[at(1, 1, 3, 1, 2)], dyv[oat(1, 1, 1, 0, 2)])
	}
}

// PoolKeep then PoolGradKept give Pool's output and PoolGrad's gradient (pool_grad_tiled, the
// maxima found again) bit for bit, with 40 samples: the pooling kernels' groups of 8 threads a
// row then take 5 samples a thread in two chunks (SAMPLES 4, then 1), so every sample slot of
// a chunk writes and reads its own window index. Ties (a maximum twice) keep the first.
func TestKeptIndicesMatchPoolGradOnEverySample(t *testing.T) {
	ops := cuda.NewOps(device(t), cuda.Options{})
	defer ops.Close()
	const R, C, N, H, W = 2, 3, 40, 4, 4
	win := compute.Window{Size: 2, Stride: 2}
	rng := rand.New(rand.NewPCG(11, 13))
	xv := normals(rng, R*C*H*W*N)
	for i := 0; i < len(xv); i += 7 {
		xv[i] = float32(math.Round(float64(xv[i]))) // small integers: ties within windows
	}
	mk := poolImages{ops, R, C, N}
	upload, img := mk.upload, mk.img
	x := img(upload(xv), H, W)
	dy := img(upload(normals(rng, R*C*2*2*N)), 2, 2)
	yKept, yFound := img(ops.Alloc(R*C*4*N), 2, 2), img(ops.Alloc(R*C*4*N), 2, 2)
	dxKept, dxFound := img(ops.Alloc(R*C*H*W*N), H, W), img(ops.Alloc(R*C*H*W*N), H, W)
	idx := ops.Alloc(ops.PoolIndexLen(compute.MaxPooling, win, x))
	ops.PoolKeep(win, x, yKept, idx)
	ops.PoolGradKept(win, x, idx, dy, dxKept)
	ops.Pool(compute.MaxPooling, win, x, yFound)
	ops.PoolGrad(compute.MaxPooling, win, x, dy, dxFound)
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what        string
		kept, found compute.Buffer
	}{{"pooled", yKept.Buf, yFound.Buf}, {"gradient", dxKept.Buf, dxFound.Buf}} {
		a, b := make([]float32, c.kept.Len()), make([]float32, c.found.Len())
		ops.Download(a, c.kept, 0)
		ops.Download(b, c.found, 0)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s value %d (sample %d): %v from the kept index, %v found again", c.what, i, i%N, a[i], b[i])
			}
		}
	}
}

// poolImages makes the pooling tests' buffers on a backend: uploads, and images of R replicas
// of C channels of N samples, replica after replica.
type poolImages struct {
	ops     *cuda.Ops
	R, C, N int
}

func (p poolImages) upload(v []float32) compute.Buffer {
	b := p.ops.Alloc(len(v))
	p.ops.Upload(b, 0, v)
	return b
}

func (p poolImages) img(buf compute.Buffer, h, w int) compute.Images {
	return compute.Images{Buf: buf, C: p.C, N: p.N, H: h, W: w, Batch: p.R, BatchStride: p.C * h * w * p.N}
}
