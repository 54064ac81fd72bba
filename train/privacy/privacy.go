// Package privacy holds the privacy plans of train's DP-FedAvg family (dp-fedavg, idp-fedavg,
// adaptive-fedavg): the per-client budgets a configuration gives (Config, Group), their
// checks, and the Plan computed from them, what every client's sampling rate, clip norm and
// the server's noise are in every round, with noise calibrated to the budgets by the
// accountant (accounting.IDPFedAvg, accounting.SpendAsYouGo). It knows nothing of training:
// train's rounds follow a Plan, and package claims states what a Plan guarantees.
package privacy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
)

// Config gives the per-client budgets of idp-fedavg and adaptive-fedavg.
type Config struct {
	// Delta is the delta of every budget.
	Delta float64 `json:"delta" yaml:"delta"`
	// Groups partition the clients in index order: the first Groups[0].Clients clients form
	// group 0, and so on; the counts must add up to the number of clients.
	Groups []Group `json:"groups" yaml:"groups"`
	// Bookkeeping is adaptive-fedavg's "composed" (default: the remaining budget judged on the
	// composed RDP curve, clients end at their budgets) or "paper" (Alg. 1 line 8 as printed).
	Bookkeeping string `json:"bookkeeping,omitempty" yaml:"bookkeeping,omitempty"`
}

// Group is one privacy group: its size, its budget epsilon and, for adaptive-fedavg, its
// saving-phase sampling rate q_n and transition round T_n (1-based: the first spending round).
type Group struct {
	Clients    int     `json:"clients" yaml:"clients"`
	Epsilon    float64 `json:"epsilon" yaml:"epsilon"`
	SavingRate float64 `json:"saving_rate,omitempty" yaml:"saving_rate,omitempty"`
	Transition int     `json:"transition,omitempty" yaml:"transition,omitempty"`
}

// PlanClaim is how the plans calibrate noise to budgets and how claims are computed: the
// default Rényi orders and Balle et al.'s conversion (as Opacus' get_privacy_spent does).
func PlanClaim(delta float64) accounting.Claim {
	return accounting.Claim{Delta: delta, Conversion: accounting.Balle}
}

// Plan is what the DP-FedAvg family does in every round, indexed [round][client] (rounds
// 0-based).
type Plan struct {
	// Q is each client's Poisson sampling rate.
	Q [][]float64
	// Clip is each client's update clip norm.
	Clip [][]float64
	// Std is the standard deviation of the server's noise on the sum.
	Std []float64
	// Divisor is q^t m, the expected number of sampled clients the sum is divided by.
	Divisor []float64
	// Group is each client's privacy group (all 0 for dp-fedavg).
	Group []int
}

// Schedule is client n's rounds for the accountant: sampling rate and noise multiplier
// (server noise over the client's clip norm).
// Clone returns a copy of p that shares no memory with it.
func (p *Plan) Clone() *Plan {
	c := &Plan{Std: slices.Clone(p.Std), Divisor: slices.Clone(p.Divisor), Group: slices.Clone(p.Group),
		Q: make([][]float64, len(p.Q)), Clip: make([][]float64, len(p.Clip))}
	for t := range p.Q {
		c.Q[t] = slices.Clone(p.Q[t])
	}
	for t := range p.Clip {
		c.Clip[t] = slices.Clone(p.Clip[t])
	}
	return c
}

func (p *Plan) Schedule(n int) []accounting.Round {
	out := make([]accounting.Round, len(p.Std))
	for t := range out {
		out[t] = accounting.Round{Q: p.Q[t][n], Z: p.Std[t] / p.Clip[t][n]}
	}
	return out
}

