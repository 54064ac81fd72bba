// Package canary configures the many canaries per run of train, for the one-run audits (Steinke, Nasr and Jagielski 2023; Mahloujifar,
// Melis and Chaudhuri 2025) and the one-shot estimate (Andrew, Kairouz, Oh, Oprea, McMahan and
// Suriyakumar 2024). Every run of pair p carries the same k canaries, canary j included with
// probability 1/2 by the bit datasets.InclusionBits(seed, p, k)[j]; both worlds of a pair
// carry the same bits (the pair's coupling is about its target, not its canaries). Runs of
// different pairs have independent seeds and bits, so the world-C runs of several pairs are
// independent runs of one experiment with k canaries each.
//
// Three kinds of canary:
//
//   - Direction canaries (Direction; the DP-FedAvg algorithm): k canary clients whose
//     update is a fixed random direction u_j of norm the update clip norm c. An included canary
//     is Poisson-sampled every round like any client (rate q, from the pair's seed) and adds c
//     u_j to the server's sum; the sum's divisor q m stays the deployment's constant. The
//     directions are public: Gaussian vectors normalized, drawn from the master seed. At every
//     round the engine projects the model change on every direction and records, per canary,
//     the cosine of w_T - w_0 with u_j (canary_cos_final), the largest cosine of a round's
//     change w_{t+1} - w_t with u_j (canary_cos_max) and the log-likelihood ratio of "canary j
//     took part" in each round's projected sum, summed over the rounds (canary_llr_all).
//   - Gradient canaries (Gradients; fedavg, fedprox and dpsgd with full batches): k fixed
//     public directions u_j (as above) in the local steps of one client: every step adds
//     -Norm u_j / B to the client's mean gradient for every included canary j, before the
//     whole-gradient clipping of fedavg and fedprox, as if one of its samples' gradient gained
//     -Norm u_j (the one-run form of the coupled pairs' gradient canary), so the step moves the
//     model along +u_j. Under dpsgd each canary is a record of its own, its gradient -Norm u_j
//     clipped per example like the others': -min(Norm, clip) u_j / B. A checkpoint records the
//     cosine of w_T - w_0 with u_j.
//   - Record canaries (Dirac, Relabel; every algorithm): k canary samples placed at
//     sample slots of the clients (datasets.NewRecordCanaries): in a run that includes canary j
//     its slot holds the canary, otherwise the client's own sample, so the client's size and
//     its batches do not depend on the bits. Each checkpoint records the model's loss and logit
//     margin on every canary (canary_loss, canary_margin) and on the sample the slot holds when
//     the canary is excluded (canary_loss_alt, canary_margin_alt): as for the target of a
//     replace adjacency, the auditor knows both candidates of a slot.
//
// The package holds what a canary is apart from training: the configuration (Config) and its
// checks, the names of the observations a checkpoint records (the run-file columns) and the
// public directions of direction canaries. Package train places the canaries and observes them.
package canary

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
)

// Canary kinds of Config.Kind.
const (
	Direction = "direction"
	Gradients = "gradient"
	Dirac     = "dirac"
	Relabel   = "relabel"
)

// Names of the canary observations in ReplicaState.Stats (the run-file column names).
const (
	StatCosFinal  = "canary_cos_final"
	StatCosMax    = "canary_cos_max"
	StatLLRAll    = "canary_llr_all"
	StatLoss      = "canary_loss"
	StatMargin    = "canary_margin"
	StatLossAlt   = "canary_loss_alt"
	StatMarginAlt = "canary_margin_alt"
)

// Config puts k canaries into every run.
type Config struct {
	// Count is k.
	Count int `json:"count" yaml:"count"`
	// Kind is "direction" (canary clients of the DP-FedAvg algorithm whose update is a fixed
	// random direction of norm update_clip), "dirac" (canary records: a blank input with a few
	// saturated features and a random label, each canary its own) or "relabel" (canary records:
	// the slot's own sample with another label).
	Kind string `json:"kind" yaml:"kind"`
	// Pixels is the number of saturated features of a dirac canary (0: the builder's default).
	Pixels int `json:"pixels,omitempty" yaml:"pixels,omitempty"`
	// Norm and Client are gradient canaries': every local step of client Client adds -Norm u_j
	// / B to its mean gradient for every included canary j (B the client's samples: full
	// batches), as if one of its samples' gradient gained -Norm u_j.
	Norm   float64 `json:"norm,omitempty" yaml:"norm,omitempty"`
	Client int     `json:"client,omitempty" yaml:"client,omitempty"`
	// Orthogonal makes direction canaries orthonormal: rows of a randomized orthonormal basis
	// (OrthonormalDirections; needs k < d) instead of independent Gaussian directions, which
	// overlap by about 1/sqrt(d). In a model of few parameters the included canaries' overlaps add
	// up to noise in every canary's projection, the same in every round when q = 1; orthonormal
	// directions remove it.
	Orthogonal bool `json:"orthogonal,omitempty" yaml:"orthogonal,omitempty"`
}

