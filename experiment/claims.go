package experiment

import (
	"context"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/claims"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

// ClaimFor is the claim the deployment of cfg makes for its target client at delta (see
// claims.For): a zero claim and "" when its system has no accountant.
func ClaimFor(ctx context.Context, cfg *spec.Config, data *spec.Data, delta float64) (audit.Claim, string, error) {
	return claims.For(ctx, claimsDeployment(cfg, data), delta)
}

// claimsDeployment is what the accountants need of the experiment.
func claimsDeployment(cfg *spec.Config, data *spec.Data) claims.Deployment {
	return claims.Deployment{Train: cfg.Train, Clients: cfg.Data.Clients, Target: cfg.Adjacency.Client,
		Adjacency: cfg.Adjacency.Kind, ClaimSamplingRate: cfg.Audit.ClaimSamplingRate,
		Dim: data.Pair.C[0].Dim(), Classes: data.Classes}
}
