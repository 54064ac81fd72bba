package train

import (
	"math"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/accounting"
	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// The informed adversary under Poisson minibatches, against the mixture's likelihood ratio
// computed on the host from what a run releases. One client (so the model is its upload plus
// sigma Z), the quadratic model (a step is w - eta (a w - mean of the minibatch)), K local
// steps: for every pair the test redraws the minibatches from the pair's seed, replays the
// 2^K patterns of steps holding the target in both worlds in float64, and computes
// log sum_S pi_S f(w_1 - w_0 - Phi_S^C) - log sum_S pi_S f(w_1 - w_0 - Phi_S^C') from the
// recorded w_1; the engine's informed_llr_all must agree (float32 training: 1e-3 relative), and
// so must the uploads observer's ratio, the upload being the model with one client.
// An adversary told the draws would compute a different number whenever the draw missed the
// target (it would see no difference), which this also rules out.
func TestPoissonMixtureRatioIsTheObservablesLikelihoodRatio(t *testing.T) {
	for _, K := range []int{1, 2} {
		const (
			n, dim, pairs = 6, 3, 40
			a, eta, sigma = 0.5, 0.3, 0.2
			batch         = 2 // q = 1/3
		)
		tgt := TargetInfo{Client: 0, Index: 1}
		c, cp := synthWorlds(1, n, dim, 2, tgt, 11)
		cfg := Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "quadratic", Curvature: a},
			Rounds: 1, LocalSteps: K, LearningRate: eta, Schedule: "constant", ClipNorm: 1e6, NoiseStd: sigma,
			Batching: algo.Poisson, BatchSize: batch, Seed: 9, Checkpoints: []int{0, 1}, Informed: true, RecordParams: true}
		cps := run(t, cfg, c, cp, tgt, PairRange{0, pairs})
		w0, cp1 := cps[0], cps[1]
		llr := slices.Index(cp1.StatNames, checkpoint.StatLLRAll)
		llrUp := slices.Index(cp1.StatNames, checkpoint.StatLLRUpload)
		q := float64(batch) / n
		// update replays the K steps of world w's data with the pair's draws, the target's
		// inclusion given by pattern S.
		update := func(pair, w int, S int) []float64 {
			data := [2][]float32{c[0].Features, cp[0].Features}[w]
			x := make([]float64, dim)
			for j := range x {
				x[j] = float64(w0.Replicas[2*pair].Params[j])
			}
			start := slices.Clone(x)
			for k := 0; k < K; k++ {
				rng := philox.NewRand(RunSeed(cfg.Seed, pair), 0, 0, philox.DomainPoisson, uint32(k))
				mean := make([]float64, dim)
				rows := 0
				for j := 0; j < n; j++ {
					in := rng.Float() < q
					if j == tgt.Index {
						in = S>>k&1 == 1
					}
					if in {
						rows++
						for d := 0; d < dim; d++ {
							mean[d] += float64(data[j*dim+d])
						}
					}
				}
				if rows == 0 {
					continue
				}
				for d := range x {
					x[d] -= eta * (a*x[d] - mean[d]/float64(rows))
				}
			}
			for d := range x {
				x[d] -= start[d]
			}
			return x
		}
		checked := 0
		for _, r := range cp1.Replicas {
			y := make([]float64, dim)
			for d := range y {
				y[d] = float64(r.Params[d]) - float64(w0.Replicas[2*r.Pair].Params[d])
			}
			var lse [2]float64
			for w := range lse {
				lse[w] = math.Inf(-1)
				for S := 0; S < 1<<K; S++ {
					phi := update(r.Pair, w, S)
					var ss float64
					for d := range y {
						ss += (y[d] - phi[d]) * (y[d] - phi[d])
					}
					in := bits.OnesCount(uint(S))
					lse[w] = accounting.LogAddExp(lse[w], float64(in)*math.Log(q)+float64(K-in)*math.Log1p(-q)-ss/(2*sigma*sigma))
				}
			}
			want, got := lse[0]-lse[1], r.Stats[llr]
			if math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
				t.Errorf("K %d pair %d world %d: informed ratio %.6g, the mixture's on the host %.6g", K, r.Pair, r.World, got, want)
			}
			// With one client the upload is the model: the uploads observer's ratio is the same.
			if up := r.Stats[llrUp]; math.Abs(up-want) > 1e-3*math.Max(1, math.Abs(want)) {
				t.Errorf("K %d pair %d world %d: uploads observer's ratio %.6g, want %.6g", K, r.Pair, r.World, up, want)
			}
			checked++
		}
		if checked != 2*pairs {
			t.Fatalf("K %d: checked %d runs, want %d", K, checked, 2*pairs)
		}
	}
}

// K above MaxPoissonMixtureSteps is refused with the way out named, before any training.
func TestPoissonMixtureRefusesManySteps(t *testing.T) {
	tgt := TargetInfo{Client: 0, Index: 1}
	c, cp := synthWorlds(2, 6, 3, 2, tgt, 11)
	cfg := mlpConfig()
	cfg.Batching, cfg.BatchSize, cfg.LocalSteps = algo.Poisson, 2, MaxPoissonMixtureSteps+1
	err := Train(t.Context(), Job{Config: cfg, WorldC: c, WorldCPrime: cp, Target: tgt, Pairs: PairRange{0, 1}, Recorder: &memRecorder{}})
	if err == nil || !strings.Contains(err.Error(), "poisson") || !strings.Contains(err.Error(), "fixed batching") {
		t.Fatalf("got %v, want the refusal of K = %d", err, cfg.LocalSteps)
	}
}
