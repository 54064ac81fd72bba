// Package nn owns the convolutional layers and models of fedaudit, replica-batched like the rest
// of the engine: every operation runs for R replicas (the coupled runs of an audit) at once,
// with hand-written backward passes. Package train trains its models (kinds lenet5, resnet and
// sequential, train/nnmodel.go) in the direct local-step form.
//
// What it owns: the layers (conv2d with stride and padding through im2col and a strided-batched
// GEMM, max and average pooling with padding, ReLU and tanh, GroupNorm, residual blocks, global
// average pooling, flatten, dense) and the softmax cross-entropy loss; the layer spec (Spec,
// LayerSpec: what a YAML `model: {kind: sequential, layers: [...]}` decodes into) with shape
// inference and errors that name the layer; the LeNet-5, ResNet-20-style and ResNet-18 specs.
//
// Where a model runs. The layers are written once, against a small set of operations (ops):
// matrix products, a few elementwise operations, and compute.Convolver's image operations.
// BuildOn runs a model in float32 on any compute.Backend that is also a compute.Convolver (the
// CPU backend, whose image operations are package internal/imgops's, and the GPU backend, whose
// CUDA kernels follow the same definitions): that is how train runs CNNs, reading the engine's
// parameter rows in place (any replica stride). Build runs a model on the host in any Float with
// a GEMM it is given (float64 with NaiveGemm in the tests' finite differences and gorgonia
// oracle; the attacks use float64 host models to reconstruct inputs). Channel biases, global
// average pooling and the bias gradients are products with a vector of ones, so they need no
// operation of their own.
//
// Layout. Activations of one replica are [channels][height][width][batch] (CHWN: the samples
// innermost), the replicas one after another. With that layout a convolution of a whole
// replica batch is ONE strided-batched GEMM over replicas, in all three of its products:
//
//	Y_r  (Cout x OH*OW*B)  = W_r (Cout x Cin*k*k) * cols_r (Cin*k*k x OH*OW*B)
//	dW_r (Cout x Cin*k*k)  = dY_r * cols_r^T      (the sum over the batch is the GEMM's depth)
//	dcols_r                = W_r^T * dY_r
//
// and the patches, pooling windows and normalisation statistics are runs of whole pixels times
// samples, contiguous in memory (with samples anywhere but innermost they would be runs of one
// image row, ten values for LeNet-5's second convolution). Flattening channels and pixels
// into features is then no operation at all: [C][H][W][B] is [C*H*W][B], the features x batch
// matrix of the dense layers, in PyTorch's flatten order. The input of the first layer is one
// client's batch shared by all replicas: it is given once (B rows of [C][H][W] values, the
// datasets' row layout, transposed once), its im2col patches are computed once and passed to
// the GEMM with replica stride 0.
//
// Parameters are R x d, replica-major, as in package train; each layer owns a contiguous range
// (conv weights [Cout][Cin][k][k] then bias; dense weights [out][in] then bias, PyTorch's order;
// GroupNorm gamma then beta).
//
// Max pooling recomputes each window's maximum in the backward pass instead of keeping its
// position, and GroupNorm recomputes its statistics: nothing but the layers' outputs is kept
// between the passes, and no backend needs integer buffers.
package nn
