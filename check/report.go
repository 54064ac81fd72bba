package check

import (
	"fmt"
	"github.com/fedaudit/fedaudit/findings"
	"math"
)

// report assembles the checks: the exact ones, then the statistical ones, which share the
// family-wise level alpha by Bonferroni.
func (c *checker) report(alpha float64, pairs int) *findings.CheckReport {
	r := &findings.CheckReport{Format: findings.CheckFormat, Alpha: alpha, Pairs: pairs, Rounds: c.rounds[len(c.rounds)-1], Skipped: c.skipped}
	if c.rounds[0] == 0 {
		r.Checks = append(r.Checks, exact(findings.CheckResult{Name: "shared-w0", Statistic: c.w0Diff,
			Meaning: "largest difference of a run's round-0 model from the first run's: every run must start from the same w_0, bit for bit"},
			c.w0Diff == 0))
	} else {
		// The first recorded models are w_t after t noisy rounds, which differ from run to run.
		r.Skipped = append(r.Skipped, findings.CheckSkipped{Check: "shared-w0",
			Why: fmt.Sprintf("needs round 0 (w_0) as a checkpoint (the runs record %v)", c.rounds)})
	}
	// A pair whose worlds draw their own noise cancels nothing: the coupled checks of an observer
	// run only where the replay shows the noise shared (or cannot tell).
	coupled := [2]bool{true, true}
	var coupling []findings.CheckResult
	for obs := range c.coupling {
		ct := c.coupling[obs]
		if ct.n == 0 {
			continue
		}
		rho := ct.cross / math.Sqrt(ct.sq0*ct.sq1)
		if !(rho >= coupledCorrelation) {
			coupled[obs] = false
			r.Skipped = append(r.Skipped, findings.CheckSkipped{Check: "coupled-difference and coupled-residuals (" + observerNames[obs] + ")",
				Why: fmt.Sprintf("the worlds of a pair do not share their noise (correlation of their residuals %.3g): train both worlds of a pair with the same noise draws", rho)})
			continue
		}
		coupling = append(coupling, exact(findings.CheckResult{Name: "coupled-residuals", Observer: observerNames[obs], Statistic: ct.worst, N: ct.n,
			Meaning: fmt.Sprintf("largest difference of the noise residuals of a pair's two worlds (the replay without noise taken from the %s) over its float tolerance, at %s: the worlds share their noise, so above 1 means the trainer computed something other than the declared round (clipping, local steps, learning rate) before adding the noise", observerNames[obs], ct.worstAt)},
			ct.worst <= 1))
	}
	if c.bounded {
		for obs := range c.diffN {
			if c.diffN[obs] == 0 && (obs == global || c.hasUpload) {
				// Nothing to compare: say so, rather than leave the check out of a report that passes.
				r.Skipped = append(r.Skipped, findings.CheckSkipped{Check: "coupled-difference (" + observerNames[obs] + ")", Why: c.noDifference(obs)})
			}
			if c.diffN[obs] == 0 || !coupled[obs] {
				continue
			}
			r.Checks = append(r.Checks, exact(findings.CheckResult{Name: "coupled-difference", Observer: observerNames[obs], Statistic: c.diffRatio[obs], N: c.diffN[obs],
				Meaning: fmt.Sprintf("largest norm of the difference of a pair's %s updates (the shared noise cancels) over the declared bound 2 V sum_k eta |1 - eta alpha|, at %s: above 1 means a client's update is larger than clip_norm allows (clipping skipped or done per tensor), or the pair's worlds do not share their noise", observerNames[obs], c.diffAt[obs])},
				c.diffRatio[obs] <= 1))
		}
	}
	if c.round1N > 0 {
		r.Checks = append(r.Checks, exact(findings.CheckResult{Name: "round-1-difference", Observer: "global", Statistic: c.round1Ratio, N: c.round1N,
			Meaning: fmt.Sprintf("largest norm of a pair's difference after round 1 (from one w_0, with the noise shared) over the declared bound %s, at %s: above 1 means the target's contribution was not clipped to its norm, or the pair's worlds do not share their draws", c.round1What, c.round1At)},
			c.round1Ratio <= 1))
	}
	r.Checks = append(r.Checks, coupling...)
	stats := append([]findings.CheckResult(nil), c.extra...)
	for obs := range c.tallies {
		for _, t := range c.tallies[obs] {
			stats = append(stats, t.results()...)
		}
	}
	r.Family = len(stats)
	if r.Family > 0 {
		r.Threshold = alpha / float64(r.Family)
	}
	for _, s := range stats {
		s.Passed = s.PValue >= r.Threshold
		r.Checks = append(r.Checks, s)
	}
	// A report of no check verified nothing: it does not pass.
	r.Passed = len(r.Checks) > 0
	for _, ch := range r.Checks {
		r.Passed = r.Passed && ch.Passed
	}
	return r
}

// exact marks a deterministic check's outcome.
func exact(r findings.CheckResult, passed bool) findings.CheckResult {
	r.Exact, r.Passed = true, passed
	if passed {
		r.PValue = 1
	}
	return r
}

// noDifference says why coupled-difference compared no round of an observer.
func (c *checker) noDifference(obs int) string {
	for i := 0; i+1 < len(c.rounds); i++ {
		if c.rounds[i+1] == c.rounds[i]+1 {
			return "the runs record no round's upload of the target client in both worlds of a pair (it sat every recorded round out)"
		}
	}
	return fmt.Sprintf("needs two consecutive rounds t, t+1 among the checkpoints (the runs record %v)", c.rounds)
}
