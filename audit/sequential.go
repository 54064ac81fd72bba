package audit

import (
	"fmt"
	"math"
)

// A group-sequential audit trains its pairs in equal batches and looks at the evidence after 1,
// 2, 4, ... batches (doubling, the last look at every batch), stopping at the first look whose
// certified bound exceeds the claim. Look j certifies at confidence 1 - (1 - c) n_j / sum n,
// n_j the batches it sees: the error levels add up to 1 - c (Bonferroni over the looks), so
// whatever look the audit stops at, the probability that any look certifies a bound the
// mechanism does not have is at most 1 - c, and a claim that holds is called violated with
// probability at most 1 - c, as with one look at every pair. Spending the error in proportion
// to the pairs keeps most of it for the last look, where a deployment close to its claim is
// decided (at 16 batches it certifies at 1 - 0.52 (1 - c)), while a gross violation is certified
// at the first look even at its strict level (1 - 0.03 (1 - c)).

// SequentialLooks returns the number of batches seen at each look of a group-sequential audit of
// the given number of batches: 1, 2, 4, ..., then batches itself.
func SequentialLooks(batches int) ([]int, error) {
	if batches < 2 {
		return nil, fmt.Errorf("audit: a sequential audit needs at least 2 batches, not %d", batches)
	}
	var looks []int
	for k := 1; k < batches; k *= 2 {
		looks = append(looks, k)
	}
	return append(looks, batches), nil
}

// SequentialConfidences are the confidences of the looks, which see looks[j] batches each, so
// that they hold jointly at confidence: look j at 1 - (1 - confidence) looks[j] / sum(looks).
func SequentialConfidences(confidence float64, looks []int) ([]float64, error) {
	if !(confidence > 0 && confidence < 1) || math.IsNaN(confidence) {
		return nil, fmt.Errorf("audit: confidence %v is not in (0, 1)", confidence)
	}
	total := 0
	for i, k := range looks {
		if k < 1 || i > 0 && k <= looks[i-1] {
			return nil, fmt.Errorf("audit: looks %v are not increasing positive batch counts", looks)
		}
		total += k
	}
	if total == 0 {
		return nil, fmt.Errorf("audit: no looks")
	}
	out := make([]float64, len(looks))
	for i, k := range looks {
		out[i] = 1 - (1-confidence)*float64(k)/float64(total)
	}
	return out, nil
}
