//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/nn"
)

// modelLossGrad is the losses and gradients of len(labels) standard normal samples (drawn from
// dataSeed) for R replicas of spec on be (ops's backend, perhaps behind a wrapper), replica r
// initialised from initSeed + r: the whole forward and backward pass of a CNN on the shim.
func modelLossGrad(t *testing.T, spec nn.Spec, ops *cuda.Ops, be compute.Backend, R int, initSeed, dataSeed uint64, labels []int32) (grad []float32, loss []float64) {
	t.Helper()
	m, err := nn.BuildOn(spec, be)
	if err != nil {
		t.Fatal(err)
	}
	d := m.NumParams()
	w := make([]float32, R*d)
	for r := range R {
		m.Init(w[r*d:][:d], initSeed+uint64(r))
	}
	rng := rand.New(rand.NewPCG(dataSeed, dataSeed))
	x := normals(rng, len(labels)*m.Input.Size())
	grad, loss = make([]float32, len(w)), make([]float64, R)
	if err := m.LossGrad(w, R, x, labels, grad, loss); err != nil {
		t.Fatal(err)
	}
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	return grad, loss
}

// requireSameBits fails t unless the losses and gradients of two forms agree bit for bit.
func requireSameBits(t *testing.T, form, other string, g1, g0 []float32, l1, l0 []float64) {
	t.Helper()
	for r := range l0 {
		if math.Float64bits(l0[r]) != math.Float64bits(l1[r]) {
			t.Errorf("replica %d: loss %v %s, %v %s", r, l1[r], form, l0[r], other)
		}
	}
	for i := range g0 {
		if math.Float32bits(g0[i]) != math.Float32bits(g1[i]) {
			t.Fatalf("gradient %d: %v %s, %v %s", i, g1[i], form, g0[i], other)
		}
	}
}

// gemmShapes is the stored shapes of a product's operands: A is m x k (k x m with transA), B is
// k x n (n x k with transB).
func gemmShapes(transA, transB bool, m, k, n int) (ar, ac, br, bc int) {
	ar, ac, br, bc = m, k, k, n
	if transA {
		ar, ac = k, m
	}
	if transB {
		br, bc = n, k
	}
	return ar, ac, br, bc
}

// normals is n standard normal values drawn from rng.
func normals(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}
