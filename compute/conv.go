package compute

// Images is a batch of image activations inside a Buffer: per batch element (replica), C
// channels, each holding N samples of H x W pixels, laid out [C][N][H][W]. Channel-major order
// makes a convolution of all N samples one matrix product (the im2col patches of one channel
// are contiguous over the samples). Element (c, n, y, x) of batch element b is at
// Off + b*BatchStride + ((c*N + n)*H + y)*W + x. A BatchStride of 0 shares one tensor with the
// whole batch (the first layer's input: one client's minibatch for every replica).
type Images struct {
	Buf                Buffer
	Off                int
	C, N, H, W         int
	Batch, BatchStride int
}

// Size is the number of values of one batch element.
func (x Images) Size() int { return x.C * x.N * x.H * x.W }

// Window is a square convolution or pooling window: Size x Size positions at Stride, over the
// input padded by Pad rows and columns on every side (zeros for convolutions and average
// pooling, which counts the padding in its divisor as PyTorch's default does; minus infinity
// for max pooling).
type Window struct{ Size, Stride, Pad int }

// Out is the output extent along an input extent n (an image's height or width).
func (w Window) Out(n int) int { return (n+2*w.Pad-w.Size)/w.Stride + 1 }

// Pooling names a pooling rule.
type Pooling int

// The pooling rules.
const (
	MaxPooling Pooling = iota
	AvgPooling
)

// Convolver is implemented by backends that run convolutional models (package nn): the
// operations of a CNN's forward and backward passes other than its matrix products (which are
// Backend.Gemm) and its elementwise activations (Backend.Activate, ActivateGrad). Like every
// Backend operation each is batched over the replicas (Images.Batch, Mat.Batch; a BatchStride
// of 0 shares an operand), computes every output value in one fixed order whatever the batch
// size and however an implementation splits the work, and overwrites its outputs.
type Convolver interface {
	// Im2col writes the patches of x for a convolution with window win: per batch element the
	// (C*Size*Size) x (N*OH*OW) matrix cols (OH, OW = win.Out(H), win.Out(W)) whose row
	// (c*Size + i)*Size + j, column (n*OH + oy)*OW + ox holds x(c, n, oy*Stride - Pad + i,
	// ox*Stride - Pad + j), or 0 where that lies in the padding.
	Im2col(x Images, win Window, cols Mat)
	// Col2im is Im2col's adjoint: dx(c, n, y, x) is the sum of the entries of cols that Im2col
	// would fill from that pixel, added in ascending row order of cols (for each channel: i,
	// then j, then the output position).
	Col2im(cols Mat, win Window, dx Images)
	// Pool writes y (C, N, win.Out(H), win.Out(W)) from x: the maximum of each window (the
	// first maximum in row-major window order, as found by comparing each value with > to the
	// best so far: -0 and +0 tie, and a NaN wins only as the window's first value; padding
	// never wins), or the average of the Size*Size window positions, padding counted as zeros.
	Pool(p Pooling, win Window, x, y Images)
	// PoolGrad writes dx from dy, the gradient of Pool's output: max pooling routes each
	// dy value to its window's first maximum (recomputed from x, so nothing is kept between
	// the passes); average pooling spreads dy/(Size*Size) over the window. Values that reach
	// one pixel from several windows are added in row-major order of the windows.
	PoolGrad(p Pooling, win Window, x, dy, dx Images)
	// GroupNorm normalises each sample's channels in groups consecutive groups (all their
	// pixels together) to mean 0 and variance 1, with eps added to the variance, then scales
	// channel c by gamma[c] and shifts it by beta[c]: gamma and beta are 1 x C rows per batch
	// element. The statistics are accumulated in float64.
	GroupNorm(groups int, eps float32, x Images, gamma, beta Mat, y Images)
	// GroupNormGrad writes the gradients of GroupNorm's inputs given dy, the gradient of its
	// output: dx (when dx.Buf is not nil) and dgamma, dbeta (1 x C rows per batch element).
	// The statistics are recomputed from x.
	GroupNormGrad(groups int, eps float32, x Images, gamma Mat, dy, dx Images, dgamma, dbeta Mat)
	// Transpose moves blocks of block consecutive values: src is a Rows x Cols matrix of
	// blocks (block (i, j) at Off + b*BatchStride + i*Stride + j*block) and dst, Cols x Rows,
	// receives block (i, j) of src as its block (j, i). With block = 1 it is a matrix
	// transpose; nn uses it to turn [samples][channels][pixels] into [channels][samples][pixels]
	// and channel planes into feature columns.
	Transpose(block int, src, dst Mat)
}
