package cuda

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

var _ compute.Winograder = (*Ops)(nil)

// Winograd implements compute.Winograder: unless Options.PatchConv, every convolution that
// compute.WinogradFits, by F(4x4, 3x3) or, with Options.Winograd2, F(2x2, 3x3).
func (o *Ops) Winograd(cout int, x compute.Images, win compute.Window) compute.WinogradTile {
	if o.winoTile == 0 || !compute.WinogradFits(cout, x, win) {
		return 0
	}
	return o.winoTile
}

// WinogradTile is the form by which the convolutions that fit run (F(4x4, 3x3) by default,
// F(2x2, 3x3) with Options.Winograd2), 0 with Options.PatchConv: the device memory estimate
// counts them in that form (train/memory.DeviceWinograd, DeviceWinograd4).
func (o *Ops) WinogradTile() compute.WinogradTile { return o.winoTile }

// winoKernels are the six kernels of each form.
type winoKernels struct{ filter, filterGrad, input, inputGrad, output, outputGrad kernels.Kernel }

// winoKernelsOf returns t's kernels; it fails the backend for a form it does not compute.
func (o *Ops) winoKernelsOf(op string, t compute.WinogradTile) (winoKernels, bool) {
	switch t {
	case compute.WinogradF2:
		return winoKernels{kernels.WinoFilter, kernels.WinoFilterGrad, kernels.WinoInput, kernels.WinoInputGrad, kernels.WinoOutput, kernels.WinoOutputGrad}, true
	case compute.WinogradF4:
		return winoKernels{kernels.Wino4Filter, kernels.Wino4FilterGrad, kernels.Wino4Input, kernels.Wino4InputGrad, kernels.Wino4Output, kernels.Wino4OutputGrad}, true
	}
	if o.err == nil {
		o.fail(op, fmt.Errorf("%v: not a form of Winograd's minimal filtering the GPU computes", t))
	}
	return winoKernels{}, false
}

// winoShape checks that the transformed operand m of op (compute.Winograder: t.Positions() Mat
// batch elements per batch element) holds rows x cols matrices, its positions in order
// (BatchStride apart), for batch batch elements; it fails the backend otherwise.
func (o *Ops) winoShape(op string, t compute.WinogradTile, m compute.Mat, rows, cols, batch int) bool {
	if o.err != nil {
		return false
	}
	tiles := t.Positions()
	if batch <= 0 || m.Batch != tiles*batch || m.Rows != rows || m.Cols != cols || m.Stride < m.Cols || m.BatchStride < m.Rows*m.Stride {
		o.fail(op, fmt.Errorf("transformed operand %d x %d (stride %d) in %d batch elements %d apart: want %d x %d matrices, %d per batch element of %d",
			m.Rows, m.Cols, m.Stride, m.Batch, m.BatchStride, rows, cols, tiles, batch))
		return false
	}
	return true
}

// winoImage passes an image's geometry with its tile grid in form t: C, N, H, W, TH, TW.
func (a *args) winoImage(t compute.WinogradTile, x compute.Images) *args {
	th, tw := t.Grid(x.H, x.W)
	return a.i64(x.C).i64(x.N).i64(x.H).i64(x.W).i64(th).i64(tw)
}

// WinogradFilter implements compute.Winograder: one launch of wino_filter (wino4_filter), a
// thread per filter.
func (o *Ops) WinogradFilter(t compute.WinogradTile, w, u compute.Mat) {
	if k, ok := o.winoKernelsOf("winograd filter", t); ok {
		o.winoFilterLaunch(k.filter, t, w, u, false)
	}
}

// WinogradFilterGrad implements compute.Winograder: one launch of wino_filter_grad
// (wino4_filter_grad), a thread per filter.
func (o *Ops) WinogradFilterGrad(t compute.WinogradTile, du, dw compute.Mat) {
	if k, ok := o.winoKernelsOf("winograd filter gradient", t); ok {
		o.winoFilterLaunch(k.filterGrad, t, dw, du, true)
	}
}

