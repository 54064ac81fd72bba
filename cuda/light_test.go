package cuda

import (
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

// Light launches give a thread several items only where the grid stays large enough to fill a
// GPU, and never exceed the grid cap.
func TestLightGrid(t *testing.T) {
	for _, c := range []struct {
		total, block, maxGrid, want int
	}{
		{1, 256, 65535, 1},
		{256 * 1000, 256, 65535, 1000},        // below lightMinGrid: one item a thread
		{256 * 1024, 256, 65535, 1024},        // at the floor
		{256 * 2048, 256, 65535, 1024},        // two items a thread, kept at the floor
		{256 * 8192, 256, 65535, 2048},        // four items a thread
		{256*8192 + 1, 256, 65535, 2049},      // a partial block rounds up
		{256 * 4 * 100000, 256, 65535, 65535}, // the cap
		{256 * 8192, 256, 3, 3},               // a smaller cap
		{7 * 5000, 7, 65535, 1250},            // odd blocks
		{0, 256, 65535, 0},                    // nothing to do (launchLight returns first)
	} {
		if got := lightGrid(c.total, c.block, c.maxGrid); got != c.want {
			t.Errorf("lightGrid(%d, %d, %d) = %d, want %d", c.total, c.block, c.maxGrid, got, c.want)
		}
	}
}

// gridDevice records the grid and the last argument (the image kernels' row group) of every
// launch.
type gridDevice struct {
	failing
	grid, group map[kernels.Kernel]int
}

func (d *gridDevice) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	d.grid[k] = grid
	d.group[k] = int(args[len(args)-1])
	return nil
}

// The image kernels put at most 8 threads on a row of samples, and a large launch gives each
// thread several rows.
func TestImageKernelsRowGroupAndGrid(t *testing.T) {
	d := &gridDevice{failing: failing{live: map[uint64]bool{}}, grid: map[kernels.Kernel]int{}, group: map[kernels.Kernel]int{}}
	o := NewOps(d, Options{Unbatched: true})
	const batch = 64 // LeNet-5's first pooling at 64 models: 64 x 6 x 28 x 28 rows of 32 samples
	x := compute.Images{Buf: o.Alloc(batch * 6 * 28 * 28 * 32), C: 6, N: 32, H: 28, W: 28, Batch: batch, BatchStride: 6 * 28 * 28 * 32}
	y := compute.Images{Buf: o.Alloc(batch * 6 * 14 * 14 * 32), C: 6, N: 32, H: 14, W: 14, Batch: batch, BatchStride: 6 * 14 * 14 * 32}
	w := compute.Window{Size: 2, Stride: 2}
	o.PoolGrad(compute.MaxPooling, w, x, y, x)
	small := compute.Images{Buf: o.Alloc(6 * 4), C: 1, N: 6, H: 2, W: 2, Batch: 1}
	smallOut := compute.Images{Buf: o.Alloc(6), C: 1, N: 6, H: 1, W: 1, Batch: 1}
	o.Pool(compute.MaxPooling, w, small, smallOut)
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
	if g := d.group[kernels.PoolGrad]; g != 8 {
		t.Errorf("pool_grad over rows of 32 samples: %d threads a row, want 8", g)
	}
	rows := batch * 6 * 28 * 28
	if got, want := d.grid[kernels.PoolGrad], (rows*8/256+3)/4; got != want {
		t.Errorf("pool_grad grid %d, want %d (four rows a thread)", got, want)
	}
	if g := d.group[kernels.Pool]; g != 4 {
		t.Errorf("pool over rows of 6 samples: %d threads a row, want 4", g)
	}
}
