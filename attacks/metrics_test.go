package attacks

import (
	"math"
	"math/rand/v2"
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

// TestLiRAOnlinePoolsFewShadowRuns: with fewer than liraPooledBelow shadow runs a world, LiRA
// online gives both worlds one variance, so its score is increasing in the statistic where
// world C's fitted mean is the higher; with enough runs each world keeps its own variance, and
// a statistic far above a tight world C scores as C' (the quadratic of two variances).
func TestLiRAOnlinePoolsFewShadowRuns(t *testing.T) {
	examples := func(n int) []Example {
		var ex []Example
		for i := range n {
			u := float64(i)/float64(n-1) - 0.5 // evenly spread in [-1/2, 1/2]
			ex = append(ex, Example{World: runs.WorldC, Features: []float64{6 + 0.2*u}}, Example{World: runs.WorldCPrime, Features: []float64{2 + 4*u}})
		}
		return ex
	}
	for _, tc := range []struct {
		n      int
		pooled bool
	}{{3, true}, {liraPooledBelow - 1, true}, {liraPooledBelow, false}, {40, false}} {
		score, err := liraAttack{online: true}.Fit(nil, examples(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		s := func(x float64) float64 { return score([]float64{x}) }
		if increasing := s(2) < s(6) && s(6) < s(10); increasing != tc.pooled {
			t.Errorf("%d runs a world: scores at 2, 6, 10: %g, %g, %g; want increasing %v", tc.n, s(2), s(6), s(10), tc.pooled)
		}
	}
}

// TestLiRAOnlineFewShadowRunsOverRepetitions: equal-variance Gaussian worlds N(2, 1) (C) and
// N(0, 1) (C'), 2 shadow runs a world, 200 fits, each scored on 400 fresh runs a world. The
// statistic itself has AUC Phi(sqrt 2) = 0.921; the fits must keep that on average (separate
// variances fitted on 2 runs each averaged about 0.85, with rows reversed).
func TestLiRAOnlineFewShadowRunsOverRepetitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var sum float64
	const reps, n = 200, 400
	for range reps {
		var ex []Example
		for range 2 {
			ex = append(ex, Example{World: runs.WorldC, Features: []float64{2 + rng.NormFloat64()}}, Example{World: runs.WorldCPrime, Features: []float64{rng.NormFloat64()}})
		}
		score, err := liraAttack{online: true}.Fit(nil, ex)
		if err != nil {
			t.Fatal(err)
		}
		scores, worlds := make([]float64, 0, 2*n), make([]int8, 0, 2*n)
		for range n {
			scores = append(scores, score([]float64{2 + rng.NormFloat64()}), score([]float64{rng.NormFloat64()}))
			worlds = append(worlds, runs.WorldC, runs.WorldCPrime)
		}
		auc, _ := rocSummary(scores, worlds)
		sum += auc
	}
	// The mean of 200 AUCs of 400 x 400 runs has a standard error near 0.001 around 0.921 when
	// every fit is oriented right; 0.90 leaves room for the few fits whose two means reverse.
	mean := sum / reps
	t.Logf("mean AUC %.4f over %d fits", mean, reps)
	if mean < 0.90 {
		t.Errorf("mean AUC %.4f over %d fits on 2 shadow runs a world, want >= 0.90 (the statistic's 0.921)", mean, reps)
	}
}
