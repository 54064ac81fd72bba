// Package cuda is the GPU training backend, beside the CPU backend of package cpu: Ops
// implements compute.Backend (and compute.Convolver, the image operations of convolutional
// models) over any Device that runs the kernels of package kernels, turning every operation
// into kernel launches and strided-batched SGEMM calls on device buffers. Launches are queued
// and issued in batches, each with one staged copy of its per-call arguments, when the host
// needs the device (a round of training is one batch), optionally as CUDA graphs (queue.go).
//
// Two devices run it. The driver device (build tag gpu) is an NVIDIA GPU through the CUDA
// driver API (gorgonia.org/cu) and cuBLAS, with the embedded PTX compiled by the driver for the
// GPU at hand; every replica's state stays in device memory for the whole run and the host
// sees it only at checkpoints. The host shim (package cuda/hostshim) compiles the same .cu
// sources as C++ and runs them on the CPU, so every kernel and every line of Ops is checked
// against the CPU backend (package cuda/paritytest) on machines without a GPU.
//
// gorgonia.org/cu initialises the driver when the program starts and exits the process if
// there is no GPU, so a gpu build runs only on a machine with one; default builds contain no
// driver code, and there Available reports false and NewBackend returns ErrNotBuilt. See
// docs/gpu.md.
package cuda
