package experiment

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/model"
)

// readDirConfig reads DIR/config.json; it returns nil and no error when there is none.
func readDirConfig(dir string) (*spec.Config, error) {
	raw, err := os.ReadFile(expdir.Dir(dir).Config())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", expdir.Dir(dir).Config(), err)
	}
	cfg, err := spec.FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expdir.Dir(dir).Config(), err)
	}
	return cfg, nil
}

// writeDirConfig stores cfg as DIR/config.json. When that changes the directory's settings,
// the files that state a verdict judged with the old ones (findings.json, the report, its
// tables and figures) are removed first: a job killed before the next analysis, or `audit
// train` alone, left a findings.json and report of one claim beside the config.json of
// another, and `status` passed such a directory. Without them the next `analyze`, `report` or
// `run` judges afresh. Where there was no config.json, the grey-box checks' check.json goes too.
func writeDirConfig(dir string, cfg *spec.Config) error {
	d := expdir.Dir(dir)
	data := append(cfg.JSON(), '\n')
	old, err := os.ReadFile(d.Config())
	if err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := removeJudged(d); err != nil {
		return err
	}
	if errors.Is(err, os.ErrNotExist) {
		// Without a config.json nothing says which runs the grey-box checks looked at, and
		// a failed one would make the new runs' headline inconclusive: they are checked again.
		if err := os.RemoveAll(d.Check()); err != nil {
			return fmt.Errorf("remove %s, of runs no config.json describes: %w", d.Check(), err)
		}
	}
	return writeFileAtomic(d.Config(), data)
}

// removeJudged removes what an analysis of dir wrote under its settings.
func removeJudged(d expdir.Dir) error {
	for _, p := range []string{d.Findings(), d.ReportHTML(), d.ReportMarkdown(), d.Tables(), d.Figures()} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove %s, judged with the settings being replaced: %w", p, err)
		}
	}
	return nil
}

// withDirSettings overlays the stage-only settings of DIR/config.json (name, audit section,
// performance knobs) on the config read from the run files, which holds only what was trained.
// Without config.json the run files' config stands as it is (directories of older versions
// recorded the whole config there), unless the directory holds findings.json: its claim and
// attacks were recorded in the missing config.json, so judging the runs with the defaults
// instead would silently replace its verdict (and `audit report` its findings). A config.json
// of other training is an error: the directory was edited by hand or mixed up.
func withDirSettings(dir string, trained *spec.Config) (*spec.Config, error) {
	own, err := readDirConfig(dir)
	if err != nil {
		return nil, err
	}
	if own == nil {
		if _, err := os.Stat(expdir.Dir(dir).Findings()); err == nil {
			return nil, fmt.Errorf("%s is missing, and with it the claim and audit settings %s was judged with: restore it (`audit run --config CONFIG --out %s` writes it again and reuses the trained runs), or remove %s to judge the runs afresh without a claim",
				expdir.Dir(dir).Config(), expdir.Dir(dir).Findings(), dir, expdir.Dir(dir).Findings())
		}
		return trained, nil
	}
	if !spec.SameTraining(own, trained) {
		return nil, fmt.Errorf("%s does not describe the runs in %s; it differs in %s",
			expdir.Dir(dir).Config(), expdir.Dir(dir).Runs(), strings.Join(spec.ConfigDiff(trained, own, true), "; "))
	}
	return own, nil
}

// DirectoryCheck is what an experiment directory already holds, compared with a config about
// to run there.
type DirectoryCheck struct {
	// Changed lists the stage-only settings (audit section, name) that differ from the
	// directory's config.json, as "path: old -> new".
	Changed []string
}

// CheckDirectory compares cfg (to be trained in shards shards) with what dir holds, before
// anything is written there: run files trained with other training settings, or for another
// shard count, and a config.json of other training are refused with the differing fields named,
// as config errors (exit status 2: the config and the output directory do not go together).
// A directory that does not exist yet is fine.
func CheckDirectory(cfg *spec.Config, dir string, shards int) (DirectoryCheck, error) {
	var chk DirectoryCheck
	// A shard without a pair cannot be trained (ShardPairs): refused before any shard of the
	// array trains, not by the empty shard's task once the others have.
	if shards > cfg.Pairs {
		return chk, &spec.ConfigError{Err: fmt.Errorf("%d shards for %d pairs: a shard needs at least one pair", shards, cfg.Pairs)}
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return chk, &spec.ConfigError{Err: fmt.Errorf("%s is a file: the output is an experiment directory (a new one, or one of this experiment)", dir)}
	}
	own, err := readDirConfig(dir)
	if err != nil {
		return chk, err
	}
	if own != nil {
		if !spec.SameTraining(own, cfg) {
			return chk, &spec.ConfigError{Err: fmt.Errorf("%s holds an experiment trained with other settings (%s); choose another --out, or remove the directory to retrain",
				dir, strings.Join(spec.ConfigDiff(own, cfg, true), "; "))}
		}
		chk.Changed = spec.ConfigDiff(own, cfg, false)
	}
	infos, err := runs.ShardStatus(expdir.Dir(dir).Runs(), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		if _, statErr := os.Stat(expdir.Dir(dir).Runs()); statErr == nil {
			return chk, err
		}
	}
	shards = max(shards, 1)
	if err := checkExternal(cfg, dir, infos); err != nil {
		return chk, err
	}
	for _, info := range infos {
		if info.Path == "" || (info.State != runs.ShardComplete && info.State != runs.ShardMismatch) {
			continue
		}
		if info.Shard.Count != shards {
			return chk, &spec.ConfigError{Err: fmt.Errorf("%s holds shard %s of a %d-shard layout (%s); this run asks for %d shards: give --shards %d, or choose another --out",
				expdir.Dir(dir).Runs(), info.Shard, info.Shard.Count, filepath.Base(info.Path), shards, info.Shard.Count)}
		}
		trained, err := trainedConfig(info.Path)
		if err != nil {
			continue // a file that cannot be read is retrained by the train stage
		}
		if !spec.SameTraining(trained, cfg) {
			return chk, &spec.ConfigError{Err: fmt.Errorf("%s was trained with other settings (%s); choose another --out, or remove the directory to retrain",
				info.Path, strings.Join(spec.ConfigDiff(trained, cfg, true), "; "))}
		}
	}
	return chk, nil
}

