//go:build cgo

package hostshim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
)

// The image kernels' mixed-radix index arithmetic (md_index in conv.cu) against division:
// im2col's seven digits with W1-sized and LeNet-sized extents, starting indices below and far
// beyond 2^32 and 2^40, strides smaller than the fastest digit, larger than a whole batch
// element, and the default launch's 256 x 65 535 threads; radices of 1 (one channel, kernel 1).
func TestMixedRadixIndex(t *testing.T) {
	d := device(t)
	for _, c := range []struct {
		i0, s int64
		radix []int64
		steps int64
	}{
		{0, 1, []int64{0, 6, 5, 5, 64, 28, 28}, 100000},
		{0, 256 * 65535, []int64{0, 6, 5, 5, 64, 28, 28}, 100000},
		{1<<32 - 7, 21, []int64{0, 3, 3, 3, 2, 7, 5}, 100000},
		{1<<40 + 3, 256 * 65535, []int64{0, 16, 32, 1024}, 1 << 20},
		{5, 7, []int64{0, 1, 1, 1, 1}, 1000},
		{0, 3, []int64{0, 2}, 1000},
		{123, 1000003, []int64{0, 4, 8, 32}, 100000},
		{0, 5, []int64{0, 7, 1, 3, 1, 2}, 10000},
	} {
		t.Run(fmt.Sprintf("%d+%d/%v", c.i0, c.s, c.radix), func(t *testing.T) {
			if k := d.CheckMixedIndex(c.i0, c.s, c.radix, c.steps); k >= 0 {
				t.Errorf("step %d (flat index %d) has the wrong coordinates", k, c.i0+k*c.s)
			}
		})
	}
}

// convCounts runs op on the shim and returns the device calls it made.
func convCounts(t *testing.T, op func(o *cuda.Ops)) (launches, reads, stages, gemms int, per map[kernels.Kernel]int) {
	t.Helper()
	d := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
	o := cuda.NewOps(d, cuda.Options{})
	defer o.Close()
	op(o)
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
	return d.launches, d.reads, d.stages, d.gemms, d.perKernel
}

