package cuda

import (
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

// A Winograd transform given operands of the wrong shape fails the backend with the operation
// named and launches nothing: weights that are not rows of 3 x 3 filters, a transformed
// operand without the form's 16 or 36 matrices per batch element or of the wrong size, an
// output that overlaps its input, a form the GPU does not compute.
func TestWinogradRefusesWrongShapes(t *testing.T) {
	m := func(o *Ops, rows, cols, batch int) compute.Mat {
		return compute.Mat{Buf: o.Alloc(rows * cols * batch), Rows: rows, Cols: cols, Stride: cols, Batch: batch, BatchStride: rows * cols}
	}
	img := func(o *Ops, c, n, h, w, batch int) compute.Images {
		return compute.Images{Buf: o.Alloc(c * n * h * w * batch), C: c, N: n, H: h, W: w, Batch: batch, BatchStride: c * n * h * w}
	}
	f2, f4 := compute.WinogradF2, compute.WinogradF4
	for _, tc := range []struct {
		name, want string
		op         func(o *Ops)
	}{
		{"weights not 3 x 3 filters", "wino_filter", func(o *Ops) { o.WinogradFilter(f2, m(o, 16, 16*9+1, 2), m(o, 16, 16, 32)) }},
		{"filters' transform of 15 positions", "wino_filter", func(o *Ops) { o.WinogradFilter(f2, m(o, 16, 16*9, 2), m(o, 16, 16, 30)) }},
		{"filters' transform of F(2x2, 3x3) for F(4x4, 3x3)", "wino4_filter", func(o *Ops) { o.WinogradFilter(f4, m(o, 16, 16*9, 2), m(o, 16, 16, 32)) }},
		{"filters' transform of other replicas", "wino_filter_grad", func(o *Ops) { o.WinogradFilterGrad(f2, m(o, 16, 16, 48), m(o, 16, 16*9, 2)) }},
		{"input's transform too narrow", "wino_input", func(o *Ops) { o.WinogradInput(f2, img(o, 16, 2, 5, 5, 2), m(o, 16, 17, 32)) }},
		{"input's transform of F(2x2, 3x3)'s tiles for F(4x4, 3x3)", "wino4_input", func(o *Ops) { o.WinogradInput(f4, img(o, 16, 2, 5, 5, 2), m(o, 16, 18, 72)) }},
		{"products of other channels", "wino_output", func(o *Ops) { o.WinogradOutput(f2, m(o, 8, 18, 32), m(o, 16, 1, 2), img(o, 16, 2, 5, 5, 2)) }},
		{"input gradient of F(4x4, 3x3) with 16 positions", "wino4_input_grad", func(o *Ops) { o.WinogradInputGrad(f4, m(o, 16, 8, 32), img(o, 16, 2, 5, 5, 2)) }},
		{"output over its input", "overlaps", func(o *Ops) {
			x := img(o, 16, 2, 4, 4, 2)
			v := m(o, 16, 8, 32)
			v.Buf = x.Buf // the kernels' pointers are __restrict__: an overlap is refused
			o.WinogradInput(f2, x, v)
		}},
		{"F(3x3, 3x3)", "not a form", func(o *Ops) { o.WinogradInput(3, img(o, 16, 2, 6, 6, 2), m(o, 16, 8, 50)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{kinds: map[kernels.Kernel]string{}}
			o := NewOps(r, Options{Unbatched: true})
			r.ops = o
			tc.op(o)
			err := o.Err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
			if len(r.kinds) != 0 {
				t.Errorf("launched %v after refusing", r.kinds)
			}
		})
	}
}
