package nn

import (
	"fmt"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

// DeviceMemory is the most float32 values a model of spec allocates at once on a device
// backend: one that writes every replica's convolution patches and keeps them from the forward
// to the backward pass (no compute.PatchGemmer, no compute.CacheSized working sets), keeps the
// bias of a convolution whose weights outweigh its output apart (compute.BiasApart) and frees a
// scratch buffer when it grows (compute.Releaser): the GPU's. The model trains R replicas on
// batches of trainRows samples (backward pass included), then evaluates evalRows samples, then
// trains again, as the engine does between checkpoints. Where the GPU computes a convolution
// directly (compute.DirectConvolver: by default, LeNet-5's second) it writes no patches, so the
// count, which takes the patches, is then an upper bound (the direct kernels' scratch is no
// larger than the patches: cuda.Ops.DirectConv; with cuda.Options.NoDirectConv the count is
// the device's). The 3 x 3 convolutions
// are counted in each of their forms, by patches and by Winograd's F(2x2, 3x3) and F(4x4, 3x3)
// (compute.Winograder), and the largest count is returned.
//
// It runs the model's own passes on a backend that computes nothing and only counts what is
// allocated and released, so the count follows the layers' code rather than a formula beside
// it. The input batch and the parameters are the caller's (not counted).
func DeviceMemory(spec Spec, R, trainRows, evalRows int) (int64, error) {
	return DeviceMemoryOf(spec, R, trainRows, evalRows, AnyConvForm)
}

// ConvForm says which form of the 3 x 3 convolutions a device memory count follows.
type ConvForm int

const (
	// AnyConvForm counts every form and takes the largest: the count for a device whose
	// options are not known.
	AnyConvForm ConvForm = iota
	// PatchConvForm counts every convolution by its patches.
	PatchConvForm
	// WinogradConvForm counts the convolutions that compute.WinogradFits by Winograd's
	// F(2x2, 3x3), as a GPU with cuda.Options.Winograd2 runs them.
	WinogradConvForm
	// Winograd4ConvForm counts them by F(4x4, 3x3), as a GPU runs them by default (not with
	// cuda.Options.PatchConv).
	Winograd4ConvForm
)

// WinogradForm is the ConvForm that counts the convolutions that fit by Winograd's form t,
// PatchConvForm for none.
func WinogradForm(t compute.WinogradTile) ConvForm {
	for _, f := range []ConvForm{PatchConvForm, WinogradConvForm, Winograd4ConvForm} {
		if ft, _ := f.tile(); ft == t {
			return f
		}
	}
	return PatchConvForm
}

// tile is the form's Winograd tile, 0 for the patches; AnyConvForm has none.
func (f ConvForm) tile() (compute.WinogradTile, bool) {
	switch f {
	case PatchConvForm:
		return 0, true
	case WinogradConvForm:
		return compute.WinogradF2, true
	case Winograd4ConvForm:
		return compute.WinogradF4, true
	}
	return 0, false
}

// DeviceMemoryOf is DeviceMemory for the convolutions in the given form.
func DeviceMemoryOf(spec Spec, R, trainRows, evalRows int, form ConvForm) (int64, error) {
	if R < 1 || trainRows < 1 || evalRows < 1 {
		return 0, fmt.Errorf("nn: device memory of %d replicas, %d training and %d evaluation rows: need positive counts", R, trainRows, evalRows)
	}
	var most int64
	for _, t := range []compute.WinogradTile{0, compute.WinogradF2, compute.WinogradF4} {
		if want, one := form.tile(); one && t != want {
			continue
		}
		o, err := countPasses(spec, R, trainRows, evalRows, t)
		if err != nil {
			return 0, err
		}
		most = max(most, o.peak+o.gnPart+o.gnStats)
	}
	return most, nil
}

// WinogradConvolutions is how many of spec's convolutions a GPU computes by Winograd's
// minimal filtering (by default: those that compute.WinogradFits), so that a memory estimate
// in that form (WinogradConvForm, Winograd4ConvForm) can say whether the form changed
// anything.
func WinogradConvolutions(spec Spec) (int, error) {
	o, err := countPasses(spec, 1, 1, 1, compute.WinogradF2)
	if err != nil {
		return 0, err
	}
	return o.winoConvs, nil
}

// countPasses runs a model of spec on countingOps for one form of the 3 x 3 convolutions: by
// their patches (tile 0), or by Winograd's F(2x2, 3x3) or F(4x4, 3x3) where
// compute.WinogradFits. Which uses more depends on the layer (the patches are 9 Cin values a
// pixel; the transformed input and products 4 Cin and 4 Cout by F(2x2, 3x3), 2.25 Cin and
// 2.25 Cout by F(4x4, 3x3); the transformed filters 16 or 36 Cout Cin a replica), so
// DeviceMemory takes the largest and holds whichever the device runs.
func countPasses(spec Spec, R, trainRows, evalRows int, wino compute.WinogradTile) (*countingOps, error) {
	m, err := build[float32](spec)
	if err != nil {
		return nil, err
	}
	o := &countingOps{wino: wino}
	m.o = o
	dim := m.Input.Size()
	mat := func(rows, cols, batch int) compute.Mat {
		return compute.Mat{Buf: countBuf(rows * cols * batch), Rows: rows, Cols: cols, Stride: cols, Batch: batch, BatchStride: rows * cols}
	}
	labels := func(rows int) compute.Mat { // shared by the replicas
		return compute.Mat{Buf: countBuf(rows), Rows: rows, Cols: 1, Stride: 1, Batch: R}
	}
	params, grad := mat(1, m.d, R), mat(1, m.d, R)
	train := func() {
		m.Grad(params, mat(trainRows, dim, R), labels(trainRows), grad, mat(trainRows, 1, R))
	}
	train()
	outputs := o.winoOutputs
	m.Eval(params, mat(evalRows, dim, R), labels(evalRows), mat(evalRows, 1, R), mat(evalRows, 1, R))
	o.winoConvs = o.winoOutputs - outputs // one output transform a layer in a forward pass
	train()
	return o, nil
}

// countBuf is a buffer of n values that holds none.
type countBuf int

func (b countBuf) Len() int { return int(b) }

// countingOps computes nothing: it counts the values allocated and not yet released, and the
// largest statistics scratch a device's GroupNorm keeps (gnPart, gnStats). With wino (a
// form) it takes the convolutions that compute.WinogradFits by that form, as the GPU does,
// and counts their output transforms (winoOutputs; winoConvs is those of the evaluation pass,
// one a layer).
type countingOps struct {
	live, peak, gnPart, gnStats int64
	wino                        compute.WinogradTile
	winoOutputs, winoConvs      int
}

func (o *countingOps) alloc(n int) compute.Buffer {
	n = max(n, 1)
	o.live += int64(n)
	o.peak = max(o.peak, o.live)
	return countBuf(n)
}
func (o *countingOps) release(b compute.Buffer)            { o.live -= int64(b.Len()) }
func (o *countingOps) wrap(v []float32) compute.Buffer     { return o.alloc(len(v)) }
func (o *countingOps) read([]float32, compute.Buffer, int) {}
func (o *countingOps) gemm(bool, bool, float32, compute.Mat, compute.Mat, float32, compute.Mat) {
}
func (o *countingOps) axpby(float32, compute.Mat, float32, compute.Mat)                       {}
func (o *countingOps) activate(compute.Activation, compute.Mat, compute.Mat)                  {}
func (o *countingOps) activateGrad(compute.Activation, compute.Mat, compute.Mat, compute.Mat) {}
func (o *countingOps) xent(compute.Mat, compute.Mat, float32, compute.Mat, compute.Mat, compute.Mat) {
}
func (o *countingOps) patchGemmer() compute.PatchGemmer    { return nil }
func (o *countingOps) directConv() compute.DirectConvolver { return nil }
func (o *countingOps) biasApart() bool                     { return true } // as the GPU's
func (o *countingOps) columnBias() compute.ColumnBiaser    { return nil }  // it allocates nothing
func (o *countingOps) columnXent() compute.ColumnXent      { return nil }  // the transposed form holds more
func (o *countingOps) winograd() compute.Winograder {
	if o.wino != 0 {
		return o
	}
	return nil
}
func (o *countingOps) Winograd(cout int, x compute.Images, win compute.Window) compute.WinogradTile {
	if !compute.WinogradFits(cout, x, win) {
		return 0
	}
	return o.wino
}
func (o *countingOps) WinogradFilter(compute.WinogradTile, compute.Mat, compute.Mat)   {}
func (o *countingOps) WinogradInput(compute.WinogradTile, compute.Images, compute.Mat) {}
func (o *countingOps) WinogradOutput(compute.WinogradTile, compute.Mat, compute.Mat, compute.Images) {
	o.winoOutputs++
}
func (o *countingOps) WinogradOutputGrad(compute.WinogradTile, compute.Images, compute.Mat) {}
func (o *countingOps) WinogradInputGrad(compute.WinogradTile, compute.Mat, compute.Images)  {}
func (o *countingOps) WinogradFilterGrad(compute.WinogradTile, compute.Mat, compute.Mat)    {}
func (o *countingOps) gnReLU() compute.GroupNormReLUer                                      { return o } // as the GPU's
func (o *countingOps) addReLU() compute.AddReLUer                                           { return o } // as the GPU's
func (o *countingOps) AddReLU(compute.Mat, compute.Mat, compute.Mat)                        {}
func (o *countingOps) Im2col(compute.Images, compute.Window, compute.Mat)                   {}
func (o *countingOps) Col2im(compute.Mat, compute.Window, compute.Images)                   {}
func (o *countingOps) Pool(compute.Pooling, compute.Window, compute.Images, compute.Images) {}
func (o *countingOps) PoolGrad(compute.Pooling, compute.Window, compute.Images, compute.Images, compute.Images) {
}

// GroupNorm counts the device's own scratch for the statistics and the gradients' sums: float64
// values, the larger of 2 per statistic (kernels.GroupNormPartials each) and what the
// gradients' sums keep (kernels.GroupNormGradScratch; TestNNDeviceMemoryIsTheShimsPeak in
// cuda/hostshim holds the count to the device's peak), and 4 values per batch element, sample
// and group, each buffer at most doubled when it grows.
func (o *countingOps) GroupNorm(groups int, _ float32, x compute.Images, _, _ compute.Mat, y compute.Images) {
	rows := int64(y.Batch) * int64(x.N) * int64(groups)
	part := max(2*rows*kernels.GroupNormPartials, int64(kernels.GroupNormGradScratch(y.Batch, x.C, x.N, x.H*x.W)))
	const f64 = 2 // float32 units per float64
	o.gnPart, o.gnStats = max(o.gnPart, 2*f64*part), max(o.gnStats, 2*f64*4*rows)
}

func (o *countingOps) GroupNormGrad(int, float32, compute.Images, compute.Mat, compute.Images, compute.Images, compute.Mat, compute.Mat) {
}
func (o *countingOps) Transpose(int, compute.Mat, compute.Mat) {}

// GroupNormReLU counts GroupNorm's scratch: the ReLU adds none.
func (o *countingOps) GroupNormReLU(groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images) {
	o.GroupNorm(groups, eps, x, gamma, beta, y)
}

func (o *countingOps) GroupNormReLUGrad(int, float32, compute.Images, compute.Mat, compute.Images, compute.Images, compute.Images, compute.Mat, compute.Mat) {
}

// The GPU's GroupNorm keeps its statistics for the gradient in the layers' own buffers, which
// the layers allocate (and so count) through alloc.
func (o *countingOps) gnKeeper() compute.GroupNormStatsKeeper { return o }
func (o *countingOps) poolKeeper() compute.PoolIndexKeeper    { return o } // as the GPU's
func (o *countingOps) PoolIndexLen(p compute.Pooling, w compute.Window, x compute.Images) int {
	if !compute.IndexablePooling(p, w, x) {
		return 0
	}
	return kernels.PoolIndexFloats(x.Batch, x.C, w.Out(x.H), w.Out(x.W), x.N)
}
func (o *countingOps) PoolKeep(compute.Window, compute.Images, compute.Images, compute.Buffer) {}
func (o *countingOps) poolReLU() compute.PoolReLUKeeper                                        { return o } // as the GPU's
func (o *countingOps) PoolKeepReLU(compute.Window, compute.Images, compute.Images, compute.Buffer) {
}
func (o *countingOps) PoolGradKeptReLU(compute.Window, compute.Images, compute.Buffer, compute.Images, compute.Images, compute.Images) {
}
func (o *countingOps) PoolGradKept(compute.Window, compute.Images, compute.Buffer, compute.Images, compute.Images) {
}
func (o *countingOps) GroupNormStatsLen(groups int, x compute.Images) int {
	return kernels.GroupNormStatsFloats(x.Batch, x.N, groups)
}
func (o *countingOps) GroupNormKeep(groups int, eps float32, x compute.Images, gamma, beta compute.Mat, y compute.Images, _ bool, _ compute.Buffer) {
	o.GroupNorm(groups, eps, x, gamma, beta, y)
}
func (o *countingOps) GroupNormGradKept(int, float32, compute.Images, compute.Mat, compute.Images, compute.Images, compute.Images, compute.Mat, compute.Mat, compute.Buffer) {
}