// Launches per Convolver operation (docs/gpu.md quotes them): one for each copy or gather,
// three for GroupNorm (partial sums, statistics, y), five for its gradient (four without dx);
// none of them reads from the device, stages arguments or calls cuBLAS, and an empty batch
// launches nothing.
func TestConvLaunchCounts(t *testing.T) {
	img := func(o *cuda.Ops, c, n, h, w, batch int) compute.Images {
		sz := c * n * h * w
		return compute.Images{Buf: o.Alloc(max(1, sz*batch)), C: c, N: n, H: h, W: w, Batch: batch, BatchStride: sz}
	}
	row := func(o *cuda.Ops, cols, batch int) compute.Mat {
		return compute.Mat{Buf: o.Alloc(max(1, cols*batch)), Rows: 1, Cols: cols, Stride: cols, Batch: batch, BatchStride: cols}
	}
	win := compute.Window{Size: 3, Stride: 2, Pad: 1}
	for _, batch := range []int{3, 0} {
		for _, c := range []struct {
			name string
			want []kernels.Kernel
			op   func(o *cuda.Ops)
		}{
			{"Im2col", []kernels.Kernel{kernels.Im2col}, func(o *cuda.Ops) {
				x := img(o, 2, 3, 7, 6, batch)
				r, n := 2*9, 3*win.Out(7)*win.Out(6)
				o.Im2col(x, win, compute.Mat{Buf: o.Alloc(max(1, r*n*batch)), Rows: r, Cols: n, Stride: n, Batch: batch, BatchStride: r * n})
			}},
			{"Col2im", []kernels.Kernel{kernels.Col2im}, func(o *cuda.Ops) {
				r, n := 2*9, 3*win.Out(7)*win.Out(6)
				o.Col2im(compute.Mat{Buf: o.Alloc(max(1, r*n*batch)), Rows: r, Cols: n, Stride: n, Batch: batch, BatchStride: r * n}, win, img(o, 2, 3, 7, 6, batch))
			}},
			{"Pool", []kernels.Kernel{kernels.Pool, kernels.Pool}, func(o *cuda.Ops) {
				x, y := img(o, 2, 3, 7, 6, batch), img(o, 2, 3, win.Out(7), win.Out(6), batch)
				o.Pool(compute.MaxPooling, win, x, y)
				o.Pool(compute.AvgPooling, win, x, y)
			}},
			{"PoolGrad", []kernels.Kernel{kernels.PoolGrad, kernels.PoolGrad}, func(o *cuda.Ops) {
				x, dy := img(o, 2, 3, 7, 6, batch), img(o, 2, 3, win.Out(7), win.Out(6), batch)
				o.PoolGrad(compute.MaxPooling, win, x, dy, img(o, 2, 3, 7, 6, batch))
				o.PoolGrad(compute.AvgPooling, win, x, dy, img(o, 2, 3, 7, 6, batch))
			}},
			{"Transpose", []kernels.Kernel{kernels.TransposeBlocks}, func(o *cuda.Ops) {
				o.Transpose(4, compute.Mat{Buf: o.Alloc(max(1, 60*batch)), Rows: 3, Cols: 5, Stride: 20, Batch: batch, BatchStride: 60},
					compute.Mat{Buf: o.Alloc(max(1, 60*batch)), Rows: 5, Cols: 3, Stride: 12, Batch: batch, BatchStride: 60})
			}},
			{"GroupNorm", []kernels.Kernel{kernels.GNStatsPartials, kernels.GNStats, kernels.GNForward}, func(o *cuda.Ops) {
				x, p := img(o, 4, 3, 5, 5, batch), row(o, 4, batch)
				o.GroupNorm(2, 1e-5, x, p, p, img(o, 4, 3, 5, 5, batch))
			}},
			{"GroupNormGrad", []kernels.Kernel{kernels.GNStatsPartials, kernels.GNStats, kernels.GNGradSums, kernels.GNGradReduce, kernels.GNGradX}, func(o *cuda.Ops) {
				x, dy, p := img(o, 4, 3, 5, 5, batch), img(o, 4, 3, 5, 5, batch), row(o, 4, batch)
				o.GroupNormGrad(2, 1e-5, x, p, dy, img(o, 4, 3, 5, 5, batch), row(o, 4, batch), row(o, 4, batch))
			}},
			{"GroupNormGradNoDX", []kernels.Kernel{kernels.GNStatsPartials, kernels.GNStats, kernels.GNGradSums, kernels.GNGradReduce}, func(o *cuda.Ops) {
				x, dy, p := img(o, 4, 3, 5, 5, batch), img(o, 4, 3, 5, 5, batch), row(o, 4, batch)
				o.GroupNormGrad(2, 1e-5, x, p, dy, compute.Images{}, row(o, 4, batch), row(o, 4, batch))
			}},
			// 12 x 12 pixels, two runs a channel (kernels.GroupNormPixelSlices): their folds.
			{"GroupNormGradRuns", []kernels.Kernel{kernels.GNStatsPartials, kernels.GNStats, kernels.GNGradSums, kernels.GNGradFold, kernels.GNGradReduce, kernels.GNGradX}, func(o *cuda.Ops) {
				x, dy, p := img(o, 4, 3, 12, 12, batch), img(o, 4, 3, 12, 12, batch), row(o, 4, batch)
				o.GroupNormGrad(2, 1e-5, x, p, dy, img(o, 4, 3, 12, 12, batch), row(o, 4, batch), row(o, 4, batch))
			}},
		} {
			t.Run(fmt.Sprintf("%s/batch%d", c.name, batch), func(t *testing.T) {
				launches, reads, stages, gemms, per := convCounts(t, c.op)
				want, total := map[kernels.Kernel]int{}, 0
				if batch > 0 {
					for _, k := range c.want {
						want[k]++
					}
					total = len(c.want)
				}
				if launches != total {
					t.Errorf("%d launches, want %d", launches, total)
				}
				for k, n := range want {
					if per[k] != n {
						t.Errorf("kernel %s launched %d times, want %d (all: %v)", k, per[k], n, per)
					}
				}
				if reads+stages+gemms != 0 {
					t.Errorf("%d reads, %d stagings, %d GEMM calls; want none", reads, stages, gemms)
				}
			})
		}
	}
}

