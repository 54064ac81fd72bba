package compute

import "fmt"

// Images is a batch of image activations inside a Buffer: per batch element (replica), C
// channels of H x W pixels of N samples, laid out [C][H][W][N], the samples innermost. With
// that order a convolution over all N samples is one matrix product whose patches are runs of
// whole pixels times samples, pooling and normalisation work on contiguous runs of samples,
// and flattening channels and pixels into features is no operation at all. Element (c, y, x, n)
// of batch element b is at Off + b*BatchStride + ((c*H + y)*W + x)*N + n. A BatchStride of 0
// shares one tensor with the whole batch (the first layer's input: one client's minibatch for
// every replica).
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

// Tiles reports whether the windows tile an h x wd image exactly (stride the window's size, no
// padding, nothing left over), so that every pixel lies in one window.
func (w Window) Tiles(h, wd int) bool {
	return w.Size > 0 && w.Stride == w.Size && w.Pad == 0 && w.Out(h)*w.Size == h && w.Out(wd)*w.Size == wd
}

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
// size and however an implementation splits the work, and overwrites its outputs. Outputs
// never overlap inputs (a GPU backend reads its inputs ahead of its writes and refuses an
// overlap).
type Convolver interface {
	// Im2col writes the patches of x for a convolution with window win: per batch element the
	// (C*Size*Size) x (OH*OW*N) matrix cols (OH, OW = win.Out(H), win.Out(W)) whose row
	// (c*Size + i)*Size + j, column (oy*OW + ox)*N + n holds x(c, oy*Stride - Pad + i,
	// ox*Stride - Pad + j, n), or 0 where that lies in the padding. The product of a weight
	// matrix with cols is then the convolution's output in the same [C][H][W][N] order.
	Im2col(x Images, win Window, cols Mat)
	// Col2im is Im2col's adjoint: dx(c, y, x, n) is the sum of the entries of cols that Im2col
	// would fill from that value, added from zero in ascending row order of cols (for each
	// channel: i, then j).
	Col2im(cols Mat, win Window, dx Images)
	// Pool writes y (C, win.Out(H), win.Out(W), N) from x, each sample on its own: the
	// maximum of each window (the first maximum in row-major window order, as found by
	// comparing each value with > to the best so far: -0 and +0 tie, and a NaN wins only as
	// the window's first value; padding never wins), or the average of the Size*Size window
	// positions (added in row-major order from zero, times 1/(Size*Size)), padding counted as
	// zeros.
	Pool(p Pooling, win Window, x, y Images)
	// PoolGrad writes dx from dy, the gradient of Pool's output: max pooling routes each
	// dy value to its window's first maximum (recomputed from x, so nothing is kept between
	// the passes); average pooling adds dy times 1/(Size*Size) to each pixel of the window.
	// Values that reach one pixel from several windows are added from zero in row-major order
	// of the windows.
	PoolGrad(p Pooling, win Window, x, dy, dx Images)
	// GroupNorm normalises each sample's channels in groups consecutive groups (all their
	// pixels together, each sample on its own) to mean 0 and variance 1, with eps added to the
	// variance, then scales channel c by gamma[c] and shifts it by beta[c]: gamma and beta are
	// 1 x C rows per batch element. The statistics are accumulated in float64.
	GroupNorm(groups int, eps float32, x Images, gamma, beta Mat, y Images)
	// GroupNormGrad writes the gradients of GroupNorm's inputs given dy, the gradient of its
	// output: dx (when dx.Buf is not nil) and dgamma, dbeta (1 x C rows per batch element).
	// The statistics are recomputed from x.
	GroupNormGrad(groups int, eps float32, x Images, gamma Mat, dy, dx Images, dgamma, dbeta Mat)
	// Transpose moves blocks of block consecutive values: src is a Rows x Cols matrix of
	// blocks (block (i, j) at Off + b*BatchStride + i*Stride + j*block) and dst, Cols x Rows,
	// receives block (i, j) of src as its block (j, i). With block = 1 it is a matrix
	// transpose; nn uses it to turn a batch of sample rows [N][C*H*W] into [C][H][W][N] and
	// logits [classes][N] into rows for the softmax.
	Transpose(block int, src, dst Mat)
}

// PatchGemmer is implemented by backends that multiply by a convolution's patches without
// writing them (the CPU backend packs its GEMM's panels straight from the image). ConvForward
// sets, per batch element, y = wb cols where cols is Im2col's patches of x for window win with
// a row of ones appended (wb is Cout x (C Size Size + 1): the weights and then the bias
// column); x must not be shared by the batch (BatchStride > 0). The result has the bits of
// Im2col into such a matrix followed by Gemm(false, false, 1, wb, cols, 0, y) on the same
// backend.
type PatchGemmer interface {
	ConvForward(wb Mat, x Images, win Window, y Mat)
}

