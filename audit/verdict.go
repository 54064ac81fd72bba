package audit

import (
	"fmt"
	"math"
)

// Claim is a privacy guarantee to check against an audit: mu-GDP when Mu > 0, and
// (Epsilon, Delta)-DP when Epsilon > 0. Both may be given; each is judged. A claim of exactly
// zero privacy loss cannot be expressed (it has no tightness ratio).
type Claim struct {
	Mu      float64 `json:"mu,omitempty"`
	Epsilon float64 `json:"epsilon,omitempty"`
	Delta   float64 `json:"delta,omitempty"`
}

// Validate reports whether the claim states a guarantee that can be judged.
func (c Claim) Validate() error {
	if math.IsNaN(c.Mu) || math.IsInf(c.Mu, 0) || c.Mu < 0 {
		return fmt.Errorf("audit: claimed mu %v is not a finite number >= 0", c.Mu)
	}
	if math.IsNaN(c.Epsilon) || math.IsInf(c.Epsilon, 0) || c.Epsilon < 0 {
		return fmt.Errorf("audit: claimed epsilon %v is not a finite number >= 0", c.Epsilon)
	}
	if !(c.Delta >= 0 && c.Delta < 1) {
		return fmt.Errorf("audit: claimed delta %v outside [0, 1)", c.Delta)
	}
	if c.Mu == 0 && c.Epsilon == 0 {
		return fmt.Errorf("audit: the claim states neither mu > 0 nor epsilon > 0")
	}
	if c.Epsilon == 0 && c.Delta != 0 {
		return fmt.Errorf("audit: claimed delta %v without an epsilon", c.Delta)
	}
	return nil
}

// Status is the outcome of judging a claim.
type Status string

const (
	// Violated: a certified lower bound exceeds the claim, so the claim is false with
	// confidence at least the audit's confidence level.
	Violated Status = "violated"
	// Consistent: no certified lower bound exceeds the claim. This does not prove the claim;
	// Tightness says how close the audit came.
	Consistent Status = "consistent"
	// Invalid: the claim could not be judged (see Verdict.Reason).
	Invalid Status = "invalid"
)

// Check compares one quantity of a claim with its certified lower bound.
type Check struct {
	Quantity string  `json:"quantity"` // "mu" or "epsilon"
	Claimed  float64 `json:"claimed"`
	Delta    float64 `json:"delta,omitempty"` // for epsilon: the delta of the claim
	Lower    float64 `json:"lower"`
	// Tightness is Lower / Claimed: above 1 the claim is violated, near 1 the audit matches
	// it, near 0 the audit shows little of the claimed loss.
	Tightness float64 `json:"tightness"`
	Violated  bool    `json:"violated"`
}

// Verdict is the judgement of a claim against an audit Result.
type Verdict struct {
	Status     Status  `json:"status"`
	Confidence float64 `json:"confidence"`
	// Tightness is the largest tightness among the checks.
	Tightness float64 `json:"tightness"`
	Checks    []Check `json:"checks"`
	Reason    string  `json:"reason,omitempty"`
}

// Judge compares a claim with the certified lower bounds of res. A claimed quantity is
// violated when its certified lower bound is strictly larger; eps is bounded at the claim's
// delta from the same certified tests as res.EpsLower.
func Judge(res *Result, claim Claim) Verdict {
	if res == nil {
		return Verdict{Status: Invalid, Reason: "no audit result"}
	}
	v := Verdict{Status: Consistent, Confidence: res.Confidence}
	if err := claim.Validate(); err != nil {
		v.Status, v.Reason = Invalid, err.Error()
		return v
	}
	add := func(c Check) {
		c.Tightness = c.Lower / c.Claimed
		c.Violated = c.Lower > c.Claimed
		if c.Violated {
			v.Status = Violated
		}
		v.Tightness = math.Max(v.Tightness, c.Tightness)
		v.Checks = append(v.Checks, c)
	}
	if claim.Mu > 0 {
		add(Check{Quantity: "mu", Claimed: claim.Mu, Lower: res.MuLower})
	}
	if claim.Epsilon > 0 {
		add(Check{Quantity: "epsilon", Claimed: claim.Epsilon, Delta: claim.Delta, Lower: res.EpsLowerAt(claim.Delta)})
	}
	return v
}

// FamilyRowConfidence is the confidence at which each of rows certified bounds must hold for all
// of them to hold jointly with probability at least confidence (Bonferroni: the rows' failure
// probabilities add up).
func FamilyRowConfidence(confidence float64, rows int) float64 {
	return 1 - (1-confidence)/float64(max(rows, 1))
}
