package experiment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/claims"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/bounds"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/runs/integrity"
	"github.com/fedaudit/fedaudit/theory"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/model"
)

// AttackOptions tune the attack stage.
type AttackOptions struct {
	// Attacks to run; empty means the config's list, or every attack the run files support.
	Attacks []string
	// Rounds to score; empty means every checkpoint.
	Rounds []int
	// Workers scoring in parallel; 0 means all cores. Scores do not depend on it.
	Workers int
	// AllowPartial scores a run directory with missing shards.
	AllowPartial bool
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

// AttackEnv builds what the attacks know besides the run files: the training config, the
// target samples and the target client's labels, rebuilt from the experiment config.
func AttackEnv(cfg *spec.Config, data *spec.Data, meta runs.Meta) *attacks.Env {
	p := data.Pair
	client := p.C[p.Client]
	env := &attacks.Env{
		Meta:         meta,
		Config:       cfg.Train,
		Dim:          client.Dim(),
		Classes:      data.Classes,
		Shape:        data.Shape,
		Target:       p.Sample,
		TargetPrime:  p.SamplePrime,
		TargetClient: p.Client,
		ClientSize:   client.Len(),
		ClientLabels: slices.Clone(client.Labels),
		Seed:         cfg.Seed,
	}
	if data.Test != nil {
		for i := 0; i < min(data.Test.Len(), 256); i++ {
			env.Aux = append(env.Aux, data.Test.Sample(i))
		}
	}
	return env
}

// experimentDir is an experiment directory opened once for the stages after training: its run
// table, the config the runs were trained with, the data rebuilt from it (checked against the
// recorded dataset hash), and the smoothness constant, resolved at most once because estimating
// it costs Hessian-vector products.
type experimentDir struct {
	dir  string
	tab  *runs.Table
	cfg  *spec.Config
	data *spec.Data
	sm   *bounds.Smoothness
	// rounds are the per-round summaries of the run files (roundSummaries), read once for the
	// analysis and the report.
	rounds []findings.RoundSummary
}

// roundSummaries is SummarizeRounds of the directory's run files, read once.
func (e *experimentDir) roundSummaries(ctx context.Context) ([]findings.RoundSummary, error) {
	if e.rounds == nil {
		sums, err := SummarizeRounds(ctx, e.tab)
		if err != nil {
			return nil, err
		}
		e.rounds = sums
	}
	return e.rounds, nil
}

// openExperimentDir opens the run files of dir and rebuilds their config and data; the
// directory's config.json supplies the audit settings.
func openExperimentDir(ctx context.Context, dir string, allowPartial bool) (*experimentDir, error) {
	// A sequential run that stopped early is the shards its last look saw, whatever shards were
	// trained after them (the tasks of a cluster array).
	first, err := stoppedAt(dir)
	if err != nil {
		return nil, err
	}
	tab, err := openRunTable(dir, allowPartial, first)
	if err != nil {
		return nil, err
	}
	cfg, err := DirConfig(dir, tab.Meta())
	if err != nil {
		tab.Close()
		return nil, err
	}
	data, err := spec.PrepareContext(ctx, cfg)
	if err != nil {
		tab.Close()
		return nil, err
	}
	return withData(dir, tab, cfg, data)
}

// DirConfig is the config of the runs of dir, whose run files have metadata meta: what they
// trained, with the stage-only settings of DIR/config.json; a config.json of other training is
// an error (the directory was edited by hand or mixed up).
func DirConfig(dir string, meta runs.Meta) (*spec.Config, error) {
	trained, err := spec.FromJSON(meta.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expdir.Dir(dir).Runs(), err)
	}
	return withDirSettings(dir, trained)
}

// openPrepared opens the run files of dir for an experiment whose data is already prepared:
// all of them, or with first > 0 the first shards only (a sequential look).
func openPrepared(dir string, allowPartial bool, first int, cfg *spec.Config, data *spec.Data) (*experimentDir, error) {
	tab, err := openRunTable(dir, allowPartial, first)
	if err != nil {
		return nil, err
	}
	return withData(dir, tab, cfg, data)
}