// Directions reports whether the canaries are canary clients with fixed update directions.
func (c *Config) Directions() bool { return c != nil && c.Kind == Direction }

// Gradients reports whether the canaries are gradient canaries (fixed gradient directions in
// one client's local steps).
func (c *Config) Gradients() bool { return c != nil && c.Kind == Gradients }

// HasDirections reports whether the canaries have public directions (direction or gradient
// canaries).
func (c *Config) HasDirections() bool { return c.Directions() || c.Gradients() }

// StatNames names the observations every checkpoint records per canary.
func (c *Config) StatNames() []string {
	switch {
	case c == nil || c.Count == 0:
		return nil
	case c.Directions():
		return []string{StatCosFinal, StatCosMax, StatLLRAll}
	case c.Gradients():
		return []string{StatCosFinal}
	}
	return []string{StatLoss, StatMargin, StatLossAlt, StatMarginAlt}
}

// Check returns the problems of the canaries of a training of algorithm alg with noise
// mechanism mech ("" is Gaussian) for m clients of at least n samples each; every error names
// its field.
func (c *Config) Check(alg algo.Algorithm, mech algo.Mechanism, m, n int) []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, a...)))
	}
	if c.Count < 1 || c.Count > MaxCount {
		bad("canaries.count", "need 1 to %d, got %d", MaxCount, c.Count)
	}
	switch c.Kind {
	case Direction:
		if alg != algo.DPFedAvg {
			bad("canaries.kind", "direction canaries are canary clients of dp-fedavg (its sampling rate and clip norm are every client's); %s takes dirac or relabel canary records", alg)
		}
		if c.Pixels != 0 {
			bad("canaries.pixels", "only dirac canaries take pixels")
		}
		if mech.OrGaussian() != algo.Gaussian {
			bad("canaries.kind", "the direction canaries' likelihood ratio is Gaussian; mechanism %s has none", mech.OrGaussian())
		}
	case Gradients:
		if alg != algo.FedAvg && alg != algo.FedProx && alg != algo.DPSGD {
			bad("canaries.kind", "gradient canaries join a client's local steps (fedavg, fedprox, dpsgd); %s takes direction canaries", alg)
		}
		if !(c.Norm > 0) || math.IsInf(c.Norm, 0) {
			bad("canaries.norm", "gradient canaries need a finite norm > 0, got %g", c.Norm)
		}
		if c.Client < 0 || (m > 0 && c.Client >= m) {
			bad("canaries.client", "%d is not a client index in [0, %d)", c.Client, m)
		}
		if c.Pixels != 0 {
			bad("canaries.pixels", "only dirac canaries take pixels")
		}
	case Dirac, Relabel:
		if c.Orthogonal {
			bad("canaries.orthogonal", "only direction and gradient canaries have directions to orthonormalize")
		}
		if c.Kind == Relabel && c.Pixels != 0 {
			bad("canaries.pixels", "only dirac canaries take pixels")
		}
		if c.Pixels < 0 {
			bad("canaries.pixels", "need >= 0, got %d", c.Pixels)
		}
		// Each record takes one sample slot; one slot belongs to the target.
		if m > 0 && n > 0 && c.Count > m*n-1 {
			bad("canaries.count", "%d canary records need as many sample slots; the clients have about %d", c.Count, m*n-1)
		}
	default:
		bad("canaries.kind", "%q is not direction, gradient, dirac or relabel", c.Kind)
	}
	if c.Kind != Gradients && (c.Norm != 0 || c.Client != 0) {
		bad("canaries.norm", "only gradient canaries take norm and client")
	}
	return errs
}

// MaxCount bounds k: every replica keeps k values per canary statistic and the engine k
// directions of d parameters.
const MaxCount = 1 << 20
