package compute

// Buffer is a float32 array owned by a Backend (host memory for the CPU backend, device memory
// for a GPU one). Its contents are reached only through the Backend's operations, so a training
// run can keep every replica's state on the device and copy to the host only at checkpoints.
type Buffer interface {
	// Len is the number of float32 values.
	Len() int
}

// Mat is a batch of row-major matrices inside a Buffer: element (i, j) of matrix b is at
// Off + b*BatchStride + i*Stride + j. A BatchStride of 0 broadcasts one matrix to the batch.
// In the engine the batch index is the replica: replica r's parameters are the 1 x d matrix at
// r*d of an R x d buffer.
type Mat struct {
	Buf                Buffer
	Off                int
	Rows, Cols, Stride int
	Batch, BatchStride int
}

// Activation is a hidden-layer nonlinearity.
type Activation int

// The activations an MLP can use.
const (
	Tanh Activation = iota
	Softplus
	ReLU
)

// Backend is the compute interface of the trainer: a small set of batched operations over
// device buffers, each at the granularity of one kernel launch (or one cuBLAS call) of a GPU
// implementation. Operations run in order on one stream; a Backend is not safe for concurrent
// use. Everything is batched over Mat.Batch (the replicas); operands whose BatchStride is 0 are
// shared by the whole batch. Results must not depend on the batch size or on how an
// implementation splits the work: every output element is computed in one fixed order.
type Backend interface {
	// Alloc returns a zeroed buffer of n values.
	Alloc(n int) Buffer
	// Upload copies src into dst at offset off.
	Upload(dst Buffer, off int, src []float32)
	// Download copies len(dst) values of src from offset off.
	Download(dst []float32, src Buffer, off int)

	// Gemm computes c = alpha op(a) op(b) + beta c for every batch element, op transposing
	// when its flag is set; with beta = 0, c is written without being read (NaN-safe).
	Gemm(transA, transB bool, alpha float32, a, b Mat, beta float32, c Mat)
	// Axpby computes y = alpha coef[b] x + beta y per batch element b (coef nil means 1); x may
	// alias y, and with alpha coef[b] = 0 and beta = 0, y is zeroed without reading x.
	Axpby(alpha float32, x Mat, beta float32, y Mat, coef []float32)
	// AddRow adds the 1 x Cols row v to every row of y.
	AddRow(y, v Mat)
	// SumRows computes y = alpha (sum of the rows of x) + beta y, y being 1 x Cols.
	SumRows(alpha float32, x Mat, beta float32, y Mat)
	// Gather copies rows idx of src (rows of a dataset) into the first len(idx) rows of dst.
	Gather(dst, src Mat, idx []int32)

	// Activate writes act(pre) into post.
	Activate(act Activation, pre, post Mat)
	// ActivateGrad multiplies grad elementwise by act'(pre) (post = act(pre) is given too).
	ActivateGrad(act Activation, pre, post, grad Mat)
	// SoftmaxXent takes logits and labels (class indices stored as float32, Rows x 1). It
	// writes dlogits = scale (softmax - onehot) when dlogits.Buf is not nil, and per row the
	// cross-entropy loss and the logit margin (true logit minus the largest other) into loss and
	// margin (Rows x 1) when their Buf is not nil. dlogits may alias logits.
	SoftmaxXent(logits, labels Mat, scale float32, dlogits, loss, margin Mat)
	// ClipExamples clips per-example gradients of a chain of dense layers: for each batch
	// element and row i, n_i = sum_l ||delta_l[i]||^2 (||in_l[i]||^2 + 1) is the squared norm of
	// example i's gradient (weights and bias of layer l), and every delta_l[i] is scaled by
	// min(1, v / sqrt(n_i)).
	ClipExamples(v float32, deltas, inputs []Mat)

	// ClipStep is one local step per batch element: with g clipped to norm v
	// (g / max(1, ||g||/v); v <= 0 disables clipping), w = w - eta (g + alpha (w - anchor)).
	// With alpha = 0 the anchor is not read.
	ClipStep(eta, v, alpha float32, w, g, anchor Mat)
	// ClipStep, AddGaussian and Dots take batches of single rows (one replica each).

	// AddGaussian adds scale[b] Z_b to batch element b, Z_b the coordinates 0..Cols-1 of the
	// Philox noise stream (seeds[b], round, stream) as defined by philox.AddGaussian. Elements
	// with equal seeds get equal noise.
	AddGaussian(dst Mat, seeds []uint64, scale []float32, round, stream uint32)
	// Dots writes into out[b] the inner product of a and b's batch element b, accumulated in
	// float64 (a reduction to the host: used once per round, not per step).
	Dots(a, b Mat, out []float64)
}

