package train

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/internal/philox"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// Pretrain is the audit's choice of the initial parameters w_0, after Annamalai and De
// Cristofaro ("Nearly tight black-box auditing of differentially private machine learning",
// NeurIPS 2024), who reach far tighter final-model audits by starting from worst-case initial
// parameters: a model already trained on the data the worlds share. Its gradients on that
// data are then small, so what the worlds differ in (the canary's gradient, at the clip)
// dominates every step instead of being drowned by the rest of the training. w_0 is public
// (both worlds of every pair start from it), so any choice keeps the audit valid.
//
// Before the audit's pairs, one model is trained from the seeded w_0 without privacy (FedAvg:
// no clipping, no noise, full batches, every client in every round) for Rounds rounds on the
// data both worlds hold: world C's clients without the target sample (client-level adjacency:
// without the target client). Its parameters are every pair's w_0.
type Pretrain struct {
	// Rounds of FedAvg to pretrain for (>= 1).
	Rounds int `json:"rounds" yaml:"rounds"`
	// LearningRate and LocalSteps of the pretraining; 0 takes train.learning_rate and
	// train.local_steps.
	LearningRate float64 `json:"learning_rate,omitempty" yaml:"learning_rate,omitempty"`
	LocalSteps   int     `json:"local_steps,omitempty" yaml:"local_steps,omitempty"`
}

// check returns the problems of the pretraining settings; trainLR is train.learning_rate, the
// pretraining's when its own is 0.
func (p *Pretrain) check(trainLR float64) []error {
	var errs []error
	if p.LearningRate == 0 && !(trainLR > 0) {
		// A schedule of type table may leave train.learning_rate 0.
		errs = append(errs, fmt.Errorf("config: pretrain.learning_rate: needed when train.learning_rate is not a positive value (%g)", trainLR))
	}
	if p.Rounds < 1 {
		errs = append(errs, fmt.Errorf("config: pretrain.rounds: need at least 1, got %d", p.Rounds))
	}
	if !(p.LearningRate >= 0) || math.IsInf(p.LearningRate, 0) {
		errs = append(errs, fmt.Errorf("config: pretrain.learning_rate: need a finite value >= 0 (0: train.learning_rate), got %g", p.LearningRate))
	}
	if p.LocalSteps < 0 {
		errs = append(errs, fmt.Errorf("config: pretrain.local_steps: need a value >= 0 (0: train.local_steps), got %d", p.LocalSteps))
	}
	return errs
}

// PretrainedInitial returns the w_0 that job's Config.Pretrain makes (see Pretrain), trained
// on be; nil without Pretrain. It depends only on the config and world C's data, so every
// shard and group of an experiment computes the same one.
func PretrainedInitial(ctx context.Context, be compute.Backend, job Job) ([]float32, error) {
	p := job.Config.Pretrain
	if p == nil {
		return nil, nil
	}
	if errs := p.check(job.Config.LearningRate); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	tc := job.Config
	cfg := Config{
		Algorithm: algo.FedAvg, Model: tc.Model, Rounds: p.Rounds,
		LocalSteps: cmp.Or(p.LocalSteps, tc.LocalSteps), LearningRate: cmp.Or(p.LearningRate, tc.LearningRate),
		Schedule: "constant", Batching: algo.Full, Seed: tc.Seed, Checkpoints: []int{p.Rounds},
		RecordParams: true, Threads: tc.Threads, EvalBatch: tc.EvalBatch,
	}
	shared := SharedClients(job)
	if len(shared) == 0 {
		return nil, errors.New("train: pretrain: the worlds share no data to pretrain on")
	}
	rec := &lastParams{}
	pj := Job{Config: cfg, WorldC: shared, WorldCPrime: shared, Target: TargetInfo{}, Pairs: PairRange{First: 0, Count: 1}, Recorder: rec}
	if err := TrainOn(ctx, be, pj); err != nil {
		return nil, fmt.Errorf("train: pretrain: %w", err)
	}
	switch {
	case rec.params == nil:
		return nil, errors.New("train: pretrain: no parameters recorded")
	case rec.diverged:
		return nil, fmt.Errorf("train: pretrain: diverged within %d rounds: lower pretrain.learning_rate (%g)", p.Rounds, cfg.LearningRate)
	}
	return rec.params, nil
}

// setPretrainedInitial sets job.Initial to the pretrained w_0 when the config asks for one and
// none is given yet, and reports whether it pretrained.
func setPretrainedInitial(ctx context.Context, be compute.Backend, job *Job) (bool, error) {
	if job.Initial != nil || job.Config.Pretrain == nil {
		return false, nil
	}
	// A job the engine would refuse is refused before the pretraining, not after it.
	if _, err := checkJob(*job); err != nil {
		return false, err
	}
	w0, err := PretrainedInitial(ctx, be, *job)
	if err != nil {
		return false, err
	}
	job.Initial = w0
	return true, nil
}

// seededInitial is the model's initialization drawn from the master seed: every pair's w_0
// without pretraining.
func seededInitial(mdl model.Model, seed uint64) []float32 {
	w0 := make([]float32, mdl.NumParams())
	mdl.Init(w0, philox.SplitMix64(seed^0x696e6974))
	return w0
}

// InitialParams is the w_0 every pair of job starts from: the pretrained one (Config.Pretrain,
// trained on the CPU backend) or the seeded initialization. It lets what is built before the
// training (a canary crafted against w_0) see the model the training starts from; a GPU
// training pretrains on the device, within float rounding of this one.
func InitialParams(ctx context.Context, job Job) ([]float32, error) {
	if job.Config.Pretrain != nil {
		be := cpu.New(job.Config.Threads)
		defer be.Close()
		return PretrainedInitial(ctx, be, job)
	}
	if len(job.WorldC) == 0 {
		return nil, errors.New("train: initial parameters: no clients")
	}
	c := job.WorldC[0]
	mdl, err := model.New(job.Config.Model, c.Shape, c.Dim(), c.Classes)
	if err != nil {
		return nil, fmt.Errorf("train: initial parameters: %w", err)
	}
	return seededInitial(mdl, job.Config.Seed), nil
}

// SharedClients is the data both worlds hold, what the pretraining trains on and what a canary
// is crafted against: world C's clients without the target sample, or without the target
// client under client-level adjacency; a client left empty is dropped. When the target client
// holds one sample more in C' than in C (adjacency kind add: C' inserts the sample), all of C
// is shared.
func SharedClients(job Job) []*datasets.Dataset {
	var out []*datasets.Dataset
	t := job.Target
	for i, c := range job.WorldC {
		added := !t.WholeClient && i < len(job.WorldCPrime) && job.WorldCPrime[i].Len() == c.Len()+1
		if i != t.Client || added {
			out = append(out, c)
			continue
		}
		if t.WholeClient || t.Absent || c.Len() <= 1 {
			continue
		}
		idx := make([]int, 0, c.Len()-1)
		for j := 0; j < c.Len(); j++ {
			if j != t.Index {
				idx = append(idx, j)
			}
		}
		out = append(out, c.Subset(c.Name, idx))
	}
	return out
}

// lastParams keeps the parameters of world C's replica of the last checkpoint it receives.
type lastParams struct {
	params   []float32
	diverged bool
}

func (l *lastParams) Checkpoint(_ context.Context, cp *checkpoint.Checkpoint) error {
	for _, r := range cp.Replicas {
		if r.World == 0 {
			l.params, l.diverged = append([]float32(nil), r.Params...), r.Diverged
		}
	}
	return nil
}
