// Package accounting holds the privacy accountants and the noise mechanisms of the DP-FL
// systems that fedaudit trains beside Noisy-FedAvg: DP-FedAvg, IDP-FedAvg and the
// time-adaptive spend-as-you-go framework (client-level Gaussian noise, Poisson sampling of
// clients), and UDP-FL (Laplace and staircase noise).
//
// The mechanisms (Gaussian, Laplace, Staircase) sample exactly from a fixed number of
// uniforms per draw, so a counter-based stream such as the trainer's Philox can feed them
// without keeping state. Each also has its exact CDF and variance, which the tests check the
// samplers against.
//
// The accountants work in Rényi differential privacy (RDP) on a grid of orders: the sampled
// Gaussian mechanism of Mironov, Talwar and Zhang (2019) at integer orders by the binomial
// expansion and at fractional orders by its two series with a bound on the truncation error,
// the Laplace mechanism in closed form, and the staircase mechanism by an exact sum over the
// pieces of its piecewise-constant density (the closed form printed in the UDP-FL paper does
// not match that sum; docs/accounting.md says where). Per-round curves add up over rounds
// (heterogeneous rounds allowed) and convert to (epsilon, delta) by the standard bound or by
// the tighter one of Balle et al. (2020), minimised over the orders; delta at a given epsilon
// is the inverse.
//
// Beside the accountants, LastIterate is the last-iterate heuristic of Steinke et al. (ICLR
// 2025): the exact (epsilon, delta) profile of the final model alone under linear losses, a
// Poisson-binomial sum of the target's shifts plus Gaussian noise against the noise alone,
// with a bound on its numerical error.
//
// On top sit the per-client claims of the DP-FL systems: epsilon of DP-FedAvg for (q, z, T),
// the calibration of noise or sampling rate to a budget by bisection (GetNoise of the
// time-adaptive paper), IDP-FedAvg's per-client parameters and the spend-as-you-go plan of
// the time-adaptive paper with the epsilon its schedule really spends.
//
// The package is pure float64 mathematics and imports only the standard library and gonum.
// docs/accounting.md states every formula, its source and how it was verified.
package accounting
