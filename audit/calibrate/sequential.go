package calibrate

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/fedaudit/fedaudit/audit"
)

// SequentialOptions configures SequentialSelfTest; zero fields take the defaults noted.
type SequentialOptions struct {
	Reps    int     // repetitions; 0 means 200
	Pairs   int     // pairs at the last look; 0 means 1600
	Batches int     // equal batches of pairs (looks at 1, 2, 4, ... of them); 0 means 16
	Mu      float64 // the mechanism's true mu; 0 means 1
	// Confidence is the level the looks hold at jointly; 0 means 0.95.
	Confidence float64
	Seed       uint64
}

// SequentialRow is what a group-sequential audit (audit.SequentialLooks) of the Gaussian
// mechanism of known mu does: against a claim equal to the true mu, how often any look calls it
// violated (the type I error, at most 1 - Confidence when the looks' levels are right), and the
// same with every look at the joint confidence, uncorrected, beside it; against a claim of half
// the true mu, at which look the audit stops, against the fixed audit of every pair.
type SequentialRow struct {
	Mu         float64 `json:"mu"`
	Confidence float64 `json:"confidence"`
	Reps       int     `json:"reps"`
	// Looks are the pairs seen at each look.
	Looks []int `json:"looks"`
	// Violations counts the repetitions some look called the true claim violated; Uncorrected
	// the same with every look certified at Confidence.
	Violations  int  `json:"violations"`
	Uncorrected int  `json:"uncorrected"`
	MaxMisses   int  `json:"max_misses"`
	Pass        bool `json:"pass"`
	// MedianStop is the median pairs seen when the audit stopped against a claim of Mu / 2
	// (the last look's pairs when it never stopped), and Caught the repetitions it stopped in.
	MedianStop int `json:"median_stop_pairs"`
	Caught     int `json:"caught"`
	// FixedCaught counts the repetitions the fixed audit of every pair, at Confidence, certified
	// above Mu / 2.
	FixedCaught int `json:"fixed_caught"`
	// MeanLast is the mean bound of the last look.
	MeanLast float64 `json:"mean_last"`
}

// SequentialSelfTest simulates group-sequential audits of the Gaussian mechanism: scores
// N(mu, 1) in world C against N(0, 1) in world C', certified with the default method for coupled
// pairs (audit.DKWBand) at each look.
func SequentialSelfTest(ctx context.Context, opts SequentialOptions) (SequentialRow, error) {
	opts.Reps = cmp.Or(opts.Reps, 200)
	opts.Pairs = cmp.Or(opts.Pairs, 1600)
	opts.Batches = cmp.Or(opts.Batches, 16)
	if opts.Mu == 0 {
		opts.Mu = 1
	}
	if opts.Confidence == 0 {
		opts.Confidence = audit.DefaultConfidence
	}
	batches, err := audit.SequentialLooks(opts.Batches)
	if err != nil {
		return SequentialRow{}, err
	}
	each, err := audit.SequentialConfidences(opts.Confidence, batches)
	if err != nil {
		return SequentialRow{}, err
	}
	row := SequentialRow{Mu: opts.Mu, Confidence: opts.Confidence, Reps: opts.Reps}
	for _, b := range batches {
		row.Looks = append(row.Looks, b*opts.Pairs/opts.Batches)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x736571)) // "seq"
	x, y := make([]float64, opts.Pairs), make([]float64, opts.Pairs)
	var stops []float64
	for range opts.Reps {
		if err := ctx.Err(); err != nil {
			return row, err
		}
		// In the order the pairs are trained: a look sees a prefix.
		for i := range x {
			x[i], y[i] = opts.Mu+rng.NormFloat64(), rng.NormFloat64()
		}
		violated, uncorrected := false, false
		stop := row.Looks[len(row.Looks)-1]
		stopped := false
		for j, n := range row.Looks {
			lower, err := muLower(x[:n], y[:n], each[j])
			if err != nil {
				return row, err
			}
			violated = violated || lower > opts.Mu
			if !stopped && lower > opts.Mu/2 {
				stop, stopped = n, true
			}
			loose, err := muLower(x[:n], y[:n], opts.Confidence)
			if err != nil {
				return row, err
			}
			uncorrected = uncorrected || loose > opts.Mu
			if j == len(row.Looks)-1 {
				row.MeanLast += lower / float64(opts.Reps)
			}
			if j == len(row.Looks)-1 && loose > opts.Mu/2 {
				row.FixedCaught++
			}
		}
		if violated {
			row.Violations++
		}
		if uncorrected {
			row.Uncorrected++
		}
		if stopped {
			row.Caught++
		}
		stops = append(stops, float64(stop))
	}
	row.MaxMisses = maxAllowedMisses(opts.Reps, 1-opts.Confidence, selfTestFalseAlarm)
	row.Pass = row.Violations <= row.MaxMisses
	row.MedianStop = int(audit.Median(stops))
	return row, nil
}

// muLower is the certified lower bound on mu of coupled scores at confidence.
func muLower(x, y []float64, confidence float64) (float64, error) {
	res, err := audit.Analyze(x, y, audit.Options{Confidence: confidence, Paired: true})
	if err != nil {
		return 0, fmt.Errorf("calibrate: sequential: %w", err)
	}
	return res.MuLower, nil
}

// selfTestSequential is the self-test's rows of the group-sequential audit: one per true mu,
// opts.N pairs in 8 batches, a miss when any look certifies above the truth.
func selfTestSequential(ctx context.Context, opts SelfTestOptions, maxMisses int) ([]SelfTestRow, error) {
	var rows []SelfTestRow
	for i, mu := range opts.Mus {
		r, err := SequentialSelfTest(ctx, SequentialOptions{Reps: opts.Reps, Pairs: opts.N, Batches: 8, Mu: mu,
			Confidence: opts.Confidence, Seed: opts.Seed + uint64(i)})
		if err != nil {
			return nil, err
		}
		rows = append(rows, SelfTestRow{Method: "pairs-sequential", Mechanism: "gaussian", Quantity: "mu", Mu: mu, Reps: r.Reps,
			Misses: r.Violations, MaxMisses: maxMisses, MeanLower: r.MeanLast})
	}
	finishRows(rows)
	return rows, nil
}
