//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/nn"
)

// A convolution whose weights outweigh its output (here the second convolution of a small
// ResNet's last stage: 32 x 289 weights a replica for 4 samples of 8 x 8 pixels, 256 columns;
// every other convolution keeps the copies) reads its weights in place and adds its bias by a product of its own on the GPU
// backend. The shim sums a product's depth in one chain from zero, so the losses and every
// gradient value must have the bits of the form with the copies; and the form must have run:
// fewer axpby copies, more cuBLAS calls.
func TestBiasApartKeepsBits(t *testing.T) {
	spec := nn.ResNet(3, 1, 8, 2, 10)
	const R, B = 2, 4
	run := func(bias bool) (grad []float32, loss []float64, gemms int) {
		d := device(t)
		ops := cuda.NewOps(d, cuda.Options{BiasCopies: !bias})
		defer ops.Close()
		m, err := nn.BuildOn(spec, ops)
		if err != nil {
			t.Fatal(err)
		}
		w := make([]float32, R*m.NumParams())
		for r := range R {
			m.Init(w[r*m.NumParams():][:m.NumParams()], uint64(r+1))
		}
		rng := rand.New(rand.NewPCG(9, 9))
		x := make([]float32, B*m.Input.Size())
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := []int32{3, 1, 4, 1}
		grad, loss = make([]float32, len(w)), make([]float64, R)
		before := d.GemmCalls()
		if err := m.LossGrad(w, R, x, y, grad, loss); err != nil {
			t.Fatal(err)
		}
		if err := ops.Err(); err != nil {
			t.Fatal(err)
		}
		return grad, loss, d.GemmCalls() - before
	}
	g0, l0, calls0 := run(false)
	g1, l1, calls1 := run(true)
	// One product more forward (the bias) and one backward (the bias gradient).
	if calls1 != calls0+2 {
		t.Errorf("%d cuBLAS calls with the bias apart, %d with copies: want 2 more", calls1, calls0)
	}
	for r := range R {
		if math.Float64bits(l0[r]) != math.Float64bits(l1[r]) {
			t.Errorf("replica %d: loss %v with the bias apart, %v with copies", r, l1[r], l0[r])
		}
	}
	for i := range g0 {
		if math.Float32bits(g0[i]) != math.Float32bits(g1[i]) {
			t.Fatalf("gradient %d: %v with the bias apart, %v with copies", i, g1[i], g0[i])
		}
	}
}
