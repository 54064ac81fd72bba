// Package kernels holds the CUDA C kernels of the GPU training backend and their PTX: the .cu
// sources, the PTX that go generate compiles from them (committed and embedded, so building
// needs no CUDA toolkit), and the names of the entry points. The Go side of the backend (the
// operations over a device, the driver device, the host shim that runs these sources on the
// CPU, the parity suite) is package cuda.
//
// The kernels follow rules that make the host shim possible and results reproducible: every
// output element is computed by one thread in an order fixed by the kernel, not by the launch,
// so results are the same on the GPU and in the shim up to the accuracy of the math library,
// and never depend on the batch, block or grid size. Threads never communicate (no shared
// memory, barriers or atomics), except in the one block kernel, hidden_step (step.cu), whose
// threads share a replica's activations through shared memory and meet at barriers; the shim
// runs it with a host thread per GPU thread.
package kernels

//go:generate sh genptx.sh elementwise
//go:generate sh genptx.sh loss
//go:generate sh genptx.sh reduce
//go:generate sh genptx.sh noise
//go:generate sh genptx.sh conv
//go:generate sh genptx.sh step
