//go:build cgo

package hostshim

import (
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
)

// noColumnBias hides compute.ColumnBiaser: a method of the same name at the same depth makes
// the embedded Ops' ambiguous, so the backend no longer has it.
type noColumnBias struct{}

func (noColumnBias) AddColumn() {}

// LeNet-5's dense layers take their biases by compute.ColumnBiaser, the first two with their
// ReLUs in the same passes (AddColumnActivate, ActivateGradSumColumns), and the losses and
// gradients have the bits of the products by ones and the separate activations (the shim sums
// a product's depth in one chain from zero, as the column sums do). The launches: the dense
// ReLUs' activate and activate_grad are gone, and no cuBLAS call is made for a bias.
func TestDenseActKeepsModelBits(t *testing.T) {
	type shimOps struct{ *cuda.Ops }
	g0, l0, k0 := lenetLossGrad(t, func(ops *cuda.Ops) compute.Backend {
		return struct {
			shimOps
			noColumnBias
		}{shimOps{ops}, noColumnBias{}}
	})
	g1, l1, k1 := lenetLossGrad(t, nil)
	for _, c := range []struct {
		k       kernels.Kernel
		off, on int
	}{
		{kernels.Activate, k0[kernels.Activate], k0[kernels.Activate] - 2},
		{kernels.ActivateGrad, k0[kernels.ActivateGrad], k0[kernels.ActivateGrad] - 2},
		{kernels.AddColActivate, 0, 2}, {kernels.ActivateGradSumCols, 0, 2},
		{kernels.AddCol, 0, 1}, {kernels.SumCols, 0, 1},
	} {
		if k0[c.k] != c.off || k1[c.k] != c.on {
			t.Errorf("%v: %d launches without compute.ColumnBiaser, %d with: want %d and %d", c.k, k0[c.k], k1[c.k], c.off, c.on)
		}
	}
	requireSameBits(t, "dense layers by ColumnBiaser", "by products with ones", g1, g0, l1, l0)
}

// noColumnXent hides compute.ColumnXent.
type noColumnXent struct{}

func (noColumnXent) SoftmaxXentColumns() {}

// nn takes the softmax cross-entropy of the logits as they lie, classes by samples
// (compute.ColumnXent), instead of transposing them for it and its gradient back: the losses
// and gradients keep their bits, and the two transpositions are gone.
func TestColumnXentKeepsModelBits(t *testing.T) {
	type shimOps struct{ *cuda.Ops }
	g0, l0, k0 := lenetLossGrad(t, func(ops *cuda.Ops) compute.Backend {
		return struct {
			shimOps
			noColumnXent
		}{shimOps{ops}, noColumnXent{}}
	})
	g1, l1, k1 := lenetLossGrad(t, nil)
	if k0[kernels.TransposeBlocks]-k1[kernels.TransposeBlocks] != 2 || k0[kernels.SoftmaxXent] != 1 || k1[kernels.SoftmaxXent] != 1 {
		t.Errorf("transpose_blocks %d and softmax_xent %d launches transposed, %d and %d by columns: want 2 transpositions fewer, one softmax_xent each",
			k0[kernels.TransposeBlocks], k0[kernels.SoftmaxXent], k1[kernels.TransposeBlocks], k1[kernels.SoftmaxXent])
	}
	requireSameBits(t, "logits by columns", "transposed", g1, g0, l1, l0)
}
