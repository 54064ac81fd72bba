// Package calibrate checks the estimators of package audit by simulation, on mechanisms whose
// privacy is known exactly.
//
// SelfTest measures the coverage of every certified bound (each threshold method, the rank
// band, the one-run audits) on the Gaussian mechanism, whose trade-off curve is exactly
// T_G(mu), and on the Laplace mechanism (exactly s-DP), singly and as a family of rows, and
// says with a binomial pass rule whether each method misses its truth no more often than its
// confidence allows. CostTable measures what each audit method costs: the trainings (or
// canaries) it needs before its median certified bound reaches a given share of the true mu.
//
// These are checks of the estimators, not estimators: audit never imports this package, and
// this package imports nothing of ours but audit. docs/statistics.md describes both.
package calibrate
