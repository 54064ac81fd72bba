// Package theory is the Gaussian differential privacy (GDP) theory of a federated-learning
// configuration: what the paper's theorems say the final model, every iterate and the uploads
// reveal after T rounds.
//
// It owns the configuration the theory needs (Config: algorithm, learning-rate schedule,
// smoothness L, local steps K, clients m and n, noise sigma, clipping norm V, FedProx alpha)
// and its validation; the learning-rate schedules (the four named ones of Theorem 3 and
// explicit tables read from CSV); the convergent bound mu_T on the final model w_T
// (Theorems 1-4, computed exactly for any schedule and in log space so that long runs stay
// finite), the composition bound for an observer of every iterate and the uploads bound, each
// also as (epsilon, delta)-DP (Bound, Bounds), with the last-iterate heuristic of Steinke et
// al. beside them (Bound.MuHeuristic: w_T's exact mu if the losses were linear; its sampled
// DP-FedAvg form is accounting's LastIterate); and the exact reference instance with
// quadratic local losses, whose mu is known in closed form so that the trainer and the
// attacks can be checked against exact numbers.
//
// It does not own the conversions between mu-GDP, (epsilon, delta)-DP and RDP: those live in
// package audit (gdp.go), which the empirical statistics use too, and theory imports audit
// for them; audit never imports theory. Like audit, the package is pure float64 mathematics
// and knows nothing of training or files. docs/theory.md states the formulas;
// docs/theory-implementation.md says how they are computed.
package theory
