package check

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
)

// The participation check. Both runs of a pair start from one w_0 and share every random draw
// but the target's data: the clients sampled in a round, the noise. In the first round their
// models therefore differ exactly when the target took part in it (its clipped update enters
// one world's sum and not the other's, or differs between them), and are equal otherwise. Over
// every pair of a directory that is a count of Bernoulli trials at the sampling rate the
// deployment declares: the accountant's rate (audit.claim_sampling_rate) where the config
// gives one, else train.sampling_rate, or participants / clients.

// declaredRate is the rate at which the target takes part in round 1 as the deployment declares
// it, with where it comes from; ok is false when every client takes part in every round.
func declaredRate(ctx context.Context, cfg *spec.Config) (q float64, source string, ok bool, err error) {
	tc := &cfg.Train
	m := cfg.Data.Clients
	switch {
	case cfg.Audit.ClaimSamplingRate > 0:
		return cfg.Audit.ClaimSamplingRate, "the accountant's sampling rate (audit.claim_sampling_rate)", true, nil
	case tc.IsClientDP():
		plan, err := tc.Plan(ctx, m)
		if err != nil {
			return 0, "", false, err
		}
		return plan.Q[0][cfg.Adjacency.Client], "train.sampling_rate", true, nil
	case tc.Participants > 0 && tc.Participants < m:
		return float64(tc.Participants) / float64(m), fmt.Sprintf("train.participants %d of %d clients", tc.Participants, m), true, nil
	}
	return 0, "", false, nil
}

// participationCheck counts the pairs of the run files at path whose worlds' models differ after
// round 1 and tests the count against the declared rate q (exact binomial, two-sided).
func participationCheck(ctx context.Context, path string, q float64, source string) (*findings.CheckResult, error) {
	table, err := runs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	defer table.Close()
	first := map[int64][]float32{} // a pair's first world seen at round 1, until its partner comes
	took, pairs := 0, 0
	err = table.Scan(ctx, func(r runs.Row) error {
		if r.Round != 1 {
			return nil
		}
		other, seen := first[r.PairID]
		if !seen {
			first[r.PairID] = append([]float32(nil), r.Params...)
			return nil
		}
		delete(first, r.PairID)
		pairs++
		if tookPart(other, r.Params) {
			took++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	if pairs == 0 {
		return nil, nil
	}
	p := binomialTwoSided(took, pairs, q)
	rate := float64(took) / float64(pairs)
	return &findings.CheckResult{Name: "participation", Observer: "global", Statistic: rate, PValue: p, N: pairs,
		Meaning: fmt.Sprintf("share of pairs whose target took part in round 1 (the worlds' first models differ): %d of %d = %.3g, against %s %.4g (binomial, two-sided): another rate means the deployment samples clients otherwise than its claim assumes",
			took, pairs, rate, source, q)}, nil
}

// tookPart says whether two worlds' models after round 1 differ by more than float rounding of
// their sums (1e-5 of their norms, as the other exact checks allow).
func tookPart(a, b []float32) bool {
	var d, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		d += (x - y) * (x - y)
		na += x * x
		nb += y * y
	}
	return math.Sqrt(d) > floatSlack*(math.Sqrt(na)+math.Sqrt(nb))
}

// binomialTwoSided is the two-sided p-value of k successes in n trials of probability q:
// twice the smaller tail, at most 1.
func binomialTwoSided(k, n int, q float64) float64 {
	switch {
	case q <= 0:
		return b2p(k == 0)
	case q >= 1:
		return b2p(k == n)
	}
	d := distuv.Binomial{N: float64(n), P: q}
	lower := d.CDF(float64(k))
	upper := 1.0
	if k > 0 {
		upper = d.Survival(float64(k - 1)) // P(X >= k), without the cancellation of 1 - CDF
	}
	return math.Min(1, 2*math.Min(lower, upper))
}

func b2p(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}