// RowAligner is implemented by backends that want every replica's parameter row to start at a
// multiple of RowAlign() floats: on a GPU, rows of d = 50,890 floats leave every other replica's
// weights only 8-byte aligned, which sends cuBLAS to slower kernels. The engine then lays out
// its R x d buffers with a pitch, d rounded up to that multiple (Mat.BatchStride; compute.RowsOf
// with the pitch as stride). No operation reads or writes the padding (every Mat the engine
// builds has Cols d), so results do not depend on the pitch.
type RowAligner interface {
	RowAlign() int
}

// Pitch is the distance between replica rows of d floats on be: d rounded up to the backend's
// RowAlign, or d.
func Pitch(be Backend, d int) int {
	if a, ok := be.(RowAligner); ok && a.RowAlign() > 1 {
		n := a.RowAlign()
		return (d + n - 1) / n * n
	}
	return d
}

// HostAliaser is implemented by backends that can use host memory in place (the CPU backend),
// so that datasets are not copied.
type HostAliaser interface {
	Alias(data []float32) Buffer
}

// Upload returns a Buffer holding data, aliasing it when the backend can.
func Upload(be Backend, data []float32) Buffer {
	if a, ok := be.(HostAliaser); ok {
		return a.Alias(data)
	}
	b := be.Alloc(len(data))
	be.Upload(b, 0, data)
	return b
}

// RowsOf views rows r0, r0+stride, ... (count of them) of d floats, pitch floats apart, as a
// batch of one-row matrices.
func RowsOf(buf Buffer, r0, count, stride, d, pitch int) Mat {
	return Mat{Buf: buf, Off: r0 * pitch, Rows: 1, Cols: d, Stride: d, Batch: count, BatchStride: stride * pitch}
}

// HiddenStepper is implemented by backends with a fused kernel for the deferred clipped step
// of an MLP with one hidden layer (train's MLP.deferredStep): the operations of the op-by-op
// path per replica in one task, with the replica's activations in cache. It sums in another
// order than the op-by-op path (the first layer's clip norm from the Gram matrix of the
// minibatch), so it agrees with that path to float32 rounding, not bit for bit (train's
// TestFusedStepMatchesClipStep holds it to 1e-6 relative); results still never depend on
// threads or sharding, since a backend uses it for every replica or for none.
type HiddenStepper interface {
	HiddenStep(a *HiddenStepArgs)
}

// HiddenStepArgs: for every batch element (replica) r, Pre (B x H) holds x W_0^T; the step
// adds the low-rank correction Gram Prev and the bias, computes the loss gradient with
// respect to every parameter, clips the whole gradient to V (the first weight matrix's part
// from the Gram matrix GX of the minibatch), updates b1, W2, b2 in Params (FedProx: towards
// Anchor first) and writes U = -Eta c delta, delta the gradient with respect to Pre.
//
// With Groups > 1 the call is Groups independent steps of Pre.Batch replicas each (several
// clients' steps of a round in one call: train/deferred.go): element (g, r) reads every
// argument where replica r of the step reads it, plus g times the argument's GroupStrides
// entry. Each element is computed exactly as alone, so the grouping never changes a bit.
type HiddenStepArgs struct {
	Act                 Activation
	Pre, Params, Anchor Mat
	Gram, Prev          Mat // the correction: Pre += Gram Prev, then Prev *= 1 - Eta Alpha
	Labels, GX, U       Mat
	B1, W2, B2, H, Cls  int // offsets of b1, W2, b2 in a parameter row; hidden width; classes
	Eta, V, Alpha       float32
	Groups              int // 0 or 1: one step
	GroupStrides        HiddenGroupStrides
}

// HiddenGroupStrides are the offsets, in floats, between consecutive groups of a grouped
// HiddenStep, per argument (0 shares an argument between the groups).
type HiddenGroupStrides struct {
	Pre, Params, Anchor, Gram, Prev, Labels, GX, U int
}

// GroupCount is the number of groups of a: Groups, at least 1.
func (a *HiddenStepArgs) GroupCount() int { return max(1, a.Groups) }

// Group returns group g's step alone: a with every argument moved by g times its stride.
func (a *HiddenStepArgs) Group(g int) HiddenStepArgs {
	s := *a
	gs := a.GroupStrides
	s.Pre.Off += g * gs.Pre
	s.Params.Off += g * gs.Params
	s.Anchor.Off += g * gs.Anchor
	s.Gram.Off += g * gs.Gram
	s.Prev.Off += g * gs.Prev
	s.Labels.Off += g * gs.Labels
	s.GX.Off += g * gs.GX
	s.U.Off += g * gs.U
	s.Groups, s.GroupStrides = 1, HiddenGroupStrides{}
	return s
}