// The image kernels take their pointers as __restrict__ (conv.cu): an operation whose output
// overlaps one of its inputs fails with an error naming both ranges and launches nothing,
// while views of one buffer that do not overlap are accepted.
func TestImageOpsRefuseOverlap(t *testing.T) {
	win := compute.Window{Size: 2, Stride: 2}
	for _, c := range []struct {
		name    string
		overlap bool
		op      func(o *cuda.Ops, buf compute.Buffer)
	}{
		{"pool in place", true, func(o *cuda.Ops, buf compute.Buffer) {
			x := compute.Images{Buf: buf, C: 1, N: 2, H: 4, W: 4, Batch: 1}
			y := compute.Images{Buf: buf, Off: 8, C: 1, N: 2, H: 2, W: 2, Batch: 1}
			o.Pool(compute.MaxPooling, win, x, y)
		}},
		{"pool beside", false, func(o *cuda.Ops, buf compute.Buffer) {
			x := compute.Images{Buf: buf, C: 1, N: 2, H: 4, W: 4, Batch: 1}
			y := compute.Images{Buf: buf, Off: 32, C: 1, N: 2, H: 2, W: 2, Batch: 1}
			o.Pool(compute.MaxPooling, win, x, y)
		}},
		{"pool gradient onto dy", true, func(o *cuda.Ops, buf compute.Buffer) {
			x := compute.Images{Buf: buf, Off: 40, C: 1, N: 2, H: 4, W: 4, Batch: 1}
			dy := compute.Images{Buf: buf, C: 1, N: 2, H: 2, W: 2, Batch: 1}
			dx := compute.Images{Buf: buf, Off: 4, C: 1, N: 2, H: 4, W: 4, Batch: 1}
			o.PoolGrad(compute.MaxPooling, win, x, dy, dx)
		}},
		{"im2col into its image", true, func(o *cuda.Ops, buf compute.Buffer) {
			x := compute.Images{Buf: buf, Off: 10, C: 1, N: 2, H: 4, W: 4, Batch: 2, BatchStride: 40}
			cols := compute.Mat{Buf: buf, Off: 0, Rows: 4, Cols: 8, Stride: 8, Batch: 2, BatchStride: 40}
			o.Im2col(x, win, cols)
		}},
		{"col2im beside", false, func(o *cuda.Ops, buf compute.Buffer) {
			cols := compute.Mat{Buf: buf, Rows: 4, Cols: 8, Stride: 8, Batch: 1}
			dx := compute.Images{Buf: buf, Off: 32, C: 1, N: 2, H: 4, W: 4, Batch: 1}
			o.Col2im(cols, win, dx)
		}},
		{"groupnorm in place", true, func(o *cuda.Ops, buf compute.Buffer) {
			x := compute.Images{Buf: buf, C: 2, N: 2, H: 2, W: 2, Batch: 1}
			p := compute.Mat{Buf: buf, Off: 100, Rows: 1, Cols: 2, Stride: 2, Batch: 1}
			o.GroupNorm(1, 1e-5, x, p, p, x)
		}},
		{"groupnorm gradient onto dy", true, func(o *cuda.Ops, buf compute.Buffer) {
			x := compute.Images{Buf: buf, C: 2, N: 2, H: 2, W: 2, Batch: 1}
			dy := compute.Images{Buf: buf, Off: 40, C: 2, N: 2, H: 2, W: 2, Batch: 1}
			p := compute.Mat{Buf: buf, Off: 100, Rows: 1, Cols: 2, Stride: 2, Batch: 1}
			g := compute.Mat{Buf: buf, Off: 110, Rows: 1, Cols: 2, Stride: 2, Batch: 1}
			o.GroupNormGrad(1, 1e-5, x, p, dy, dy, g, g)
		}},
		{"transpose in place", true, func(o *cuda.Ops, buf compute.Buffer) {
			m := compute.Mat{Buf: buf, Rows: 3, Cols: 3, Stride: 3, Batch: 1}
			o.Transpose(1, m, m)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			launches, _, _, _, _ := convCountsErr(t, func(o *cuda.Ops) { c.op(o, o.Alloc(200)) }, c.overlap)
			if c.overlap && launches != 0 {
				t.Errorf("%d launches for a refused operation", launches)
			}
			if !c.overlap && launches != 1 {
				t.Errorf("%d launches, want 1", launches)
			}
		})
	}
}

