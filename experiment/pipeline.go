package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fedaudit/fedaudit/audit"
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
}

// Run trains, attacks, analyzes and reports an experiment in dir, skipping every stage whose
// output is complete, and writes the canonical config (config.json), the findings
// (findings.json) and the report (report.html, report.md) beside the run files.
func Run(ctx context.Context, cfg *Config, dir string, opts RunOptions) ([]Finding, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "config.json"), append(cfg.JSON(), '\n')); err != nil {
		return nil, err
	}
	data, err := Prepare(cfg)
	if err != nil {
		return nil, err
	}
	stage := opts.Stage
	if stage == nil {
		stage = func(string) {}
	}
	stage("train")
	if err := TrainShards(ctx, cfg, data, dir, AllShards(opts.Shards), opts.Train, opts.TrainProgress); err != nil {
		return nil, err
	}
	aopts := opts.Analyze
	if aopts.Confidence == 0 {
		aopts.Confidence = cfg.Audit.Confidence
	}
	if aopts.Delta == 0 {
		aopts.Delta = cfg.Audit.Delta
	}
	if aopts.Method == "" {
		aopts.Method = audit.ThresholdMethod(cfg.Audit.Method)
	}
	if aopts.Claim.Mu == 0 && aopts.Claim.Epsilon == 0 {
		aopts.Claim.Mu = cfg.Audit.ClaimMu
		if cfg.Audit.ClaimEpsilon > 0 {
			aopts.Claim.Epsilon, aopts.Claim.Delta = cfg.Audit.ClaimEpsilon, aopts.Delta
		}
	}
	// One open of the finished run files serves every later stage, with the data prepared above.
	ed, err := openPrepared(dir, opts.Attack.AllowPartial, cfg, data)
	if err != nil {
		return nil, err
	}
	defer ed.Close()
	stage("attack")
	sf, err := ed.scores(ctx, opts.Attack)
	if err != nil {
		return nil, err
	}
	stage("analyze")
	findings, err := ed.analyze(ctx, sf, aopts, opts.Attack.Logf)
	if err != nil {
		return nil, err
	}
	raw, err := json.MarshalIndent(Records(findings), "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, "findings.json"), append(raw, '\n')); err != nil {
		return nil, err
	}
	stage("report")
	if err := ed.report(ctx, findings, opts.Report); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return findings, nil
}

// writeFileAtomic writes through a temporary file and a rename, so a reader never sees half a
// file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
