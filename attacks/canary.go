package attacks

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/fedaudit/fedaudit/runs"
)

// Canary attacks score every canary of every run (runs with train.canaries): higher means
// "this canary was included in the run". Their scores feed the one-run audits, which compare
// the included and excluded canaries of a run instead of the runs of two worlds. Each reads
// one canary observation the trainer recorded at the checkpoint.
const (
	// CanaryCos scores a direction canary by the cosine of w_T - w_0 with its direction: the
	// final model's statistic of Andrew et al.'s one-shot estimate.
	CanaryCos = "canary-cos"
	// CanaryCosMax scores it by the largest cosine of a round's model change with its
	// direction: that estimate's statistic for an observer of every iterate.
	CanaryCosMax = "canary-cos-max"
	// CanaryLLR scores it by the log-likelihood ratio of its participation, summed over the
	// rounds (all iterates), under the deployment's sampling rate and noise.
	CanaryLLR = "canary-llr"
	// CanaryLoss scores a record canary like the paired loss attack scores a target: the final
	// model's loss on the sample the slot holds without the canary minus its loss on the canary.
	CanaryLoss = "canary-loss"
	// CanaryMargin scores it by its logit margin on the canary minus that on the slot's sample.
	CanaryMargin = "canary-margin"
)

// canaryAttack reads one canary statistic, minus another when alt is set (the slot's own
// sample); sign orients the result so that higher means included.
type canaryAttack struct {
	name, threat, stat, alt string
	sign                    float64
	what                    string
}

var canaryAttacks = []canaryAttack{
	{CanaryCos, runs.ThreatFinal, runs.CanaryCosFinal, "", 1, "cosine of w_T - w_0 with the canary's direction"},
	{CanaryCosMax, runs.ThreatAllIterates, runs.CanaryCosMax, "", 1, "largest cosine of a round's change with the canary's direction"},
	{CanaryLLR, runs.ThreatAllIterates, runs.CanaryLLRAll, "", 1, "log-likelihood ratio of the canary's participation, summed over rounds"},
	{CanaryLoss, runs.ThreatFinal, runs.CanaryLoss, runs.CanaryLossAlt, -1, "paired: final model's loss on the slot's own sample minus on the canary"},
	{CanaryMargin, runs.ThreatFinal, runs.CanaryMargin, runs.CanaryMarginAlt, 1, "paired: final model's margin on the canary minus on the slot's own sample"},
}

// IsCanaryAttack reports whether name is a canary attack.
func IsCanaryAttack(name string) bool {
	return slices.ContainsFunc(canaryAttacks, func(a canaryAttack) bool { return a.name == name })
}

// CanaryAttackNames lists every canary attack, in canonical order.
func CanaryAttackNames() []string {
	out := make([]string, len(canaryAttacks))
	for i, a := range canaryAttacks {
		out[i] = a.name
	}
	return out
}

// CanaryInfo describes a canary attack for listings: name, threat model and what it scores.
type CanaryInfo struct{ Name, Threat, Summary string }

// CanaryNames describes every canary attack, in canonical order.
func CanaryNames() []CanaryInfo {
	out := make([]CanaryInfo, len(canaryAttacks))
	for i, a := range canaryAttacks {
		out[i] = CanaryInfo{a.name, a.threat, "canaries (train.canaries): " + a.what}
	}
	return out
}

// CanaryDefault lists the canary attacks a run file supports (none without canaries), in
// canonical order.
func CanaryDefault(meta runs.Meta) []string {
	var out []string
	for _, a := range canaryAttacks {
		if meta.Canaries > 0 && meta.CanaryStatIndex(a.stat) >= 0 && (a.alt == "" || meta.CanaryStatIndex(a.alt) >= 0) {
			out = append(out, a.name)
		}
	}
	return out
}

// CanaryThreat is the threat model of a canary attack ("" for another name).
func CanaryThreat(name string) string {
	for _, a := range canaryAttacks {
		if a.name == name {
			return a.threat
		}
	}
	return ""
}

// ScoreCanaries scores every canary of every run of table at the given rounds (nil: every
// checkpoint after 0) with the named canary attacks. Scores are ordered by attack (as
// requested), round, run id and canary. A NaN observation (a diverged run) scores -Inf,
// "surely excluded": still a function of the run's output alone, as the one-run audits need.
func ScoreCanaries(ctx context.Context, table *runs.Table, names []string, rounds []int) ([]runs.CanaryScore, error) {
	meta := table.Meta()
	if meta.Canaries == 0 {
		return nil, fmt.Errorf("attacks: %s holds no canaries (set train.canaries)", table.Path())
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("attacks: no canary attack selected")
	}
	var atts []canaryAttack
	for _, n := range names {
		i := slices.IndexFunc(canaryAttacks, func(a canaryAttack) bool { return a.name == n })
		if i < 0 {
			return nil, fmt.Errorf("attacks: unknown canary attack %q (have %v)", n, CanaryAttackNames())
		}
		a := canaryAttacks[i]
		for _, st := range []string{a.stat, a.alt} {
			if st != "" && meta.CanaryStatIndex(st) < 0 {
				return nil, fmt.Errorf("attacks: %s needs the canary observation %q, which %s does not record (it has %v)", n, st, table.Path(), meta.CanaryStatNames)
			}
		}
		if slices.ContainsFunc(atts, func(b canaryAttack) bool { return b.name == n }) {
			return nil, fmt.Errorf("attacks: attack %s selected twice", n)
		}
		atts = append(atts, a)
	}
	want := map[int32]bool{}
	for _, t := range rounds {
		want[int32(t)] = true
	}
	var rows []runs.Row
	err := table.Scan(ctx, func(r runs.Row) error {
		if (len(rounds) == 0 && r.Round > 0) || want[r.Round] {
			r.Params, r.Upload, r.Stats = nil, nil, nil
			rows = append(rows, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("attacks: %s holds no rows at the rounds scored (%v)", table.Path(), rounds)
	}
	slices.SortStableFunc(rows, func(a, b runs.Row) int {
		return cmp.Or(cmp.Compare(a.Round, b.Round), cmp.Compare(a.RunID, b.RunID))
	})
	out := make([]runs.CanaryScore, 0, len(atts)*len(rows)*meta.Canaries)
	for _, a := range atts {
		col, alt := meta.CanaryStatIndex(a.stat), meta.CanaryStatIndex(a.alt)
		for _, r := range rows {
			for j, v := range r.CanaryStats[col] {
				if alt >= 0 {
					v -= r.CanaryStats[alt][j]
				}
				s := a.sign * v
				if math.IsNaN(s) {
					s = math.Inf(-1)
				}
				out = append(out, runs.CanaryScore{RunID: r.RunID, PairID: r.PairID, World: r.World, Round: r.Round,
					Attack: a.name, Threat: a.threat, Canary: int32(j), Included: r.CanaryIn[j], Score: s})
			}
		}
	}
	return out, nil
}

// WriteCanaryScores writes canary scores to path with the run files' metadata.
func WriteCanaryScores(path string, meta runs.Meta, toolVersion string, scores []runs.CanaryScore) (err error) {
	w, err := runs.CreateCanaryScores(path, runs.ScoreMeta{Config: meta.Config, DatasetHash: meta.DatasetHash, ToolVersion: toolVersion})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	if err := w.Write(scores...); err != nil {
		return err
	}
	return w.Close()
}
