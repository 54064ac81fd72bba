package hostmodel

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train/model"
)

// blasGemm is nn.Gemm[float64] over gonum's native DGEMM, one call per batch entry: the host
// CNNs of the attacks run in float64 for precision (the finite-difference Hessian products of
// invgrad need it), and nn.NaiveGemm is too slow for LeNet-5 in a loop of hundreds of
// iterations.
type blasGemm struct{}

var dgemm = gonum.Implementation{}

// Gemm implements nn.Gemm[float64].
func (blasGemm) Gemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda, sa int, b []float64, ldb, sb int, beta float64, c []float64, ldc, sc, batch int) {
	if m == 0 || n == 0 {
		return
	}
	tA, tB := blas.NoTrans, blas.NoTrans
	if transA {
		tA = blas.Trans
	}
	if transB {
		tB = blas.Trans
	}
	for i := 0; i < batch; i++ {
		C := c[i*sc:]
		if k == 0 {
			// An empty product: C = beta C (gonum wants leading dimensions of at least 1 here).
			for r := 0; r < m; r++ {
				row := C[r*ldc : r*ldc+n]
				for j := range row {
					if beta == 0 {
						row[j] = 0
					} else {
						row[j] *= beta
					}
				}
			}
			continue
		}
		dgemm.Dgemm(tA, tB, m, n, k, alpha, a[i*sa:], lda, b[i*sb:], ldb, beta, C, ldc)
	}
}

// cnnModel evaluates one of package nn's models (train's model kinds lenet5, resnet and
// sequential) in float64 on the host, with train's parameter layout (nn's: per layer, conv
// weights [Cout][Cin][k][k] then bias, dense [out][in] then bias, GroupNorm gamma then beta). An
// nn.Model keeps its activations between calls and is not safe for concurrent use, so each
// caller takes one from a pool and returns it.
type cnnModel struct {
	spec    nn.Spec
	d       int
	classes int
	input   nn.Shape
	layers  []nn.LayerInfo
	pool    sync.Pool
}

// newCNN builds the host model of a CNN config for samples of the given shape and dim
// features (the data's), as model.NNSpec rebuilds what training ran.
func newCNN(mc model.Config, shape []int, dim, classes int) (*cnnModel, error) {
	spec, err := model.NNSpec(mc, shape, dim, classes)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := nn.Build[float64](spec, blasGemm{})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if m.Classes != classes {
		return nil, fmt.Errorf("model: the last layer has %d outputs, the data has %d classes", m.Classes, classes)
	}
	h := &cnnModel{spec: spec, d: m.NumParams(), classes: m.Classes, input: m.Input, layers: m.Layers()}
	h.put(m)
	return h, nil
}

// get returns a model for the caller's exclusive use until put.
func (h *cnnModel) get() *nn.Model[float64] {
	if m, ok := h.pool.Get().(*nn.Model[float64]); ok {
		return m
	}
	m, err := nn.Build[float64](h.spec, blasGemm{})
	if err != nil {
		panic(fmt.Sprintf("attacks: nn model built before: %v", err)) // newCNN built it
	}
	return m
}

func (h *cnnModel) put(m *nn.Model[float64]) {
	// The attacks' runner parallelizes over runs; one thread per model keeps the cores busy
	// without oversubscribing them (results do not depend on it).
	m.Threads = 1
	h.pool.Put(m)
}

// lastDense returns the offsets of the last layer's weight (classes x in) and bias when it is a
// dense layer (the label attacks read its update).
func (h *cnnModel) lastDense() (woff, boff, in int, ok bool) {
	l := h.layers[len(h.layers)-1]
	if l.Kind != "dense" {
		return 0, 0, 0, false
	}
	in = l.In.C
	return h.d - h.classes*(in+1), h.d - h.classes, in, true
}

// lastDenseReadsNonNegative: see Model.LastDenseReadsNonNegative.
func (h *cnnModel) lastDenseReadsNonNegative() bool {
	if len(h.layers) == 0 || h.layers[len(h.layers)-1].Kind != "dense" {
		return false
	}
	for i := len(h.layers) - 2; i >= 0; i-- {
		switch h.layers[i].Kind {
		case "flatten", "maxpool", "avgpool", "globalavgpool":
			continue // order-preserving and sign-preserving: look further back
		case "relu", "residual":
			return true
		}
		return false
	}
	return false
}

// firstDense returns the offsets of the first parameterized layer when it is a dense layer on
// the raw input (only flatten layers before it, which keep the datasets' [C][H][W] order: nn's
// flatten orders features c*H*W + y*W + x), with its rows and inputs; analytic inversion needs
// it.
func (h *cnnModel) firstDense() (woff, boff, rows, in int, ok bool) {
	for _, l := range h.layers {
		switch l.Kind {
		case "flatten":
			continue
		case "dense":
			rows, in = l.Params/(l.In.C+1), l.In.C
			return 0, rows * in, rows, in, true
		}
		return 0, 0, 0, 0, false
	}
	return 0, 0, 0, 0, false
}

// sampleLoss returns the cross-entropy and logit margin of sample (x, y) at w, and when grad is
// not nil adds scale times the loss's gradient in w to it.
func (h *cnnModel) sampleLoss(w, x []float64, y int, scale float64, grad []float64) (loss, margin float64) {
	m := h.get()
	defer h.put(m)
	logits, err := m.Forward(w, 1, x, 1)
	if err != nil {
		panic(fmt.Sprintf("attacks: nn forward: %v", err)) // sizes checked by the callers
	}
	loss, margin = crossEntropy(logits, y)
	if grad != nil {
		g := make([]float64, h.d)
		var l [1]float64
		if err := m.LossGrad(w, 1, x, []int32{int32(y)}, g, l[:]); err != nil {
			panic(fmt.Sprintf("attacks: nn gradient: %v", err))
		}
		for i, v := range g {
			grad[i] += scale * v
		}
	}
	return loss, margin
}

// crossEntropy returns the softmax cross-entropy of label y and the margin (true logit minus the
// largest other) of one sample's logits, in the log-sum-exp form.
func crossEntropy(z []float64, y int) (loss, margin float64) {
	mx, other := math.Inf(-1), math.Inf(-1)
	for j, v := range z {
		mx = math.Max(mx, v)
		if j != y {
			other = math.Max(other, v)
		}
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - mx)
	}
	return mx + math.Log(s) - z[y], z[y] - other
}

// meanProbabilities returns the model's mean softmax output over the samples xs at w, in
// batches of at most cnnBatch samples.
func (h *cnnModel) meanProbabilities(w []float64, xs [][]float32) []float64 {
	m := h.get()
	defer h.put(m)
	dim := h.input.Size()
	mean := make([]float64, h.classes)
	var batch []float64
	for lo := 0; lo < len(xs); lo += cnnBatch {
		hi := min(lo+cnnBatch, len(xs))
		B := hi - lo
		batch = slices.Grow(batch[:0], B*dim)[:B*dim]
		for i, s := range xs[lo:hi] {
			for j, v := range s {
				batch[i*dim+j] = float64(v)
			}
		}
		logits, err := m.Forward(w, 1, batch, B)
		if err != nil {
			panic(fmt.Sprintf("attacks: nn forward: %v", err))
		}
		z := make([]float64, h.classes)
		for b := 0; b < B; b++ {
			for c := range z {
				z[c] = logits[c*B+b] // logits are [classes][B]
			}
			for c, p := range softmax(z) {
				mean[c] += p / float64(len(xs))
			}
		}
	}
	return mean
}

// cnnBatch is the batch of the host CNN's forward passes over many samples.
const cnnBatch = 64
