//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
)

// AccumulateInOrder must give the bits of the Axpby calls it replaces, one a matrix in order,
// for strided rows and batches, per-matrix weights or none, zero weights (which still add 0 x
// and so carry a NaN of x, as Axpby does) and launches of several items a thread.
func TestAccumulateInOrderIsAxpbysInOrder(t *testing.T) {
	d := device(t)
	for _, c := range []struct {
		name                 string
		n, rows, cols, b     int
		weights, light1, nan bool
	}{
		{"one", 1, 1, 5, 3, true, false, false},
		{"weights", 4, 3, 7, 5, true, false, false},
		{"no-weights", 3, 2, 9, 4, false, false, false},
		{"nan-behind-zero-weight", 3, 1, 6, 2, true, false, true},
		{"one-item-a-thread", 5, 2, 33, 3, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := cuda.Options{Block: 32}
			if c.light1 {
				o.LightItems = 1
			}
			ops := cuda.NewOps(d, o)
			defer ops.Close()
			// y: rows with a stride of cols+3, batches cols+... apart; x_q: the same shape,
			// q step floats apart.
			ys, ybs := c.cols+3, (c.cols+3)*c.rows+2
			xs, xbs := c.cols+1, (c.cols+1)*c.rows+5
			step := xbs*c.b + 7
			rng := rand.New(rand.NewPCG(1, uint64(c.n)))
			xv := make([]float32, step*c.n)
			for i := range xv {
				xv[i] = float32(rng.NormFloat64())
			}
			yv := make([]float32, ybs*c.b)
			for i := range yv {
				yv[i] = float32(rng.NormFloat64())
			}
			var coef []float32
			if c.weights {
				coef = make([]float32, c.n*c.b)
				for i := range coef {
					coef[i] = float32(rng.IntN(3)) * 0.7
				}
			}
			if c.nan {
				coef[1*c.b+1] = 0
				xv[1*step+1*xbs+2] = float32(math.NaN())
			}
			x, y := ops.Alloc(len(xv)), ops.Alloc(len(yv))
			ymat := compute.Mat{Buf: y, Rows: c.rows, Cols: c.cols, Stride: ys, Batch: c.b, BatchStride: ybs}
			xmat := compute.Mat{Buf: x, Rows: c.rows, Cols: c.cols, Stride: xs, Batch: c.b, BatchStride: xbs}
			ops.Upload(x, 0, xv)

			ops.Upload(y, 0, yv)
			for q := 0; q < c.n; q++ {
				xq := xmat
				xq.Off += q * step
				var cq []float32
				if coef != nil {
					cq = coef[q*c.b : (q+1)*c.b]
				}
				ops.Axpby(1, xq, 1, ymat, cq)
			}
			want := make([]float32, len(yv))
			ops.Download(want, y, 0)

			ops.Upload(y, 0, yv)
			launches := d.Launches()
			ops.AccumulateInOrder(ymat, xmat, c.n, step, coef)
			got := make([]float32, len(yv))
			ops.Download(got, y, 0)
			if err := ops.Err(); err != nil {
				t.Fatal(err)
			}
			if n := d.Launches() - launches; n != 1 {
				t.Errorf("%d launches, want 1", n)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("y[%d] = %v, want %v (the Axpby calls' bits)", i, got[i], want[i])
				}
			}
			if c.nan && !slices.ContainsFunc(got, func(v float32) bool { return v != v }) {
				t.Errorf("the NaN behind a zero weight vanished")
			}
		})
	}
}

// Axpby in place (x = y), as the engine runs it (the average of the round's sum, a
// participant's factors scaled by its weight): axpby loads several of a thread's items before
// storing them, so each item's values must still be read before the item is written, for every
// branch of the kernel (zeroing, beta 0, beta 1, any beta) and launches of 1 and 4 items a
// thread. Expected values computed here in float32, an operation at a time.
func TestAxpbyInPlace(t *testing.T) {
	d := device(t)
	const rows, cols, batch = 3, 37, 5
	for _, items := range []int{1, 4} {
		ops := cuda.NewOps(d, cuda.Options{Block: 32, LightItems: items})
		for _, c := range []struct {
			name        string
			alpha, beta float32
			coef        []float32
		}{
			{"zero", 0, 0, nil}, {"scale", 0.37, 0, nil}, {"beta1", -1.25, 1, nil},
			{"beta", 0.7, -0.3, nil}, {"weights", 1, 0, []float32{1, 0, 0.5, 2, -1}},
		} {
			rng := rand.New(rand.NewPCG(7, uint64(items)))
			v := make([]float32, rows*cols*batch)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			buf := ops.Alloc(len(v))
			ops.Upload(buf, 0, v)
			m := compute.Mat{Buf: buf, Rows: rows, Cols: cols, Stride: cols, Batch: batch, BatchStride: rows * cols}
			ops.Axpby(c.alpha, m, c.beta, m, c.coef)
			got := make([]float32, len(v))
			ops.Download(got, buf, 0)
			if err := ops.Err(); err != nil {
				t.Fatal(err)
			}
			for i, x := range v {
				a := c.alpha
				if c.coef != nil {
					a = c.alpha * c.coef[i/(rows*cols)]
				}
				var want float32
				switch {
				case a == 0 && c.beta == 0:
				case c.beta == 0:
					want = a * x
				case c.beta == 1:
					want = x + float32(a*x)
				default:
					want = float32(a*x) + float32(c.beta*x)
				}
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("%d items a thread, %s: y[%d] = %v, want %v", items, c.name, i, got[i], want)
				}
			}
			ops.Release(buf)
		}
		ops.Close()
	}
}
