//go:build cgo

package hostshim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
)

// An inner product of long rows (Dots, and the gradient norm of ClipStep) gives each of its
// kernels.Partials float64 partial sums fold pieces (fold 4 at 2^20 + 37 values: 1,024
// threads a row instead of 256), so that a few replicas of a large model spread over the
// device. The sum's order is fixed by the row length alone: piece g of partial p sums values
// p + 256 g, p + 256 g + 1024, ... in order; each partial adds its pieces in order from 0, the
// row its partials. Emulated here in float64, it must give the kernels' bits, for a short row
// (one piece: the order before pieces existed) too, and not depend on the batch.
func TestDotsOfLongRowsAddTheirPiecesInOrder(t *testing.T) {
	d := device(t)
	for _, cols := range []int{1000, 1<<20 + 37} {
		for _, batch := range []int{1, 3} {
			t.Run(fmt.Sprintf("cols=%d/batch=%d", cols, batch), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, uint64(cols)))
				x, y := make([]float32, batch*cols), make([]float32, batch*cols)
				for i := range x {
					x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				ops := cuda.NewOps(d, cuda.Options{})
				defer ops.Close()
				a, b := ops.Alloc(len(x)), ops.Alloc(len(y))
				ops.Upload(a, 0, x)
				ops.Upload(b, 0, y)
				got := make([]float64, batch)
				ops.Dots(compute.Mat{Buf: a, Rows: 1, Cols: cols, Stride: cols, Batch: batch, BatchStride: cols},
					compute.Mat{Buf: b, Rows: 1, Cols: cols, Stride: cols, Batch: batch, BatchStride: cols}, got)
				if err := ops.Err(); err != nil {
					t.Fatal(err)
				}
				fold := 1
				if cols > 1<<20 {
					fold = 4
				}
				P, PF := kernels.Partials, kernels.Partials*fold
				for e := range batch {
					xr, yr := x[e*cols:][:cols], y[e*cols:][:cols]
					var total float64
					for p := range P {
						var partial float64
						for g := range fold {
							var piece float64
							for j := p + P*g; j < cols; j += PF {
								piece += float64(xr[j]) * float64(yr[j])
							}
							partial += piece
						}
						total += partial
					}
					if math.Float64bits(got[e]) != math.Float64bits(total) {
						t.Errorf("element %d: %v, want %v (pieces, partials, row, each in order)", e, got[e], total)
					}
				}
			})
		}
	}
}
