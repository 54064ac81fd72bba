//go:build cgo

package hostshim

import (
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/nn"
)

// A convolution whose weights outweigh its output (here the second convolution of a small
// ResNet's last stage: 32 x 289 weights a replica for 4 samples of 8 x 8 pixels, 256 columns;
// every other convolution keeps the copies) reads its weights in place and adds its bias by a product of its own on the GPU
// backend. The shim sums a product's depth in one chain from zero, so the losses and every
// gradient value must have the bits of the form with the copies; and the form must have run:
// fewer axpby copies, more cuBLAS calls. Both by patches (Options.PatchConv): by default that
// convolution runs by Winograd's F(2x2, 3x3), which adds its bias in the output transform.
func TestBiasApartKeepsBits(t *testing.T) {
	spec := nn.ResNet(3, 1, 8, 2, 10)
	run := func(bias bool) (grad []float32, loss []float64, gemms int) {
		d := device(t)
		ops := cuda.NewOps(d, cuda.Options{BiasCopies: !bias, PatchConv: true})
		defer ops.Close()
		before := d.GemmCalls()
		grad, loss = modelLossGrad(t, spec, ops, ops, 2, 1, 9, []int32{3, 1, 4, 1})
		return grad, loss, d.GemmCalls() - before
	}
	g0, l0, calls0 := run(false)
	g1, l1, calls1 := run(true)
	// One product more forward (the bias) and one backward (the bias gradient).
	if calls1 != calls0+2 {
		t.Errorf("%d cuBLAS calls with the bias apart, %d with copies: want 2 more", calls1, calls0)
	}
	requireSameBits(t, "with the bias apart", "with copies", g1, g0, l1, l0)
}