// Check returns the problems of c for algorithm alg (idp-fedavg or adaptive-fedavg) with
// sampling rate q, the given number of rounds and m clients; every error names its field.
func (c *Config) Check(alg algo.Algorithm, q float64, rounds, m int) []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, a...)))
	}
	if !(c.Delta > 0 && c.Delta < 1) {
		bad("privacy.delta", "need a value in (0, 1), got %g", c.Delta)
	}
	switch c.Bookkeeping {
	case "", "composed", "paper":
	default:
		bad("privacy.bookkeeping", "%q is not composed or paper", c.Bookkeeping)
	}
	total := 0
	for g, grp := range c.Groups {
		total += grp.Clients
		if grp.Clients < 1 {
			bad(fmt.Sprintf("privacy.groups[%d].clients", g), "need at least 1, got %d", grp.Clients)
		}
		if !(grp.Epsilon > 0) || math.IsInf(grp.Epsilon, 0) {
			bad(fmt.Sprintf("privacy.groups[%d].epsilon", g), "need a finite budget > 0, got %g", grp.Epsilon)
		}
		if alg == algo.AdaptiveFedAvg {
			if !(grp.SavingRate > 0 && grp.SavingRate <= q) {
				bad(fmt.Sprintf("privacy.groups[%d].saving_rate", g), "need q_n in (0, sampling_rate = %g], got %g", q, grp.SavingRate)
			}
			if grp.Transition < 1 || grp.Transition > rounds {
				bad(fmt.Sprintf("privacy.groups[%d].transition", g), "need a round in [1, %d], got %d", rounds, grp.Transition)
			}
		} else if grp.SavingRate != 0 || grp.Transition != 0 {
			bad(fmt.Sprintf("privacy.groups[%d]", g), "saving_rate and transition are adaptive-fedavg's")
		}
	}
	if total != m {
		bad("privacy.groups", "the groups hold %d clients, the data has %d", total, m)
	}
	return errs
}

// Params are the fields of a training configuration a plan is computed from.
type Params struct {
	Algorithm algo.Algorithm
	// Clients is m, Rounds T.
	Clients, Rounds int
	// SamplingRate is q, UpdateClip c and NoiseMultiplier dp-fedavg's z.
	SamplingRate, UpdateClip, NoiseMultiplier float64
	// Privacy holds the budgets of idp-fedavg and adaptive-fedavg (nil for dp-fedavg).
	Privacy *Config
}

// NewPlan computes the privacy plan of checked parameters; idp-fedavg and adaptive-fedavg
// calibrate their noise to the budgets here (accounting.IDPFedAvg, accounting.SpendAsYouGo).
func NewPlan(ctx context.Context, pp Params) (*Plan, error) {
	T, q, clip, m := pp.Rounds, pp.SamplingRate, pp.UpdateClip, pp.Clients
	p := &Plan{Q: make([][]float64, T), Clip: make([][]float64, T), Std: make([]float64, T),
		Divisor: make([]float64, T), Group: make([]int, m)}
	for t := range p.Q {
		p.Q[t], p.Clip[t] = make([]float64, m), make([]float64, m)
	}
	var counts []int
	if pp.Privacy != nil {
		n := 0
		for g, grp := range pp.Privacy.Groups {
			for k := 0; k < grp.Clients; k++ {
				p.Group[n] = g
				n++
			}
			counts = append(counts, grp.Clients)
		}
	}
	claim := func() accounting.Claim { return PlanClaim(pp.Privacy.Delta) }
	switch pp.Algorithm {
	case algo.DPFedAvg:
		for t := 0; t < T; t++ {
			for n := 0; n < m; n++ {
				p.Q[t][n], p.Clip[t][n] = q, clip
			}
			p.Std[t], p.Divisor[t] = pp.NoiseMultiplier*clip, q*float64(m)
		}
	case algo.IDPFedAvg:
		budgets := make([]float64, m)
		for n := range budgets {
			budgets[n] = pp.Privacy.Groups[p.Group[n]].Epsilon
		}
		idp, err := accounting.IDPFedAvg(ctx, budgets, q, T, clip, claim())
		if err != nil {
			return nil, fmt.Errorf("config: privacy: %w", err)
		}
		for t := 0; t < T; t++ {
			for n := 0; n < m; n++ {
				p.Q[t][n], p.Clip[t][n] = q, idp.Clips[n]
			}
			p.Std[t], p.Divisor[t] = idp.Sigma*clip, q*float64(m)
		}
	case algo.AdaptiveFedAvg:
		clients := make([]accounting.SpendClient, len(pp.Privacy.Groups))
		for g, grp := range pp.Privacy.Groups {
			clients[g] = accounting.SpendClient{Epsilon: grp.Epsilon, SavingRate: grp.SavingRate, Transition: grp.Transition, Count: counts[g]}
		}
		book := accounting.ComposedBookkeeping
		if pp.Privacy.Bookkeeping == "paper" {
			book = accounting.PaperBookkeeping
		}
		sp, err := accounting.SpendAsYouGo(ctx, clients, q, clip, T, book, claim())
		if err != nil {
			return nil, fmt.Errorf("config: privacy: %w", err)
		}
		for t := 0; t < T; t++ {
			for n := 0; n < m; n++ {
				g := p.Group[n]
				p.Q[t][n], p.Clip[t][n] = sp.ClientQ[g][t], sp.ClientClip[g][t]
			}
			// Alg. 2 line 8: sampled clients add N(0, (c_n^t sigma_n^t)^2 / N) = N(0, c^2
			// (sigma^t)^2 / N) each and the server the same for every unsampled client, so the
			// sum always carries N(0, c^2 (sigma^t)^2): drawn here once, at the server.
			p.Std[t], p.Divisor[t] = clip*sp.Sigma[t], sp.Q[t]*float64(m)
		}
	}
	return p, nil
}