// ClientBatcher is implemented by backends that gain from running several clients' local
// steps in one call (a GPU at few replicas: one block per replica leaves most of the device
// idle, and every launch pays its latency). ClientBatch returns the most replica steps
// (replicas times clients) it wants in one grouped HiddenStep, 0 for none; the engine groups
// as many clients of a round as fit, and at most MaxClientBatch steps. Results do not depend
// on it: the grouped step computes every element as alone.
type ClientBatcher interface {
	ClientBatch() int
}

// MaxClientBatch caps ClientBatch, so that the memory it takes (the grouped clients'
// pre-activations and parameters) stays a fixed amount that the memory estimate can count.
const MaxClientBatch = 4096

// DeviceClipper is implemented by backends that compute whole-gradient clip factors in their
// own memory, so that a clipped local step needs no copy to the host: on a GPU, computing the
// factors from Dots makes the host wait for the device twice per step. The engine uses it
// when the backend has it; a backend must give exactly the factors (and so the bits) of the
// host path it replaces (two Dots, the formula below in float64, then Axpby with the factors).
type DeviceClipper interface {
	// ClipCoefs writes into coef[b] (b < a.Batch, from offset 0) the clip factor of batch
	// element b: with N = sqrt(<a_b, b_b> + <c_b, d_b>), each inner product accumulated in
	// float64 as Dots accumulates it and the two added in float64, the factor is
	// float32(v / N) when N > v, NaN when N is NaN, else 1. a and b are a.Cols long, c and d
	// c.Cols long; a, b, c, d are batches of single rows.
	ClipCoefs(v float32, a, b, c, d Mat, coef Buffer)
	// AxpbyCoefs is Axpby with the coefficients read from coef (y.Batch values from offset 0)
	// instead of from the host.
	AxpbyCoefs(alpha float32, x Mat, beta float32, y Mat, coef Buffer)
}

// InOrderAccumulator is implemented by backends that add several matrices into one in a single
// call (on a GPU, one launch instead of one a matrix: train's grouped clients add their
// parameters to the round's sum this way). It must give exactly the bits of the calls it
// replaces, Axpby(1, x_q, 1, y, coef[q y.Batch:(q+1) y.Batch]) for q = 0, 1, ..., n-1 in turn.
type InOrderAccumulator interface {
	// AccumulateInOrder adds to y, for q = 0, ..., n-1 in turn, coef[q y.Batch + b] times x_q
	// to batch element b (coef nil means 1), where x_q is x with its offset moved by q step;
	// x has y's shape.
	AccumulateInOrder(y, x Mat, n, step int, coef []float32)
}

// Fuser is implemented by backends with fused forms of operation pairs that the engine issues
// back to back (on a GPU each pair is otherwise two launches and two passes over memory). Each
// must give exactly the bits of the pair it stands for, including what the first operation
// leaves in its output.
type Fuser interface {
	// AddRowActivate is AddRow(pre, bias) then Activate(act, pre, post).
	AddRowActivate(act Activation, pre, bias, post Mat)
	// ActivateGradSumRows is ActivateGrad(act, pre, post, grad) then
	// SumRows(alpha, grad, beta, y).
	ActivateGradSumRows(act Activation, pre, post, grad Mat, alpha, beta float32, y Mat)
	// AddRowSoftmaxXent is AddRow(logits, bias) then
	// SoftmaxXent(logits, labels, scale, dlogits, loss, margin).
	AddRowSoftmaxXent(logits, bias, labels Mat, scale float32, dlogits, loss, margin Mat)
}

// ColumnBiaser is implemented by backends with kernels of their own for the bias of a layer
// whose features are rows and samples columns (package nn's dense layers: out x B a
// replica). Without it the bias is a product by a row or a column of ones, which on a GPU is a
// cuBLAS call of a degenerate shape per layer and pass: LeNet-5's last bias gradient, 1 x 10 x
// 32 per replica, took 7.7% of W2's device time at 64 replicas (docs/gpu.md).
type ColumnBiaser interface {
	// AddColumn computes y[b, r, j] += v[b, r, 0] for every column j (v: y.Rows x 1).
	AddColumn(y, v Mat)
	// SumColumns computes y[b, r, 0] = the sum over j of x[b, r, j], a float32 sum in column
	// order (y: x.Rows x 1).
	SumColumns(x, y Mat)
	// AddColumnActivate is AddColumn(pre, v) then Activate(act, pre, post), and
	// ActivateGradSumColumns is ActivateGrad(act, pre, post, grad) then SumColumns(grad, y),
	// each in one pass with exactly the bits of the pair (a dense layer and the activation
	// after it).
	AddColumnActivate(act Activation, pre, v, post Mat)
	ActivateGradSumColumns(act Activation, pre, post, grad, y Mat)
}

