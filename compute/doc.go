// Package compute is the interface between the training engine and its backends: device
// buffers (Buffer), batched matrix views (Mat), the activations, the Backend operations every
// backend implements (the CPU backend in cpu/, the GPU backend in cuda/) and the optional fused
// kernels a backend may offer (HiddenStepper). It holds no implementation, so train, cpu and
// cuda all import it without importing one another.
package compute
