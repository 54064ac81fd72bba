package cuda

import (
	"fmt"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

var _ compute.Winograder = (*Ops)(nil)

// Winograd implements compute.Winograder: unless Options.PatchConv, every convolution that
// compute.WinogradFits.
func (o *Ops) Winograd(cout int, x compute.Images, win compute.Window) bool {
	return o.winograd && compute.WinogradFits(cout, x, win)
}

// WinogradEnabled reports whether the convolutions that fit run by Winograd's form (the
// default; not with Options.PatchConv): the device memory estimate then counts them in that
// form (train/memory.DeviceWinograd).
func (o *Ops) WinogradEnabled() bool { return o.winograd }

// winoShape checks that the transformed operand m of op (compute.Winograder: WinogradTiles Mat
// batch elements per batch element) holds rows x cols matrices, its positions in order
// (BatchStride apart), for batch batch elements; it fails the backend otherwise.
func (o *Ops) winoShape(op string, m compute.Mat, rows, cols, batch int) bool {
	if o.err != nil {
		return false
	}
	const tiles = compute.WinogradTiles
	if batch <= 0 || m.Batch != tiles*batch || m.Rows != rows || m.Cols != cols || m.Stride < m.Cols || m.BatchStride < m.Rows*m.Stride {
		o.fail(op, fmt.Errorf("transformed operand %d x %d (stride %d) in %d batch elements %d apart: want %d x %d matrices, %d per batch element of %d",
			m.Rows, m.Cols, m.Stride, m.Batch, m.BatchStride, rows, cols, tiles, batch))
		return false
	}
	return true
}

// winoImage passes an image's geometry with its tile grid: C, N, H, W, TH, TW.
func (a *args) winoImage(x compute.Images) *args {
	th, tw := compute.WinogradTileGrid(x.H, x.W)
	return a.i64(x.C).i64(x.N).i64(x.H).i64(x.W).i64(th).i64(tw)
}

// WinogradFilter implements compute.Winograder: one launch of wino_filter, a thread per
// filter.
func (o *Ops) WinogradFilter(w, u compute.Mat) { o.winoFilterLaunch(kernels.WinoFilter, w, u, false) }

// WinogradFilterGrad implements compute.Winograder: one launch of wino_filter_grad, a thread
// per filter.
func (o *Ops) WinogradFilterGrad(du, dw compute.Mat) {
	o.winoFilterLaunch(kernels.WinoFilterGrad, dw, du, true)
}

// winoFilterLaunch checks the filters w (Cout x 9 Cin, rows of 3 x 3 filters) and their
// transforms u and launches k, a thread per filter: with toFilters k writes w from u, else u
// from w. k's arguments are its output, its input, then Cout, Cin and the batch.
func (o *Ops) winoFilterLaunch(k kernels.Kernel, w, u compute.Mat, toFilters bool) {
	op := k.Name()
	if w.Cols <= 0 || w.Cols%9 != 0 {
		o.fail(op, fmt.Errorf("weights of %d columns: want Cin 3 x 3 filters a row", w.Cols))
		return
	}
	out, in := u, w
	if toFilters {
		out, in = w, u
	}
	if !o.winoShape(op, u, w.Rows, w.Cols/9, w.Batch) || !o.apart(op, matSpan(out), matSpan(in)) {
		return
	}
	o.args.reset().ptr(addr(out)).i64(out.Stride).i64(out.BatchStride).ptr(addr(in)).i64(in.Stride).i64(in.BatchStride).
		i64(u.Rows).i64(u.Cols).i64(w.Batch)
	o.launch(k, w.Batch*u.Rows*u.Cols)
}

// WinogradInput implements compute.Winograder: one launch of wino_input, a group of threads
// per (channel, tile) and its samples.
func (o *Ops) WinogradInput(x compute.Images, v compute.Mat) {
	th, tw := compute.WinogradTileGrid(x.H, x.W)
	o.winoLaunch(kernels.WinoInput, v, x, false, nil, x.C*th*tw)
}

// WinogradOutput implements compute.Winograder: one launch of wino_output, a group of threads
// per (output channel, tile) and its samples.
func (o *Ops) WinogradOutput(m, bias compute.Mat, y compute.Images) {
	th, tw := compute.WinogradTileGrid(y.H, y.W)
	o.winoLaunch(kernels.WinoOutput, m, y, true, &bias, y.C*th*tw)
}

// WinogradOutputGrad implements compute.Winograder: one launch of wino_output_grad, a group of
// threads per (output channel, tile) and its samples.
func (o *Ops) WinogradOutputGrad(dy compute.Images, dm compute.Mat) {
	th, tw := compute.WinogradTileGrid(dy.H, dy.W)
	o.winoLaunch(kernels.WinoOutputGrad, dm, dy, false, nil, dy.C*th*tw)
}

// WinogradInputGrad implements compute.Winograder: one launch of wino_input_grad, a group of
// threads per (channel, block of 2 x 2 padded pixels) and its samples.
func (o *Ops) WinogradInputGrad(dv compute.Mat, dx compute.Images) {
	o.winoLaunch(kernels.WinoInputGrad, dv, dx, true, nil, dx.C*(dx.H/2+1)*(dx.W/2+1))
}

// winoLaunch checks a transform between the image x and the transformed operand t and launches
// k over rowsPer rows of x's samples per batch element: with toImage, k writes x from t (and
// the bias, where given), else t from x. k's arguments are its output, its inputs, then x's
// geometry and tile grid and the batch.
func (o *Ops) winoLaunch(k kernels.Kernel, t compute.Mat, x compute.Images, toImage bool, bias *compute.Mat, rowsPer int) {
	th, tw := compute.WinogradTileGrid(x.H, x.W)
	op := k.Name()
	if !o.winoShape(op, t, x.C, th*tw*x.N, x.Batch) {
		return
	}
	a := o.args.reset()
	if toImage {
		in := []span{matSpan(t)}
		if bias != nil {
			in = append(in, matSpan(*bias))
		}
		if !o.apart(op, imgSpan(x), in...) {
			return
		}
		a.ptr(imgAddr(x)).i64(x.BatchStride).ptr(addr(t)).i64(t.Stride).i64(t.BatchStride)
		if bias != nil {
			a.ptr(addr(*bias)).i64(bias.Stride).i64(bias.BatchStride)
		}
	} else {
		if !o.apart(op, matSpan(t), imgSpan(x)) {
			return
		}
		a.ptr(addr(t)).i64(t.Stride).i64(t.BatchStride).ptr(imgAddr(x)).i64(x.BatchStride)
	}
	a.winoImage(x).i64(x.Batch)
	o.launchRows(k, x.Batch*rowsPer, x.N)
}
