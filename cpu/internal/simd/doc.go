// Package simd holds the CPU backend's elementwise maths kernels with their AVX2/AVX-512
// assembly: exp (softmax), tanh and its derivative (activations) and the Gaussian noise stream
// of internal/philox eight or four counters at a time. Each has a portable Go version that
// gives the same bits; the tests hold the assembly to it.
package simd
