package cost

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
)

// The measured cost of a one-run audit: what one real training with k canaries certifies, for
// several k, each measured over several trainings (master seeds) of the config, beside the
// truth the bounds can be held against. It is the real-training counterpart of the cost table
// (calibrate.CostTable), which simulates the Gaussian mechanism.

// OneRunCost is the measurement at one canary count: per canary attack and round the medians
// over the seeds.
type OneRunCost struct {
	Canaries int             `json:"canaries"`
	Seeds    int             `json:"seeds"`
	Rows     []OneRunCostRow `json:"rows"`
}

// OneRunCostRow is one canary attack at one canary count.
type OneRunCostRow struct {
	Attack string `json:"attack"`
	Threat string `json:"threat"`
	Round  int    `json:"round"`
	// MuLower and EpsLower are the medians over the seeds of the certified bounds (eps at
	// Delta); MuLowers and EpsLowers list every seed's certified bounds.
	MuLower   float64   `json:"mu_lower"`
	EpsLower  float64   `json:"eps_lower"`
	Delta     float64   `json:"delta"`
	MuLowers  []float64 `json:"mu_lowers"`
	EpsLowers []float64 `json:"eps_lowers"`
	// Truth is what the bound is held against: the exact mu of the canaries where the instance
	// has one (TruthKind "exact"), else the median realized mu of the informed adversary on the
	// target ("realized", an observer of every iterate), else NaN ("").
	Truth     float64 `json:"truth"`
	TruthKind string  `json:"truth_kind"`
	// Misses counts the seeds whose certified mu exceeds an exact truth.
	Misses int `json:"misses"`
	// EstimateMu is the median one-shot mu, an estimate (NaN where the attack has none).
	EstimateMu float64 `json:"estimate_mu"`
}

// MarshalJSON writes the row with NaN (unknown truth, no estimate) as null.
func (r OneRunCostRow) MarshalJSON() ([]byte, error) {
	type plain OneRunCostRow
	out := struct {
		plain
		Truth      *float64 `json:"truth"`
		EstimateMu *float64 `json:"estimate_mu"`
	}{plain: plain(r)}
	if !math.IsNaN(r.Truth) {
		out.Truth = &r.Truth
	}
	if !math.IsNaN(r.EstimateMu) {
		out.EstimateMu = &r.EstimateMu
	}
	return json.Marshal(out)
}

// MeasureOneRun trains, for each canary count and each of seeds master seeds (the config's,
// then the next ones), one run of cfg with that many canaries (train.canaries must be set;
// pairs is set to 1 and audit.method to one-run), audits it in a temporary directory under
// dir (removed afterwards) and summarizes each canary attack at each of rounds (empty: the last
// checkpoint). The audit is the one `audit run` makes: every checkpoint of the training in one
// family, so the rounds summarized are certified at the family's confidence, which counts
// every checkpoint's rows, not only theirs.
func MeasureOneRun(ctx context.Context, cfg *spec.Config, counts []int, seeds int, rounds []int, dir string) ([]OneRunCost, error) {
	if cfg.Train.Canaries == nil {
		return nil, errors.New("measure: the config has no train.canaries")
	}
	if seeds < 1 || len(counts) == 0 {
		return nil, fmt.Errorf("measure: need canary counts and at least one seed, got %v and %d", counts, seeds)
	}
	if len(rounds) == 0 {
		rounds = []int{slices.Max(cfg.Train.Checkpoints)}
	}
	for _, t := range rounds {
		if t < 1 || !slices.Contains(cfg.Train.Checkpoints, t) {
			return nil, fmt.Errorf("measure: round %d is not a checkpoint after 0 of the config (%v)", t, cfg.Train.Checkpoints)
		}
	}
	var out []OneRunCost
	for _, k := range counts {
		tally := oneRunTally{byAttack: map[oneRunKey]*oneRunAcc{}}
		for s := 0; s < seeds; s++ {
			c := measureConfig(cfg, k, s, rounds)
			if err := c.Validate(); err != nil {
				return nil, fmt.Errorf("measure: %d canaries: %w", k, err)
			}
			tmp, err := os.MkdirTemp(dir, ".measure-")
			if err != nil {
				return nil, err
			}
			a, realized, err := measureRun(ctx, &c, tmp, rounds)
			if err != nil {
				return nil, fmt.Errorf("measure: %d canaries, seed %d: %w", k, c.Seed, err)
			}
			tally.add(a.Findings, realized)
		}
		out = append(out, OneRunCost{Canaries: k, Seeds: seeds, Rows: tally.rows(cfg.Audit.Delta)})
	}
	return out, nil
}

