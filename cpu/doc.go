// Package cpu is the CPU backend of training: a pure-Go (plus amd64 assembly) implementation of
// compute.Backend. It owns the batched GEMM with its packing and AVX2/AVX-512 micro-kernels,
// the fixed worker pool that splits every operation into tasks, the elementwise and reduction
// kernels (softmax cross-entropy, clipping, noise, dot products) and the fused deferred step of
// a one-hidden-layer MLP (compute.HiddenStepper). The elementwise maths (exp, tanh, Gaussian
// noise) are in cpu/internal/simd. Every output element is computed in one fixed order, so
// results do not depend on the thread count or the batch size, and every SIMD path gives the
// portable path's bits.
package cpu
