package attacks

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/attacks/inversion"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

// invgradAttack reconstructs the target client's sample by optimization, in the style of
// Inverting Gradients (Geiping et al. 2020): it looks for the x in the box [0, 1]^d whose
// simulated local training from w_{T-1} produces an update pointing the way the observed update
// u = upload - w_{T-1} points. The client is modelled as holding one sample (x, y) and taking K
// full-batch steps w_{k+1} = w_k - eta_k (clip(grad loss(w_k; x, y)) + alpha (w_k - w_0)) (alpha
// is FedProx's, 0 otherwise); the noise is unknown and ignored. The objective is
//
//	1 - cos(w_K - w_0, u) + lambda_TV TV(x)
//
// with TV the anisotropic total variation when Env.Shape describes an image and no prior for flat
// inputs. Its gradient in x runs through the K unrolled steps: each step's adjoint needs the
// Hessian-vector products H_ww r and H_xw r of the loss, which hostmodel.Work computes exactly by
// reverse mode over a forward-mode (tangent) pass of the MLP (package inversion holds the
// problem and its optimizer, inversion.Reconstruct). The label is the iDLG rule of the
// label attack (the argmax of its estimated label histogram). Signed Adam with step decay
// minimizes the objective from several seeded random starts, and the start of least objective
// wins: the ground truth is never consulted before the reconstruction is fixed.
//
// Its score is ||x^ - epsilon'|| - ||x^ - epsilon|| (or -||x^ - epsilon|| without epsilon'), and
// its metrics are those of the analytic inversion attack.
type invgradAttack struct {
	cfg inversion.Config
}

// invgradSalt separates the restart stream from other users of Env.Seed.
const invgradSalt = 0x696e7667726164

func (invgradAttack) Info() Info {
	return Info{Name: "invgrad", Threat: runs.ThreatUploads,
		Needs:   Needs{Upload: true, Target: true, Model: true, Classes: true, LastDense: true},
		Metrics: inversionMetrics,
		Summary: "Inverting-Gradients reconstruction: cosine matching of the update through K unrolled local steps, TV prior, box [0,1], signed Adam, restarts; score = ||x^-epsilon'|| - ||x^-epsilon||"}
}

func (a invgradAttack) Observe(env *Env, obs *Observation) (Observed, error) {
	x, _, err := a.reconstruct(env, obs)
	if err != nil {
		return Observed{}, err
	}
	nan := math.NaN()
	if x == nil {
		return Observed{Score: nan, Metrics: nanMetrics()}, nil
	}
	score := -math.Sqrt(sqDist(x, to64(env.Target.Features)))
	if env.TargetPrime.Present() {
		score += math.Sqrt(sqDist(x, to64(env.TargetPrime.Features)))
	}
	metrics := nanMetrics()
	truth := env.Target
	if obs.World == runs.WorldCPrime {
		truth = env.TargetPrime
	}
	if truth.Present() {
		metrics = inversion.Metrics(x, to64(truth.Features), inversion.ImageShape(env.Shape, env.Dim))
	}
	return Observed{Score: score, Metrics: metrics, Reconstruction: x}, nil
}

// pairCap implements pairCapped: Options.InvgradPairs, defaulting to DefaultInvgradPairsCNN
// pairs for a CNN (a LeNet-5 reconstruction takes seconds) and every pair for the host MLPs.
func (invgradAttack) pairCap(env *Env, opts Options) int {
	switch {
	case opts.InvgradPairs < 0:
		return 0
	case opts.InvgradPairs > 0:
		return opts.InvgradPairs
	case env.model != nil && env.model.IsCNN():
		return DefaultInvgradPairsCNN
	}
	return 0
}

// reconstruct returns the reconstruction of the best restart and its objective, or a nil x when
// the update is degenerate (zero or non-finite) or every restart diverged. It builds the problem
// from the update, w_{T-1}, the training config and the input shape only: Env.Target and
// Env.TargetPrime do not reach it.
func (a invgradAttack) reconstruct(env *Env, obs *Observation) ([]float64, float64, error) {
	u, err := update(obs)
	if err != nil {
		return nil, 0, err
	}
	if err := checkParamLen(env, u); err != nil {
		return nil, 0, err
	}
	lo, hi := env.model.LastBias()
	// The label attack's histogram; for a one-sample client it is iDLG's sign rule.
	counts := estimateLabelCounts(env, obs, u[lo:hi])
	y := 0
	for c, n := range counts {
		if n > counts[y] {
			y = c
		}
	}
	etas, err := localRates(&env.Config, int(obs.Round)-1)
	if err != nil {
		return nil, 0, err
	}
	cfg := a.cfg
	if cfg.Iterations == 0 {
		cfg.Iterations = env.invgrad.Iterations
	}
	var alpha float64
	if env.Config.Algorithm == algo.FedProx {
		alpha = env.Config.ProxAlpha
	}
	rng := rand.New(rand.NewPCG(env.Seed^invgradSalt, uint64(obs.RunID)*0x9e3779b97f4a7c15^uint64(obs.Round)))
	p := inversion.Problem{Model: env.model, W0: to64(obs.Prev.Params), U: u, Label: y, Etas: etas,
		Clip: env.Config.ClipNorm, Alpha: alpha, Image: inversion.ImageShape(env.Shape, env.Dim)}
	return inversion.Reconstruct(env.context(), p, cfg, rng)
}

// localRates returns eta_{t,k} for the K local steps of round t.
func localRates(c *train.Config, t int) ([]float64, error) {
	K := max(c.LocalSteps, 1)
	if c.Schedule == "table" && (t < 0 || t >= len(c.ScheduleTable) || len(c.ScheduleTable[t]) < K) {
		return nil, fmt.Errorf("learning-rate table has no row of %d steps for round %d", K, t)
	}
	etas := make([]float64, K)
	for k := range etas {
		etas[k] = c.LearningRateAt(t, k)
	}
	return etas, nil
}
