package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/numfmt"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/model"
)

// A sequential run (RunOptions.Sequential, `audit run --sequential`) trains the shards in order
// and analyzes the pairs trained so far after 1, 2, 4, ... shards and after the last
// (audit.SequentialLooks), each look at its audit.SequentialConfidences, and stops at the first
// look whose headline is a violation: a deployment far from its claim is caught after a fraction
// of the pairs, and a claim that holds is called violated with probability at most one minus the
// confidence, over all looks together. The directory records its looks in DIR/sequential.json,
// and the confidence of the look it ended at as its audit confidence, so every later stage
// judges what that look judged.

// SequentialFormat names the JSON form of DIR/sequential.json.
const SequentialFormat = "fedaudit-sequential/1"

// SequentialLook is one look of a sequential run.
type SequentialLook struct {
	Shards int `json:"shards"` // the first Shards shards were analyzed
	Pairs  int `json:"pairs"`
	// Confidence is the look's family-wise confidence.
	Confidence float64 `json:"confidence"`
	// Status is the look's headline status, MuLower its headline's certified bound.
	Status  string  `json:"status"`
	MuLower float64 `json:"mu_lower"`
}

// SequentialRecord is DIR/sequential.json.
type SequentialRecord struct {
	Format string `json:"format"`
	Shards int    `json:"shards"`
	Pairs  int    `json:"pairs"` // the config's pairs, all shards
	// Confidence is the level the looks hold at jointly.
	Confidence float64 `json:"confidence"`
	// Planned are the shards seen at each planned look, PlannedConfidence each look's level.
	Planned           []int            `json:"planned_looks"`
	PlannedConfidence []float64        `json:"planned_confidence"`
	Looks             []SequentialLook `json:"looks"`
	// Stopped says the run stopped before its last look: the shards after the last look's were
	// never trained, and later stages analyze the ones that were.
	Stopped bool   `json:"stopped"`
	Status  string `json:"status"`
	// Settings is the audit section the looks judged with (the claim, the attacks, the joint
	// confidence, ...): a record of other settings, or without them, is an earlier run's, and
	// the tasks of a new array neither trust nor keep it (SequentialSettled).
	Settings json.RawMessage `json:"settings,omitempty"`
}

// ReadSequential reads DIR/sequential.json; nil when the directory was not run sequentially.
func ReadSequential(dir string) (*SequentialRecord, error) {
	raw, err := os.ReadFile(expdir.Dir(dir).Sequential())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r SequentialRecord
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err = dec.Decode(&r)
	if err == nil && r.Format != SequentialFormat {
		err = fmt.Errorf("format %q, want %q", r.Format, SequentialFormat)
	}
	if err == nil {
		err = r.check()
	}
	if err != nil {
		// Damaged, or written by an earlier version (look_confidence, no planned_confidence):
		// its looks cannot be trusted. A task of a new array removes it (SequentialSettled).
		return nil, fmt.Errorf("%s: %w: %v (remove it and run the audit again with --sequential)", expdir.Dir(dir).Sequential(), errSequentialRecord, err)
	}
	return &r, nil
}

// errSequentialRecord marks a sequential.json that no sequential run of this version wrote.
var errSequentialRecord = errors.New("not a record of a sequential run")

// check refuses a record no sequential run writes: the analysis states its looks' levels from
// it (a flipped byte made "error levels adding up to -7.95, so that all 4 hold jointly at
// 8.95"), and a later stage takes the shards its last look saw.
func (r *SequentialRecord) check() error {
	level := func(x float64) bool { return x > 0 && x < 1 }
	switch {
	case r.Shards < 1 || r.Pairs < r.Shards:
		return fmt.Errorf("%d shards of %d pairs", r.Shards, r.Pairs)
	case !level(r.Confidence):
		return fmt.Errorf("confidence %v is not in (0, 1)", r.Confidence)
	case len(r.Planned) == 0 || len(r.Planned) != len(r.PlannedConfidence):
		return fmt.Errorf("%d planned looks with %d levels", len(r.Planned), len(r.PlannedConfidence))
	case len(r.Looks) > len(r.Planned):
		return fmt.Errorf("%d looks of %d planned", len(r.Looks), len(r.Planned))
	}
	for i, s := range r.Planned {
		if s < 1 || s > r.Shards || (i > 0 && s <= r.Planned[i-1]) || !level(r.PlannedConfidence[i]) {
			return fmt.Errorf("planned look %d (%d shards at %v) is not a look of %d shards at a level in (0, 1) after the one before", i+1, s, r.PlannedConfidence[i], r.Shards)
		}
	}
	for i, l := range r.Looks {
		if l.Shards != r.Planned[i] || l.Confidence != r.PlannedConfidence[i] || l.Pairs < 1 || l.Pairs > r.Pairs {
			return fmt.Errorf("look %d (%d shards, %d pairs at %v) is not planned look %d", i+1, l.Shards, l.Pairs, l.Confidence, i+1)
		}
	}
	return nil
}

