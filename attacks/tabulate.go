package attacks

import (
	"errors"
	"math"
	"slices"
	"sort"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/runs"
)

// tabulate turns the observations into score rows and per (attack, round) summaries, in the
// order of the attacks, then rounds, then observations. The observations are indexed by round
// once: each (attack, round) scanning all of them made the stage quadratic in the checkpoints
// (1,000 pairs: 5.0, 14.6 and 53.3 s of CPU at 50, 100 and 200 checkpoints).
func (sc *scoring) tabulate() *Result {
	res := &Result{MetricNames: metricNames(sc.atts)}
	byRound := map[int32][]int{}
	for oi := range sc.obs {
		t := sc.obs[oi].Round
		byRound[t] = append(byRound[t], oi)
	}
	for ai, a := range sc.atts {
		info := a.Info()
		col := make([]int, len(info.Metrics))
		for i, m := range info.Metrics {
			col[i] = slices.Index(res.MetricNames, m)
		}
		for _, t := range sc.rounds {
			at := byRound[int32(t)]
			sc.tabulateRound(res, ai, info, col, int32(t), at)
			if len(sc.gallery) > 0 {
				res.Reconstructions = append(res.Reconstructions, sc.reconstructions(ai, info, int32(t), at)...)
			}
		}
		// Attack ai's observations are all in res now: its reconstructions and fits go.
		sc.observed[ai] = nil
	}
	return res
}

// reconstructions returns attack ai's reconstructions at round t (its observations at), from
// both runs of the first gallery pair (by id) whose two runs it scored with a reconstruction,
// or none.
func (sc *scoring) reconstructions(ai int, info Info, t int32, at []int) []Reconstruction {
	byPair := map[int64][]Reconstruction{}
	var pairs []int64
	for _, oi := range at {
		o := &sc.obs[oi]
		ob := &sc.observed[ai][oi]
		if sc.status[ai][oi] != nil || ob.Reconstruction == nil {
			continue
		}
		if byPair[o.PairID] == nil {
			pairs = append(pairs, o.PairID)
		}
		byPair[o.PairID] = append(byPair[o.PairID], Reconstruction{Attack: info.Name, Round: t, RunID: o.RunID,
			PairID: o.PairID, World: o.World, X: ob.Reconstruction, Metrics: ob.Metrics})
	}
	slices.Sort(pairs)
	for _, id := range pairs {
		if rs := byPair[id]; len(rs) == 2 {
			slices.SortFunc(rs, func(a, b Reconstruction) int { return int(a.World) - int(b.World) })
			return rs
		}
	}
	return nil
}

// tabulateRound appends the scores of attack ai at round t (its observations at) to res, and
// their summary. col maps the attack's metrics to the result's metric columns.
func (sc *scoring) tabulateRound(res *Result, ai int, info Info, col []int, t int32, at []int) {
	sum := Metrics{Attack: info.Name, Threat: info.Threat, Round: t, Means: map[string]float64{}}
	sums := make([]float64, len(info.Metrics))
	counts := make([]int, len(info.Metrics))
	var scores []float64
	var worlds []int8
	first := len(res.Scores)
	m := len(res.MetricNames)
	backing := make([]float64, len(at)*m) // the rows' metrics, one array for the block
	for i := range backing {
		backing[i] = math.NaN()
	}
	for _, oi := range at {
		o := &sc.obs[oi]
		if sc.learned[ai] && sc.shadow[o.PairID] || errors.Is(sc.status[ai][oi], errNotScored) {
			continue // shadow pairs fitted the learned attacks and are not audited; capped pairs are not scored
		}
		s := runs.Score{RunID: o.RunID, PairID: o.PairID, World: o.World, Round: t, Attack: info.Name, Threat: info.Threat}
		k := len(res.Scores) - first
		s.Metrics = backing[k*m : (k+1)*m : (k+1)*m]
		sum.Runs++
		if sc.status[ai][oi] != nil {
			sum.Missing++
		} else {
			v := sc.observed[ai][oi].Score
			if math.IsNaN(v) {
				sum.NonFinite++ // a diverged run: nothing to rank it by
				v = 0
			}
			s.Score = v
			for i, m := range sc.observed[ai][oi].Metrics {
				s.Metrics[col[i]] = m
				if !math.IsNaN(m) {
					sums[i] += m
					counts[i]++
				}
			}
		}
		scores = append(scores, s.Score)
		worlds = append(worlds, s.World)
		res.Scores = append(res.Scores, s)
	}
	// Infinite scores keep their rank (a canary's loss of exactly 0 in world C), written finite.
	audit.FiniteRanks(scores)
	for i := range scores {
		res.Scores[first+i].Score = scores[i]
	}
	for i, m := range info.Metrics {
		if counts[i] > 0 {
			sum.Means[m] = sums[i] / float64(counts[i])
		}
	}
	sum.AUC, sum.Accuracy = rocSummary(scores, worlds)
	res.Summary = append(res.Summary, sum)
}

// rocSummary returns the AUC (ties one half) and the best balanced accuracy of scores for
// telling world C (positive) from C'.
func rocSummary(scores []float64, worlds []int8) (auc, acc float64) {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	var nc, np float64
	for _, w := range worlds {
		if w == runs.WorldC {
			nc++
		} else {
			np++
		}
	}
	if nc == 0 || np == 0 {
		return math.NaN(), math.NaN()
	}
	// Walk thresholds from high to low; tied scores move together.
	var tp, fp float64
	acc = 0.5
	for i := 0; i < len(idx); {
		j := i
		var dtp, dfp float64
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			if worlds[idx[j]] == runs.WorldC {
				dtp++
			} else {
				dfp++
			}
			j++
		}
		auc += dfp * (tp + dtp/2)
		tp += dtp
		fp += dfp
		acc = math.Max(acc, (tp/nc+1-fp/np)/2)
		i = j
	}
	return auc / (nc * np), acc
}

// WriteScores writes res to a score file at path, carrying the run file's config and dataset
// hash.
func WriteScores(path string, meta runs.Meta, toolVersion string, res *Result) (err error) {
	w, err := runs.CreateScores(path, runs.ScoreMeta{Config: meta.Config, DatasetHash: meta.DatasetHash, ToolVersion: toolVersion, MetricNames: res.MetricNames})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	if err := w.Write(res.Scores...); err != nil {
		return err
	}
	return w.Close()
}