// measureConfig is cfg made into the s-th seed's one-run audit with k canaries: one pair, the
// seed cfg.Seed+s, the method one-run at the given rounds, no claim.
func measureConfig(cfg *spec.Config, k, s int, rounds []int) spec.Config {
	c := *cfg
	c.Train = cfg.Train
	cc := *cfg.Train.Canaries
	cc.Count = k
	c.Train.Canaries = &cc
	c.Pairs, c.Seed = 1, cfg.Seed+uint64(s)
	c.Train.Seed = c.Seed
	c.Audit.Method = spec.MethodOneRun
	c.Audit.Rounds = rounds
	c.Audit.ClaimMu, c.Audit.ClaimEpsilon, c.Audit.ClaimDelta = 0, 0, 0
	return c
}

// measureRun runs the audit of c in the temporary directory tmp and removes it, returning the
// analysis and the realized mu at each of rounds (read before the directory goes).
func measureRun(ctx context.Context, c *spec.Config, tmp string, rounds []int) (*findings.Analysis, map[int]float64, error) {
	a, err := experiment.Run(ctx, c, tmp, experiment.RunOptions{})
	realized := map[int]float64{}
	if err == nil {
		for _, t := range rounds {
			realized[t] = realizedMuAt(tmp, t)
		}
	}
	os.RemoveAll(tmp)
	return a, realized, err
}

// oneRunKey names a summarized row: one canary attack at one round.
type oneRunKey struct {
	attack string
	round  int
}

// oneRunAcc gathers one attack's results at one round over the seeds.
type oneRunAcc struct {
	mu, eps, truth, est []float64
	kind                string
	attack, threat      string
	round               int
	misses              int
}

// oneRunTally gathers the one-run findings of every seed of one canary count, by attack and
// round in the order first seen, so that each becomes one row of medians.
type oneRunTally struct {
	byAttack map[oneRunKey]*oneRunAcc
	order    []oneRunKey
}

// add records one seed's one-run findings; realized is that run's realized mu by round, the
// truth where no exact mu is known.
func (t *oneRunTally) add(fs []findings.Finding, realized map[int]float64) {
	for _, f := range fs {
		if !f.OneRun() {
			continue
		}
		k := oneRunKey{f.Attack, f.Round}
		x := t.byAttack[k]
		if x == nil {
			x = &oneRunAcc{attack: f.Attack, threat: f.Threat, round: f.Round}
			t.byAttack[k] = x
			t.order = append(t.order, k)
		}
		x.mu = append(x.mu, f.Result.MuLower)
		x.eps = append(x.eps, f.Result.EpsLower)
		switch {
		case !math.IsNaN(f.ExactMu):
			x.truth, x.kind = append(x.truth, f.ExactMu), "exact"
			if f.Result.MuLower > f.ExactMu {
				x.misses++
			}
		case !math.IsNaN(realized[f.Round]):
			x.truth, x.kind = append(x.truth, realized[f.Round]), "realized"
		}
		if f.Estimate != nil {
			x.est = append(x.est, f.Estimate.Mu)
		}
	}
}

// rows is one row per attack and round, in the canary attacks' order then by round, each the
// medians over the seeds.
func (t *oneRunTally) rows(delta float64) []OneRunCostRow {
	slices.SortFunc(t.order, func(a, b oneRunKey) int {
		names := attacks.CanaryAttackNames()
		return cmp.Or(cmp.Compare(slices.Index(names, a.attack), slices.Index(names, b.attack)), cmp.Compare(a.round, b.round))
	})
	var rows []OneRunCostRow
	for _, k := range t.order {
		x := t.byAttack[k]
		r := OneRunCostRow{Attack: x.attack, Threat: x.threat, Round: x.round, MuLower: audit.Median(x.mu), EpsLower: audit.Median(x.eps),
			Delta: delta, MuLowers: x.mu, EpsLowers: x.eps, Truth: math.NaN(), TruthKind: x.kind, Misses: x.misses, EstimateMu: math.NaN()}
		if len(x.truth) > 0 {
			r.Truth = audit.Median(x.truth)
		}
		if len(x.est) > 0 {
			r.EstimateMu = audit.Median(x.est)
		}
		rows = append(rows, r)
	}
	return rows
}

// realizedMuAt is the realized mu of the informed adversary at round T in an experiment
// directory's rounds.json (NaN when absent).
func realizedMuAt(dir string, T int) float64 {
	raw, err := os.ReadFile(expdir.Dir(dir).Rounds())
	if err != nil {
		return math.NaN()
	}
	rs, err := findings.UnmarshalRounds(raw)
	if err != nil {
		return math.NaN()
	}
	for _, r := range rs {
		if r.Round == T {
			return r.RealizedMu
		}
	}
	return math.NaN()
}
