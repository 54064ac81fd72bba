//go:build cgo

package hostshim

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/nn"
)

// A small ResNet (width 16, two stages of one block, 8 x 8 inputs) in each Winograd form, by
// default F(4x4, 3x3) and with Options.Winograd2 F(2x2, 3x3): its three 3 x 3 convolutions at
// stride 1 of at least 16 channels (stage 1's two, stage 2's second) run by that form's
// kernels and none of the other's, the stem (3 input channels, an input shared by the
// replicas) and the stride-2 and 1 x 1 convolutions by their patches. Per pass: each Winograd
// convolution's filters transformed twice (forward, and backward for the input gradient), its
// input, output, output gradient, input gradient and filter gradient once; 3 im2col and 3
// col2im fewer.
//
// The losses and gradients must agree with the patch form's to rounding: every value on both
// sides is a float32 sum of at most a few thousand products (stage 1's filter gradients sum
// over 64 pixels of 4 samples, the inputs' gradients over 16 channels times 9 taps), each
// side within about 2^-24 times the terms' count (and F(4x4, 3x3)'s transforms' few tens of
// roundings more: cuda/paritytest/winograd.go) of the exact value relative to the terms'
// magnitudes, and what follows (GroupNorm, the softmax) is smooth. The tolerance, 1e-4 of the
// largest gradient of the model (and 1e-6 relative on the losses), is far above those
// roundings and far below a wrong tile, tap or channel, which moves values by their own size.
func TestWinogradModelAgreesWithPatches(t *testing.T) {
	spec := nn.ResNet(2, 1, 16, 4, 10)
	spec.Input = []int{3, 8, 8}
	run := func(opt cuda.Options) (grad []float32, loss []float64, per map[kernels.Kernel]int) {
		d := &countingDevice{Device: device(t), perKernel: map[kernels.Kernel]int{}}
		ops := cuda.NewOps(d, opt)
		defer ops.Close()
		grad, loss = modelLossGrad(t, spec, ops, ops, 2, 1, 9, []int32{3, 1, 4, 1})
		return grad, loss, d.perKernel
	}
	g0, l0, k0 := run(cuda.Options{PatchConv: true})
	f2 := []kernels.Kernel{kernels.WinoFilter, kernels.WinoInput, kernels.WinoOutput, kernels.WinoOutputGrad, kernels.WinoFilterGrad, kernels.WinoInputGrad}
	f4 := []kernels.Kernel{kernels.Wino4Filter, kernels.Wino4Input, kernels.Wino4Output, kernels.Wino4OutputGrad, kernels.Wino4FilterGrad, kernels.Wino4InputGrad}
	for _, tc := range []struct {
		name        string
		opt         cuda.Options
		mine, other []kernels.Kernel
	}{
		{"F(2x2, 3x3)", cuda.Options{Winograd2: true}, f2, f4},
		{"F(4x4, 3x3)", cuda.Options{}, f4, f2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g1, l1, k1 := run(tc.opt)
			for i, k := range tc.mine {
				n := 3
				if i == 0 {
					n = 6 // the filters, transformed in both passes
				}
				if k0[k] != 0 || k1[k] != n {
					t.Errorf("%s: %d launches in this form, %d by patches: want %d and 0", k, k1[k], k0[k], n)
				}
				if o := tc.other[i]; k1[o] != 0 {
					t.Errorf("%s: %d launches, the other form's kernel: want 0", o, k1[o])
				}
			}
			im2col := func(per map[kernels.Kernel]int) int { return per[kernels.Im2col] + per[kernels.Im2colRows] }
			if im2col(k0)-im2col(k1) != 3 || k0[kernels.Col2im]-k1[kernels.Col2im] != 3 {
				t.Errorf("im2col %d, col2im %d launches with patches; %d and %d by Winograd: want 3 of each fewer",
					im2col(k0), k0[kernels.Col2im], im2col(k1), k1[kernels.Col2im])
			}
			for r := range l0 {
				if d := math.Abs(l1[r] - l0[r]); !(d <= 1e-6*math.Abs(l0[r])) {
					t.Errorf("replica %d: loss %v by Winograd, %v with patches", r, l1[r], l0[r])
				}
			}
			largest, worst := 0.0, 0.0
			for i := range g0 {
				largest = max(largest, math.Abs(float64(g0[i])))
				worst = max(worst, math.Abs(float64(g1[i]-g0[i])))
			}
			t.Logf("largest gradient %g, largest difference %g (%.2g of it)", largest, worst, worst/largest)
			if !(worst <= 1e-4*largest) {
				t.Errorf("gradients differ by up to %g, above 1e-4 of the largest, %g", worst, largest)
			}
		})
	}
}
