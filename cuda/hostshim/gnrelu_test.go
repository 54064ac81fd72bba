//go:build cgo

package hostshim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/nn"
)

// withoutFusedReLU is the shim's backend without compute.GroupNormReLUer and
// compute.AddReLUer (the methods of those names shadowed by ones of another signature): models
// run GroupNorm and its ReLU as two layers, and a residual block's sum and its ReLU as two
// passes, as on the CPU backend.
type withoutFusedReLU struct{ *cuda.Ops }

func (withoutFusedReLU) GroupNormReLU() {}
func (withoutFusedReLU) AddReLU()       {}

// GroupNorm with the ReLU in its passes (compute.GroupNormReLUer) has the bits of GroupNorm
// then Activate's ReLU, and its gradient those of ActivateGrad's ReLU (on a copy of dy, in
// place) then GroupNormGrad, with and without dx; dy is left as it was. Inputs are centred on
// 0 so that about half the ReLU's inputs are negative, one is NaN, and dy holds a NaN where
// the ReLU passes nothing (it must stay 0 there, as ActivateGrad sets it).
func TestGroupNormReLUIsGroupNormThenReLU(t *testing.T) {
	const C, N, H, W, groups, R = 8, 6, 5, 5, 4, 2
	d := device(t)
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	n := C * N * H * W
	rng := rand.New(rand.NewPCG(4, 4))
	xv, dyv, gv, bv := normals(rng, R*n), normals(rng, R*n), normals(rng, R*C), normals(rng, R*C)
	xv[17] = float32(math.NaN())
	img := func(v []float32) compute.Images {
		buf := ops.Alloc(R * n)
		if v != nil {
			ops.Upload(buf, 0, v)
		}
		return compute.Images{Buf: buf, C: C, N: N, H: H, W: W, Batch: R, BatchStride: n}
	}
	row := func(v []float32) compute.Mat {
		buf := ops.Alloc(R * C)
		if v != nil {
			ops.Upload(buf, 0, v)
		}
		return compute.Mat{Buf: buf, Rows: 1, Cols: C, Stride: C, Batch: R, BatchStride: C}
	}
	flat := func(x compute.Images) compute.Mat {
		return compute.Mat{Buf: x.Buf, Rows: 1, Cols: n, Stride: n, Batch: R, BatchStride: n}
	}
	get := func(buf compute.Buffer) []float32 {
		v := make([]float32, buf.Len())
		ops.Download(v, buf, 0)
		return v
	}
	x, gamma, beta := img(xv), row(gv), row(bv)
	// The two operations apart.
	pre, post := img(nil), img(nil)
	ops.GroupNorm(groups, 1e-5, x, gamma, beta, pre)
	ops.Activate(compute.ReLU, flat(pre), flat(post))
	postv := get(post.Buf)
	for i, v := range postv {
		if v <= 0 && i%7 == 0 {
			dyv[i] = float32(math.NaN()) // passed back as 0 where the ReLU's input was <= 0
		}
	}
	dyApart := img(dyv)
	ops.ActivateGrad(compute.ReLU, flat(pre), flat(post), flat(dyApart))
	dx0, dg0, db0 := img(nil), row(nil), row(nil)
	ops.GroupNormGrad(groups, 1e-5, x, gamma, dyApart, dx0, dg0, db0)
	dgNoDX0, dbNoDX0 := row(nil), row(nil)
	ops.GroupNormGrad(groups, 1e-5, x, gamma, dyApart, compute.Images{}, dgNoDX0, dbNoDX0)
	// Together.
	y, dy := img(nil), img(dyv)
	ops.GroupNormReLU(groups, 1e-5, x, gamma, beta, y)
	dx1, dg1, db1 := img(nil), row(nil), row(nil)
	ops.GroupNormReLUGrad(groups, 1e-5, x, gamma, y, dy, dx1, dg1, db1)
	dgNoDX1, dbNoDX1 := row(nil), row(nil)
	ops.GroupNormReLUGrad(groups, 1e-5, x, gamma, y, dy, compute.Images{}, dgNoDX1, dbNoDX1)
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want compute.Buffer
	}{
		{"y", y.Buf, post.Buf}, {"dx", dx1.Buf, dx0.Buf}, {"dgamma", dg1.Buf, dg0.Buf}, {"dbeta", db1.Buf, db0.Buf},
		{"dgamma without dx", dgNoDX1.Buf, dgNoDX0.Buf}, {"dbeta without dx", dbNoDX1.Buf, dbNoDX0.Buf},
	} {
		got, want := get(c.got), get(c.want)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d] = %v, want %v (GroupNorm, then the ReLU)", c.what, i, got[i], want[i])
			}
		}
	}
	for i, v := range get(dy.Buf) {
		if math.Float32bits(v) != math.Float32bits(dyv[i]) {
			t.Fatalf("dy[%d] changed to %v from %v", i, v, dyv[i])
		}
	}
}