// openRunTable opens the run files of dir: every shard, or with first > 0 the shards of index
// below it (runs.FirstShards).
func openRunTable(dir string, allowPartial bool, first int) (*runs.Table, error) {
	var opts []runs.Option
	if allowPartial {
		opts = append(opts, runs.AllowPartial())
	}
	if first > 0 {
		opts = append(opts, runs.FirstShards(first))
	}
	if err := NoRunFiles(dir, "attack"); err != nil {
		return nil, err
	}
	t, err := runs.Open(expdir.Dir(dir).Runs(), opts...)
	if errors.Is(err, runs.ErrShardsMissing) {
		return nil, fmt.Errorf("%w: train them (audit status %s lists every shard), or give --allow-partial to audit the shards there are", err, dir)
	}
	return t, err
}

// NoRunFiles explains, for a command that would verb dir's run files, why a directory has none
// where that has a reason: imported model outputs, or a directory that kept its report but not
// its runs (results/ commits reports only). It is nil otherwise, also when DIR/runs exists.
func NoRunFiles(dir, verb string) error {
	d := expdir.Dir(dir)
	if _, err := os.Stat(d.Runs()); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if IsOutputsDir(dir) {
		return fmt.Errorf("%s holds imported model outputs, already scored by `audit import --outputs` (%s), and no run files to %s: `audit analyze %s` judges them", dir, d.Scores(), verb, dir)
	}
	if _, err := os.Stat(d.Findings()); err == nil {
		config := filepath.Join(dir, "config.yaml")
		if _, err := os.Stat(config); err != nil {
			config = "CONFIG"
		}
		return fmt.Errorf("%s has findings.json and a report but no run files to %s (%s): run and score files are not kept with reports; `audit run --config %s --out %s` rebuilds them (in this repository's results/: make results)",
			dir, verb, d.Runs(), config, dir)
	}
	return nil
}

func withData(dir string, tab *runs.Table, cfg *spec.Config, data *spec.Data) (*experimentDir, error) {
	if data.Hash != tab.Meta().DatasetHash {
		tab.Close()
		return nil, fmt.Errorf("%s: the data rebuilt from the config has hash %s, the run files were trained on %s; the dataset changed since training",
			expdir.Dir(dir).Runs(), data.Hash, tab.Meta().DatasetHash)
	}
	// A config that declares canaries over run files without them (runs imported, or written by
	// a trainer that left them out) would be audited silently without its one-run rows.
	if c := cfg.Train.Canaries; c != nil && c.Count > 0 && tab.Meta().Canaries == 0 {
		tab.Close()
		return nil, fmt.Errorf("%s: the config declares %d canaries (train.canaries) but the run files carry none; audit them without train.canaries, or train them with fedaudit",
			expdir.Dir(dir).Runs(), c.Count)
	}
	return &experimentDir{dir: dir, tab: tab, cfg: cfg, data: data}, nil
}

func (e *experimentDir) Close() error { return e.tab.Close() }

// smoothness is SmoothnessOf, or the estimate from recorded parameters when the model has no
// certified constant and none was given.
func (e *experimentDir) smoothness(ctx context.Context) (bounds.Smoothness, error) {
	if e.sm != nil {
		return *e.sm, nil
	}
	sm, err := bounds.SmoothnessOf(e.cfg, e.data)
	if err != nil {
		return bounds.Smoothness{}, err
	}
	if sm.Source == "none" {
		if sm, err = bounds.EstimateSmoothness(ctx, e.tab, e.cfg, e.data); err != nil {
			return bounds.Smoothness{}, err
		}
	}
	e.sm = &sm
	return sm, nil
}

// AttackDir scores the run files of dir into expdir.Dir(dir).Scores(), unless a score file is already
// there (then it is read and returned).
func AttackDir(ctx context.Context, dir string, opts AttackOptions) (*runs.ScoreFile, error) {
	ed, err := openExperimentDir(ctx, dir, opts.AllowPartial)
	if err != nil {
		return nil, err
	}
	defer ed.Close()
	return ed.scores(ctx, opts)
}

