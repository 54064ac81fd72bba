package audit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBandRanks(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 57, 500, 2000, 100000} {
		r := bandRanks(n)
		if r[0] != 1 || r[len(r)-1] != n {
			t.Errorf("n=%d: ranks %v do not run from 1 to n", n, r)
		}
		for i := 1; i < len(r); i++ {
			if r[i] <= r[i-1] {
				t.Fatalf("n=%d: ranks not increasing at %d: %v", n, i, r[i-1:i+1])
			}
			// Past the first few ranks, the gap is at most 10% (+1 for rounding).
			if r[i-1] >= 10 && float64(r[i]) > bandRatio*float64(r[i-1])+1 {
				t.Errorf("n=%d: gap from %d to %d", n, r[i-1], r[i])
			}
		}
		if max := 12 + math.Log(math.Max(1, float64(n)/10))/math.Log(bandRatio); float64(len(r)) > max {
			t.Errorf("n=%d: %d ranks, more than %.0f", n, len(r), max)
		}
	}
}

// TestRankBandCoversTrueROC: on the Gaussian pair the band's upper edge must hold at every
// threshold at once (alpha(t) <= AlphaUpper and beta(t) <= BetaUpper for the true error rates)
// in at least 95% of repetitions; the Bonferroni split makes it conservative, so we also log
// the observed rate.
func TestRankBandCoversTrueROC(t *testing.T) {
	const n, reps, mu = 300, 300, 2.0
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float64, n), make([]float64, n)
	held := 0
	for range reps {
		gaussianScores(rng, mu, x, y)
		cert := certifyRankBand(x, y, 0.95)
		ok := true
		for _, p := range cert.points {
			// Exact rates at threshold t: P(X < t) for X ~ N(mu, 1), P(Y >= t) for Y ~ N(0, 1).
			a := normalCDF(p.Threshold - mu)
			b := 1 - normalCDF(p.Threshold)
			if a > p.AlphaUpper || b > p.BetaUpper {
				ok = false
				break
			}
		}
		if ok {
			held++
		}
	}
	t.Logf("rank band upper edge held at every threshold in %d of %d repetitions", held, reps)
	if held < reps*95/100 {
		t.Errorf("band held in %d of %d repetitions, want >= 95%%", held, reps)
	}
}

// TestRankBandCoverageMu: the certified mu of the band method is at or below the truth in at
// least 95% of 200 repetitions, for independent worlds and for coupled pairs (y = +-z sharing
// the noise of x = mu + z, whose marginals are the Gaussian pair).
func TestRankBandCoverageMu(t *testing.T) {
	const n, reps = 500, 200
	for ci, mu := range []float64{1, 3, 5} {
		for _, coupled := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(uint64(ci), 11))
			x, y := make([]float64, n), make([]float64, n)
			misses := 0
			var vals []float64
			for range reps {
				if coupled {
					sign := 1.0
					if rng.IntN(2) == 0 {
						sign = -1
					}
					for i := range x {
						z := rng.NormFloat64()
						x[i], y[i] = mu+z, sign*z
					}
				} else {
					gaussianScores(rng, mu, x, y)
				}
				res, err := Analyze(x, y, Options{Method: RankBand, Paired: coupled})
				if err != nil {
					t.Fatal(err)
				}
				if res.MuLower > mu {
					misses++
				}
				vals = append(vals, res.MuLower)
			}
			t.Logf("mu=%g coupled=%v: %d misses of %d, mean certified mu %.3f", mu, coupled, misses, reps, mean(vals))
			if misses > reps/20 {
				t.Errorf("mu=%g coupled=%v: coverage %d/%d below 95%%", mu, coupled, reps-misses, reps)
			}
		}
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// TestRankBandBeatsDKW: at large true mu the band certifies more than DKW, whose constant
// half-width caps mu near 3.0 at 500 pairs and 3.75 at 2000 (mean over 50 repetitions); at
// mu = 1 the two are only logged.
func TestRankBandBeatsDKW(t *testing.T) {
	for _, c := range []struct {
		n  int
		mu float64
	}{{500, 1}, {2000, 1}, {500, 4}, {500, 6}, {2000, 5}, {2000, 7}} {
		rng := rand.New(rand.NewPCG(uint64(c.n), uint64(c.mu)))
		x, y := make([]float64, c.n), make([]float64, c.n)
		var band, dkw, bonf []float64
		plan := NewBonferroniPlan(c.n, c.n, 0.95)
		for range 50 {
			gaussianScores(rng, c.mu, x, y)
			band = append(band, math.Max(0, rankBandMuLower(x, y, 0.95)))
			dkw = append(dkw, math.Max(0, dkwMuLower(x, y, 0.95)))
			bonf = append(bonf, math.Max(0, plan.muLower(x, y)))
		}
		// Bonferroni (independent worlds only) is logged for comparison.
		t.Logf("n=%d mu=%g: mean certified mu, band %.3f, DKW %.3f (max DKW %.3f), Bonferroni %.3f",
			c.n, c.mu, mean(band), mean(dkw), slices.Max(dkw), mean(bonf))
		// At small mu the optimum sits mid-ROC where DKW is about as tight; only log there.
		if c.mu >= 4 && !(mean(band) > mean(dkw)+0.3) {
			t.Errorf("n=%d mu=%g: band %.3f does not beat DKW %.3f by 0.3", c.n, c.mu, mean(band), mean(dkw))
		}
	}
}