// DirectConvolver is implemented by backends that compute some convolutions and their
// gradients straight from the images, without writing patches or multiplying by them (the GPU
// backend's kernels for convolutions of few channels, where a product by patches is mostly
// moving the patches). Each result is the one Im2col and Gemm (and Col2im) would give, summed
// in the same order as the patch form on a backend that sums a product's depth in order, so
// it agrees with another backend's patch form to the rounding of the sums' order.
type DirectConvolver interface {
	// DirectConv reports whether the backend computes a convolution of x (its geometry, the
	// sample count N included, and whether the batch shares it: BatchStride 0; the batch size
	// is not looked at) with window win into cout channels directly. It depends only on those,
	// never on the data or the device's state, so a backward pass can follow its forward
	// pass's choice.
	DirectConv(cout int, x Images, win Window) bool
	// ConvDirect sets y (cout channels of win.Out(H) x win.Out(W) pixels of N samples, per
	// batch element) to the convolution of x by w plus bias: w is cout x (C Size Size), row
	// (output channel) by row as Im2col's rows, and bias cout x 1. x may be shared by the batch
	// (BatchStride 0).
	ConvDirect(w, bias Mat, x Images, win Window, y Images)
	// ConvDirectGrad writes the gradients of ConvDirect's inputs given dy, the gradient of its
	// output: dw (cout x C Size Size, the product of dy with the patches' transpose), dbias
	// (cout x 1, the sum of each channel of dy) and, when dx.Buf is not nil, dx (Col2im of w's
	// transpose times dy). x may be shared by the batch.
	ConvDirectGrad(w Mat, x Images, win Window, dy Images, dw, dbias Mat, dx Images)
}

// BiasApart is implemented by backends on which a convolution whose weights outweigh its
// output (Cin k k + 1 above three quarters of the output columns, B OH OW: ResNet-18's later
// stages) should read the weights where they lie in the parameters and add the bias by a
// product of its own (Cout x 1 times a row of ones), instead of copying weights and bias side
// by side into one matrix for a product by the patches with a row of ones, and copying the
// gradient back: the copies move the weights four times a step, the bias's products the output
// three times. Every output is the same sum as the product with the copies, the bias added
// last, so a backend that sums a product's depth in one chain from zero gives the same bits
// either way; a backend whose products sum in blocks (the CPU backend) rounds the two
// differently, and does not implement it, so that its results stay bit for bit.
type BiasApart interface {
	BiasApart() bool
}

// GroupNormReLUer is implemented by backends that apply a ReLU in GroupNorm's own passes
// (ResNet's GroupNorm then ReLU), instead of a pass of its own over GroupNorm's output each
// way, and keep no buffer of GroupNorm's output before the ReLU.
type GroupNormReLUer interface {
	// GroupNormReLU writes y = max(GroupNorm(x), 0): Convolver.GroupNorm followed by
	// Backend.Activate's ReLU, with their bits.
	GroupNormReLU(groups int, eps float32, x Images, gamma, beta Mat, y Images)
	// GroupNormReLUGrad writes what GroupNormGrad writes for the gradient that the ReLU passes
	// back from dy: dy where GroupNormReLU's output y is above 0 or NaN, 0 where it is <= 0
	// (Backend.ActivateGrad's ReLU rule, read from the output: the input was <= 0 exactly
	// where the output is). dy is not changed.
	GroupNormReLUGrad(groups int, eps float32, x Images, gamma Mat, y, dy, dx Images, dgamma, dbeta Mat)
}

// GroupNormStatsKeeper is implemented by backends whose GroupNorm can leave the statistics it
// computes (each sample's group means and reciprocal standard deviations) in a buffer of the
// caller's, and whose gradient can read them from there instead of computing them again from
// the same x: a model keeps one such buffer a GroupNorm layer from its forward pass to its
// backward pass. The results are those of the calls without the buffer, bit for bit.
type GroupNormStatsKeeper interface {
	// GroupNormStatsLen is the length of a buffer that holds the statistics of x (Batch batch
	// elements) in groups groups.
	GroupNormStatsLen(groups int, x Images) int
	// GroupNormKeep is Convolver.GroupNorm, or with relu GroupNormReLUer.GroupNormReLU, that
	// also writes x's statistics into stats.
	GroupNormKeep(groups int, eps float32, x Images, gamma, beta Mat, y Images, relu bool, stats Buffer)
	// GroupNormGradKept is Convolver.GroupNormGrad, or where relu.Buf is not nil
	// GroupNormReLUer.GroupNormReLUGrad with relu the ReLU's output, that reads x's statistics
	// from stats, where GroupNormKeep wrote them for the same x, groups and eps.
	GroupNormGradKept(groups int, eps float32, x Images, gamma Mat, relu, dy, dx Images, dgamma, dbeta Mat, stats Buffer)
}

