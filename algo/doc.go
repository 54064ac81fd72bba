// Package algo is the shared vocabulary of the training schemes: the algorithm, the minibatch
// sampling (batching) and the noise mechanism, as typed string enums with their YAML and JSON
// forms and validation. train, audit and experiment all use these one definitions; the
// package holds no training code, so audit stays free of it.
package algo
