// Package check holds the grey-box checks of a deployment's runs: what the recorded rounds of a
// few coupled pairs show about a DP federated trainer without any attack.
//
// fedaudit's pairs share their noise: run C and run C' of a pair draw the same noise, so the
// difference of their rounds is the difference of the clipped updates with the noise cancelled,
// which the declared sensitivity bounds. Where a round is a function of the global model and the
// data alone (train.Replayable), it is replayed without noise, and what is left of the recorded
// global model and of the target client's upload is the noise itself, which must follow the
// declared distribution: centred, of the declared scale, Gaussian, fresh every round. Bugs that
// deployments have shipped (clipping skipped, noise of the wrong scale, noise reused, a tensor
// left without noise) show in one or two pairs this way, where a black-box audit needs hundreds.
//
// Run reads an experiment directory (fedaudit's own or one written by `audit import`) and returns
// a Report; docs/check.md says what each check means.
package check