// TestRankBandMethodPlumbing: "band" parses, runs through Analyze for independent, paired and
// dependent scores, agrees with the fast path, and the defaults are unchanged.
func TestRankBandMethodPlumbing(t *testing.T) {
	if m, err := ParseThresholdMethod(" Band "); err != nil || m != RankBand {
		t.Fatalf("ParseThresholdMethod(band) = %v, %v", m, err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := make([]float64, 400), make([]float64, 400)
	gaussianScores(rng, 2, x, y)
	for _, o := range []Options{{Method: RankBand}, {Method: RankBand, Paired: true}, {Method: RankBand, Dependent: true}} {
		res, err := Analyze(x, y, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		fast, err := MuLowerSorted(x, y, Options{Method: RankBand, Confidence: 0.95}, nil)
		if err != nil || math.Abs(fast-res.MuLower) > 1e-12 {
			t.Errorf("%+v: Analyze mu %v, fast path %v (%v)", o, res.MuLower, fast, err)
		}
		if res.Method != RankBand || res.MuLower <= 0 || res.EpsLower <= 0 {
			t.Errorf("%+v: method %v mu %v eps %v", o, res.Method, res.MuLower, res.EpsLower)
		}
	}
	if o, _ := (Options{}).withDefaults(); o.Method != Bonferroni {
		t.Errorf("default method %v, want bonferroni", o.Method)
	}
	if o, _ := (Options{Paired: true}).withDefaults(); o.Method != DKWBand {
		t.Errorf("default paired method %v, want dkw+band", o.Method)
	}
	if slices.Contains(ThresholdMethods, RankBand) {
		t.Errorf("band joined ThresholdMethods; the reports' default set is meant to stay as it was")
	}
}

// TestRankBandCoverageLaplace is the non-Gaussian case: Laplace pairs shifted by s are exactly
// s-DP, with a numerically found GDP-equivalent mu; the band's mu and eps (delta = 0) must be
// at or below them in >= 95% of 200 repetitions of 500 pairs.
func TestRankBandCoverageLaplace(t *testing.T) {
	const n, reps = 500, 200
	for si, s := range []float64{1, 4} {
		sc := laplaceScenario(s)
		rng := rand.New(rand.NewPCG(uint64(si), 505))
		x, y := make([]float64, n), make([]float64, n)
		muMiss, epsMiss := 0, 0
		for range reps {
			sc.draw(rng, x, y)
			res, err := Analyze(x, y, Options{Method: RankBand, Dependent: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.MuLower > sc.mu {
				muMiss++
			}
			if res.EpsLower > s {
				epsMiss++
			}
		}
		t.Logf("laplace s=%g (mu %.3f): %d mu misses, %d eps misses of %d", s, sc.mu, muMiss, epsMiss, reps)
		if muMiss > reps/20 || epsMiss > reps/20 {
			t.Errorf("laplace s=%g: coverage below 95%%", s)
		}
	}
}

// DKWBand is the intersection of DKW and the rank band at half the error level each: at every
// threshold its upper bounds are the smaller of the two methods' at that level, so its
// certified mu is at least each one's at half the level (exactly the larger of the two's point
// by point); its fast path agrees with Analyze; and it is the default for coupled scores.
func TestDKWBandIntersection(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct {
		n  int
		mu float64
	}{{200, 0.5}, {500, 1}, {1000, 3}, {300, 6}} {
		x, y := make([]float64, c.n), make([]float64, c.n)
		gaussianScores(rng, c.mu, x, y)
		res, err := Analyze(x, y, Options{Dependent: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Method != DKWBand {
			t.Fatalf("default method for dependent scores is %q, want %q", res.Method, DKWBand)
		}
		sx, sy := slices.Clone(x), slices.Clone(y)
		slices.Sort(sx)
		slices.Sort(sy)
		d := certifyDKW(sx, sy, 0.975)
		b := certifyRankBand(sx, sy, 0.975)
		if len(res.Certified) != len(d.points) || len(d.points) != len(b.points) {
			t.Fatalf("n=%d: %d points, DKW %d, band %d", c.n, len(res.Certified), len(d.points), len(b.points))
		}
		for i, p := range res.Certified {
			if p.AlphaUpper != math.Min(d.points[i].AlphaUpper, b.points[i].AlphaUpper) ||
				p.BetaUpper != math.Min(d.points[i].BetaUpper, b.points[i].BetaUpper) || p.Threshold != d.points[i].Threshold {
				t.Fatalf("n=%d point %d: %+v, DKW %+v, band %+v", c.n, i, p, d.points[i], b.points[i])
			}
		}
		want := math.Max(0, math.Max(dkwMuLower(sx, sy, 0.975), rankBandMuLower(sx, sy, 0.975)))
		if res.MuLower < want-1e-12 {
			t.Errorf("n=%d mu=%g: certified %v below the better half-level method %v", c.n, c.mu, res.MuLower, want)
		}
		fast, err := MuLowerSorted(sx, sy, Options{Method: DKWBand, Confidence: 0.95}, nil)
		if err != nil || math.Abs(fast-res.MuLower) > 1e-12 {
			t.Errorf("n=%d: fast path %v, Analyze %v (%v)", c.n, fast, res.MuLower, err)
		}
	}
	if res, err := Analyze([]float64{1, 2, 3}, []float64{0, 1, 2}, Options{Paired: true}); err != nil || res.Method != DKWBand {
		t.Errorf("default for paired scores: %v, %v", res, err)
	}
}

// TestDKWBandPower: over the Gaussian pair at n = 500 and 2000, mu from 0.5 to 5, the combined
// method's mean certified mu is within 8% or 0.03 (whichever is larger) of the better of DKW and
// the rank band at the full level in every cell: the price of halving each one's error level,
// which at small mu is a small absolute amount (measured: 0.894 of DKW, 0.027 below it, at n =
// 500, mu = 0.5; 0.96-1.01 of the better elsewhere). Wherever the two differ by more than 10%
// it must beat the worse one.
func TestDKWBandPower(t *testing.T) {
	for _, n := range []int{500, 2000} {
		for _, mu := range []float64{0.5, 1, 2, 3, 5} {
			rng := rand.New(rand.NewPCG(uint64(n), uint64(10*mu)))
			x, y := make([]float64, n), make([]float64, n)
			var both, dkw, band float64
			const reps = 20
			for range reps {
				gaussianScores(rng, mu, x, y)
				both += math.Max(0, dkwBandMuLower(x, y, 0.95)) / reps
				dkw += math.Max(0, dkwMuLower(x, y, 0.95)) / reps
				band += math.Max(0, rankBandMuLower(x, y, 0.95)) / reps
			}
			best, worst := math.Max(dkw, band), math.Min(dkw, band)
			t.Logf("n=%d mu=%g: dkw+band %.3f, DKW %.3f, band %.3f (%.3f of the better)", n, mu, both, dkw, band, both/best)
			if both < best-math.Max(0.08*best, 0.03) {
				t.Errorf("n=%d mu=%g: dkw+band %.3f more than max(8%%, 0.03) below the better method %.3f", n, mu, both, best)
			}
			if best > 1.1*worst && !(both > worst) {
				t.Errorf("n=%d mu=%g: dkw+band %.3f not above the worse method %.3f", n, mu, both, worst)
			}
		}
	}
}

// TestDKWBandCoversTrueROC: the intersection of the two bands is a simultaneous band: on the
// Gaussian pair its upper edge must hold at every threshold at once in at least 95% of
// repetitions, mid-ROC (mu = 1, where DKW's edge is the smaller) and in the tails (mu = 3,
// where the rank band's is).
func TestDKWBandCoversTrueROC(t *testing.T) {
	const n, reps = 300, 400
	for _, mu := range []float64{1, 3} {
		rng := rand.New(rand.NewPCG(5, uint64(mu)))
		x, y := make([]float64, n), make([]float64, n)
		held := 0
		for range reps {
			gaussianScores(rng, mu, x, y)
			ok := true
			for _, p := range certifyDKWBand(x, y, 0.95).points {
				if normalCDF(p.Threshold-mu) > p.AlphaUpper || 1-normalCDF(p.Threshold) > p.BetaUpper {
					ok = false
					break
				}
			}
			if ok {
				held++
			}
		}
		t.Logf("mu=%g: dkw+band upper edge held at every threshold in %d of %d repetitions", mu, held, reps)
		if held < reps*95/100 {
			t.Errorf("mu=%g: held in %d of %d repetitions, want >= 95%%", mu, held, reps)
		}
	}
}

// gaussianScores fills x with sorted N(mu, 1) scores (world C) and y with sorted N(0, 1)
// scores (world C').
func gaussianScores(rng *rand.Rand, mu float64, x, y []float64) {
	for i := range x {
		x[i] = mu + rng.NormFloat64()
	}
	for i := range y {
		y[i] = rng.NormFloat64()
	}
	slices.Sort(x)
	slices.Sort(y)
}
