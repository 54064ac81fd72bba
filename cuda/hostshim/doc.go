// Package hostshim runs the CUDA kernels of package kernels on the CPU: it compiles the .cu
// sources as C++ against a small header (cxx/cuda_shim.h) that turns a launch into loops over
// blocks and threads (for the block kernel hidden_step, a host thread per GPU thread of a block
// with real barriers), loads the result with dlopen, and provides a cuda.Device over host
// memory that also models CUDA graphs (a capture records the launches, a graph launch replays
// them). cuda.Ops on that device is a compute.Backend, so the GPU backend's kernels and
// logic can be compared with the CPU backend operation by operation and run by run without a
// GPU. It needs a C++17 compiler (g++, or $CXX) at run time and is meant for tests.
//
// Without cgo the package is empty.
package hostshim
