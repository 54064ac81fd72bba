//go:build cgo

package hostshim

import (
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
	spec := nn.LeNet5(10, false)
	run := func(keep bool) (grad []float32, loss []float64, per map[kernels.Kernel]int) {
		cd := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
		ops := cuda.NewOps(cd, cuda.Options{})
		defer ops.Close()
		var be compute.Backend = ops
		if !keep {
			type shimOps struct{ *cuda.Ops }
			be = struct {
				shimOps
				noKeptIndex
			}{shimOps{ops}, noKeptIndex{}}
		}
		grad, loss = modelLossGrad(t, spec, ops, be, 2, 5, 3, []int32{1, 8, 0, 3})
		return grad, loss, cd.perKernel
	}
	g0, l0, k0 := run(false)
	g1, l1, k1 := run(true)
	if k0[kernels.PoolGradTiled] != 2 || k0[kernels.PoolGradKept] != 0 || k1[kernels.PoolGradTiled] != 0 || k1[kernels.PoolGradKept] != 2 {
		t.Errorf("pool_grad_tiled %d and pool_grad_kept %d launches finding the maxima again, %d and %d keeping them: want 2 and 0, 0 and 2",
			k0[kernels.PoolGradTiled], k0[kernels.PoolGradKept], k1[kernels.PoolGradTiled], k1[kernels.PoolGradKept])
	}
	requireSameBits(t, "kept window indices", "found again", g1, g0, l1, l0)
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