// PoolIndexKeeper is implemented by backends whose max pooling can leave, for windows that
// tile the image, each window's first maximum's place in a buffer of the caller's, and whose
// gradient can read it there instead of finding the maximum again in x: a model keeps one such
// buffer a pooling layer from its forward pass to its backward pass. The results are those of
// Convolver.Pool and PoolGrad, bit for bit.
type PoolIndexKeeper interface {
	// PoolIndexLen is the length of a buffer that holds the window indices of pooling x by
	// w, or 0 where the backend keeps none for it (average pooling, windows that do not tile
	// x).
	PoolIndexLen(p Pooling, w Window, x Images) int
	// PoolKeep is Convolver.Pool with max pooling that also writes the window indices into
	// idx.
	PoolKeep(w Window, x, y Images, idx Buffer)
	// PoolGradKept is Convolver.PoolGrad with max pooling that reads the window indices from
	// idx, where PoolKeep wrote them for the same x and w (x itself is not read).
	PoolGradKept(w Window, x Images, idx Buffer, dy, dx Images)
}

// PoolReLUKeeper is implemented by PoolIndexKeepers that also apply the ReLU after the max
// pooling in the same passes (a model moves a ReLU that comes right before a max pooling after
// it: they commute), so the ReLU's own passes over the pooled values, forward and back, are
// not made. The results are those of the two apart, bit for bit.
type PoolReLUKeeper interface {
	PoolIndexKeeper
	// PoolKeepReLU is PoolKeep followed by Activate's ReLU of y in place.
	PoolKeepReLU(w Window, x, y Images, idx Buffer)
	// PoolGradKeptReLU is ActivateGrad's ReLU of dy followed by PoolGradKept, where y is
	// PoolKeepReLU's output (the ReLU's input is <= 0 exactly where y is, so y gives the ReLU's
	// rule); dy is not changed.
	PoolGradKeptReLU(w Window, x Images, idx Buffer, y, dy, dx Images)
}

// IndexablePooling reports whether pooling x by w is one whose window indices a
// PoolIndexKeeper may keep: max pooling whose windows tile x, of at most 256 pixels (an index
// a byte).
func IndexablePooling(p Pooling, w Window, x Images) bool {
	return p == MaxPooling && w.Tiles(x.H, x.W) && w.Size*w.Size <= 256
}

// AddReLUer is implemented by backends that add a residual block's two paths and apply the
// ReLU after them in one pass, instead of adding one into the other and then a pass of the
// ReLU over the sum.
type AddReLUer interface {
	// AddReLU writes y = max(a + b, 0): Backend.Axpby(1, b, 1, a) then Activate's ReLU of a
	// into y, with their bits, except that a is not changed. The ReLU's gradient can be read
	// from y as well as from the sum (y <= 0 exactly where the sum is).
	AddReLU(a, b, y Mat)
}

// WinogradTile is the side of the square output tile of one of Winograd's minimal filterings
// of a 3 x 3 window (Lavin and Gray, "Fast algorithms for convolutional neural networks",
// 2016): WinogradF2 for F(2x2, 3x3), WinogradF4 for F(4x4, 3x3). Its zero value is none: a
// convolution by its patches.
type WinogradTile int

const (
	// WinogradF2 is F(2x2, 3x3): 16 products make a 2 x 2 tile, from 4 x 4 input pixels.
	WinogradF2 WinogradTile = 2
	// WinogradF4 is F(4x4, 3x3): 36 products make a 4 x 4 tile, from 6 x 6 input pixels,
	// 2.25 multiplications a pixel and channel pair instead of F(2x2, 3x3)'s 4, at the price
	// of a few more roundings (its transforms are not exact in float32).
	WinogradF4 WinogradTile = 4
)

// Positions is the number of positions of the transformed (t + 2) x (t + 2) tiles: 16 for
// F(2x2, 3x3), 36 for F(4x4, 3x3). A Winograder's transformed filters, inputs and products are
// Positions matrices per batch element.
func (t WinogradTile) Positions() int { return (int(t) + 2) * (int(t) + 2) }

