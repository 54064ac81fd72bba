package experiment

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
)

// RunOptions tune a whole experiment.
type RunOptions struct {
	// Shards the training is split into (each one file); 0 means 1.
	Shards  int
	Train   TrainOptions
	Attack  AttackOptions
	Analyze AnalyzeOptions
	Report  ReportOptions
	// Stage, when set, is called as each stage starts ("train", "attack", "analyze", "report"),
	// so one display can follow the whole run.
	Stage func(name string)
	// TrainProgress, when set, returns the progress callback of one shard.
	TrainProgress func(s runs.Shard) func(done, total int)
	// Sequential trains the Shards in order and analyzes after 1, 2, 4, ... of them and after
	// the last, stopping at the first violation (sequential.go); it needs Shards >= 2.
	Sequential bool
}

// Run trains, attacks, analyzes and reports an experiment in dir, skipping every stage whose
// output is complete, and writes the canonical config (config.json), the analysis
// (findings.json) and the report (report.html, report.md) beside the run files.
//
// A directory trained before is checked first, before anything is written: runs of other
// training settings or another shard count are refused with the differing fields named, while
// changed audit settings (claim, confidence, attacks, ...) reuse the trained runs.
//
// The statistics settings opts.Analyze states (the command line's claim, confidence, delta,
// threshold method) are recorded in config.json's audit section, so that every later stage of
// the directory (analyze, report, the cluster finish jobs) judges what findings.json was judged
// with; the analysis notes each one that replaces the config's.
func Run(ctx context.Context, cfg *spec.Config, dir string, opts RunOptions) (*findings.Analysis, error) {
	logf := opts.Train.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// What the attack stage needs of the runs is checked before they are trained, with the
	// command line's statistics settings (a claim and what it is about) in place.
	if err := spec.CheckStages(opts.Analyze.recorded(cfg)); err != nil {
		return nil, err
	}
	if _, err := CheckDirectory(cfg, dir, opts.Shards); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if note := cfg.PrepareNote(); note != "" {
		logf("%s", note)
	}
	data, err := spec.PrepareContext(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var seq *SequentialRecord
	if opts.Sequential {
		if seq, cfg, err = planSequential(cfg, &opts); err != nil {
			return nil, err
		}
	}
	// The notes name what the command line replaces in cfg; the directory records the result.
	rec := opts.Analyze.recorded(cfg)
	opts.Analyze.Notes = opts.Analyze.withDefaults(cfg).Notes
	if !bytes.Equal(rec.JSON(), cfg.JSON()) {
		opts.Analyze.Notes = append(opts.Analyze.Notes, fmt.Sprintf("the command line's settings are recorded in %s: later stages (analyze, report) judge them too",
			expdir.Dir(dir).Config()))
	}
	if note := opts.Analyze.unrecordedSeed(cfg, dir); note != "" {
		opts.Analyze.Notes = append(opts.Analyze.Notes, note)
	}
	cfg = rec
	changed, err := SetUpDirectory(cfg, dir, opts.Shards)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if len(changed) > 0 {
		logf("run: settings changed since the last run in %s; reusing its trained runs: %s", dir, strings.Join(changed, "; "))
	}
	stage := opts.Stage
	if stage == nil {
		stage = func(string) {}
	}
	if opts.Sequential {
		return runSequential(ctx, cfg, data, dir, opts, seq, stage)
	}
	// A run of every shard replaces a sequential run's stop: later stages analyze all the
	// shards, as this run does, not the stopped look's.
	if _, err := ForgetSequential(dir); err != nil {
		return nil, err
	}
	stage("train")
	if err := TrainShards(ctx, cfg, data, dir, AllShards(opts.Shards), opts.Train, opts.TrainProgress); err != nil {
		return nil, err
	}
	// One open of the finished run files serves every later stage, with the data prepared above.
	ed, err := openPrepared(dir, opts.Attack.AllowPartial, 0, cfg, data)
	if err != nil {
		return nil, err
	}
	defer ed.Close()
	a, err := ed.scoreAndAnalyze(ctx, opts.Attack, opts.Analyze, stage)
	if err != nil {
		return nil, err
	}
	stage("report")
	if err := ed.writeAnalysis(ctx, a, opts.Report); err != nil {
		return nil, err
	}
	return a, nil
}

// WriteFindings stores an analysis as DIR/findings.json.
func WriteFindings(dir string, a *findings.Analysis) error {
	var buf bytes.Buffer
	if err := a.WriteJSON(&buf); err != nil {
		return fmt.Errorf("findings: %w", err)
	}
	return writeFileAtomic(expdir.Dir(dir).Findings(), buf.Bytes())
}

// writeFileAtomic writes through a temporary file, fsync and a rename, so a reader never sees
// half a file (fsutil.WriteFile).
func writeFileAtomic(path string, data []byte) error { return fsutil.WriteFile(path, data) }
