// Package nn owns the convolutional layers and models of fedaudit, replica-batched like the rest
// of the engine: every operation runs for R replicas (the coupled runs of an audit) at once, in
// float32, with hand-written backward passes. Package train trains its models (kinds lenet5,
// resnet and sequential, train/nnmodel.go) on the CPU backend in the direct local-step form.
//
// What it owns: the layers (conv2d with stride and padding through im2col and the CPU backend's
// strided-batched SGEMM, max and average pooling, ReLU and tanh, GroupNorm, residual blocks,
// global average pooling, flatten, dense) and the softmax cross-entropy loss; the layer spec
// (Spec, LayerSpec: what a YAML `model: {kind: sequential, layers: [...]}` decodes into) with
// shape inference and errors that name the layer; the LeNet-5 and ResNet-20-style specs.
//
// Layout. Activations of one replica are [channels][batch][height][width] (CNHW), the replicas
// one after another: [replica][channels][batch][height][width]. With that layout a convolution of
// a whole replica batch is ONE strided-batched GEMM over replicas, in all three of its products:
//
//	Y_r  (Cout x B*OH*OW)  = W_r (Cout x Cin*k*k) * cols_r (Cin*k*k x B*OH*OW)
//	dW_r (Cout x Cin*k*k)  = dY_r * cols_r^T      (the sum over the batch is the GEMM's depth)
//	dcols_r                = W_r^T * dY_r
//
// whereas NCHW ([batch][channels]...) would need one GEMM per (replica, sample) and a separate
// reduction over samples for the weight gradient. Dense layers are the same product with
// H = W = 1 (features x batch). The input of the first layer is one client's batch shared by all
// replicas: it is given once ([batch][C][H][W], the datasets' row layout), its im2col patches are
// computed once and passed to the GEMM with replica stride 0.
//
// Parameters are R x d, replica-major, as in package train; each layer owns a contiguous range
// (conv weights [Cout][Cin][k][k] then bias; dense weights [out][in] then bias, PyTorch's order;
// GroupNorm gamma then beta).
//
// Model types are generic over float32 and float64: float32 is what training runs (its GEMM is
// package cpu's); float64 with the plain GEMM of this package exists for the tests' finite
// differences.
package nn
