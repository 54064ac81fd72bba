package attacks

import (
	"math"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/runs"
)

func TestHistogramMatch(t *testing.T) {
	// truth (2, 1, 0), estimate (1, 1, 1): matched min = 1 + 1 + 0 = 2 of 3.
	for _, tc := range []struct {
		est, truth []int
		want       float64
	}{
		{[]int{1, 1, 1}, []int{2, 1, 0}, 2.0 / 3},
		{[]int{0, 3, 0}, []int{0, 3, 0}, 1},
		{[]int{3, 0, 0}, []int{0, 0, 3}, 0},
	} {
		if got := histogramMatch(tc.est, tc.truth); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("histogramMatch(%v, %v) = %v, want %v", tc.est, tc.truth, got, tc.want)
		}
	}
}

func TestRoundToTotal(t *testing.T) {
	// (1.4, 1.4, 3.2) sums to 6: floors (1, 1, 3) leave 1 to the largest remainder, a tie of
	// 0.4 and 0.4 resolved to the first.
	for _, tc := range []struct {
		x    []float64
		n    int
		want []int
	}{
		{[]float64{1.4, 1.4, 3.2}, 6, []int{2, 1, 3}},
		{[]float64{0.7, 2.1, 0.2}, 6, []int{1, 4, 1}}, // rescaled by 2: 1.4, 4.2, 0.4
		{[]float64{0, 0}, 3, []int{3, 0}},
	} {
		if got := roundToTotal(tc.x, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("roundToTotal(%v, %d) = %v, want %v", tc.x, tc.n, got, tc.want)
		}
	}
}

// TestROCSummary: scores (3, 2, 1, 0) for worlds (C, C', C, C'): of the 4 (C, C') pairs, C
// scores higher in 3, so AUC = 0.75; the best threshold (between 3 and 2, or between 1 and 0)
// gives balanced accuracy (1/2 + 1)/2 = 0.75. Ties count one half: all scores equal give 0.5.
func TestROCSummary(t *testing.T) {
	C, P := runs.WorldC, runs.WorldCPrime
	for _, tc := range []struct {
		s        []float64
		w        []int8
		auc, acc float64
	}{
		{[]float64{3, 2, 1, 0}, []int8{C, P, C, P}, 0.75, 0.75},
		{[]float64{1, 1, 1, 1}, []int8{C, P, C, P}, 0.5, 0.5},
		{[]float64{0, 1}, []int8{C, P}, 0, 0.5},
		{[]float64{5, 5, 1}, []int8{C, P, P}, 0.75, 0.75},
	} {
		auc, acc := rocSummary(tc.s, tc.w)
		if math.Abs(auc-tc.auc) > 1e-15 || math.Abs(acc-tc.acc) > 1e-15 {
			t.Errorf("rocSummary(%v, %v) = %v, %v, want %v, %v", tc.s, tc.w, auc, acc, tc.auc, tc.acc)
		}
	}
}

func TestLogitConfidence(t *testing.T) {
	// p = exp(-loss): loss log 2 gives p = 1/2, logit 0; loss log(5/4) gives p = 4/5, logit log 4.
	for _, tc := range []struct{ loss, want float64 }{
		{math.Ln2, 0}, {math.Log(1.25), math.Log(4)}, {math.Log(5), -math.Log(4)},
	} {
		if got := logitConfidence(tc.loss); math.Abs(got-tc.want) > 1e-13 {
			t.Errorf("logitConfidence(%v) = %v, want %v", tc.loss, got, tc.want)
		}
	}
	// Tiny losses stay finite and large: p = 1 - 1e-12 gives about log(1e12) = 27.63.
	if got := logitConfidence(1e-12); math.Abs(got-27.631021115928547) > 1e-6 {
		t.Errorf("logitConfidence(1e-12) = %v", got)
	}
	// Losses below 1e-12 keep their order (a floor of 1e-12 tied them): the logit is
	// -log(loss) to within the loss itself.
	for _, loss := range []float64{1e-13, 1e-15, 1e-30, 1e-45, 1e-300} {
		if got, want := logitConfidence(loss), -math.Log(loss); math.Abs(got-want) > 1e-9*want {
			t.Errorf("logitConfidence(%v) = %v, want %v", loss, got, want)
		}
	}
	// A loss of exactly 0 (a saturated float32 softmax) is the most confident of all: finite
	// (an infinite statistic made the run missing, score 0) and above the smallest positive
	// float32 cross-entropy, -log(1 - 2^-24).
	zero, smallest := logitConfidence(0), logitConfidence(-math.Log1p(-math.Ldexp(1, -24)))
	if math.IsInf(zero, 0) || math.IsNaN(zero) || !(zero > smallest) {
		t.Errorf("logitConfidence(0) = %v, want finite and above %v", zero, smallest)
	}
}

// TestLiRAFit: C' statistics (1, 3) fit N(2, 2) (sample variance 2), C statistics (5, 7) fit
// N(6, 2). Offline at 4: z = (4 - 2)/sqrt 2. Online at 4: the two Gaussians share a variance and
// 4 is their midpoint, so the log ratio is 0; at 6 it is ((6-2)^2 - 0)/(2*2) = 4.
func TestLiRAFit(t *testing.T) {
	ex := []Example{
		{World: runs.WorldCPrime, Features: []float64{1}}, {World: runs.WorldCPrime, Features: []float64{3}},
		{World: runs.WorldC, Features: []float64{5}}, {World: runs.WorldC, Features: []float64{7}},
	}
	off, err := liraAttack{}.Fit(nil, ex)
	if err != nil {
		t.Fatal(err)
	}
	if got := off([]float64{4}); math.Abs(got-2/math.Sqrt2) > 1e-14 {
		t.Errorf("offline score %v, want %v", got, 2/math.Sqrt2)
	}
	on, err := liraAttack{online: true}.Fit(nil, ex)
	if err != nil {
		t.Fatal(err)
	}
	if got := on([]float64{4}); math.Abs(got) > 1e-14 {
		t.Errorf("online score at the midpoint %v, want 0", got)
	}
	if got := on([]float64{6}); math.Abs(got-4) > 1e-14 {
		t.Errorf("online score at 6: %v, want 4", got)
	}
	if _, err := (liraAttack{}).Fit(nil, ex[2:]); err == nil {
		t.Error("fit without world-C' runs: no error")
	}
}

// TestLDAFit: two features, world means (1, 0) for C and (-1, 0) for C', each with the four
// deviations (+-1, +-1). These are uncorrelated, so the pooled covariance is diagonal, the
// discriminant lies along the first feature only, and the midpoint of the means scores 0.
func TestLDAFit(t *testing.T) {
	var ex []Example
	for _, d := range [][2]float64{{1, 1}, {-1, -1}, {1, -1}, {-1, 1}} {
		ex = append(ex, Example{World: runs.WorldC, Features: []float64{1 + d[0], d[1]}})
		ex = append(ex, Example{World: runs.WorldCPrime, Features: []float64{-1 + d[0], d[1]}})
	}
	score, err := fitLDA(ex)
	if err != nil {
		t.Fatal(err)
	}
	if got := score([]float64{0, 0}); math.Abs(got) > 1e-12 {
		t.Errorf("midpoint scores %v, want 0", got)
	}
	if a, b := score([]float64{1, 0}), score([]float64{1, 5}); !(a > 0) || math.Abs(a-b) > 1e-9 {
		t.Errorf("score(1,0) = %v, score(1,5) = %v: want positive and independent of the noise feature", a, b)
	}
}
