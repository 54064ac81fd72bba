// Package cuda is the GPU training backend: train.Backend on an NVIDIA GPU through the CUDA
// driver API (gorgonia.org/cu), cuBLAS for the matrix products and the kernels of package
// kernels (embedded PTX, compiled by the driver for the GPU at hand) for everything else.
// Every replica's state stays in device memory for the whole run; the host sees it only at
// checkpoints.
//
// The backend exists only in builds with the tag gpu (go build -tags gpu), which need the
// CUDA toolkit's headers and libraries (libcuda, libcublas) to link. gorgonia.org/cu
// initialises the driver when the program starts and exits the process if there is no GPU,
// so a gpu build runs only on a machine with one; default builds contain no CUDA code, and
// there Available reports false and NewBackend returns ErrNotBuilt. See docs/gpu.md.
package cuda
