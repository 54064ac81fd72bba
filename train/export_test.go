package train

import (
	"context"

	"github.com/fedaudit/fedaudit/compute"
)

// Hooks for the W1 benchmarks (bench_test.go), which live in package train_test because
// their fixture (train/traintest) imports train.

// BenchEngine is an engine built for a benchmark.
type BenchEngine struct {
	e    *engine
	form groupStepper // the step outside the deferred form
}

// NewBenchEngine builds the engine of job on be.
func NewBenchEngine(be compute.Backend, job Job) (*BenchEngine, error) {
	e, err := newEngine(be, job)
	if err != nil {
		return nil, err
	}
	return &BenchEngine{e: e, form: e.chooseSteps(false).(*wholeSteps).form}, nil
}

// BenchStep is one local step (round t, client i, step k, learning rate eta) of every replica
// outside the deferred form: the fused step where the model has one, else the direct one.
func (b *BenchEngine) BenchStep(t, i, k int, eta float32) error {
	e := b.e
	e.eta = eta
	return e.localGrad(b.form, t, i, k, e.l, false, 0, e.P)
}

// BenchClient is client i's K local steps of round t in the engine's own form.
func (b *BenchEngine) BenchClient(ctx context.Context, t, i int) error {
	return b.e.localTrain(ctx, t, i, b.e.l, false, false)
}

// retrainingShadow is a form's local steps that never report the worlds' minibatches the
// same, so the round trains the informed shadow every round instead of copying the target's
// training (the behaviour before that copy; tests and benchmarks compare the two).
type retrainingShadow struct{ localSteps }

func (retrainingShadow) sameWorlds(int, int) bool { return false }

// TrainOnRetrainingShadow is TrainOn (without pretraining) with the informed shadow trained
// every round.
func TrainOnRetrainingShadow(ctx context.Context, be compute.Backend, job Job) error {
	e, err := newEngine(be, job)
	if err != nil {
		return err
	}
	e.steps = retrainingShadow{e.steps}
	return e.train(ctx, job.Recorder, job.Progress)
}
