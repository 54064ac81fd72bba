package canary

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
)

// Gradient is the gradient canary of a coupled-pairs audit: the adversary crafts the target
// sample's gradient instead of choosing its input. In world C' every local step of the target
// client whose minibatch holds the target sample adds Norm u / B to the mean gradient before
// the whole-gradient clipping (B the minibatch's rows): the sample's gradient gains Norm u, a
// fixed public unit direction, in every step, as the gradient canaries of Nasr, Hayes, Steinke,
// Balle, Tramèr, Jagielski, Carlini and Terzis ("Tight auditing of differentially private
// machine learning", 2023) and the crafted canaries of Cebere, Bellet and Papernot ("Tighter
// privacy auditing of DP-SGD in the hidden state threat model", 2025). One sample's gradient is
// anything the adversary likes, so the worlds stay adjacent; a Norm large against the clip
// makes the clipped step of C' point along u. C holds the sample as it is, or with Opposite its
// gradient gains -Norm u.
type Gradient struct {
	// Norm is the canary gradient's norm (G): Norm u is added to the sample's gradient.
	Norm float64 `json:"norm" yaml:"norm"`
	// Direction is "dirac" (default: u is parameter Coordinate's unit vector, the Dirac canary
	// of Nasr et al., which moves one coordinate that the other clients' gradients may barely
	// touch) or "gaussian" (a unit Gaussian direction from the master seed).
	Direction string `json:"direction,omitempty" yaml:"direction,omitempty"`
	// Coordinate is the parameter a dirac canary moves; negative counts from the end (-1: the
	// last parameter).
	Coordinate int `json:"coordinate,omitempty" yaml:"coordinate,omitempty"`
	// Opposite crafts C's sample too: its gradient gains -Norm u. Replace-one adjacency lets
	// the adversary choose both samples, and then the worlds' clipped steps differ by up to
	// twice the clip along u, the sensitivity the theory's bounds assume.
	Opposite bool `json:"opposite,omitempty" yaml:"opposite,omitempty"`
}

// Shift is the change of the target sample's gradient from world C to C' along u: Norm, or
// twice that when C's sample is crafted the opposite way.
func (g *Gradient) Shift() float64 {
	if g.Opposite {
		return 2 * g.Norm
	}
	return g.Norm
}

// Gradient canary directions.
const (
	DiracDirection    = "dirac"
	GaussianDirection = "gaussian"
)

// Check returns the problems of a gradient canary for a training of algorithm alg with d
// parameters (0: not known yet).
func (g *Gradient) Check(alg algo.Algorithm, d int) []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: gradient_canary.%s: %s", field, fmt.Sprintf(format, a...)))
	}
	if alg != "" && alg != algo.FedAvg && alg != algo.FedProx { // an empty one is reported as such
		bad("algorithm", "the gradient canary crafts a sample's gradient before fedavg's and fedprox's whole-gradient clipping; %s is not supported", alg)
	}
	if !(g.Norm > 0) || math.IsInf(g.Norm, 0) {
		bad("norm", "need a finite norm > 0, got %g", g.Norm)
	}
	return append(errs, checkDirection("gradient_canary", g.Direction, g.Coordinate, d)...)
}

// checkDirection returns the problems of a canary direction (field names under prefix) for a
// model of d parameters (0: not known yet).
func checkDirection(prefix, direction string, coordinate, d int) []error {
	var errs []error
	switch direction {
	case "", DiracDirection:
		if d > 0 && (coordinate >= d || coordinate < -d) {
			errs = append(errs, fmt.Errorf("config: %s.coordinate: %d is not a parameter index of a model with %d parameters (negative: from the end)", prefix, coordinate, d))
		}
	case GaussianDirection:
	default:
		errs = append(errs, fmt.Errorf("config: %s.direction: %q is not dirac or gaussian", prefix, direction))
	}
	return errs
}

// Vector returns the canary's unit direction u in R^d for an experiment with master seed seed.
func (g *Gradient) Vector(seed uint64, d int) []float32 {
	return directionVector(g.Direction, g.Coordinate, seed, d)
}

// directionVector is the unit direction of a canary: parameter coordinate's unit vector
// (dirac; negative counts from the end) or a unit Gaussian direction from the master seed.
func directionVector(direction string, coordinate int, seed uint64, d int) []float32 {
	if direction == GaussianDirection {
		// Row 0 of the one-run canaries' Gaussian directions is a different stream from the
		// canaries' own only if the seed differs; the coupled-pairs canaries (a gradient
		// canary, a crafted update) and the one-run canaries are never in one run (train.Config
		// refuses both at once).
		return GaussianDirections(seed, 1, d)
	}
	u := make([]float32, d)
	j := coordinate
	if j < 0 {
		j += d
	}
	u[j] = 1
	return u
}
