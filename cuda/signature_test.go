package cuda

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

// recorder is a Device that runs nothing and records the argument kinds Ops passes to each
// kernel.
type recorder struct {
	ops   *Ops
	next  uint64
	kinds map[kernels.Kernel]string
}

func (r *recorder) Alloc(n int) (uint64, error) { r.next += uint64(n) + 256; return r.next, nil }
func (r *recorder) Free(uint64) error           { return nil }
func (r *recorder) Write(uint64, []byte) error  { return nil }
func (r *recorder) Read(dst []byte, _ uint64) error {
	clear(dst)
	return nil
}
func (r *recorder) Stage([]byte) (uint64, error) { return 1 << 40, nil }
func (r *recorder) Gemm(GemmArgs) error          { return nil }
func (r *recorder) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	r.kinds[k] = string(r.ops.args.kinds)
	return nil
}

// ptxParams returns each entry point's parameter types in the PTX.
func ptxParams(t *testing.T) map[string][]string {
	mods, err := kernels.Modules()
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`\.entry (\w+)\(([^)]*)\)`)
	param := regexp.MustCompile(`\.param \.(\w+) `)
	out := map[string][]string{}
	for _, m := range mods {
		for _, e := range entry.FindAllStringSubmatch(m.PTX, -1) {
			var types []string
			for _, p := range param.FindAllStringSubmatch(e[2], -1) {
				types = append(types, p[1])
			}
			out[e[1]] = types
		}
	}
	return out
}

