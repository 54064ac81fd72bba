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
		total, block, maxGrid, items, want int
	}{
		{1, 256, 65535, 4, 1},
		{256 * 1000, 256, 65535, 4, 1000},        // below lightMinGrid: one item a thread
		{256 * 1024, 256, 65535, 4, 1024},        // at the floor
		{256 * 2048, 256, 65535, 4, 1024},        // two items a thread, kept at the floor
		{256 * 8192, 256, 65535, 4, 2048},        // four items a thread
		{256*8192 + 1, 256, 65535, 4, 2049},      // a partial block rounds up
		{256 * 4 * 100000, 256, 65535, 4, 65535}, // the cap
		{256 * 8192, 256, 3, 4, 3},               // a smaller cap
		{7 * 5000, 7, 65535, 4, 1250},            // odd blocks
		{256 * 8192, 256, 65535, 1, 8192},        // one item a thread (Options.LightItems 1)
		{256 * 8192, 256, 65535, 2, 4096},
		{0, 256, 65535, 4, 0}, // nothing to do (launchLight returns first)
	} {
		if got := lightGrid(c.total, c.block, c.maxGrid, c.items); got != c.want {
			t.Errorf("lightGrid(%d, %d, %d, %d) = %d, want %d", c.total, c.block, c.maxGrid, c.items, got, c.want)
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
// thread several rows; Options.RowGroup and LightItems (or their environment variables) give
// the launch shape of the sitting of 2026-11-27 back, 32 threads a row and one row a thread.
func TestImageKernelsRowGroupAndGrid(t *testing.T) {
	const batch = 64 // LeNet-5's first pooling at 64 models: 64 x 6 x 28 x 28 rows of 32 samples
	rows := batch * 6 * 28 * 28
	for _, c := range []struct {
		name              string
		opt               Options
		env               map[string]string
		group, grid, pool int
		tiledGrid         int
	}{
		{"default", Options{}, nil, 8, (rows*8/256 + 3) / 4, 4, max((rows/4*8/256+3)/4, 1024)},
		{"options", Options{RowGroup: 32, LightItems: 1}, nil, 32, min(rows*32/256, 65535), 4, rows / 4 * 32 / 256},
		{"environment", Options{}, map[string]string{RowGroupEnv: "32", LightItemsEnv: "1"}, 32, min(rows*32/256, 65535), 4, rows / 4 * 32 / 256},
		{"rounded down", Options{RowGroup: 20, LightItems: 2}, nil, 16, (rows*16/256 + 1) / 2, 4, (rows/4*16/256 + 1) / 2},
		{"bad environment", Options{}, map[string]string{RowGroupEnv: "x", LightItemsEnv: "-3"}, 8, (rows*8/256 + 3) / 4, 4, max((rows/4*8/256+3)/4, 1024)},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			d := &gridDevice{failing: failing{live: map[uint64]bool{}}, grid: map[kernels.Kernel]int{}, group: map[kernels.Kernel]int{}}
			c.opt.Unbatched = true
			poolLaunches(t, NewOps(d, c.opt), batch)
			if g := d.group[kernels.PoolGrad]; g != c.group {
				t.Errorf("pool_grad over rows of 32 samples: %d threads a row, want %d", g, c.group)
			}
			if got := d.grid[kernels.PoolGrad]; got != c.grid {
				t.Errorf("pool_grad grid %d, want %d", got, c.grid)
			}
			if g := d.group[kernels.Pool]; g != c.pool {
				t.Errorf("pool over rows of 6 samples: %d threads a row, want %d", g, c.pool)
			}
			if g, grid := d.group[kernels.PoolGradTiled], d.grid[kernels.PoolGradTiled]; g != c.group || grid != c.tiledGrid {
				t.Errorf("pool_grad_tiled: %d threads a window, grid %d; want %d and %d", g, grid, c.group, c.tiledGrid)
			}
		})
	}
}

// poolLaunches launches pool_grad (average pooling) and pool_grad_tiled (max pooling) over
// LeNet-5's first pooling at batch models, and pool over rows of 6 samples.
func poolLaunches(t *testing.T, o *Ops, batch int) {
	t.Helper()
	x := compute.Images{Buf: o.Alloc(batch * 6 * 28 * 28 * 32), C: 6, N: 32, H: 28, W: 28, Batch: batch, BatchStride: 6 * 28 * 28 * 32}
	y := compute.Images{Buf: o.Alloc(batch * 6 * 14 * 14 * 32), C: 6, N: 32, H: 14, W: 14, Batch: batch, BatchStride: 6 * 14 * 14 * 32}
	dx := x
	dx.Buf = o.Alloc(x.Buf.Len())
	w := compute.Window{Size: 2, Stride: 2}
	o.PoolGrad(compute.AvgPooling, w, x, y, dx)
	o.PoolGrad(compute.MaxPooling, w, x, y, dx)
	small := compute.Images{Buf: o.Alloc(6 * 4), C: 1, N: 6, H: 2, W: 2, Batch: 1}
	smallOut := compute.Images{Buf: o.Alloc(6), C: 1, N: 6, H: 1, W: 1, Batch: 1}
	o.Pool(compute.MaxPooling, w, small, smallOut)
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
}

// hidden_step runs blocks of Options.Block threads (at most 256) unless Options.HiddenBlock or
// its environment variable asks for more, up to its launch bound of 1,024.
func TestHiddenStepBlock(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  Options
		env  string
		want int
	}{
		{"default", Options{}, "", 256},
		{"Options.Block", Options{Block: 64}, "", 64},
		{"Options.HiddenBlock", Options{HiddenBlock: 1024}, "", 1024},
		{"above the launch bound", Options{HiddenBlock: 4096}, "", kernels.HiddenBlock},
		{"environment", Options{}, "512", 512},
		{"bad environment", Options{}, "lots", 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(HiddenBlockEnv, c.env)
			}
			d := &blockDevice{failing: failing{live: map[uint64]bool{}}, blocks: map[kernels.Kernel]int{}}
			c.opt.Unbatched = true
			o := NewOps(d, c.opt)
			m := func(rows, cols, batch int) compute.Mat {
				return compute.Mat{Buf: o.Alloc(rows * cols * max(batch, 1)), Rows: rows, Cols: cols, Stride: cols, Batch: batch, BatchStride: rows * cols}
			}
			pr := m(1, 3*2+3+3*2+2, 2) // W1 3 x 2, b1 3, W2 2 x 3, b2 2
			hb := m(4, 3, 2)
			o.HiddenStep(&compute.HiddenStepArgs{Act: compute.Tanh, Pre: hb, Params: pr, Anchor: pr, Gram: m(4, 4, 1), Prev: m(4, 3, 2),
				Labels: m(4, 1, 1), GX: m(4, 4, 1), U: hb, B1: 6, W2: 9, B2: 15, H: 3, Cls: 2, Eta: 0.1, V: 1, Alpha: 0.5})
			if err := o.Err(); err != nil {
				t.Fatal(err)
			}
			if got := d.blocks[kernels.HiddenStep]; got != c.want {
				t.Errorf("hidden_step launched with blocks of %d threads, want %d", got, c.want)
			}
		})
	}
}
