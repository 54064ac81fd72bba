package experiment

import (
	"context"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
)

// SummarizeRounds reads every row of a run table once and aggregates it per round: what
// rounds.json holds and the report shows.
func SummarizeRounds(ctx context.Context, tab *runs.Table) ([]findings.RoundSummary, error) {
	meta := tab.Meta()
	mu2 := meta.StatIndex(runs.StatMu2)
	type acc struct {
		findings.RoundSummary
		lossSum, accSum, mu2Sum float64
		ok, accN, mu2N          int
		sensSum                 float64
		sensN                   int
		pending                 map[int64][]float32 // params of the first run of each pair seen
	}
	byRound := map[int32]*acc{}
	err := tab.Scan(ctx, func(r runs.Row) error {
		a := byRound[r.Round]
		if a == nil {
			a = &acc{RoundSummary: findings.RoundSummary{Round: int(r.Round)}, pending: map[int64][]float32{}}
			byRound[r.Round] = a
		}
		a.Runs++
		if r.Diverged {
			a.Diverged++
			return nil
		}
		a.ok++
		a.lossSum += r.TrainLoss
		if !math.IsNaN(r.TestAccuracy) {
			a.accSum += r.TestAccuracy
			a.accN++
		}
		if mu2 >= 0 && r.World == runs.WorldC && !math.IsNaN(r.Stats[mu2]) {
			a.mu2Sum += r.Stats[mu2]
			a.mu2N++
		}
		if len(r.Params) > 0 {
			if other, seen := a.pending[r.PairID]; seen {
				delete(a.pending, r.PairID)
				var s float64
				for i := range other {
					d := float64(other[i]) - float64(r.Params[i])
					s += d * d
				}
				d := math.Sqrt(s)
				a.sensSum += d
				a.sensN++
				a.MaxSensitivity = math.Max(a.MaxSensitivity, d)
			} else {
				a.pending[r.PairID] = slices.Clone(r.Params)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	div := func(s float64, n int) float64 {
		if n == 0 {
			return math.NaN()
		}
		return s / float64(n)
	}
	var out []findings.RoundSummary
	for _, a := range byRound {
		s := a.RoundSummary
		s.TrainLoss = div(a.lossSum, a.ok)
		s.TestAccuracy = div(a.accSum, a.accN)
		s.RealizedMu = math.Sqrt(div(a.mu2Sum, a.mu2N))
		s.Sensitivity = div(a.sensSum, a.sensN)
		if a.sensN == 0 {
			s.MaxSensitivity = math.NaN()
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b findings.RoundSummary) int { return a.Round - b.Round })
	return out, nil
}
