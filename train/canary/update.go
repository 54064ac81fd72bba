package canary

import (
	"fmt"

	"github.com/fedaudit/fedaudit/algo"
)

// Update is the crafted canary client of a client-level coupled-pairs audit of the DP-FedAvg
// family: the target client of remove-client adjacency sends, in every round it is sampled,
// the update clip_t u, a fixed public unit direction u scaled to its clip norm of that round,
// instead of training on its data. World C holds the client, C' lacks it. Its update is the
// largest a clipped client can send and the same in every round, the case of the last-iterate
// heuristic (Steinke et al., "The last iterate advantage", ICLR 2025), and of the crafted
// gradient canaries of Nasr et al. ("Tight auditing of differentially private machine
// learning", 2023) and Cebere, Bellet and Papernot ("Tighter privacy auditing of DP-SGD in the
// hidden state threat model", 2025) carried over from a sample's gradient to a client's update. An add/remove-one-client guarantee holds
// for any update a client sends, so the worlds stay adjacent.
type Update struct {
	// Direction is "dirac" (default: parameter Coordinate's unit vector) or "gaussian" (a
	// unit Gaussian direction from the master seed).
	Direction string `json:"direction,omitempty" yaml:"direction,omitempty"`
	// Coordinate is the parameter a dirac canary moves; negative counts from the end.
	Coordinate int `json:"coordinate,omitempty" yaml:"coordinate,omitempty"`
}

// Check returns the problems of a crafted update for algorithm alg with d parameters (0: not
// known yet).
func (u *Update) Check(alg algo.Algorithm, d int) []error {
	var errs []error
	if alg != "" && !alg.ClientDP() {
		errs = append(errs, fmt.Errorf("config: crafted_update: a client's crafted update is sent to the DP-FedAvg family's server, which clips and noises it; %s adds its noise on the clients", alg))
	}
	return append(errs, checkDirection("crafted_update", u.Direction, u.Coordinate, d)...)
}

// Vector returns the update's unit direction u in R^d for an experiment with master seed seed
// (the same u a gradient canary of that direction and coordinate has).
func (u *Update) Vector(seed uint64, d int) []float32 {
	return directionVector(u.Direction, u.Coordinate, seed, d)
}
