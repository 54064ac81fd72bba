// Package audit is the mathematics of the empirical privacy audit: certified trade-off curves
// and lower bounds on mu and epsilon built from attack scores, and the Gaussian differential
// privacy (GDP) conversions both it and the theory use.
//
// It turns scores of runs on adjacent datasets into error-rate points, their convex envelope
// and Clopper-Pearson lower bounds on mu and epsilon (Bonferroni, split, DKW, the rank band,
// paired scores), one-run audits (onerun.go; the adaptive mu bound over nested guess sets,
// onerun_order.go; the sequential eps bound for pure DP, onerun_sequential.go), the one-shot
// estimate, the parametric interval of the informed adversary and verdicts; and it holds the conversions between mu-GDP,
// (epsilon, delta)-DP and RDP (gdp.go). The checks of these estimators by simulation (the
// self-test and the cost table) are package audit/calibrate, which imports this one. The theory for a
// configuration (the convergent, composition and uploads bounds, learning-rate schedules,
// the exact quadratic instance) is package theory, which imports this one; audit never
// imports theory.
//
// The package is pure float64 mathematics: it imports neither the trainer nor the attacks,
// so any tool that produces numbers can be audited with it. docs/theory.md states the
// formulas; docs/theory-implementation.md says how they are computed.
package audit
