package cpu

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
)

// hiddenStepOnce runs one HiddenStep of one replica (B samples, H hidden units, C classes) on
// be and returns the updated parameters and U.
func hiddenStepOnce(be *Backend, B, H, C int) ([]float32, []float32) {
	d := 3*H + H + C*H + C // the first layer's 3 x H weights (untouched), b1, W2, b2
	fill := func(n int, f func(i int) float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	params := fill(d, func(i int) float32 { return float32(math.Sin(float64(i))) / 4 })
	pre := fill(B*H, func(i int) float32 { return float32(math.Cos(float64(i))) })
	labels := fill(B, func(i int) float32 { return float32(i % C) })
	gx := fill(B*B, func(i int) float32 { return float32(i%3) / 4 })
	u := make([]float32, B*H)
	one := func(v []float32, rows, cols int) compute.Mat {
		return compute.Mat{Buf: be.Alias(v), Rows: rows, Cols: cols, Stride: cols, Batch: 1}
	}
	p := one(params, 1, d)
	be.HiddenStep(&compute.HiddenStepArgs{Act: compute.Tanh, Pre: one(pre, B, H), Params: p, Anchor: p,
		Gram: one(make([]float32, B), B, 0), Prev: one(nil, 0, H), Labels: one(labels, B, 1), GX: one(gx, B, B), U: one(u, B, H),
		B1: 3 * H, W2: 4 * H, B2: 4*H + C*H, H: H, Cls: C, Eta: 0.1, V: 1})
	return params, u
}

// A backend's per-worker scratch is reused by a HiddenStep of other sizes: a step with more
// classes after one with few (and more samples and hidden units) gives what it gives on a
// fresh backend. The first step leaves every other buffer large enough for the second, so only
// the logits' float64 rows must grow with the classes.
func TestHiddenStepScratchGrowsWithClasses(t *testing.T) {
	be := New(1)
	defer be.Close()
	hiddenStepOnce(be, 64, 64, 2)
	p1, u1 := hiddenStepOnce(be, 4, 4, 20)
	fresh := New(1)
	defer fresh.Close()
	p2, u2 := hiddenStepOnce(fresh, 4, 4, 20)
	for i := range p1 {
		if math.Float32bits(p1[i]) != math.Float32bits(p2[i]) {
			t.Fatalf("param %d: %v after a smaller step, %v on a fresh backend", i, p1[i], p2[i])
		}
	}
	for i := range u1 {
		if math.Float32bits(u1[i]) != math.Float32bits(u2[i]) {
			t.Fatalf("u %d: %v after a smaller step, %v on a fresh backend", i, u1[i], u2[i])
		}
	}
}
