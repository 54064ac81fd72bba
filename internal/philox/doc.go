// Package philox is the counter-based random number generator of training, Philox4x32-10,
// shared by the CPU backend, the GPU backend's parity suite and the training engine: the
// block function, the Box-Muller transform that turns its words into the Gaussian noise
// stream, the host reference of that stream, the integer and uniform draws of minibatch,
// participation and mechanism sampling, and the domains that keep their counters apart.
package philox
