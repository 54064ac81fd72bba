package hostmodel

import (
	"fmt"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/model"
)

// Evaluator computes, for parameters of one of train's models, the quantities run files record
// beside the parameters (loss and logit margin on a sample, loss and accuracy on a dataset), in
// float64 and with the definitions train uses. The importer fills run files of models trained
// elsewhere with it, so the loss-based attacks read imported runs as they read ours.
type Evaluator struct{ m *Model }

// NewEvaluator returns an evaluator of the model mc on data of dimension dim with classes.
func NewEvaluator(mc model.Config, dim, classes int) (*Evaluator, error) {
	m, err := newFlat(mc, dim, classes)
	if err != nil {
		return nil, err
	}
	return &Evaluator{m: m}, nil
}

// NumParams is the length of the model's parameter vector.
func (e *Evaluator) NumParams() int { return e.m.NumParams() }

// LossMargin returns the loss and logit margin of sample s at params.
func (e *Evaluator) LossMargin(params []float32, s datasets.Sample) (loss, margin float64, err error) {
	if len(params) != e.m.NumParams() {
		return 0, 0, fmt.Errorf("evaluate: %d parameters, the model has %d", len(params), e.m.NumParams())
	}
	if len(s.Features) != e.m.sizes[0] {
		return 0, 0, fmt.Errorf("evaluate: sample has %d features, the model takes %d", len(s.Features), e.m.sizes[0])
	}
	loss, margin = e.m.LossGrad(to64(params), to64(s.Features), int(s.Label), 0, nil)
	return loss, margin, nil
}

// Dataset returns the mean loss and the accuracy (margin > 0) of params over every sample of
// the datasets together.
func (e *Evaluator) Dataset(params []float32, ds ...*datasets.Dataset) (meanLoss, accuracy float64, err error) {
	if len(params) != e.m.NumParams() {
		return 0, 0, fmt.Errorf("evaluate: %d parameters, the model has %d", len(params), e.m.NumParams())
	}
	w := to64(params)
	n := 0
	for _, d := range ds {
		if d.Dim() != e.m.sizes[0] {
			return 0, 0, fmt.Errorf("evaluate: %s has %d features, the model takes %d", d.Name, d.Dim(), e.m.sizes[0])
		}
		x := make([]float64, d.Dim())
		for i := 0; i < d.Len(); i++ {
			s := d.Sample(i)
			for j, v := range s.Features {
				x[j] = float64(v)
			}
			l, m := e.m.LossGrad(w, x, int(s.Label), 0, nil)
			meanLoss += l
			if m > 0 {
				accuracy++
			}
			n++
		}
	}
	if n > 0 {
		meanLoss /= float64(n)
		accuracy /= float64(n)
	}
	return meanLoss, accuracy, nil
}