// Fields are the training configuration's fields beside Params that the DP-FedAvg family
// constrains.
type Fields struct {
	ServerLR, NoiseStd     float64
	Participants           int
	RecordUpload, Informed bool
}

// Check checks the parameters and fields of a DP-FedAvg family training (the config's field
// names in every error).
func (c Params) Check(f Fields) error {
	m := c.Clients
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", field, fmt.Sprintf(format, a...)))
	}
	if !(c.SamplingRate > 0 && c.SamplingRate <= 1) {
		bad("sampling_rate", "%s samples each client with probability q in (0, 1], got %g", c.Algorithm, c.SamplingRate)
	}
	if !(c.UpdateClip > 0) || math.IsInf(c.UpdateClip, 0) {
		bad("update_clip", "%s clips every client's update: need a finite c > 0, got %g", c.Algorithm, c.UpdateClip)
	}
	if !(f.ServerLR >= 0) || math.IsInf(f.ServerLR, 0) {
		bad("server_lr", "need a finite value >= 0 (0: 1), got %g", f.ServerLR)
	}
	if f.NoiseStd != 0 {
		bad("noise_std", "%s adds noise at the server: set noise_multiplier (dp-fedavg) or privacy budgets, not noise_std", c.Algorithm)
	}
	if f.Participants != 0 {
		bad("participants", "%s samples clients with probability sampling_rate; participants must be 0", c.Algorithm)
	}
	if f.RecordUpload {
		bad("record_upload", "%s uploads clipped updates without noise (the noise is the server's): nothing private to record", c.Algorithm)
	}
	if c.Algorithm == algo.DPFedAvg {
		if !(c.NoiseMultiplier >= 0) || math.IsInf(c.NoiseMultiplier, 0) {
			bad("noise_multiplier", "need a finite z >= 0, got %g", c.NoiseMultiplier)
		}
		if f.Informed && !(c.NoiseMultiplier > 0) {
			bad("informed", "the likelihood ratio needs noise_multiplier > 0")
		}
		if c.Privacy != nil {
			bad("privacy", "dp-fedavg has one noise multiplier for everyone; per-client budgets are idp-fedavg or adaptive-fedavg")
		}
		return errors.Join(errs...)
	}
	if c.NoiseMultiplier != 0 {
		bad("noise_multiplier", "%s calibrates its noise to the privacy budgets; leave it 0", c.Algorithm)
	}
	if c.Privacy == nil || len(c.Privacy.Groups) == 0 {
		bad("privacy", "%s needs privacy.groups with budgets", c.Algorithm)
		return errors.Join(errs...)
	}
	errs = append(errs, c.Privacy.Check(c.Algorithm, c.SamplingRate, c.Rounds, m)...)
	return errors.Join(errs...)
}