// ColumnXent is implemented by backends that take the softmax cross-entropy of logits whose
// classes are rows and samples columns (package nn's layout: classes x B a replica) without
// transposing them. SoftmaxXentColumns is SoftmaxXent on the transposes: logits and dlogits
// are Classes x Samples, labels, loss and margin as SoftmaxXent's (Samples x 1), with exactly
// the bits of transposing the logits, SoftmaxXent and transposing dlogits back.
type ColumnXent interface {
	SoftmaxXentColumns(logits, labels Mat, scale float32, dlogits, loss, margin Mat)
}

// NoiseKind names an exact sampler of a non-Gaussian noise mechanism.
type NoiseKind int

// The mechanisms a NoiseSampler draws (accounting.Laplace and accounting.Staircase).
const (
	LaplaceNoise NoiseKind = iota + 1
	StaircaseNoise
)

// NoiseDist is a non-Gaussian noise distribution with its parameters, as accounting defines
// them: Laplace's scale b; the staircase's epsilon, step width Delta, gamma and the
// probability of a step's inner part, gamma / (gamma + (1 - gamma) e^-epsilon).
type NoiseDist struct {
	Kind                         NoiseKind
	Scale                        float64
	Epsilon, Delta, Gamma, Inner float64
}

// NoiseSampler is implemented by backends that draw the noise of the non-Gaussian mechanisms
// in their own memory, instead of the host drawing it (train/noise.AddHost) and uploading every
// row every round. Draw j of the stream (seed, round, stream) is accounting's FromUniforms of
// uniforms j (Laplace) or 4j..4j+3 (staircase) of philox.NewUniforms(seed, round, stream), in
// float64 with Go's math.Log, then rounded to float32: a backend must give exactly the host's
// bits. Batch elements with equal seeds draw the same noise, as AddGaussian's.
type NoiseSampler interface {
	// AddNoise adds scale[b] (0 + float32(X_j)) to element j of batch element b, X the draws
	// of dist from the stream (seeds[b], round, stream).
	AddNoise(dst Mat, dist NoiseDist, seeds []uint64, scale []float32, round, stream uint32)
	// SumNoise writes into element j of batch element b total times the float32 sum, from 0
	// in the order of streams, of float32(X_j) over the streams k with use[b len(streams) + k]
	// (every stream when use is nil), X the draws of dist from (seeds[b], round, streams[k]).
	SumNoise(dst Mat, dist NoiseDist, seeds []uint64, streams []uint32, use []bool, total float32, round uint32)
}

// CacheSized is implemented by backends whose operations run fastest when the operands of
// consecutive operations stay in a cache of CacheBytes bytes (the CPU backend), so that a
// model may make a large intermediate buffer (a convolution's patches of many replicas) a part
// at a time. Results must not depend on it.
type CacheSized interface {
	CacheBytes() int
}

// Releaser is implemented by backends whose buffers are not garbage collected (device memory):
// Release frees b at once, after every operation issued before it that may use b. A model that
// grows a scratch buffer releases the smaller one, so a larger evaluation batch does not leave
// the training batch's buffers allocated beside it until the backend closes.
type Releaser interface {
	Release(b Buffer)
}

// Precision is the arithmetic a backend's matrix products run in.
type Precision string

// The precisions.
const (
	// FP32 is float32 products and sums (the default; every backend).
	FP32 Precision = "fp32"
	// TF32 rounds the inputs of every matrix product to TensorFloat-32 (8-bit exponent, 10-bit
	// mantissa) and sums in float32: NVIDIA tensor cores (Ampere and later) run it several
	// times faster than float32. Only the GEMMs change; every other operation stays float32.
	TF32 Precision = "tf32"
	// BF16 lets the products down-convert their float32 inputs to bfloat16 (7-bit mantissa, 8 significant bits)
	// on the tensor cores, sums in float32 (cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF, which may
	// also choose TF32): faster than TF32 where the library finds it worth it, at a relative
	// 2^-8 per input.
	BF16 Precision = "bf16"
)

// Precisioner is implemented by backends whose matrix products can run in another precision
// than float32 (the GPU's tensor cores). SetPrecision applies to the products issued after it.
type Precisioner interface {
	SetPrecision(p Precision) error
}