// checkExternal refuses to train a model of kind external (runs trained elsewhere, of an
// architecture fedaudit does not know) where the directory does not already hold every run
// file complete, before anything is written: such runs can only be imported.
func checkExternal(cfg *spec.Config, dir string, infos []runs.ShardInfo) error {
	if cfg.Train.Model.Kind != model.External {
		return nil
	}
	complete := len(infos) > 0
	for _, info := range infos {
		complete = complete && info.State == runs.ShardComplete
	}
	if !complete {
		return &spec.ConfigError{Err: fmt.Errorf("%s holds no complete run files: %w", dir, model.ErrExternal)}
	}
	return nil
}

// SetUpDirectory checks dir against cfg (CheckDirectory) and records cfg as its config.json,
// creating the directory. It returns the stage-only settings that changed since the last run
// there. Nothing is written when the check refuses (but the lock file, when another training's
// config appeared in the moment between the first check and the lock).
func SetUpDirectory(cfg *spec.Config, dir string, shards int) ([]string, error) {
	// Checked first without the lock, whose file would create the directory: a refused
	// config leaves no trace.
	if _, err := CheckDirectory(cfg, dir, shards); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	// The shard jobs of an array hold the directory shared: the jobs of two arrays of other
	// training sharing one directory both found it without a config, each wrote its own, and
	// trained shards of two experiments side by side (3 of 8 tries). The check and the write are
	// one step, so the later array's jobs find the earlier one's config and are refused.
	var changed []string
	err := fsutil.Serialize(expdir.Dir(dir).ConfigLock(), func() error {
		chk, err := CheckDirectory(cfg, dir, shards)
		if err != nil {
			return err
		}
		changed = chk.Changed
		return writeDirConfig(dir, cfg)
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// trainedConfig reads the config a run file was trained with.
func trainedConfig(path string) (*spec.Config, error) {
	t, err := runs.Open(path)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	cfg, err := spec.FromJSON(t.Meta().Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// scoredWith is what a score file records of how it was scored: the attacks it ran and the
// rounds it was asked for (empty: every checkpoint), in the audit section of its config.
type scoredWith struct {
	Audit struct {
		Attacks           []string `json:"attacks"`
		Rounds            []int    `json:"rounds"`
		InvgradPairs      int      `json:"invgrad_pairs"`
		InvgradIterations int      `json:"invgrad_iterations"`
	} `json:"audit"`
}

// scoringDiffers says how a score file scored with the recorded config fails to answer the
// attacks and rounds asked for now, or "" when it answers them. Files of other tools record
// nothing and are taken as they are.
func scoringDiffers(recorded []byte, attacks []string, rounds []int, invgradPairs, invgradIterations int) string {
	if len(recorded) == 0 {
		return ""
	}
	var rec scoredWith
	if json.Unmarshal(recorded, &rec) != nil {
		return "its recorded config cannot be read"
	}
	sorted := func(x []string) []string { x = slices.Clone(x); slices.Sort(x); return x }
	sortedInts := func(x []int) []int { x = slices.Clone(x); slices.Sort(x); return x }
	if a, b := sorted(rec.Audit.Attacks), sorted(attacks); !slices.Equal(a, b) {
		return fmt.Sprintf("it holds attacks %v, the config asks for %v", a, b)
	}
	if a, b := sortedInts(rec.Audit.Rounds), sortedInts(rounds); !slices.Equal(a, b) {
		return fmt.Sprintf("it was scored for rounds %v, the config asks for %v (empty: every checkpoint)", a, b)
	}
	if slices.Contains(attacks, "invgrad") && rec.Audit.InvgradPairs != invgradPairs {
		return fmt.Sprintf("invgrad reconstructed %s per round, the config asks for %s", pairsText(rec.Audit.InvgradPairs), pairsText(invgradPairs))
	}
	if slices.Contains(attacks, "invgrad") && rec.Audit.InvgradIterations != invgradIterations {
		return fmt.Sprintf("invgrad ran %d iterations, the config asks for %d (0: the default)", rec.Audit.InvgradIterations, invgradIterations)
	}
	return ""
}

// scoredOtherRuns says why a score file that records the config recorded and the dataset hash
// hash was scored from other runs than the run files of tab, trained with cfg ("" when from
// the same training): a directory whose runs were removed and trained again with other settings
// keeps the old score file, which answers the same attacks and rounds and pair ids. Files of
// other tools record nothing and are taken as they are.
func scoredOtherRuns(recorded []byte, hash string, tab *runs.Table, cfg *spec.Config) string {
	if len(recorded) == 0 {
		return ""
	}
	if runsHash := tab.Meta().DatasetHash; hash != runsHash {
		return fmt.Sprintf("it was scored from runs on dataset %s, the run files were trained on %s", hash, runsHash)
	}
	var scored spec.Config
	if err := json.Unmarshal(recorded, &scored); err != nil {
		return "its recorded config cannot be read"
	}
	scored.FillDefaults()
	if !spec.SameTraining(&scored, cfg) {
		return fmt.Sprintf("it was scored from runs of other training (%s)", strings.Join(spec.ConfigDiff(&scored, cfg, true), "; "))
	}
	return ""
}

// pairsText names an audit.invgrad_pairs setting.
func pairsText(n int) string {
	switch {
	case n < 0:
		return "every pair"
	case n == 0:
		return "the default number of pairs"
	}
	return fmt.Sprintf("%d pairs", n)
}

// recorded returns a copy of cfg whose audit section holds the statistics settings o states
// (the command line's: confidence, delta, threshold method, claim and what it is about), so
// that an experiment directory's config.json says what its findings.json was judged with and
// every later stage (analyze, report, the cluster finish jobs) judges the same. The split
// method's seed is recorded as audit.split_seed when it differs from the one the config
// implies (its split_seed, else the master seed).
func (o AnalyzeOptions) recorded(cfg *spec.Config) *spec.Config {
	c := *cfg
	a := &c.Audit
	a.Confidence = cmp.Or(o.Confidence, a.Confidence)
	if a.ClaimEpsilon > 0 && o.Delta != 0 && o.Claim.Mu == 0 && o.Claim.Epsilon == 0 {
		a.ClaimDelta = configClaimDelta(*a) // the claim stays at its delta (withDefaults)
	}
	a.Delta = cmp.Or(o.Delta, a.Delta)
	if a.ClaimDelta == a.Delta {
		a.ClaimDelta = 0
	}
	a.Method = cmp.Or(string(o.Method), a.Method)
	switch {
	case o.Claim.Mu > 0:
		a.ClaimMu, a.ClaimEpsilon, a.ClaimDelta = o.Claim.Mu, 0, 0
	case o.Claim.Epsilon > 0:
		// At --delta when given; without it at the configured claim's delta, which stays
		// recorded (withDefaults).
		a.ClaimMu, a.ClaimEpsilon = 0, o.Claim.Epsilon
		if o.Claim.Delta > 0 {
			a.Delta, a.ClaimDelta = o.Claim.Delta, 0
		}
	}
	a.ClaimAbout = cmp.Or(o.ClaimAbout, a.ClaimAbout)
	if o.Seed != 0 && o.Seed != cmp.Or(a.SplitSeed, c.Seed) {
		a.SplitSeed = o.Seed
	}
	return &c
}

// unrecordedSeed is the note for a split seed o gives that the directory's config.json would
// not record (recorded(cfg) does record every seed, as audit.split_seed): a later stage would
// divide the scores with another seed, so its bounds (and verdict) might differ unless it is
// given the same --seed. It is "" when the seed is the one a later stage would use, or the
// method in effect is not split.
func (o AnalyzeOptions) unrecordedSeed(cfg *spec.Config, dir string) string {
	later := AnalyzeOptions{}.withDefaults(o.recorded(cfg)).Seed
	if o.withDefaults(cfg).Method != audit.Split || o.Seed == 0 || o.Seed == later {
		return ""
	}
	return fmt.Sprintf("split seed %d from the command line is not recorded in %s (it has no place in the config): a later analyze or report of the directory divides the scores with seed %d unless given --seed %d",
		o.Seed, expdir.Dir(dir).Config(), later, o.Seed)
}

// RecordSettings writes the statistics settings opts states (the command line's) into the
// audit section of DIR/config.json, as `audit run` does, after `audit report DIR` wrote
// findings.json and the report with them: the directory then says what they were judged with,
// and a later `audit analyze DIR` judges the same. A directory without config.json (imported
// model outputs) is left as it is. It reports whether config.json changed.
func RecordSettings(dir string, opts AnalyzeOptions) (bool, error) {
	own, err := readDirConfig(dir)
	if err != nil || own == nil {
		return false, err
	}
	rec := opts.recorded(own)
	if bytes.Equal(rec.JSON(), own.JSON()) {
		return false, nil
	}
	return true, writeDirConfig(dir, rec)
}
