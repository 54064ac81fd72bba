// Package hostmodel evaluates train's models in float64 on the host, one sample at a time and
// with train's parameter layout: the flat models (softmax regression, the MLP, the quadratic
// model) by hand-written forward and backward passes, and package nn's CNNs through
// nn.Build[float64] over gonum's DGEMM. The attacks need per-sample losses, margins and
// gradients, and invgrad the Hessian-vector products of an MLP (Work); unlike training, they want
// precision rather than speed.
//
// It also holds the models' host-side mathematics that the theory needs: the smoothness
// constant a model certifies on the data (CertifiedSmoothness) and the Hessian estimate for one
// that does not (SmoothnessEstimate), and an Evaluator of the quantities run files record (loss,
// margin, accuracy) with train's definitions.
package hostmodel