// Grid is the number of output tiles down and across an h x w image.
func (t WinogradTile) Grid(h, w int) (th, tw int) {
	n := int(t)
	return (h + n - 1) / n, (w + n - 1) / n
}

// Valid reports whether t is one of the forms a Winograder computes.
func (t WinogradTile) Valid() bool { return t == WinogradF2 || t == WinogradF4 }

func (t WinogradTile) String() string {
	if !t.Valid() {
		return fmt.Sprintf("WinogradTile(%d)", int(t))
	}
	return fmt.Sprintf("F(%dx%d, 3x3)", int(t), int(t))
}

// WinogradFits reports whether a convolution of x into cout channels by window win is one that
// Winograd's minimal filtering computes: a 3 x 3 window at stride 1 with padding 1, an input per
// batch element (not shared: its transform would be too), and at least 16 input and output
// channels, so that the products over the channels have the depth and width to pay for the
// transforms. It depends only on the geometry.
func WinogradFits(cout int, x Images, win Window) bool {
	return win.Size == 3 && win.Stride == 1 && win.Pad == 1 && x.BatchStride != 0 &&
		x.C >= 16 && cout >= 16 && x.H >= 1 && x.W >= 1 && x.N >= 1
}

// Winograder is implemented by backends that compute 3 x 3 convolutions at stride 1 with
// padding 1 by one of Winograd's minimal filterings (WinogradTile): each t x t tile of output
// pixels is A^T [sum over the input channels of (G g G^T) (.) (B^T d B)] A for the channel's
// 3 x 3 filter g and the (t + 2) x (t + 2) input pixels d around the tile, so the products
// over the channels are t.Positions() matrix products (Backend.Gemm) of depth Cin instead of
// one of depth 9 Cin: 2.25 times fewer multiplications for F(2x2, 3x3), 4 times for
// F(4x4, 3x3). The transforms (B, G and A of each form) are the backend's; package nn makes
// the products between them.
//
// A transformed operand is a Mat of t.Positions() matrices per batch element, position e of
// the tile (e = (t + 2) r + s) of batch element b being Mat batch element P b + e for P =
// t.Positions() (so Batch is P times the replicas, and Gemm multiplies every position of
// every replica in one call): the filters u are Cout x Cin, the inputs v Cin x (TH TW N) and
// the products m Cout x (TH TW N) (TH, TW from t.Grid), column p N + n for tile p = ty TW + tx
// and sample n. The results are those of the convolution to rounding (for F(2x2, 3x3)
// exactly, when every step is exact, as on small integers); the gradients are those of the
// same bilinear form, so the patch form and this one agree to rounding, not bit for bit. Every
// method but Winograd is given the form Winograd chose.
type Winograder interface {
	// Winograd reports the form by which the backend computes this convolution, 0 for none
	// (by its patches): only where WinogradFits, and never depending on the data or the
	// device's state, so the backward pass follows the forward pass's choice.
	Winograd(cout int, x Images, win Window) WinogradTile
	// WinogradFilter writes u from the weights w (Cout x 9 Cin per batch element, a row of
	// Cin 3 x 3 filters as Im2col's rows): u's position e is (G g G^T)[e].
	WinogradFilter(t WinogradTile, w, u Mat)
	// WinogradInput writes v from x: position e of tile p, channel c, sample n is
	// (B^T d B)[e] for the tile's (t + 2) x (t + 2) input pixels d, from (t ty - 1,
	// t tx - 1), zeros outside the image.
	WinogradInput(t WinogradTile, x Images, v Mat)
	// WinogradOutput writes y (Cout channels of x's size) from the products m: each tile's
	// output pixels inside the image are (A^T m A) plus the channel's bias (Cout x 1 per batch
	// element), added last.
	WinogradOutput(t WinogradTile, m, bias Mat, y Images)
	// WinogradOutputGrad writes dm = A dy A^T for each tile (dy's pixels outside the image
	// count as 0): the gradient of the products m given dy, the gradient of WinogradOutput's y.
	WinogradOutputGrad(t WinogradTile, dy Images, dm Mat)
	// WinogradInputGrad writes dx from dv, the gradient of the transformed inputs: dx(c, y, x,
	// n) is the sum, from 0 in ascending tile order, of (B dv B^T) at the pixel's place in each
	// tile that reads it.
	WinogradInputGrad(t WinogradTile, dv Mat, dx Images)
	// WinogradFilterGrad writes the weight gradient dw (Cout x 9 Cin) from du, the gradient of
	// the transformed filters: G^T du G for each filter.
	WinogradFilterGrad(t WinogradTile, du, dw Mat)
}
