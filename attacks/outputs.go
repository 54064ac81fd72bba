package attacks

import (
	"slices"

	"github.com/fedaudit/fedaudit/runs"
)

// This file exports the pieces of the membership attacks that an audit of imported per-record
// outputs (losses or logits, no parameters) needs, so that such an audit fits LiRA exactly as
// Score does on run files: same Gaussian fits, same one-sided offline statistic, same choice of
// shadow pairs.

// LogitConfidence is LiRA's logit-scaled confidence log(p / (1 - p)) of a softmax model whose
// cross-entropy loss on the record is loss (p = exp(-loss)), computed without cancellation.
func LogitConfidence(loss float64) float64 { return logitConfidence(loss) }

// FitLiRA fits LiRA on the features of shadow runs, in (world C, the record trained on) and out
// (world C'), and returns the scorer of the other runs: the offline one-sided z-score against
// the Gaussian of out, or with online the log-likelihood ratio of the two Gaussians. Higher
// means world C.
func FitLiRA(online bool, in, out []float64) (func(float64) float64, error) {
	ex := make([]Example, 0, len(in)+len(out))
	for _, v := range in {
		ex = append(ex, Example{World: runs.WorldC, Features: []float64{v}})
	}
	for _, v := range out {
		ex = append(ex, Example{World: runs.WorldCPrime, Features: []float64{v}})
	}
	f, err := liraAttack{online: online}.Fit(nil, ex)
	if err != nil {
		return nil, err
	}
	return func(x float64) float64 { return f([]float64{x}) }, nil
}

// ShadowPairs picks the shadow pairs among pair ids exactly as Score does (every k-th pair in
// order of pair id, at most limit; 0 means the defaults).
func ShadowPairs(ids []int64, k, limit int) (map[int64]bool, error) {
	ids = slices.Clone(ids)
	obs := make([]Observation, len(ids))
	for i, id := range ids {
		obs[i].PairID = id
	}
	return shadowPairs(obs, k, limit)
}