// Every launch of Ops passes exactly the parameters the compiled kernel declares, in number
// and size (the CUDA driver checks neither; a mismatch would read garbage on the GPU).
func TestLaunchArgumentsMatchPTX(t *testing.T) {
	r := &recorder{kinds: map[kernels.Kernel]string{}}
	o := NewOps(r, Options{Unbatched: true}) // each launch issued while its argument kinds are current
	r.ops = o
	m := func(rows, cols, batch int) compute.Mat {
		return compute.Mat{Buf: o.Alloc(rows * cols * max(batch, 1)), Rows: rows, Cols: cols, Stride: cols, Batch: batch, BatchStride: rows * cols}
	}
	x, y := m(3, 4, 2), m(3, 4, 2)
	row := m(1, 4, 2)
	o.Axpby(1, x, 0.5, y, []float32{1, 2})
	o.AddRow(y, row)
	o.SumRows(1, x, 0, row)
	o.AddColumn(y, m(3, 1, 2))
	o.SumColumns(x, m(3, 1, 2))
	o.SoftmaxXentColumns(x, m(4, 1, 2), 1, y, m(4, 1, 2), m(4, 1, 2))
	o.AddColumnActivate(compute.ReLU, y, m(3, 1, 2), x)
	o.ActivateGradSumColumns(compute.Tanh, x, y, x, m(3, 1, 2))
	o.Gather(y, x, []int32{0, 2, 1})
	o.Activate(compute.Tanh, x, y)
	o.ActivateGrad(compute.Tanh, x, y, x)
	o.SoftmaxXent(x, m(3, 1, 2), 1, y, m(3, 1, 2), m(3, 1, 2))
	o.ClipExamples(1, []compute.Mat{x}, []compute.Mat{y})
	o.ClipStep(0.1, 1, 0.5, row, row, row)
	o.AddGaussian(row, []uint64{1, 1}, []float32{1, 1}, 0, 0)
	o.Dots(row, row, make([]float64, 2))
	coef := o.Alloc(2)
	o.ClipCoefs(1, row, row, row, row, coef)
	o.AxpbyCoefs(1, x, 0.5, y, coef)
	o.AccumulateInOrder(y, x, 2, 0, []float32{1, 2, 3, 4})
	o.AddRowActivate(compute.Tanh, x, row, y)
	o.ActivateGradSumRows(compute.Tanh, x, y, x, 1, 0, row)
	img := func(c, n, h, w, batch int) compute.Images {
		sz := c * n * h * w
		return compute.Images{Buf: o.Alloc(sz * batch), C: c, N: n, H: h, W: w, Batch: batch, BatchStride: sz}
	}
	win := compute.Window{Size: 3, Stride: 2, Pad: 1}
	xi, yi := img(2, 3, 5, 5, 2), img(2, 3, 3, 3, 2)
	cols := m(2*9, 3*9, 2)
	o.Im2col(xi, win, cols)
	o.Col2im(cols, win, xi)
	o.Im2col(xi, compute.Window{Size: 3, Stride: 1, Pad: 1}, m(2*9, 3*25, 2)) // stride 1: im2col_rows
	o.AddReLU(m(3, 4, 2), m(3, 4, 2), m(3, 4, 2))
	o.Pool(compute.MaxPooling, win, xi, yi)
	o.PoolGrad(compute.AvgPooling, win, xi, yi, img(2, 3, 5, 5, 2))
	tiles := compute.Window{Size: 2, Stride: 2} // windows tiling the image: pool_grad_tiled
	o.PoolGrad(compute.MaxPooling, tiles, img(2, 3, 4, 4, 2), img(2, 3, 2, 2, 2), img(2, 3, 4, 4, 2))
	px := img(2, 3, 4, 4, 2)
	pidx := o.Alloc(o.PoolIndexLen(compute.MaxPooling, tiles, px))
	o.PoolKeep(tiles, px, img(2, 3, 2, 2, 2), pidx)
	o.PoolGradKept(tiles, px, pidx, img(2, 3, 2, 2, 2), img(2, 3, 4, 4, 2))
	o.Transpose(3, m(2, 6, 2), m(2, 6, 2))
	gb := m(1, 2, 2)
	o.GroupNorm(2, 1e-5, xi, gb, gb, img(2, 3, 5, 5, 2))
	o.GroupNormGrad(2, 1e-5, xi, gb, img(2, 3, 5, 5, 2), img(2, 3, 5, 5, 2), m(1, 2, 2), m(1, 2, 2))
	// 12 x 12 pixels: two runs a channel, gn_grad_fold; statistics kept from the forward pass.
	xg, st := img(2, 3, 12, 12, 2), o.Alloc(o.GroupNormStatsLen(2, img(2, 3, 12, 12, 2)))
	o.GroupNormKeep(2, 1e-5, xg, gb, gb, img(2, 3, 12, 12, 2), true, st)
	o.GroupNormGradKept(2, 1e-5, xg, gb, img(2, 3, 12, 12, 2), img(2, 3, 12, 12, 2), img(2, 3, 12, 12, 2), m(1, 2, 2), m(1, 2, 2), st)
	cw, cb := m(2, 2*9, 2), m(2, 1, 2)
	o.ConvDirect(cw, cb, xi, win, yi)
	o.ConvDirectGrad(cw, xi, win, yi, cw, cb, xi)
	for _, rows := range []int{2, 4} { // conv_direct_dw_win2 and _win4: stride 1
		o.dwRows = rows
		o.ConvDirectGrad(cw, xi, compute.Window{Size: 3, Stride: 1, Pad: 1}, img(2, 3, 5, 5, 2), cw, cb, xi)
	}
	o.dwRows = 0
	wx, wy := img(16, 2, 5, 5, 2), img(16, 2, 5, 5, 2)
	ww := m(16, 16*9, 2)
	for _, f := range []struct {
		t    compute.WinogradTile
		cols int // tiles times samples: F(2x2, 3x3) 3 x 3 tiles, F(4x4, 3x3) 2 x 2
	}{{compute.WinogradF2, 18}, {compute.WinogradF4, 8}} {
		p := f.t.Positions()
		wu, wv := m(16, 16, 2*p), m(16, f.cols, 2*p)
		o.WinogradFilter(f.t, ww, wu)
		o.WinogradFilterGrad(f.t, wu, ww)
		o.WinogradInput(f.t, wx, wv)
		o.WinogradOutput(f.t, wv, m(16, 1, 2), wy)
		o.WinogradOutputGrad(f.t, wy, wv)
		o.WinogradInputGrad(f.t, wv, wx)
	}
	pr := m(1, 3*2+3+3*2+2, 2) // W1 3 x 2, b1 3, W2 2 x 3, b2 2
	hb := m(4, 3, 2)
	o.HiddenStep(&compute.HiddenStepArgs{Act: compute.Tanh, Pre: hb, Params: pr, Anchor: pr, Gram: m(4, 4, 1), Prev: m(4, 3, 2),
		Labels: m(4, 1, 1), GX: m(4, 4, 1), U: hb, B1: 6, W2: 9, B2: 15, H: 3, Cls: 2, Eta: 0.1, V: 1, Alpha: 0.5})
	o.AddNoise(row, compute.NoiseDist{Kind: compute.LaplaceNoise, Scale: 1}, []uint64{1, 1}, []float32{1, 1}, 0, 0)
	o.SumNoise(row, compute.NoiseDist{Kind: compute.StaircaseNoise, Epsilon: 1, Delta: 1, Gamma: 0.5, Inner: 0.6}, []uint64{1, 2},
		[]uint32{0, 1}, []bool{true, false, true, true}, 1, 0)
	o.splitK = 2 // a product in depth slices ends with splitk_reduce
	o.Gemm(false, false, 1, m(3, 8, 2), m(8, 4, 2), 0, m(3, 4, 2))
	o.splitK = 0
	if _, err := o.PhiloxRaw(1, 0, 0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
	ptx := ptxParams(t)
	size := map[byte]string{kindPtr: "u64", kindI64: "u64", kindI32: "u32", kindF32: "f32", kindF64: "f64", kindStg: "u64"}
	for _, k := range kernels.All() {
		kinds, ok := r.kinds[k]
		if !ok {
			t.Errorf("kernel %s was never launched by the operations above", k)
			continue
		}
		types, ok := ptx[k.Name()]
		if !ok {
			t.Errorf("kernel %s is not in the PTX", k)
			continue
		}
		var want []string
		for i := range kinds {
			want = append(want, size[kinds[i]])
		}
		if strings.Join(want, ",") != strings.Join(types, ",") {
			t.Errorf("kernel %s: Ops passes %v, the PTX declares %v", k, want, types)
		}
	}
}