func writeSequential(dir string, r *SequentialRecord) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(expdir.Dir(dir).Sequential(), append(raw, '\n'))
}

// stoppedAt is the number of shards the last look of a sequential run in dir saw when it stopped
// before its last look, 0 when dir holds no such run: the shards after them are not missing but
// never needed, and any trained anyway (by tasks of an array running at once) were not judged.
func stoppedAt(dir string) (int, error) {
	r, err := ReadSequential(dir)
	if err != nil || r == nil || !r.Stopped || len(r.Looks) == 0 {
		return 0, err
	}
	return r.Looks[len(r.Looks)-1].Shards, nil
}

// CheckSequential refuses, with a *spec.ConfigError, a sequential run of cfg in shards shards
// that could not analyze its looks: fewer than 2 shards, more shards than pairs, or a first look
// (the first shard's pairs) too small to fit a learned attack the looks score (listed, the
// attacks asked for, else the config's; the default set leaves out only those too few for all
// the pairs): the attacks are fitted on the shadow pairs of the runs analyzed, and a run would
// train the first shard and then fail at its first look. `audit run --sequential` and the
// tasks of a sequential array (`audit train --sequential`) check it before they train.
func CheckSequential(cfg *spec.Config, shards int, listed []string) error {
	if shards > cfg.Pairs {
		return &spec.ConfigError{Err: fmt.Errorf("--sequential with %d shards needs at least as many pairs (the config has %d)", shards, cfg.Pairs)}
	}
	if shards < 2 {
		return &spec.ConfigError{Err: fmt.Errorf("--sequential looks after 1, 2, 4, ... shards and needs at least 2 (--shards %d)", shards)}
	}
	if cfg.Audit.Method == spec.MethodOneRun {
		return nil // the canaries only: nothing is fitted on shadow pairs
	}
	if len(listed) == 0 {
		listed = cfg.Audit.Attacks
	}
	names, _ := spec.RunAttacks(listed, spec.PlannedMeta(cfg), cfg.Train.Model, cfg.Pairs)
	first := ShardPairs(cfg.Pairs, runs.Shard{Index: 0, Count: shards}).Count
	if few := attacks.TooFewPairs(names, first); len(few) > 0 {
		return &spec.ConfigError{Err: fmt.Errorf("--sequential with %d shards looks first at the %d pairs of the first shard, and attack %s cannot be fitted on them (%s): give at most %d shards, or audit.attacks without it",
			shards, first, few[0].Name, few[0].Why, cfg.Pairs/attacks.MinPairs(few[0].Name))}
	}
	return nil
}

// planSequential checks a sequential run's options and returns its plan, and the config to
// record until the run ends, whose audit confidence is the last look's.
func planSequential(cfg *spec.Config, opts *RunOptions) (*SequentialRecord, *spec.Config, error) {
	if err := CheckSequential(cfg, opts.Shards, opts.Attack.Attacks); err != nil {
		return nil, nil, fmt.Errorf("run: %w", err)
	}
	looks, err := audit.SequentialLooks(opts.Shards)
	if err != nil {
		return nil, nil, err
	}
	joint := opts.Analyze.withDefaults(cfg).Confidence
	each, err := audit.SequentialConfidences(joint, looks)
	if err != nil {
		return nil, nil, &spec.ConfigError{Err: fmt.Errorf("run: %w", err)}
	}
	settings, err := json.Marshal(opts.Analyze.recorded(cfg).Audit)
	if err != nil {
		return nil, nil, err
	}
	seq := *cfg
	seq.Audit.Confidence = each[len(each)-1]
	opts.Analyze.Confidence = 0
	return &SequentialRecord{Format: SequentialFormat, Shards: opts.Shards, Pairs: cfg.Pairs, Confidence: joint,
		Planned: looks, PlannedConfidence: each, Settings: settings}, &seq, nil
}