// winoFilterLaunch checks the filters w (Cout x 9 Cin, rows of 3 x 3 filters) and their
// transforms u and launches k, a thread per filter: with toFilters k writes w from u, else u
// from w. k's arguments are its output, its input, then Cout, Cin and the batch.
func (o *Ops) winoFilterLaunch(k kernels.Kernel, t compute.WinogradTile, w, u compute.Mat, toFilters bool) {
	op := k.Name()
	if w.Cols <= 0 || w.Cols%9 != 0 {
		o.fail(op, fmt.Errorf("weights of %d columns: want Cin 3 x 3 filters a row", w.Cols))
		return
	}
	out, in := u, w
	if toFilters {
		out, in = w, u
	}
	if !o.winoShape(op, t, u, w.Rows, w.Cols/9, w.Batch) || !o.apart(op, matSpan(out), matSpan(in)) {
		return
	}
	o.args.reset().ptr(addr(out)).i64(out.Stride).i64(out.BatchStride).ptr(addr(in)).i64(in.Stride).i64(in.BatchStride).
		i64(u.Rows).i64(u.Cols).i64(w.Batch)
	o.launch(k, w.Batch*u.Rows*u.Cols)
}

// WinogradInput implements compute.Winograder: one launch of wino_input (wino4_input), a group
// of threads per (channel, tile) and its samples.
func (o *Ops) WinogradInput(t compute.WinogradTile, x compute.Images, v compute.Mat) {
	if k, ok := o.winoKernelsOf("winograd input", t); ok {
		th, tw := t.Grid(x.H, x.W)
		o.winoLaunch(k.input, t, v, x, false, nil, x.C*th*tw)
	}
}

// WinogradOutput implements compute.Winograder: one launch of wino_output (wino4_output), a
// group of threads per (output channel, tile) and its samples.
func (o *Ops) WinogradOutput(t compute.WinogradTile, m, bias compute.Mat, y compute.Images) {
	if k, ok := o.winoKernelsOf("winograd output", t); ok {
		th, tw := t.Grid(y.H, y.W)
		o.winoLaunch(k.output, t, m, y, true, &bias, y.C*th*tw)
	}
}

// WinogradOutputGrad implements compute.Winograder: one launch of wino_output_grad
// (wino4_output_grad), a group of threads per (output channel, tile) and its samples.
func (o *Ops) WinogradOutputGrad(t compute.WinogradTile, dy compute.Images, dm compute.Mat) {
	if k, ok := o.winoKernelsOf("winograd output gradient", t); ok {
		th, tw := t.Grid(dy.H, dy.W)
		o.winoLaunch(k.outputGrad, t, dm, dy, false, nil, dy.C*th*tw)
	}
}

// WinogradInputGrad implements compute.Winograder: one launch of wino_input_grad
// (wino4_input_grad), a group of threads per (channel, block of t x t padded pixels) and its
// samples.
func (o *Ops) WinogradInputGrad(t compute.WinogradTile, dv compute.Mat, dx compute.Images) {
	if k, ok := o.winoKernelsOf("winograd input gradient", t); ok {
		n := int(t)
		o.winoLaunch(k.inputGrad, t, dv, dx, true, nil, dx.C*(dx.H/n+1)*(dx.W/n+1))
	}
}

// winoLaunch checks a transform between the image x and the transformed operand m in form t
// and launches k over rowsPer rows of x's samples per batch element: with toImage, k writes x
// from m (and the bias, where given), else m from x. k's arguments are its output, its
// inputs, then x's geometry and tile grid and the batch.
func (o *Ops) winoLaunch(k kernels.Kernel, t compute.WinogradTile, m compute.Mat, x compute.Images, toImage bool, bias *compute.Mat, rowsPer int) {
	th, tw := t.Grid(x.H, x.W)
	op := k.Name()
	if !o.winoShape(op, t, m, x.C, th*tw*x.N, x.Batch) || !o.planeFits(op, x) {
		return
	}
	// The transforms reach a replica's positions with 32-bit offsets too.
	if span := int64(t.Positions()) * int64(m.BatchStride); span > math.MaxInt32 {
		o.fail(op, fmt.Errorf("the transformed operand's %d positions, %d values apart, span %d values, more than the transforms' 32-bit offsets reach (%d)",
			t.Positions(), m.BatchStride, span, math.MaxInt32))
		return
	}
	a := o.args.reset()
	if toImage {
		in := []span{matSpan(m)}
		if bias != nil {
			in = append(in, matSpan(*bias))
		}
		if !o.apart(op, imgSpan(x), in...) {
			return
		}
		a.ptr(imgAddr(x)).i64(x.BatchStride).ptr(addr(m)).i64(m.Stride).i64(m.BatchStride)
		if bias != nil {
			a.ptr(addr(*bias)).i64(bias.Stride).i64(bias.BatchStride)
		}
	} else {
		if !o.apart(op, matSpan(m), imgSpan(x)) {
			return
		}
		a.ptr(addr(m)).i64(m.Stride).i64(m.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride)
	}
	a.winoImage(t, x).i64(x.Batch)
	o.launchRows(k, x.Batch*rowsPer, x.N)
}
