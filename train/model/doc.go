// Package model holds the models train's engine trains, with their hand-written backward
// passes: softmax regression and the MLP (MLP, with the fused clipped step and the deferred
// first-layer step), the quadratic reference model of the theory (Quadratic), and package nn's
// convolutional models adapted to the engine (NN). Every model computes the loss, gradient and
// evaluation of a batch of replicas at once through a compute.Backend; a replica's parameters
// are one row of a compute.Mat.
package model
