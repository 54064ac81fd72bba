package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/train/canary"
)

// TestCraftedUpdateReplaysAlgorithm4: with a crafted update the target client of remove-client
// adjacency sends clip u in every round it is sampled in world C (u the dirac direction of
// parameter 1, clipped to itself) and nothing in C'; the other clients train as in Alg. 4.
// Replayed in float64 without noise; tolerance 1e-5 as in TestDPFedAvgRoundMatchesAlgorithm4.
func TestCraftedUpdateReplaysAlgorithm4(t *testing.T) {
	const m, n, dim, pairs, target = 5, 4, 3, 6, 2
	clients, _ := quadClients(m, n, dim, 2)
	cfg := dpConfig()
	cfg.Rounds, cfg.Checkpoints = 3, []int{1, 2, 3}
	cfg.CraftedUpdate = &canary.Update{Direction: canary.DiracDirection, Coordinate: 1}
	cp := slices.Delete(slices.Clone(clients), target, target+1)
	cps := run(t, cfg, clients, cp, TargetInfo{Client: target, WholeClient: true, Absent: true}, PairRange{0, pairs})
	sampled := replayAlg4(t, cfg, m, pairs, cps, func(w, i int, params []float64) []float64 {
		if i != target {
			return quadUpdate(params, clients[i], 1, cfg.LearningRate, cfg.LocalSteps)
		}
		if w == 1 {
			return nil
		}
		u := make([]float64, dim)
		u[1] = cfg.UpdateClip
		return u
	}, target)
	if !sampled[1] {
		t.Fatal("the fixture never sampled the canary client: pick another seed")
	}
}

// TestCraftedUpdateInformedMu: with q = 1 every round is the Gaussian mechanism whose means
// differ by the crafted update clip u, so the informed adversary's recorded mu^2 is exactly
// T (clip/std)^2 = T/z^2 whatever the other clients do (here 4/1.5^2), and refusals name the
// field: a crafted update needs remove-client adjacency and the DP-FedAvg family.
func TestCraftedUpdateInformedMu(t *testing.T) {
	const m, n, dim, pairs = 3, 3, 2, 4
	clients, _ := quadClients(m, n, dim, 2)
	cfg := dpConfig()
	cfg.Rounds, cfg.Checkpoints = 4, []int{4}
	cfg.SamplingRate, cfg.NoiseMultiplier, cfg.Informed, cfg.RecordParams = 1, 1.5, true, false
	cfg.CraftedUpdate = &canary.Update{Direction: canary.GaussianDirection}
	cp := slices.Clone(clients[1:])
	tgt := TargetInfo{Client: 0, WholeClient: true, Absent: true}
	cps := run(t, cfg, clients, cp, tgt, PairRange{0, pairs})
	want := 4 / (1.5 * 1.5)
	for r, rs := range cps[len(cps)-1].Replicas {
		// float32 sums of four rounds of squared norms: 1e-5 relative.
		if got := rs.Stats[2]; math.Abs(got-want) > 1e-5*want {
			t.Fatalf("replica %d: informed mu^2 %g, want T/z^2 = %g", r, got, want)
		}
	}

	replace := TargetInfo{Client: 0, WholeClient: true}
	if err := Train(context.Background(), Job{Config: cfg, WorldC: clients, WorldCPrime: clients, Target: replace, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}}); err == nil || !strings.Contains(err.Error(), "crafted_update") {
		t.Errorf("a crafted update with replace-client adjacency: %v, want crafted_update named", err)
	}
	fedavg := cfg
	fedavg.Algorithm = "fedavg"
	if err := fedavg.Check(m, n, 2); err == nil || !strings.Contains(err.Error(), "crafted_update") {
		t.Errorf("a crafted update under fedavg: %v, want crafted_update named", err)
	}
}
