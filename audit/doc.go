// Package audit is the mathematics of the privacy audit: Gaussian differential privacy (GDP)
// theory for a federated-learning configuration, and certified empirical trade-off curves
// built from attack scores.
//
// The theory half turns a configuration (algorithm, learning-rate schedule, smoothness L,
// local steps K, clients m, noise sigma, clipping norm V) into the convergent bound mu_T on
// the final model w_T (Theorems 1-4 of the source paper, computed exactly for any schedule
// and in log space so that long runs stay finite), the composition baseline for an observer
// of every iterate, the conversions between mu-GDP, (epsilon, delta)-DP and RDP, and the
// exact reference instance with quadratic local losses. The empirical half turns scores of
// runs on adjacent datasets into error-rate points, their convex envelope and
// Clopper-Pearson lower bounds on mu and epsilon.
//
// The package is pure float64 mathematics: it imports neither the trainer nor the attacks,
// so any tool that produces numbers can be audited with it. docs/theory.md states the
// formulas; docs/theory-implementation.md says how they are computed.
package audit