// samePlan reports whether r is a record of the sequential run that plan plans: the same shards
// and pairs, looks and levels, judged with the same settings.
func (r *SequentialRecord) samePlan(plan *SequentialRecord) bool {
	return r.Shards == plan.Shards && r.Pairs == plan.Pairs && r.Confidence == plan.Confidence &&
		slices.Equal(r.Planned, plan.Planned) && slices.Equal(r.PlannedConfidence, plan.PlannedConfidence) &&
		sameJSON(r.Settings, plan.Settings)
}

// sameJSON reports whether a and b are the same JSON text but for white space (the record is
// written indented); an empty or invalid text matches nothing.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return len(a) > 0 && json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// ForgetSequential removes DIR/sequential.json, the record of an earlier sequential run, and
// reports whether there was one: a run of every shard, or a sequential run of other settings,
// replaces it, and later stages must not analyze only the shards its stop saw.
func ForgetSequential(dir string) (bool, error) {
	err := os.Remove(expdir.Dir(dir).Sequential())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// SequentialConfig is the config that a sequential run of cfg in shards shards records in
// DIR/config.json while it runs (Run records it before it trains): its audit confidence is the
// last look's, so that an analysis of every shard before the run ends (the finish job of a
// cluster array, which records the confidence of the look it ends at) judges at that look's
// share of the error, not at the joint level the looks already spend. The tasks of a
// sequential array (`audit train --sequential`) record it.
func SequentialConfig(cfg *spec.Config, shards int) (*spec.Config, error) {
	ro := RunOptions{Shards: shards}
	_, seq, err := planSequential(cfg, &ro)
	return seq, err
}

// runSequential trains and analyzes the looks of a sequential run (the directory set up by Run)
// and writes the analysis of the look it stopped at.
func runSequential(ctx context.Context, cfg *spec.Config, data *spec.Data, dir string, opts RunOptions, rec *SequentialRecord, stage func(string)) (*findings.Analysis, error) {
	shards := AllShards(opts.Shards)
	looks := rec.Planned
	// The record is rewritten look by look; an older one (a run before this one) is stale.
	if _, err := ForgetSequential(dir); err != nil {
		return nil, err
	}
	for j, k := range looks {
		stage("train")
		if err := TrainShards(ctx, cfg, data, dir, shards[:k], opts.Train, opts.TrainProgress); err != nil {
			return nil, err
		}
		pairs := pairsOfShards(cfg.Pairs, shards[:k])
		last := j == len(looks)-1
		look := *cfg
		look.Audit.Confidence = rec.PlannedConfidence[j]
		a, err := sequentialLook(ctx, &look, data, dir, opts, k, stage, func(a *findings.Analysis) (bool, error) {
			rec.Looks = append(rec.Looks, SequentialLook{Shards: k, Pairs: pairs, Confidence: look.Audit.Confidence, Status: a.Headline.Status, MuLower: a.Headline.MuLower})
			stop := last || a.Headline.Violated()
			rec.Stopped, rec.Status = stop && !last, a.Headline.Status
			if !stop {
				return false, writeSequential(dir, rec)
			}
			a.Headline.Notes = append([]string{sequentialNote(rec)}, a.Headline.Notes...)
			// Later stages judge at the confidence of the look the run ended at.
			if _, err := RecordSettings(dir, AnalyzeOptions{Confidence: look.Audit.Confidence}); err != nil {
				return false, err
			}
			return true, writeSequential(dir, rec)
		})
		if err != nil || a != nil {
			return a, err
		}
		if opts.Train.Logf != nil {
			opts.Train.Logf("run: sequential look %d of %d (%d pairs): no violation certified at confidence %s; training on", j+1, len(looks), pairs, numfmt.LowerConfidence(look.Audit.Confidence, 'g', 4))
		}
	}
	return nil, errors.New("run: sequential: no look")
}

// sequentialLook attacks and analyzes the shards trained so far; decide records the look and
// says whether to stop there, in which case the analysis is written and returned.
func sequentialLook(ctx context.Context, cfg *spec.Config, data *spec.Data, dir string, opts RunOptions, first int, stage func(string), decide func(*findings.Analysis) (bool, error)) (*findings.Analysis, error) {
	ed, err := openPrepared(dir, false, first, cfg, data)
	if err != nil {
		return nil, err
	}
	defer ed.Close()
	a, err := ed.scoreAndAnalyze(ctx, opts.Attack, opts.Analyze, stage)
	if err != nil {
		return nil, err
	}
	stop, err := decide(a)
	if err != nil || !stop {
		return nil, err
	}
	stage("report")
	if err := ed.writeAnalysis(ctx, a, opts.Report); err != nil {
		return nil, err
	}
	return a, nil
}

// sequentialNote says where a sequential run ended and at what confidence.
func sequentialNote(r *SequentialRecord) string {
	l := r.Looks[len(r.Looks)-1]
	what := "the last look: every pair trained"
	if r.Stopped {
		what = fmt.Sprintf("stopped: the remaining %d pairs are left out (they need not be trained; any already trained are not analyzed)", r.Pairs-l.Pairs)
	}
	return fmt.Sprintf("sequential run: look %d of %d, %d of %d pairs (%s); this look certifies at confidence %s, the looks' error levels adding up to %.4g, so that all %d hold jointly at %g (docs/statistics.md)",
		len(r.Looks), len(r.Planned), l.Pairs, r.Pairs, what, numfmt.LowerConfidence(l.Confidence, 'g', 4), 1-r.Confidence, len(r.Planned), r.Confidence)
}

// pairsOfShards counts the pairs of the given shards.
func pairsOfShards(pairs int, shards []runs.Shard) int {
	n := 0
	for _, s := range shards {
		n += ShardPairs(pairs, s).Count
	}
	return n
}

// scoresCoverRuns says why scores (of pairs pairID) do not cover the runs of tab ("" when they
// do): a score file written before more shards were trained (a sequential look, an analysis
// with --allow-partial) scores fewer pairs than the directory now holds, and one written before
// shards were removed scores pairs it no longer holds. Every shard of at least need pairs must
// have a scored pair (coverNeed: 1 when an attack scores every pair; 0, none, when no attack
// need score a given pair).
func scoresCoverRuns[S any](scores []S, pairID func(S) int64, tab *runs.Table, pairs, need int) string {
	type span struct{ first, end int }
	var spans []span
	for _, f := range tab.Shards() {
		r := ShardPairs(pairs, f.Shard)
		spans = append(spans, span{r.First, r.First + r.Count})
	}
	seen := make([]bool, len(spans))
	for _, sc := range scores {
		id := pairID(sc)
		in := false
		for i, s := range spans {
			if int(id) >= s.first && int(id) < s.end {
				seen[i], in = true, true
				break
			}
		}
		if !in {
			return fmt.Sprintf("it scores pair %d, which no run file holds", id)
		}
	}
	for i, s := range spans {
		if !seen[i] && need > 0 && s.end-s.first >= need {
			return fmt.Sprintf("it scores none of pairs %d..%d, which the run files hold", s.first, s.end-1)
		}
	}
	return ""
}

// coverNeed is the fewest pairs a shard holds when the named run-level attacks must score
// some pair of it: 1 when one of them scores every pair (every attack but the learned ones and
// a capped invgrad does: a run lacking the observation scores 0, attacks.Metrics); 2 when all
// are learned (they leave out the shadow
// pairs, every attacks.DefaultShadowEvery-th pair by pair id, so of two adjacent pairs one is
// scored); 0 when only invgrad runs, capped to the first pairs (attacks.Options.InvgradPairs),
// so that a shard past them has no score.
func coverNeed(names []string, cfg *spec.Config) int {
	need := 0
	for _, n := range names {
		a, err := attacks.Lookup(n)
		switch {
		case err != nil:
			return 1
		case a.Info().Learned:
			need = 2
		case n == "invgrad" && (cfg.Audit.InvgradPairs > 0 || cfg.Audit.InvgradPairs == 0 && model.IsNNKind(cfg.Train.Model.Kind)):
		default:
			return 1
		}
	}
	return need
}

// SequentialTask is what one task of a cluster array (`audit train --shard i/n --sequential`)
// does about the looks of a sequential run once its shard is trained: it evaluates, in order,
// every planned look whose shards are all complete, in a private temporary folder (the
// directory's own outputs are the finish job's), and at the first look that certifies a
// violation records the stop in DIR/sequential.json, so that the array's tasks that have not
// started yet train nothing (they read it first: SequentialSettled). It returns the record of
// the stop, or nil while the run goes on. The finish job, `audit run --sequential`, evaluates the
// looks again and writes the analysis: the same looks of the same runs give the same verdicts.
func SequentialTask(ctx context.Context, cfg *spec.Config, data *spec.Data, dir string, shards int, opts AnalyzeOptions, aopts AttackOptions) (*SequentialRecord, error) {
	ro := RunOptions{Shards: shards, Analyze: opts}
	rec, base, err := planSequential(cfg, &ro)
	if err != nil {
		return nil, err
	}
	infos, err := runs.ShardStatus(expdir.Dir(dir).Runs(), shards)
	if err != nil {
		return nil, err
	}
	complete := make([]bool, shards)
	for _, in := range infos {
		if in.State == runs.ShardComplete && in.Shard.Count == shards {
			complete[in.Shard.Index] = true
		}
	}
	for j, k := range rec.Planned {
		for i := range k {
			if !complete[i] {
				return nil, nil // this look waits for shard i; a later task evaluates it
			}
		}
		look := *base
		look.Audit.Confidence = rec.PlannedConfidence[j]
		a, err := evaluateLook(ctx, &look, data, dir, k, ro.Analyze, aopts)
		if err != nil {
			return nil, fmt.Errorf("sequential look %d (%d shards): %w", j+1, k, err)
		}
		rec.Looks = append(rec.Looks, SequentialLook{Shards: k, Pairs: pairsOfShards(cfg.Pairs, AllShards(shards)[:k]),
			Confidence: look.Audit.Confidence, Status: a.Headline.Status, MuLower: a.Headline.MuLower})
		if a.Headline.Violated() {
			rec.Stopped, rec.Status = j < len(rec.Planned)-1, a.Headline.Status
			return rec, writeSequential(dir, rec)
		}
	}
	return nil, nil
}

// SequentialSettled returns the record of the sequential run of cfg in shards shards in dir
// when it stopped early, nil when it has not: a task of its array then has nothing left to
// train. A record of another run (other shards, pairs or settings: the directory was run before
// with another claim, say) is removed and reported as stale, so that the new array trains its
// shards and later stages do not analyze the old stop's.
func SequentialSettled(dir string, cfg *spec.Config, shards int) (settled, stale *SequentialRecord, err error) {
	r, err := ReadSequential(dir)
	if errors.Is(err, errSequentialRecord) {
		// An earlier version's record (or a damaged one) is an earlier run's, as one of other
		// settings is: removed, so that this array's looks are its own.
		if _, err := ForgetSequential(dir); err != nil {
			return nil, nil, err
		}
		return nil, &SequentialRecord{}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if r == nil {
		return nil, nil, nil
	}
	plan, _, err := planSequential(cfg, &RunOptions{Shards: shards})
	if err != nil {
		return nil, nil, err
	}
	if !r.samePlan(plan) {
		if _, err := ForgetSequential(dir); err != nil {
			return nil, nil, err
		}
		return nil, r, nil
	}
	if !r.Stopped {
		return nil, nil, nil
	}
	return r, nil, nil
}

// evaluateLook attacks and analyzes the first k shards of dir with the scores kept in a private
// temporary folder.
func evaluateLook(ctx context.Context, cfg *spec.Config, data *spec.Data, dir string, k int, opts AnalyzeOptions, aopts AttackOptions) (*findings.Analysis, error) {
	tmp, err := os.MkdirTemp("", "fedaudit-look-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	tab, err := openRunTable(dir, false, k)
	if err != nil {
		return nil, err
	}
	ed, err := withData(tmp, tab, cfg, data)
	if err != nil {
		return nil, err
	}
	defer ed.Close()
	return ed.scoreAndAnalyze(ctx, aopts, opts, nil)
}
