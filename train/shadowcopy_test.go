package train

import (
	"context"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// shadowCounting counts the round's trainings of the informed shadow (the steps' flip calls)
// and its copies (sameWorlds true) through the steps it wraps.
type shadowCounting struct {
	localSteps
	shadows, copied int
}

func (s *shadowCounting) train(ctx context.Context, t, i int, buf compute.Buffer, flip, materialize bool) error {
	if flip {
		s.shadows++
	}
	return s.localSteps.train(ctx, t, i, buf, flip, materialize)
}

func (s *shadowCounting) sameWorlds(t, i int) bool {
	same := s.localSteps.sameWorlds(t, i)
	if same {
		s.copied++
	}
	return same
}

// The informed shadow is copied from the target's training where the round's minibatches were
// the same in both worlds (the steps' sameWorlds): every recorded value must keep the bits of
// the runs that train it every round, over rounds that copy and rounds that train (both
// checked), in the deferred, fused and direct forms, FedProx, partial participation (a
// non-participating target), DP-SGD, one local step; never copied where the worlds always
// differ (a target whose whole client differs, full batches) or where a gradient canary makes
// them differ on the same rows.
func TestShadowCopiedWhereWorldsAgree(t *testing.T) {
	base := mlpConfig()
	base.Rounds, base.LocalSteps, base.BatchSize, base.Checkpoints = 6, 2, 4, []int{1, 3, 6}
	fedprox := base
	fedprox.Algorithm, fedprox.ProxAlpha = algo.FedProx, 0.4
	partial := base
	partial.Participants = 3
	oneStep := base
	oneStep.LocalSteps = 1
	// (K-1) B above the input's 10 features: not the deferred form, the fused one.
	fused := base
	fused.LocalSteps = 4
	dpsgd := base
	dpsgd.Algorithm = algo.DPSGD
	gradCanary := base
	gradCanary.GradientCanary = &canary.Gradient{Norm: 3}
	full := base
	full.Batching = "full"
	for _, tc := range []struct {
		name      string
		cfg       Config
		tgt       TargetInfo
		form      string
		neverCopy bool
	}{
		{"fedavg", base, TargetInfo{Client: 1, Index: 2}, "deferred", false},
		{"fedprox", fedprox, TargetInfo{Client: 0, Index: 5}, "deferred", false},
		{"participants-3", partial, TargetInfo{Client: 2, Index: 6}, "deferred", false},
		{"one-step", oneStep, TargetInfo{Client: 3, Index: 4}, "deferred", false},
		{"whole-client", base, TargetInfo{Client: 1, WholeClient: true}, "deferred", true},
		{"fused", fused, TargetInfo{Client: 1, Index: 2}, "fused", false},
		{"dpsgd-direct", dpsgd, TargetInfo{Client: 0, Index: 6}, "direct", false},
		{"gradient-canary", gradCanary, TargetInfo{Client: 1, Index: 2}, "direct", true},
		{"full-batches", full, TargetInfo{Client: 1, Index: 2}, "direct", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clients := 5
			if tc.cfg.Algorithm == algo.DPSGD {
				clients = 1 // DP-SGD trains one client
			}
			c, cp := synthWorlds(clients, 12, 10, 3, tc.tgt, 4)
			job := Job{Config: tc.cfg, WorldC: c, WorldCPrime: cp, Target: tc.tgt, Pairs: PairRange{First: 2, Count: 3}}
			run := func(retrain bool) ([]*checkpoint.Checkpoint, *shadowCounting) {
				be := cpu.New(2)
				defer be.Close()
				e, err := newEngine(be, job)
				if err != nil {
					t.Fatal(err)
				}
				form := "deferred"
				if w, ok := e.steps.(*wholeSteps); ok {
					form = "direct"
					if _, ok := w.form.(*fusedSteps); ok {
						form = "fused"
					}
				}
				if form != tc.form {
					t.Fatalf("the %s form, want the %s form", form, tc.form)
				}
				steps := e.steps
				if retrain {
					steps = retrainingShadow{steps}
				}
				sc := &shadowCounting{localSteps: steps}
				e.steps = sc
				rec := &memRecorder{}
				if err := e.train(context.Background(), rec, nil); err != nil {
					t.Fatal(err)
				}
				return rec.cps, sc
			}
			want, trained := run(true)
			got, copied := run(false)
			t.Logf("shadow trained in %d of %d rounds, copied in %d", copied.shadows, tc.cfg.Rounds, copied.copied)
			if trained.shadows != tc.cfg.Rounds || copied.shadows+copied.copied != tc.cfg.Rounds {
				t.Fatalf("retraining: %d shadow trainings; copying: %d trained + %d copied; want %d rounds each", trained.shadows, copied.shadows, copied.copied, tc.cfg.Rounds)
			}
			if tc.neverCopy && copied.copied != 0 || !tc.neverCopy && (copied.copied == 0 || copied.shadows == 0) {
				t.Fatalf("%d rounds copied and %d trained: the case must cover both (or, whole-client, never copy)", copied.copied, copied.shadows)
			}
			sameBits(t, "shadow copied", got, want)
		})
	}
}
