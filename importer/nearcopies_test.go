package importer

import (
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// Pairs whose noise is one draw (every pair's generator seeded alike) but whose models differ
// by float rounding (a server summing uploads in arrival order) passed the test of equal bits,
// and were audited as independent pairs: a PyTorch deployment whose own training certifies
// mu >= 0.27 came out VIOLATED at 3.75 (AUC 1). Runs of different pairs closer than the
// round's noise allows are refused, naming the likely cause; runs with their own draws of the
// declared noise (standard deviation 0.02/sqrt(3) a parameter) are not, nor are near copies
// where the config declares no noise; runs of a tenth of the declared noise, closer than it
// allows but not copies, are imported with a warning (the audit is to find that violation).
func TestNearCopiesRefused(t *testing.T) {
	cfg := smallConfig(t)
	s := cfg.Train.NoiseStd / math.Sqrt(3)
	// One draw for every pair, each pair's copy a few ulps off (rounding), in 2 parameters.
	rounded := func(p, w, r int, good []float32) []float32 {
		if r == 0 {
			return nil
		}
		v := ownDraw(good, 0, w, r)
		for _, i := range []int{p % len(v), (3 * p) % len(v)} {
			v[i] = math.Nextafter32(v[i], float32(math.Inf(1)))
		}
		return v
	}
	_, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: rounded})
	for _, want := range []string{"round 1: pair ", "round 3: pair ", "within float rounding of each other: the pairs share their noise draws", "seeded alike", "(2 problems)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}

	// Every run its own draw at exactly the declared noise: accepted.
	declared := func(p, w, r int, good []float32) []float32 {
		if r == 0 {
			return nil
		}
		v := ownDraw(make([]float32, len(good)), p, w, r)
		for i := range v {
			v[i] = good[i] + v[i]*float32(s/0.1)
		}
		return v
	}
	if _, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: declared}); err != nil {
		t.Errorf("runs with their own draws of the declared noise refused: %v", err)
	}

	// Runs with their own draws of a tenth of the declared noise (a deployment that draws too
	// little): closer than the declared noise allows, but not copies. That is the violation
	// the audit is to find: imported, with a warning.
	// So are runs of a ten-thousandth of it, whose draws still move every parameter by more than
	// rounding (a relative distance of 1e-4 took a thousandth for copies).
	for _, share := range []float64{0.1, 1e-3, 1e-4} {
		quiet := func(p, w, r int, good []float32) []float32 {
			if r == 0 {
				return nil
			}
			v := ownDraw(make([]float32, len(good)), p, w, r)
			for i := range v {
				v[i] = good[i] + v[i]*float32(s*share/0.1)
			}
			return v
		}
		res, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: quiet})
		if err != nil {
			t.Fatalf("runs with %g of the declared noise refused: %v", share, err)
		}
		if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "may add less noise than it declares") }) {
			t.Errorf("%g of the declared noise: no warning of runs closer than it allows: %q", share, res.Warnings)
		}
	}

	// A staircase mechanism is not measured: its draws put more mass near 0 than the Gaussian
	// bound allows (correct runs at epsilon 8 were warned of).
	stair := smallConfig(t)
	stair.Train.Mechanism, stair.Train.StaircaseEpsilon = "staircase", 8
	if res, err, _ := importFlat(t, flatSpec{cfg: stair, vec: rounded}); err != nil || len(res.Warnings) > 0 {
		t.Errorf("staircase noise: %v, warnings %q; want no check", err, res.Warnings)
	}

	// Without noise, runs of different pairs may be near copies.
	quiet := smallConfig(t)
	quiet.Train.NoiseStd = 0
	if _, err, _ := importFlat(t, flatSpec{cfg: quiet, vec: rounded}); err != nil {
		t.Errorf("near copies refused without noise: %v", err)
	}
}

// Both worlds trained on world C's data (the runs of C' read c/client*) give every pair two
// equal runs: imported, every row certified nothing and the audit said CONSISTENT, exit 0.
// Where the target takes part in every round with full batches, the worlds must differ from
// round 1 on, and the import is refused; with partial participation a pair's worlds may agree
// (the target sat the rounds out), and it is not.
func TestWorldsThatNeverDifferRefused(t *testing.T) {
	oneWorld := func(p, w, r int, good []float32) []float32 {
		if r == 0 {
			return nil
		}
		return ownDraw(good, p, 0, r)
	}
	_, err, _ := importFlat(t, flatSpec{cfg: smallConfig(t), vec: oneWorld})
	if err == nil || !strings.Contains(err.Error(), "did the runs of world C' train on world C's data") {
		t.Errorf("error %v, want the worlds that never differ named", err)
	}
	partial := smallConfig(t)
	partial.Train.Participants = 2
	if _, err, _ := importFlat(t, flatSpec{cfg: partial, vec: oneWorld}); err != nil {
		t.Errorf("equal worlds refused under partial participation: %v", err)
	}
}

// The near-copy limit's small-ball bound against the chi-square distribution itself (gonum's
// regularized incomplete gamma): at most the level at every k the check uses, and within a
// factor e^(x/2) of it (the density's exponential factor the bound drops).
func TestChiSquareSmallBall(t *testing.T) {
	for _, k := range []int{1, 2, 3, 8, 53, 64} {
		for _, level := range []float64{1e-30, 1e-12, 1e-3} {
			x := chiSquareSmallBall(k, level)
			p := distuv.ChiSquared{K: float64(k)}.CDF(x)
			if !(p <= level*(1+1e-9)) || p < level*math.Exp(-x/2)*(1-1e-9) {
				t.Errorf("k %d, level %g: x %g has P[chi2 < x] = %g", k, level, x, p)
			}
		}
	}
}
