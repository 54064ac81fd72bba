package audit

import (
	"fmt"
	"math"
)

// A group-sequential audit trains its pairs in equal batches and looks at the evidence after 1,
// 2, 4, ... batches (doubling, the last look at every batch), stopping at the first look whose
// certified bound exceeds the claim. Each look certifies at confidence 1 - (1 - c) / J for J
// looks (Bonferroni over the looks): whatever look the audit stops at, the probability that any
// look certifies a bound the mechanism does not have is at most 1 - c, so a claim that holds is
// called violated with probability at most 1 - c, as with one look at every pair. Doubling keeps
// J = 1 + log2(batches) small, and with it the price of looking: at 16 batches, 5 looks at
// 1 - (1 - c) / 5 each.

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

// SequentialConfidence is the confidence of each of looks looks so that they hold jointly at
// confidence.
func SequentialConfidence(confidence float64, looks int) (float64, error) {
	if !(confidence > 0 && confidence < 1) || math.IsNaN(confidence) {
		return 0, fmt.Errorf("audit: confidence %v is not in (0, 1)", confidence)
	}
	if looks < 1 {
		return 0, fmt.Errorf("audit: %d looks", looks)
	}
	return 1 - (1-confidence)/float64(looks), nil
}
