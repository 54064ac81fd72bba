package claims

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
	"github.com/fedaudit/fedaudit/train/privacy"
)

// Deployment is what the accountant of a system needs to state the claim for one client.
type Deployment struct {
	// Train is the training configuration (algorithm, sampling, noise, clipping, privacy groups).
	Train train.Config
	// Clients is the number of clients m; Target the client whose claim is computed.
	Clients, Target int
	// Adjacency is the experiment's adjacency kind: the accountants bound "remove-client".
	Adjacency string
	// ClaimSamplingRate, when positive, replaces the sampling rate the accountant assumes (the
	// deliberate mis-calibration of audit.claim_sampling_rate).
	ClaimSamplingRate float64
	// Dim and Classes describe one sample, for the model's parameter count.
	Dim, Classes int
}

// For is the claim deployment d makes for its target client at delta, computed by the
// accountant of its system, and a line saying how; a zero claim and "" when the system has no
// accountant here (Noisy-FedAvg, FedProx and DP-SGD are judged against docs/theory.md's
// bounds instead). The claim is per client: for idp-fedavg and adaptive-fedavg the target
// client's privacy group decides it, so auditing every group takes one experiment per group,
// each with its target (adjacency.client) in that group.
//
// The accountants bound add/remove-one-client adjacency (Poisson sampling of the client in or
// out of the sum), so a claim is computed only for remove-client; other adjacencies need an
// explicit audit.claim_epsilon. audit.claim_sampling_rate, when set, is the deliberate
// mis-calibration of a deployment whose accountant assumes another sampling rate than the one
// it runs.
func For(ctx context.Context, d Deployment, delta float64) (audit.Claim, string, error) {
	tc := d.Train
	if !tc.IsClientDP() {
		return audit.Claim{}, "", nil
	}
	if d.Adjacency != "remove-client" {
		return audit.Claim{}, "", fmt.Errorf("adjacency.kind: the %s accountant bounds add/remove-one-client adjacency; use remove-client or state audit.claim_epsilon", tc.Algorithm)
	}
	plan, err := planOf(ctx, tc, d.Clients)
	if err != nil {
		return audit.Claim{}, "", err
	}
	n := d.Target
	schedule := plan.Schedule(n)
	q := schedule[0].Q
	if cq := d.ClaimSamplingRate; cq > 0 {
		for t := range schedule {
			schedule[t].Q = cq
		}
		q = cq
	}
	group := ""
	if tc.Privacy != nil {
		g := plan.Group[n]
		group = fmt.Sprintf(", group %d (budget %g)", g, tc.Privacy.Groups[g].Epsilon)
	}
	pc := privacy.PlanClaim(delta)
	switch mech := tc.Mechanism; mech {
	case "", algo.Gaussian:
		g, err := accounting.ScheduleEpsilon(schedule, pc)
		if err != nil {
			return audit.Claim{}, "", fmt.Errorf("claim: %w", err)
		}
		return audit.Claim{Epsilon: g.Epsilon, Delta: delta},
			fmt.Sprintf("accountant: %s, sampled Gaussian RDP (q = %g, z = %.4g, T = %d, Balle conversion)%s", tc.Algorithm, q, schedule[0].Z, len(schedule), group), nil
	case algo.Laplace:
		// Product Laplace noise of scale b per coordinate; an update clipped to L2 norm c has
		// L1 norm at most sqrt(d) c, and the Laplace divergence is superadditive in the shift,
		// so each round is Laplace RDP at b / (sqrt(d) c). Subsampling is ignored (it can only
		// lower the divergence), so the claim is valid but loose.
		dim, err := model.ParamCount(tc.Model, d.Dim, d.Classes)
		if err != nil {
			return audit.Claim{}, "", err
		}
		acc, err := accounting.NewAccountant(accounting.DefaultOrders())
		if err != nil {
			return audit.Claim{}, "", err
		}
		for t := range schedule {
			b := plan.Std[t] / math.Sqrt2 / (math.Sqrt(float64(dim)) * plan.Clip[t][n])
			curve, err := accounting.LaplaceRDPCurve(b, accounting.DefaultOrders())
			if err != nil {
				return audit.Claim{}, "", fmt.Errorf("claim: %w", err)
			}
			if err := acc.Add(curve, 1); err != nil {
				return audit.Claim{}, "", err
			}
		}
		eps, _, err := acc.Epsilon(delta, accounting.Balle)
		if err != nil {
			return audit.Claim{}, "", fmt.Errorf("claim: %w", err)
		}
		return audit.Claim{Epsilon: eps, Delta: delta},
			fmt.Sprintf("accountant: %s, Laplace RDP per round (L1 sensitivity sqrt(d) c, no amplification by sampling)%s", tc.Algorithm, group), nil
	case algo.Staircase:
		return staircaseClaim(d, plan, schedule, n, delta, group)
	}
	return audit.Claim{}, "", fmt.Errorf("train.mechanism: no accountant for %s noise in %s; state audit.claim_epsilon", tc.Mechanism, tc.Algorithm)
}

