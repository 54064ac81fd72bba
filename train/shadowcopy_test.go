package train

import (
	"context"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// shadowCounting counts the engine's trainings of the informed shadow, by the deferred form's
// flip calls, through the steps it wraps.
type shadowCounting struct {
	localSteps
	shadows, copied int
	e               *engine
}

func (s *shadowCounting) train(ctx context.Context, t, i int, buf compute.Buffer, flip, materialize bool) error {
	if flip {
		s.shadows++
	}
	return s.localSteps.train(ctx, t, i, buf, flip, materialize)
}

func (s *shadowCounting) sameWorlds(t, i int) bool {
	same := s.localSteps.sameWorlds(t, i)
	if same && !s.e.retrainShadow {
		s.copied++
	}
	return same
}

// The informed shadow is copied from the target's training where the round's minibatches were
// the same in both worlds (the deferred form's sameWorlds): every recorded value must keep the
// bits of the runs that train it every round, over rounds that copy and rounds that train
// (both checked), FedProx, partial participation (a non-participating target), a target whose
// whole client differs (never copied) and one local step.
func TestShadowCopiedWhereWorldsAgree(t *testing.T) {
	base := mlpConfig()
	base.Rounds, base.LocalSteps, base.BatchSize, base.Checkpoints = 6, 2, 4, []int{1, 3, 6}
	fedprox := base
	fedprox.Algorithm, fedprox.ProxAlpha = algo.FedProx, 0.4
	partial := base
	partial.Participants = 3
	oneStep := base
	oneStep.LocalSteps = 1
	for _, tc := range []struct {
		name      string
		cfg       Config
		tgt       TargetInfo
		neverCopy bool
	}{
		{"fedavg", base, TargetInfo{Client: 1, Index: 2}, false},
		{"fedprox", fedprox, TargetInfo{Client: 0, Index: 5}, false},
		{"participants-3", partial, TargetInfo{Client: 2, Index: 6}, false},
		{"one-step", oneStep, TargetInfo{Client: 3, Index: 4}, false},
		{"whole-client", base, TargetInfo{Client: 1, WholeClient: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cp := synthWorlds(5, 12, 10, 3, tc.tgt, 4)
			job := Job{Config: tc.cfg, WorldC: c, WorldCPrime: cp, Target: tc.tgt, Pairs: PairRange{First: 2, Count: 3}}
			run := func(retrain bool) ([]*checkpoint.Checkpoint, *shadowCounting) {
				be := cpu.New(2)
				defer be.Close()
				e, err := newEngine(be, job)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := e.steps.(*deferredSteps); !ok {
					t.Fatalf("steps %T, want the deferred form", e.steps)
				}
				sc := &shadowCounting{localSteps: e.steps, e: e}
				e.steps, e.retrainShadow = sc, retrain
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