// A ResNet's GroupNorm-then-ReLU pairs, and its residual sums with their ReLU, run as one on
// the GPU backend: the losses and every gradient value have the bits of the same model with
// them apart, and the fused forms run (fewer activate, activate_grad and axpby launches).
func TestGroupNormReLUKeepsModelBits(t *testing.T) {
	spec := nn.ResNet(2, 1, 8, 2, 10)
	run := func(fused bool) (grad []float32, loss []float64, launches int) {
		cd := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
		ops := cuda.NewOps(cd, cuda.Options{})
		defer ops.Close()
		var be compute.Backend = ops
		if !fused {
			be = withoutFusedReLU{ops}
		}
		grad, loss = modelLossGrad(t, spec, ops, be, 2, 7, 2, []int32{0, 9, 2, 7})
		return grad, loss, cd.perKernel[kernels.Activate] + cd.perKernel[kernels.ActivateGrad] + cd.perKernel[kernels.Axpby]
	}
	g0, l0, apart := run(false)
	g1, l1, fused := run(true)
	// The stem's and the two blocks' first GroupNorm: 3 activate and 3 activate_grad fewer; the
	// two blocks' sums: 2 axpby and 2 activate fewer (their ReLU's gradient stays).
	if apart-fused != 10 {
		t.Errorf("%d activate, activate_grad and axpby launches fused, %d apart: want 10 fewer", fused, apart)
	}
	requireSameBits(t, "fused", "apart", g1, g0, l1, l0)
}

// A residual block's sum and ReLU in one pass (compute.AddReLUer) has the bits of Axpby(1, b,
// 1, a) then Activate's ReLU, a NaN, a -0 sum and strided views included, and leaves a as it
// was.
func TestAddReLUIsAxpbyThenReLU(t *testing.T) {
	const rows, cols, R = 3, 7, 2
	d := device(t)
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	rng := rand.New(rand.NewPCG(8, 8))
	n := R * rows * (cols + 2)
	av, bv := make([]float32, n), make([]float32, n)
	for i := range av {
		av[i], bv[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	av[3], bv[5] = float32(math.NaN()), float32(math.NaN())
	av[10], bv[10] = float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))
	view := func(v []float32) compute.Mat {
		buf := ops.Alloc(n)
		if v != nil {
			ops.Upload(buf, 0, v)
		}
		return compute.Mat{Buf: buf, Rows: rows, Cols: cols, Stride: cols + 2, Batch: R, BatchStride: rows * (cols + 2)}
	}
	get := func(m compute.Mat) []float32 {
		v := make([]float32, n)
		ops.Download(v, m.Buf, 0)
		return v
	}
	a, b, y := view(av), view(bv), view(nil)
	ops.AddReLU(a, b, y)
	a2, y2 := view(av), view(nil)
	ops.Axpby(1, b, 1, a2, nil)
	ops.Activate(compute.ReLU, a2, y2)
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	got, want := get(y), get(y2)
	for r := range R {
		for i := range rows {
			for j := range cols {
				k := r*rows*(cols+2) + i*(cols+2) + j
				if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
					t.Fatalf("y[%d] = %v, want %v (Axpby, then the ReLU)", k, got[k], want[k])
				}
			}
		}
	}
	for i, v := range get(a) {
		if math.Float32bits(v) != math.Float32bits(av[i]) {
			t.Fatalf("a[%d] changed to %v from %v", i, v, av[i])
		}
	}
}