// staircaseClaim accounts product Staircase noise: every coordinate of the server's sum gets
// an independent staircase draw of parameters (epsilon, Delta, gamma), where Delta is the
// design sensitivity the trainer scales to the configured standard deviation. Removing a client
// shifts each coordinate by at most its clip norm c (the L-infinity norm is below the L2 norm),
// and for shifts up to Delta the full shift Delta is the worst case of the one-dimensional
// Renyi divergence (accounting verifies this), so a round costs at most d times the
// one-dimensional staircase RDP (accounting.StaircaseVectorRDP) whenever c <= Delta. With
// c > Delta the divergence at a larger shift is not covered, and no claim is made.
// Subsampling is ignored (valid, loose).
func staircaseClaim(dep Deployment, plan *privacy.Plan, schedule []accounting.Round, n int, delta float64, group string) (audit.Claim, string, error) {
	tc := &dep.Train
	d, err := model.ParamCount(tc.Model, dep.Dim, dep.Classes)
	if err != nil {
		return audit.Claim{}, "", err
	}
	eps, gamma := tc.StaircaseEpsilon, tc.StaircaseGamma
	if gamma == 0 {
		gamma = accounting.OptimalStaircaseGamma(eps)
	}
	orders := accounting.DefaultOrders()
	acc, err := accounting.NewAccountant(orders)
	if err != nil {
		return audit.Claim{}, "", err
	}
	// The trainer scales a unit staircase to the configured standard deviation
	// (train.Config.NoiseOf), so the design sensitivity of round t is std_t / sd(unit).
	unit, err := accounting.NewStaircase(eps, 1, gamma)
	if err != nil {
		return audit.Claim{}, "", fmt.Errorf("train.staircase_epsilon, train.staircase_gamma: %w", err)
	}
	for t := range schedule {
		design := plan.Std[t] / math.Sqrt(unit.Variance())
		if c := plan.Clip[t][n]; c > design {
			return audit.Claim{}, "", fmt.Errorf("train.staircase_epsilon: round %d clips updates to %g, above the staircase's design sensitivity %g: no accountant covers that shift; state audit.claim_epsilon", t, c, design)
		}
		curve := make([]float64, len(orders))
		for i, a := range orders {
			if curve[i], err = accounting.StaircaseVectorRDP(eps, gamma, a, d); err != nil {
				return audit.Claim{}, "", fmt.Errorf("claim: %w", err)
			}
		}
		if err := acc.Add(curve, 1); err != nil {
			return audit.Claim{}, "", err
		}
	}
	e, _, err := acc.Epsilon(delta, accounting.Balle)
	if err != nil {
		return audit.Claim{}, "", fmt.Errorf("claim: %w", err)
	}
	return audit.Claim{Epsilon: e, Delta: delta},
		fmt.Sprintf("accountant: %s, Staircase RDP per round (d = %d coordinates, shift <= clip <= Delta, no amplification by sampling)%s", tc.Algorithm, d, group), nil
}

// LastIterate is the last-iterate heuristic of Steinke et al. (ICLR 2025) for deployment d's
// client (d.Target, or any other client whose parameters an experiment's canaries share: the
// one-run direction canaries are client 0's): the epsilon at delta of the final model w_T
// alone if every loss were linear, at each T of rounds (in that order), or nil where the
// heuristic does not describe the system (no accountant, non-Gaussian noise, an adjacency
// other than remove-client). It is the counterpart of the accountant's claim for a
// final-model observer: a heuristic, not a bound, shown beside final-model rows as what their
// attacks can be expected to reach.
//
// It is about the deployment as it runs, so the sampling rate is the one trained, not
// audit.claim_sampling_rate's. Under linear losses a round moves w along the client's
// direction by server_lr clip_t / divisor_t when the client is sampled, with noise of std
// server_lr std_t / divisor_t there (privacy.Plan); the common server_lr cancels.
func LastIterate(ctx context.Context, d Deployment, delta float64, rounds []int) ([]float64, error) {
	tc := d.Train
	if !tc.IsClientDP() || d.Adjacency != "remove-client" || (tc.Mechanism != "" && tc.Mechanism != algo.Gaussian) {
		return nil, nil
	}
	plan, err := planOf(ctx, tc, d.Clients)
	if err != nil {
		return nil, err
	}
	n := d.Target
	lr := make([]accounting.LastIterateRound, len(plan.Std))
	for t := range lr {
		lr[t] = accounting.LastIterateRound{Q: plan.Q[t][n], Shift: plan.Clip[t][n] / plan.Divisor[t], Std: plan.Std[t] / plan.Divisor[t]}
	}
	gs, err := accounting.LastIterateRoundsEpsilons(lr, rounds, delta)
	if err != nil {
		return nil, fmt.Errorf("last-iterate heuristic: %w", err)
	}
	out := make([]float64, len(gs))
	for i, g := range gs {
		out[i] = g.Epsilon
	}
	return out, nil
}

// lastPlan is the privacy plan of the last deployment asked for: an analysis asks For and
// LastIterate (for one or two clients) of the same deployment, and an adaptive plan takes
// seconds to compute. Plans are read, never written.
var lastPlan struct {
	sync.Mutex
	key  string
	plan *privacy.Plan
}

// planOf is tc.Plan(ctx, m), computed once for consecutive calls with the same deployment.
func planOf(ctx context.Context, tc train.Config, m int) (*privacy.Plan, error) {
	raw, err := json.Marshal(tc)
	if err != nil {
		return nil, fmt.Errorf("privacy plan: %w", err)
	}
	key := fmt.Sprintf("%d %s", m, raw)
	lastPlan.Lock()
	defer lastPlan.Unlock()
	if lastPlan.plan != nil && lastPlan.key == key {
		return lastPlan.plan, nil
	}
	plan, err := tc.Plan(ctx, m)
	if err != nil {
		return nil, err
	}
	lastPlan.key, lastPlan.plan = key, plan
	return plan, nil
}
