//go:build cgo

package hostshim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
)

// clip_step takes LIGHT_BATCH of a thread's items at once, loading them all before storing
// any: the same bits as one item a thread. A grid of one block of 32 threads gives each thread
// about six items of 5 replicas x 37 parameters, so a batch spans replicas with different clip
// factors (one clipped, one not, one NaN from a NaN gradient); a grid as large as the items
// gives each thread one.
func TestClipStepBatchingKeepsBits(t *testing.T) {
	const batch, cols = 5, 37
	rng := rand.New(rand.NewPCG(5, 7))
	normal := func(scale float64) []float32 {
		v := make([]float32, batch*cols)
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
		return v
	}
	w0, g, anchor := normal(1), normal(0.2), normal(1)
	for j := 0; j < cols; j++ {
		g[cols+j] *= 30 // replica 1 far above the clip norm
	}
	g[3*cols+4] = float32(math.NaN()) // replica 3's factor is NaN
	run := func(opt cuda.Options, eta, v, alpha float32) []float32 {
		ops := cuda.NewOps(device(t), opt)
		defer ops.Close()
		bufs := make([]compute.Buffer, 3)
		for i, host := range [][]float32{w0, g, anchor} {
			bufs[i] = ops.Alloc(batch * cols)
			ops.Upload(bufs[i], 0, host)
		}
		mat := func(b compute.Buffer) compute.Mat {
			return compute.Mat{Buf: b, Rows: 1, Cols: cols, Stride: cols, BatchStride: cols, Batch: batch}
		}
		ops.ClipStep(eta, v, alpha, mat(bufs[0]), mat(bufs[1]), mat(bufs[2]))
		out := make([]float32, batch*cols)
		ops.Download(out, bufs[0], 0)
		if err := ops.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct{ eta, v, alpha float32 }{{0.1, 0.5, 0}, {0.05, 1, 0.7}, {0.3, 0, 0}} {
		batched := run(cuda.Options{Block: 32, MaxGrid: 1, LightItems: 4}, c.eta, c.v, c.alpha)
		single := run(cuda.Options{Block: 32, LightItems: 1}, c.eta, c.v, c.alpha)
		for i := range single {
			if math.Float32bits(batched[i]) != math.Float32bits(single[i]) {
				t.Errorf("%+v: w[%d] = %v in batches of items, %v one item a thread", c, i, batched[i], single[i])
			}
		}
		if c.v > 0 && !math.IsNaN(float64(single[3*cols])) {
			t.Errorf("%+v: replica 3's NaN gradient left w[%d] = %v", c, 3*cols, single[3*cols])
		}
	}
}
