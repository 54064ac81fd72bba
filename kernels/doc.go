// Package kernels holds the CUDA C kernels of the GPU training backend, their PTX (compiled by
// go generate, committed and embedded, so building needs no CUDA toolkit), and Ops: the
// backend logic above the kernels. Ops implements train.Backend for any Device that can run
// the kernels; package cuda supplies the GPU device and package kernels/hostshim a device that
// runs the same CUDA sources compiled as C++ on the CPU, which is how every kernel and every
// line of Ops is tested on machines without a GPU.
//
// The kernels follow rules that make that possible: threads never communicate (no shared
// memory, barriers or atomics) and every output element is computed by one thread in an order
// fixed by the kernel, not by the launch, so results are the same on the GPU and in the shim
// up to the accuracy of the math library, and never depend on the batch or grid size.
package kernels

//go:generate nvcc -ptx -arch=compute_70 -fmad=false -O3 -o elementwise.ptx elementwise.cu
//go:generate nvcc -ptx -arch=compute_70 -fmad=false -O3 -o loss.ptx loss.cu
//go:generate nvcc -ptx -arch=compute_70 -fmad=false -O3 -o reduce.ptx reduce.cu
//go:generate nvcc -ptx -arch=compute_70 -fmad=false -O3 -o noise.ptx noise.cu