// allScores returns the scores of both kinds the directory's runs support: the run-level
// scores of the coupled pairs (nil when no run-level attack is asked for, as with the one-run
// method) and the canary scores (nil without canaries). At least one is not nil.
func (e *experimentDir) allScores(ctx context.Context, opts AttackOptions) (*runs.ScoreFile, *runs.CanaryScoreFile, error) {
	sf, err := e.scores(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	cf, err := e.canaryScores(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	if sf == nil && cf == nil {
		if e.cfg.Audit.Method == spec.MethodOneRun {
			return nil, nil, fmt.Errorf("attack: audit method %s needs runs with canaries (train.canaries)", spec.MethodOneRun)
		}
		return nil, nil, errors.New("attack: no attack to score")
	}
	return sf, cf, nil
}

// checksFailedText says why a failed grey-box check leaves a headline inconclusive: an exact
// check holds for every correct deployment up to float rounding, so its failure shows another
// mechanism; a statistical one fails a correct deployment with probability up to the check's
// level, so its failure may be chance.
func checksFailedText(c *findings.CheckReport) string {
	for _, f := range c.Failed() {
		if f.Exact {
			return "an exact grey-box check failed (audit check): the deployment does not run the mechanism it declares, so no verdict that it meets its claim is given. Fix it, retrain and audit again"
		}
	}
	return fmt.Sprintf("a statistical grey-box check failed (audit check, at family-wise level %g): the deployment may not run the mechanism it declares, so no verdict that it meets its claim is given. A correct deployment fails the checks that often: check more pairs (audit check --pairs) or train more pairs to tell chance from a departure", c.Alpha)
}

// rescorable says whether an error reading a score file of an experiment directory means the
// file is damaged, so that it is scored again: a checksum mismatch, and anything else that is
// not an error of the file system (a file cut short by a full disk or a killed copy, emptied,
// zeroed: Arrow's own errors, or a CSV reader's about a file that is not one). Only a
// checksum mismatch was, so `audit run` failed on a truncated score file that `status
// --verify` called damaged and said it would rescore. Errors of the file system (permission,
// I/O) stay errors.
func rescorable(err error) bool {
	var pe *fs.PathError
	return err != nil && (errors.Is(err, integrity.ErrDamaged) || !errors.As(err, &pe))
}

// scores reads the directory's score file, scoring the runs into it first when it is missing or
// was scored for other attacks or rounds than the ones asked for now. It returns nil when no
// run-level attack is asked for.
func (e *experimentDir) scores(ctx context.Context, opts AttackOptions) (*runs.ScoreFile, error) {
	if names, _ := e.scoring(opts); len(names) == 0 {
		return nil, nil
	}
	path := expdir.Dir(e.dir).Scores()
	why := "" // why the runs are scored again; empty when the file is missing
	if _, err := os.Stat(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else if err == nil {
		sf, err := runs.ReadScoreFile(path)
		switch {
		case rescorable(err):
			why = err.Error() // a damaged score file is recomputed, never used
		case err != nil:
			return nil, err
		default:
			names, rounds := e.scoring(opts)
			why = scoredOtherRuns(sf.Meta.Config, sf.Meta.DatasetHash, e.tab, e.cfg)
			if why == "" {
				why = scoringDiffers(sf.Meta.Config, names, rounds, e.cfg.Audit.InvgradPairs, e.cfg.Audit.InvgradIterations)
			}
			if why == "" {
				why = scoresCoverRuns(sf.Scores, func(s runs.Score) int64 { return s.PairID }, e.tab, e.cfg.Pairs, coverNeed(names, e.cfg))
			}
			if why == "" {
				return sf, nil
			}
		}
	}
	if err := e.writableScores(path, why); err != nil {
		return nil, err
	}
	if why != "" && opts.Logf != nil {
		opts.Logf("attack: %s is stale (%s); scoring again", path, why)
	}
	if _, err := e.attack(ctx, path, opts); err != nil {
		return nil, err
	}
	return runs.ReadScoreFile(path)
}

// canWrite is fsutil.CanWrite; a test replaces it, as root writes to any directory it may chmod.
var canWrite = fsutil.CanWrite

// writableScores fails, before any attack runs, when the score file path that is to be scored
// (again, for the reason why) cannot be written: an analysis of a read-only directory whose score
// file was damaged scored every run, which can take hours with inversion attacks, and then failed
// to write the file.
func (e *experimentDir) writableScores(path, why string) error {
	err := canWrite(path)
	if err == nil {
		return nil
	}
	if why == "" {
		why = "it is missing"
	}
	return fmt.Errorf("%s must be scored (%s), but cannot be written: %w; audit a writable copy of %s", path, why, err, e.dir)
}

// scoring resolves the attacks and rounds to score: the options', else the config's, else every
// attack the run files support and every checkpoint (an empty rounds list).
func (e *experimentDir) scoring(opts AttackOptions) (names []string, rounds []int) {
	rounds = opts.Rounds
	if len(rounds) == 0 {
		rounds = e.cfg.Audit.Rounds
	}
	if e.cfg.Audit.Method == spec.MethodOneRun {
		return nil, rounds // the one-run audit scores the canaries only (canaryScoring)
	}
	listed := opts.Attacks
	if len(listed) == 0 {
		listed = e.cfg.Audit.Attacks
	}
	// Canary attacks are scored into their own file (canaryScoring). Attacks that cannot
	// evaluate the model (convolutional models on the host) are left out, whether selected or
	// by default, and so are, by default, learned attacks the pairs are too few to fit; attack
	// logs why.
	names, _ = spec.RunAttacks(listed, e.tab.Meta(), e.cfg.Train.Model, e.cfg.Pairs)
	if len(listed) == 0 {
		// By default, not the attacks whose score is 0 in every run for this target pair.
		for _, s := range attacks.ConstantScores(e.data.Pair.Sample, e.data.Pair.SamplePrime) {
			names = slices.DeleteFunc(names, func(n string) bool { return n == s.Name })
		}
	}
	return names, rounds
}

// logAttackChoice logs which attacks are scored and why an attack that was asked for is not:
// one line for each listed attack (or, with none listed, each attack of the default set) left
// out for the model or for too few pairs. Attacks nobody asked for are not listed one by one:
// with the default set, one line names those the run files cannot support (they record
// nothing the attack reads); with a list, nothing is said of the others.
func logAttackChoice(logf func(string, ...any), names, listed []string, cfg *spec.Config, meta runs.Meta, data *spec.Data) {
	if len(listed) == 0 {
		listed = cfg.Audit.Attacks
	}
	asked := slices.DeleteFunc(slices.Clone(listed), attacks.IsCanaryAttack)
	byDefault := len(listed) == 0
	if byDefault {
		asked = attacks.Default(meta)
	}
	var said []string
	for _, s := range attacks.ModelSkipped(cfg.Train.Model) {
		if slices.Contains(asked, s.Name) {
			logf("attacks: skipped %s: %s", s.Name, s.Why)
			said = append(said, s.Name)
		}
	}
	_, few := spec.RunAttacks(listed, meta, cfg.Train.Model, cfg.Pairs)
	for _, s := range few {
		if !slices.Contains(said, s.Name) {
			logf("attacks: skipped %s: %s", s.Name, s.Why)
			said = append(said, s.Name)
		}
	}
	for _, s := range attacks.ConstantScores(data.Pair.Sample, data.Pair.SamplePrime) {
		switch {
		case slices.Contains(said, s.Name) || !slices.Contains(asked, s.Name):
		case byDefault:
			logf("attacks: skipped %s: %s", s.Name, s.Why)
			said = append(said, s.Name)
		default:
			logf("attacks: note: %s scores 0 in every run here (%s), so its rows certify nothing and take a share of the family's confidence", s.Name, strings.SplitN(s.Why, ": 0 in every run", 2)[0])
		}
	}
	logf("attacks: scoring %v", names)
	if !byDefault {
		return
	}
	var other []string
	for _, s := range attacks.Skipped(meta) {
		if !slices.Contains(names, s.Name) && !slices.Contains(said, s.Name) {
			other = append(other, s.Name)
		}
	}
	if len(other) > 0 {
		logf("attacks: not run, the run files record nothing they read: %s ('audit attack --list' and docs/attacks.md say what each needs)", strings.Join(other, ", "))
	}
}

// AttackTo scores the run files of dir into the score file out (expdir.Dir(dir).Scores() when empty),
// replacing it.
func AttackTo(ctx context.Context, dir, out string, opts AttackOptions) ([]runs.Score, string, error) {
	if out == "" {
		out = expdir.Dir(dir).Scores()
	}
	ed, err := openExperimentDir(ctx, dir, opts.AllowPartial)
	if err != nil {
		return nil, "", err
	}
	defer ed.Close()
	if names, _ := ed.scoring(opts); len(names) == 0 {
		return nil, out, nil // only canary attacks: AttackCanaries scores them
	}
	scores, err := ed.attack(ctx, out, opts)
	return scores, out, err
}

// AttackCanaries scores the canaries of the runs of dir into expdir.Dir(dir).CanaryScores(),
// replacing it, and returns the number of canary scores and the path; 0 and "" when the runs
// carry no canaries.
func AttackCanaries(ctx context.Context, dir string, opts AttackOptions) (int, string, error) {
	ed, err := openExperimentDir(ctx, dir, opts.AllowPartial)
	if err != nil {
		return 0, "", err
	}
	defer ed.Close()
	path := expdir.Dir(dir).CanaryScores()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, "", err
	}
	cf, err := ed.canaryScores(ctx, opts)
	if err != nil || cf == nil {
		return 0, "", err
	}
	return len(cf.Scores), path, nil
}

// attack scores the runs into the score file path, which records the config with the attacks
// and rounds actually scored, so a later stage can tell whether it answers its config.
func (e *experimentDir) attack(ctx context.Context, path string, opts AttackOptions) ([]runs.Score, error) {
	tab, cfg, data := e.tab, e.cfg, e.data
	names, rounds := e.scoring(opts)
	// A learned attack asked for by name on too few pairs: the minimum, not a failed fit.
	if few := attacks.TooFewPairs(names, cfg.Pairs); len(few) > 0 {
		return nil, &spec.ConfigError{Err: fmt.Errorf("attack %s: %s", few[0].Name, few[0].Why)}
	}
	if opts.Logf != nil {
		logAttackChoice(opts.Logf, names, opts.Attacks, cfg, tab.Meta(), data)
	}
	env := AttackEnv(cfg, data, tab.Meta())
	if opts.Logf != nil && slices.Contains(names, "invgrad") {
		n := cfg.Audit.InvgradPairs
		if n == 0 && model.IsNNKind(cfg.Train.Model.Kind) {
			n = attacks.DefaultInvgradPairsCNN
		}
		if n > 0 && n < cfg.Pairs {
			opts.Logf("attacks: invgrad reconstructs the first %d of %d pairs at each round (audit.invgrad_pairs; -1: every pair)", n, cfg.Pairs)
		}
	}
	res, err := attacks.Score(ctx, tab, *env, attacks.Options{Attacks: names, Rounds: rounds, Workers: opts.Workers,
		InvgradPairs: cfg.Audit.InvgradPairs, InvgradIterations: cfg.Audit.InvgradIterations, Logf: opts.Logf})
	if err != nil {
		return nil, err
	}
	if opts.Logf != nil {
		logOneShot(res, cfg.Audit.Delta, opts.Logf)
	}
	scored := *cfg
	scored.Audit.Attacks, scored.Audit.Rounds = names, rounds
	meta := tab.Meta()
	meta.Config = scored.JSON()
	if err := attacks.WriteScores(path, meta, meta.ToolVersion, res); err != nil {
		return nil, err
	}
	if path == expdir.Dir(e.dir).Scores() {
		if err := writeGallery(e.dir, env, res.Reconstructions); err != nil {
			return nil, err
		}
	}
	return res.Scores, nil
}

// writeGallery writes the reconstructions of the attack stage with the samples they
// reconstruct as DIR/reconstructions.json, or removes a stale one when there are none (the
// samples are no images, or no reconstructing attack ran).
func writeGallery(dir string, env *attacks.Env, recs []attacks.Reconstruction) error {
	path := expdir.Dir(dir).Reconstructions()
	if len(recs) == 0 || len(env.Shape) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	g := &findings.Gallery{Shape: galleryShape(env.Shape)}
	for world, s := range []datasets.Sample{env.Target, env.TargetPrime} {
		if s.Present() {
			g.Samples = append(g.Samples, findings.GallerySample{World: int8(world), Label: int(s.Label), Pixels: slices.Clone(s.Features)})
		}
	}
	names := map[string][]string{}
	for _, info := range attacks.Names() {
		names[info.Name] = info.Metrics
	}
	for _, r := range recs {
		px := make([]float32, len(r.X))
		for i, v := range r.X {
			px[i] = float32(v)
		}
		m := map[string]float64{}
		for i, name := range names[r.Attack] {
			if i < len(r.Metrics) {
				m[name] = r.Metrics[i]
			}
		}
		g.Reconstructions = append(g.Reconstructions, findings.Reconstruction{Attack: r.Attack, Round: int(r.Round),
			Run: r.RunID, Pair: r.PairID, World: r.World, Pixels: px, Metrics: m})
	}
	raw, err := findings.MarshalGallery(g)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, raw)
}

// galleryShape is a sample shape as [channels, height, width] (the leading dimensions of a
// longer shape multiply into channels, as the attacks read it).
func galleryShape(shape []int) []int {
	c := 1
	for _, s := range shape[:len(shape)-2] {
		c *= s
	}
	return []int{c, shape[len(shape)-2], shape[len(shape)-1]}
}

// AnalyzeDir audits an experiment directory: it scores the run files when no score file exists,
// then audits every (attack, threat, round) beside the theory for the experiment's config. The
// directory's own audit settings (DIR/config.json) apply wherever opts leaves a field zero.
func AnalyzeDir(ctx context.Context, dir string, opts AnalyzeOptions, aopts AttackOptions) (*findings.Analysis, error) {
	if a, ok, err := analyzeOutputsDir(ctx, dir, opts, aopts.Logf); ok {
		return a, err
	}
	ed, err := openExperimentDir(ctx, dir, aopts.AllowPartial)
	if err != nil {
		return nil, err
	}
	defer ed.Close()
	return ed.scoreAndAnalyze(ctx, aopts, opts, nil)
}

// scoreAndAnalyze scores the runs (or reads their up-to-date score files) and analyzes the
// scores, announcing each stage to stage when it is not nil.
func (e *experimentDir) scoreAndAnalyze(ctx context.Context, aopts AttackOptions, opts AnalyzeOptions, stage func(string)) (*findings.Analysis, error) {
	if stage == nil {
		stage = func(string) {}
	}
	stage("attack")
	sf, cf, err := e.allScores(ctx, aopts)
	if err != nil {
		return nil, err
	}
	stage("analyze")
	return e.analyze(ctx, sf, cf, opts, aopts.Logf)
}

// analyze audits the scores beside the theory, the claim and the exact mu of the experiment.
func (e *experimentDir) analyze(ctx context.Context, sf *runs.ScoreFile, cf *runs.CanaryScoreFile, opts AnalyzeOptions, logf func(string, ...any)) (*findings.Analysis, error) {
	cfg, data := e.cfg, e.data
	sm, err := e.smoothness(ctx)
	if err != nil {
		return nil, err
	}
	var rounds []int32
	if sf != nil {
		for _, s := range sf.Scores {
			rounds = append(rounds, s.Round)
		}
	}
	if cf != nil {
		for _, s := range cf.Scores {
			rounds = append(rounds, s.Round)
		}
	}
	theory, err := theoryLookup(cfg, sm, rounds, logf)
	if err != nil {
		return nil, err
	}
	confidenceGiven := opts.Confidence != 0
	opts = opts.withDefaults(cfg)
	opts.Smoothness = sm
	opts.Logf = logf
	if opts.Rounds, err = e.roundSummaries(ctx); err != nil {
		return nil, err
	}
	// Failed grey-box checks (audit check) qualify every verdict: the claim is computed for a
	// mechanism that did not run.
	check, err := ReadCheck(e.dir)
	if err != nil {
		return nil, err
	}
	if note := check.HeadlineNote(); note != "" {
		opts.Notes = append([]string{note}, opts.Notes...)
		opts.ChecksFailed = checksFailedText(check)
	}
	// A later analysis of a sequential run that stopped early says so, as the run did.
	if seq, err := ReadSequential(e.dir); err != nil {
		return nil, err
	} else if seq != nil && seq.Stopped && len(seq.Looks) > 0 {
		opts.Notes = append([]string{sequentialNote(seq)}, opts.Notes...)
		// The look the run stopped at was chosen by its data: its bounds hold, jointly with
		// the other looks', only at its own share of the error. The cluster array's tasks
		// record the stop before the finish job records that confidence in config.json, and
		// an analysis in between read the level the tasks recorded there (the last look's,
		// SequentialConfig), overstating every bound.
		if look := seq.Looks[len(seq.Looks)-1].Confidence; !confidenceGiven && look > opts.Confidence {
			opts.Confidence = look
		}
	} else if note := partialNote(cfg, e.tab); note != "" {
		opts.Notes = append([]string{note}, opts.Notes...)
	}
	if opts.Claim.Mu == 0 && opts.Claim.Epsilon == 0 {
		claim, source, err := ClaimFor(ctx, cfg, data, opts.Delta)
		if err != nil {
			return nil, err
		}
		// An accountant's claim is about the global models the server releases.
		opts.Claim, opts.ClaimSource, opts.ClaimAbout = claim, source, spec.ClaimAboutModels
		if source != "" && claim.Mu == 0 && claim.Epsilon == 0 {
			// The accountant proves (0, delta)-DP: at so large a delta its epsilon is 0, which
			// reads as no claim, and the rows go unjudged; say so rather than say nothing.
			opts.Notes = append(opts.Notes, fmt.Sprintf("%s gives epsilon = 0 at delta = %g, which leaves nothing to judge: the rows have no verdict; use a smaller audit.delta, or state audit.claim_epsilon", source, opts.Delta))
		}
		if c := cfg.Train.Canaries; (claim.Mu > 0 || claim.Epsilon > 0) && c != nil && (c.Kind == canary.Dirac || c.Kind == canary.Relabel) {
			opts.OneRunUncovered = fmt.Sprintf("the one-run rows of %s canary records are not judged against the accountant's claim: it bounds adding or removing a whole client, and a canary record replaces one record inside a client, a change of up to twice the clip norm; set audit.claim_epsilon to judge them", c.Kind)
			opts.Notes = append(opts.Notes, opts.OneRunUncovered)
		}
	}
	if c := cfg.Train.Canaries; c != nil && c.Kind == canary.Gradients && cfg.Train.Algorithm == algo.DPSGD && cfg.Train.LocalSteps >= 2 {
		// Under DP-SGD a gradient canary is a record added to the client's batch, beside all
		// of its records, where the target's bound counts the target and the others: after the
		// first step the others' drift can move the canary's runs apart by more than that
		// bound allows (with K >= 3 whatever L, with K = 2 once L d exceeds the clip).
		opts.OneRunTheoryUncovered = "the one-run rows of gradient canaries under DP-SGD with more than one local step are not judged against the theory: a canary is a record added beside all of the client's records, and the target's bounds do not cover its drift; set audit.claim_mu or audit.claim_epsilon to judge them"
		if (opts.Claim.Mu == 0 && opts.Claim.Epsilon == 0) || opts.OneRunUncovered != "" {
			opts.Notes = append(opts.Notes, opts.OneRunTheoryUncovered) // else the claim judges them
		}
	}
	if opts.EpsHeuristic == nil {
		// Informational: a heuristic that cannot be computed never holds up the verdict.
		if opts.EpsHeuristic, err = epsHeuristic(ctx, cfg, data, opts.heuristicDelta(), rounds); err != nil {
			if logf != nil {
				logf("analyze: no last-iterate heuristic: %v", err)
			}
			opts.EpsHeuristic = nil
		}
	}
	if note := participationNote(cfg, opts.Claim); note != "" {
		opts.Notes = append(opts.Notes, note)
	}
	if final, all, uploads, ok := bounds.ExactMu(cfg, data); ok && opts.Exact == nil {
		opts.Exact = func(threat string, round int) float64 {
			switch {
			case round < 1:
				return math.NaN()
			case threat == runs.ThreatFinal:
				return final(round)
			case threat == runs.ThreatAllIterates:
				return all(round)
			case threat == runs.ThreatUploads:
				return uploads(round)
			}
			return math.NaN()
		}
	}
	if exact, ok := bounds.ExactMuOneRun(cfg, data); ok && opts.ExactOneRun == nil {
		opts.ExactOneRun = exact
	}
	return AnalyzeAll(ctx, sf, cf, opts, theory)
}

// participationNote qualifies a stated claim about a Noisy-FedAvg, FedProx or DP-SGD
// deployment in which a round averages fewer clients than there are: the informed adversary
// knows which clients took part (the server does), so its rows test a claim that does not
// count on that secrecy; a claim computed with amplification by client sampling is about a
// weaker observer than these rows. The DP-FedAvg family's adversary does not know it
// (dpfedavg.go), and Poisson minibatches are averaged over (poissonmix.go).
func participationNote(cfg *spec.Config, claim audit.Claim) string {
	tc := cfg.Train
	if claim.Mu == 0 && claim.Epsilon == 0 || tc.IsClientDP() || !tc.Informed || tc.Participants == 0 || tc.Participants >= cfg.Data.Clients {
		return ""
	}
	return fmt.Sprintf("the informed rows know which %d of the %d clients took part in each round, as the server does: a claim that counts on that secrecy (amplification by client sampling) is about a weaker observer than they are",
		tc.Participants, cfg.Data.Clients)
}

// epsHeuristic is the last-iterate heuristic of the DP-FedAvg family at every scored round
// (claims.LastIterate), nil for the other systems.
func epsHeuristic(ctx context.Context, cfg *spec.Config, data *spec.Data, delta float64, scored []int32) (func(int, bool) float64, error) {
	var rounds []int
	for _, r := range scored {
		if r >= 1 && int(r) <= cfg.Train.Rounds && !slices.Contains(rounds, int(r)) {
			rounds = append(rounds, int(r))
		}
	}
	if len(rounds) == 0 {
		return nil, nil
	}
	// The target client's, and client 0's for the one-run canaries (the same deployment's
	// plan, computed once).
	byRound := func(client int) (map[int]float64, error) {
		d := claimsDeployment(cfg, data)
		d.Target = client
		eps, err := claims.LastIterate(ctx, d, delta, rounds)
		if err != nil || eps == nil {
			return nil, err
		}
		out := map[int]float64{}
		for i, T := range rounds {
			out[T] = eps[i]
		}
		return out, nil
	}
	target, err := byRound(cfg.Adjacency.Client)
	if err != nil || target == nil {
		return nil, err
	}
	client0 := target
	if cfg.Adjacency.Client != 0 {
		if client0, err = byRound(0); err != nil {
			return nil, err
		}
	}
	return func(round int, oneRun bool) float64 {
		if oneRun {
			return client0[round]
		}
		return target[round]
	}, nil
}

// theoryLookup computes the bounds for every round that has scores.
// A configuration outside the theorems' assumptions (e.g. FedProx with alpha <= L) still gets its
// empirical audit, with no bound beside it and the reason logged.
func theoryLookup(cfg *spec.Config, sm bounds.Smoothness, scored []int32, logf func(string, ...any)) (func(int) *theory.Bound, error) {
	var rounds []int
	for _, r := range scored {
		if r >= 1 && !slices.Contains(rounds, int(r)) {
			rounds = append(rounds, int(r))
		}
	}
	slices.Sort(rounds)
	bounds, err := bounds.TheoryAt(cfg, sm, rounds)
	if err != nil {
		if logf != nil {
			logf("theory: no bound for this configuration: %v", err)
		}
		return nil, nil
	}
	byRound := map[int]*theory.Bound{}
	for i := range bounds {
		byRound[bounds[i].T] = &bounds[i]
	}
	return func(round int) *theory.Bound { return byRound[round] }, nil
}

// logOneShot logs the one-shot estimate of epsilon (Andrew et al. 2024; audit.OneShotEpsilon)
// from the cosine statistic's scores at each round: Gaussians fitted to the runs of world C'
// and of world C. It is an estimate under the Gaussian assumption, not a certified bound, so it
// is told, not judged.
func logOneShot(res *attacks.Result, delta float64, logf func(string, ...any)) {
	for _, m := range res.Summary {
		if m.Attack != "param-cosine" {
			continue
		}
		var c, cp []float64
		for _, s := range res.Scores {
			if s.Attack == m.Attack && s.Round == m.Round {
				if s.World == runs.WorldC {
					c = append(c, s.Score)
				} else {
					cp = append(cp, s.Score)
				}
			}
		}
		est, err := audit.OneShotEpsilon(cp, c, delta)
		if err != nil {
			logf("attacks: param-cosine at T = %d: no one-shot estimate: %v", m.Round, err)
			continue
		}
		logf("attacks: param-cosine at T = %d: one-shot estimate epsilon %.3f at delta %g, mu %.3f (Gaussian fit to %d + %d runs; an estimate, not a bound)",
			m.Round, est.Epsilon, delta, est.Mu, est.Inserted.N, est.HeldOut.N)
	}
}