// noKeptStats, embedded beside a backend one level deeper, shadows
// compute.GroupNormStatsKeeper's GroupNormKeep with a method of another signature: the
// backend's GroupNorm gradient then computes the statistics again from x.
type noKeptStats struct{}

func (noKeptStats) GroupNormKeep() {}

// GroupNorm's statistics kept from the forward pass for the gradient (compute.
// GroupNormStatsKeeper) give a small ResNet's losses and gradients the bits of computing them
// again, with the GroupNorm and ReLU layers fused and apart, and save the statistics' two
// launches in every GroupNorm's backward pass: half the model's gn_stats_partials and gn_stats
// launches.
func TestKeptGroupNormStatsKeepModelBits(t *testing.T) {
	spec := nn.ResNet(2, 1, 8, 2, 10)
	for _, fused := range []bool{true, false} {
		run := func(keep bool) (grad []float32, loss []float64, stats int) {
			cd := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
			ops := cuda.NewOps(cd, cuda.Options{})
			defer ops.Close()
			var be compute.Backend = ops
			type shimOps struct{ *cuda.Ops }
			switch {
			case !keep && fused:
				be = struct {
					shimOps
					noKeptStats
				}{shimOps{ops}, noKeptStats{}}
			case !keep:
				be = struct {
					withoutFusedReLU
					noKeptStats
				}{withoutFusedReLU{ops}, noKeptStats{}}
			case !fused:
				be = withoutFusedReLU{ops}
			}
			grad, loss = modelLossGrad(t, spec, ops, be, 2, 7, 2, []int32{0, 9, 2, 7})
			return grad, loss, cd.perKernel[kernels.GNStatsPartials] + cd.perKernel[kernels.GNStats]
		}
		g0, l0, again := run(false)
		g1, l1, kept := run(true)
		if again == 0 || kept*2 != again {
			t.Errorf("fused %v: %d statistics launches kept, %d computed again: want half", fused, kept, again)
		}
		requireSameBits(t, fmt.Sprintf("kept statistics (fused %v)", fused), "computed again", g1, g0, l1, l0)
	}
}

// A statistics buffer shorter than GroupNormStatsLen is refused with an error, and no launch.
func TestKeptGroupNormStatsNeedTheirLength(t *testing.T) {
	d := device(t)
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	x := compute.Images{Buf: ops.Alloc(2 * 4 * 3 * 3 * 3), C: 4, N: 3, H: 3, W: 3, Batch: 2, BatchStride: 4 * 3 * 3 * 3}
	g := compute.Mat{Buf: ops.Alloc(8), Rows: 1, Cols: 4, Stride: 4, Batch: 2, BatchStride: 4}
	y := x
	y.Buf = ops.Alloc(2 * 4 * 3 * 3 * 3)
	n := ops.GroupNormStatsLen(2, x)
	if n != 2*2*2*3*2 {
		t.Fatalf("GroupNormStatsLen = %d, want %d (a float64 mean and rstd per batch element, sample and group)", n, 2*2*2*3*2)
	}
	ops.GroupNormKeep(2, 1e-5, x, g, g, y, false, ops.Alloc(n-1))
	err := ops.Err()
	if err == nil || !strings.Contains(err.Error(), "statistics buffer") {
		t.Fatalf("a statistics buffer one value short: error %v", err)
	}
}
