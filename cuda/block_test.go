package cuda

import (
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

// blockDevice records the block size of every launch.
type blockDevice struct {
	failing
	blocks map[kernels.Kernel]int
}

func (d *blockDevice) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	d.blocks[k] = max(d.blocks[k], block)
	return nil
}

// A block of more than 256 threads fails on a GPU for the kernels that use more registers than
// such a block leaves a thread (pool_grad 127 to 128 registers, pool up to 119, im2col up to
// 88 on sm_70 to sm_90: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES at 512 or 1,024 threads), where the
// host shim runs any block. Options.Block is therefore capped at 256 for every kernel.
func TestBlockNeverExceeds256(t *testing.T) {
	for _, block := range []int{0, 7, 256, 257, 512, 1024, 4096} {
		d := &blockDevice{failing: failing{live: map[uint64]bool{}}, blocks: map[kernels.Kernel]int{}}
		o := NewOps(d, Options{Block: block, Unbatched: true})
		x := compute.Images{Buf: o.Alloc(2 * 4 * 4 * 32), C: 2, N: 32, H: 4, W: 4, Batch: 1}
		y := compute.Images{Buf: o.Alloc(2 * 2 * 2 * 32), C: 2, N: 32, H: 2, W: 2, Batch: 1}
		w := compute.Window{Size: 2, Stride: 2}
		o.Pool(compute.MaxPooling, w, x, y)
		dx := x
		dx.Buf = o.Alloc(x.Buf.Len())
		o.PoolGrad(compute.MaxPooling, w, x, y, dx)
		m := compute.Mat{Buf: o.Alloc(64), Rows: 1, Cols: 64, Stride: 64, Batch: 1}
		o.Axpby(1, m, 1, m, nil)
		if err := o.Err(); err != nil {
			t.Fatal(err)
		}
		want := block
		if want <= 0 || want > 256 {
			want = 256
		}
		o.PoolGrad(compute.AvgPooling, w, x, y, dx) // the general kernel (max pooling of tiling windows is pool_grad_tiled)
		for _, k := range []kernels.Kernel{kernels.Pool, kernels.PoolGrad, kernels.PoolGradTiled, kernels.Axpby} {
			if got := d.blocks[k]; got != want {
				t.Errorf("Options.Block %d: %s launched with blocks of %d threads, want %d", block, k, got, want)
			}
		}
	}
}
