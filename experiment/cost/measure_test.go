package cost

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/model"
)

// directionConfig is dp-fedavg with every client sampled (q = 1) and k direction canaries: each
// canary is then a Gaussian mechanism of mu 1/z per round, so the observer of every iterate
// faces exactly mu = sqrt(T)/z per canary (bounds.ExactMuOneRun). The config goes through
// its JSON form so that its defaults are filled as a loaded config's are.
func directionConfig(t *testing.T, k int, z float64) *spec.Config {
	t.Helper()
	cfg := &spec.Config{
		Name: "one-run", Seed: 11, Pairs: 1,
		Data: spec.DataConfig{Source: "synthetic", Synthetic: spec.SyntheticConfig{Dim: 40, Classes: 4, Separation: 3, Noise: 1},
			Clients: 10, PerClient: 6},
		Adjacency: spec.AdjacencyConfig{Kind: "remove-client"},
		Train: train.Config{
			Algorithm: algo.DPFedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{48}, Activation: "tanh"},
			Rounds: 4, LocalSteps: 1, LearningRate: 0.1, SamplingRate: 1, NoiseMultiplier: z, UpdateClip: 1,
			Checkpoints: []int{2, 4}, Canaries: &canary.Config{Count: k, Kind: canary.Direction},
		},
		Audit: spec.AuditConfig{Method: spec.MethodOneRun},
	}
	filled, err := spec.FromJSON(cfg.JSON())
	if err != nil {
		t.Fatal(err)
	}
	return filled
}

// TestMeasureOneRun: two trainings per canary count of the direction-canary config, audited at
// T = 2 and 4 as one family: every row has its exact mu (sqrt(T)/z), no bound above it, one
// certified mu per seed, an estimate, and JSON without NaN; a round that is not a checkpoint is
// refused.
func TestMeasureOneRun(t *testing.T) {
	cfg := directionConfig(t, 100, 1)
	res, err := MeasureOneRun(context.Background(), cfg, []int{100, 300}, 2, []int{2, 4}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[1].Canaries != 300 || len(res[0].Rows) != 3*2 {
		t.Fatalf("measurements %+v", res)
	}
	for _, m := range res {
		for _, r := range m.Rows {
			exact := math.Sqrt(float64(r.Round))
			if r.Threat == runs.ThreatAllIterates && (r.TruthKind != "exact" || math.Abs(r.Truth-exact) > 1e-12 || r.Misses != 0) {
				t.Errorf("%d canaries %s T=%d: truth %v %s, %d misses", m.Canaries, r.Attack, r.Round, r.Truth, r.TruthKind, r.Misses)
			}
			if len(r.MuLowers) != 2 || math.IsNaN(r.EstimateMu) || r.MuLower > r.Truth {
				t.Errorf("%d canaries %s T=%d: %+v", m.Canaries, r.Attack, r.Round, r)
			}
		}
	}
	if _, err := json.Marshal(res); err != nil {
		t.Errorf("JSON: %v", err)
	}
	if _, err := MeasureOneRun(context.Background(), cfg, []int{100}, 1, []int{3}, t.TempDir()); err == nil {
		t.Error("round 3, not a checkpoint, was accepted")
	}
}
