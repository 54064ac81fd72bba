package train

import (
	"context"
	"fmt"

	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// Evaluate computes what a training run records at a checkpoint (training loss, test accuracy,
// the target sample's loss and margin in both worlds) for parameter vectors that were trained
// elsewhere, with the engine's own model, data layout and evaluation on the CPU backend: a
// run imported from a snapshot carries exactly the numbers fedaudit's trainer records for the
// same parameters, bit for bit. params holds one vector per replica of job.Pairs, pair
// job.Pairs.First+p's world w at index 2p+w. The statistics of the informed adversary, the
// parameters and the uploads are not part of the result (Informed, RecordParams and
// RecordUpload are ignored), and the evaluation is float32 whatever Precision says;
// job.Recorder and job.Progress are not used.
func Evaluate(ctx context.Context, job Job, round int, params [][]float32) (*checkpoint.Checkpoint, error) {
	job.Config.Informed, job.Config.RecordParams, job.Config.RecordUpload = false, false, false
	// On the CPU, in float32, whatever precision the runs were trained in.
	job.Config.Precision = ""
	if len(params) != 2*job.Pairs.Count {
		return nil, fmt.Errorf("train: evaluate: %d parameter vectors for %d pairs (want two per pair)", len(params), job.Pairs.Count)
	}
	be := cpu.New(job.Config.Threads)
	defer be.Close()
	e, err := newEngine(be, job)
	if err != nil {
		return nil, err
	}
	for r, w := range params {
		if len(w) != e.d {
			return nil, fmt.Errorf("train: evaluate: replica %d has %d parameters, the model %d", r, len(w), e.d)
		}
		be.Upload(e.g, r*e.pitch, w)
	}
	stop := context.AfterFunc(ctx, func() { e.stop.Store(true) })
	defer stop()
	cp := e.checkpoint(round)
	if e.stop.Load() {
		return nil, context.Cause(ctx)
	}
	return cp, nil
}
