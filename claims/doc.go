// Package claims computes the privacy claim a deployment makes for one client, with the
// accountant of its system: DP-FedAvg, IDP-FedAvg and time-adaptive spending, with Gaussian
// noise (sampled Gaussian RDP), product Laplace noise or product Staircase noise, converted to
// (epsilon, delta) at the audit's delta. The claim is what the audit judges the certified lower
// bounds against for these systems (Noisy-FedAvg, FedProx and DP-SGD are judged against the
// theory's bounds instead, see experiment).
//
// The RDP mathematics is accounting's; this package maps a training configuration and its
// privacy plan (train.Config.Plan) onto it, so it imports train, accounting and audit.
package claims