// convCountsErr is convCounts expecting an overlap error when wantErr, none otherwise.
func convCountsErr(t *testing.T, op func(o *cuda.Ops), wantErr bool) (launches, reads, stages, gemms int, per map[kernels.Kernel]int) {
	t.Helper()
	d := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
	o := cuda.NewOps(d, cuda.Options{})
	defer o.Close()
	op(o)
	err := o.Err()
	switch {
	case wantErr && (err == nil || !strings.Contains(err.Error(), "overlaps an input")):
		t.Fatalf("error %v, want an overlap refused", err)
	case !wantErr && err != nil:
		t.Fatal(err)
	}
	return d.launches, d.reads, d.stages, d.gemms, d.perKernel
}

// The pooling and Winograd kernels index a channel's plane (H W N values), and the Winograd
// transforms a replica's positions, with 32-bit offsets: an operation beyond 2^31 - 1 values
// fails with an error that says so, before any launch or memory access.
func TestImageKernelsRefusePlanesBeyond32Bits(t *testing.T) {
	win := compute.Window{Size: 2, Stride: 2}
	for _, c := range []struct {
		name string
		op   func(o *cuda.Ops, x compute.Images)
	}{
		{"pool", func(o *cuda.Ops, x compute.Images) {
			o.Pool(compute.MaxPooling, win, x, compute.Images{Buf: x.Buf, C: 1, N: x.N, H: x.H / 2, W: x.W / 2, Batch: 1})
		}},
		{"pool gradient", func(o *cuda.Ops, x compute.Images) {
			y := compute.Images{Buf: x.Buf, C: 1, N: x.N, H: x.H / 2, W: x.W / 2, Batch: 1}
			o.PoolGrad(compute.MaxPooling, win, x, y, x)
		}},
		{"winograd input", func(o *cuda.Ops, x compute.Images) {
			th, tw := compute.WinogradF2.Grid(x.H, x.W)
			cols := th * tw * x.N
			v := compute.Mat{Buf: x.Buf, Rows: x.C, Cols: cols, Stride: cols, Batch: compute.WinogradF2.Positions(), BatchStride: cols}
			o.WinogradInput(compute.WinogradF2, x, v)
		}},
		{"winograd positions", func(o *cuda.Ops, x compute.Images) {
			// A small image, but its transformed tiles' 16 positions 2^28 values apart: 2^32 in all.
			x.H, x.W = 4, 4
			th, tw := compute.WinogradF2.Grid(x.H, x.W)
			cols := th * tw * x.N
			v := compute.Mat{Buf: x.Buf, Rows: x.C, Cols: cols, Stride: cols, Batch: compute.WinogradF2.Positions(), BatchStride: 1 << 28}
			o.WinogradInput(compute.WinogradF2, x, v)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
			o := cuda.NewOps(d, cuda.Options{})
			defer o.Close()
			x := compute.Images{Buf: o.Alloc(8), C: 1, N: 2, H: 32768, W: 32768, Batch: 1} // 2^31 values a channel
			c.op(o, x)
			if err := o.Err(); err == nil || !strings.Contains(err.Error(), "32-bit offsets") {
				t.Fatalf("error %v, want the channel refused", err)
			}
			if d.launches != 0 {
				t.Errorf("%d launches for a refused operation", d.launches)
			}
		})
	}
}
