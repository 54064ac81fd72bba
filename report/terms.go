package report

// term is one entry of the report's glossary: the words its headline, tables and captions use
// without defining them, for a reader who has the report and not the source.
type term struct{ Name, Meaning string }

// terms are defined once for every report; the longer account is in the fedaudit source's
// docs/statistics.md (the bounds and methods) and docs/theory.md (the theory's bounds).
var terms = []term{
	{"μ-GDP (Gaussian DP)", "telling world C from world C' by any test is at least as hard as telling N(0, 1) from N(μ, 1): every test's type II error β at type I error α is at least T_G(μ)(α) = Φ(Φ⁻¹(1 − α) − μ) (Dong, Roth and Su, \"Gaussian differential privacy\", 2022). Larger μ, less privacy."},
	{"(ε, δ)-DP", "every test's errors satisfy α + e^ε β ≥ 1 − δ and β + e^ε α ≥ 1 − δ. A μ-GDP mechanism is (ε, δ)-DP for ε(μ, δ) = the root of δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."},
	{"trade-off curve (f-DP)", "the least type II error β at each type I error α over all tests the attacks' scores allow; the empirical curve is built from the scores of the two worlds."},
	{"certified lower bound (mu lower, eps lower)", "a value the mechanism's μ (or ε at δ) is at least, with the stated confidence, from the attack's tests on the runs; never a point estimate. A claim is violated when a certified lower bound exceeds it."},
	{"ceiling", "the largest μ a number of runs can certify at a confidence: the bound of scores that tell every run of one world from every run of the other. A bound at its ceiling says \"at least this much\", and more pairs would certify more."},
	{"threshold methods", "how the tests' thresholds are chosen without spending the confidence: bonferroni (Clopper-Pearson limits at every threshold, the level divided among them), split (thresholds chosen on one part of the runs, certified on the other), dkw (a Dvoretzky-Kiefer-Wolfowitz band around each world's score distribution), band (a band from the ranks' exact distribution, tighter in the tails), dkw+band (both, each at half the error level; the default for coupled pairs)."},
	{"jointly over N rows", "every certified bound of the report holds at once with the stated confidence: each row is certified at the Bonferroni level 1 − (1 − confidence)/N."},
	{"convergent bound", "the theory's μ for an observer of the final model only, from the paper's convergence argument with a smoothness constant L; after T = 1 it is an estimate, not a proven bound, and a certified bound above it \"exceeds estimate\"."},
	{"composition bound", "the theory's μ for an observer of every global model w_1, ..., w_T: the rounds' Gaussian mechanisms composed, a proven bound (for DP-SGD with K ≥ 2 local steps, only as computed without L)."},
	{"uploads bound", "the theory's μ for an observer of the model a round starts from and the target client's noisy upload in it (the uploads composition bound: of every upload and iterate up to T)."},
	{"last-iterate heuristic", "the final model's exact μ if every local loss were linear (Steinke et al., 2025): what a final-model attack can be expected to reach; a heuristic, not a bound."},
	{"realized μ", "the square root of the mean μ² the training recorded for its pairs: the loss an informed adversary would see in these particular runs."},
	{"accountant (sampled Gaussian RDP, Balle conversion)", "for DP-FedAvg, the deployment's own claim: Rényi DP of the Poisson-sampled Gaussian mechanism composed over the rounds (Mironov, Talwar and Zhang, 2019) and turned into (ε, δ) by the conversion of Balle et al. (2020)."},
}
