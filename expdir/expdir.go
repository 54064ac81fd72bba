// Package expdir owns the layout of an experiment directory: the one place that names its
// files. Every stage, the report, the locks and the CLI ask a Dir for a path instead of
// joining names of their own, so the layout can only change here.
//
//	DIR/config.json     the whole config as last run (its audit: section drives the later stages)
//	DIR/runs/           the run files, one per shard (named by package runs)
//	DIR/scores.arrow    the attacks' scores
//	DIR/canary-scores.arrow  the canary attacks' scores (runs with canaries)
//	DIR/findings.json   the analysis (package findings, format "fedaudit-findings/3")
//	DIR/rounds.json     per-round training summaries
//	DIR/reconstructions.json  the reconstructing attacks' images for the report's gallery
//	DIR/outputs.json    what `audit import --outputs` scored; it marks a directory of model outputs
//	DIR/import.json     where `audit import` took the runs from; it marks a directory of imported runs
//	DIR/report.html     the report, self-contained; DIR/report.md the same in Markdown
//	DIR/figures/        the report's figures (SVG, PNG on request)
//	DIR/tables/         the report's tables (CSV, LaTeX)
//	DIR/.lock           the directory lock; DIR/.lock-shard-I-of-N the lock of one shard job;
//	                    DIR/.lock-config the one that makes checking and writing config.json one step
//	DIR/logs/           a Slurm submission's job logs and the copy of the config it submitted
//
// It imports nothing: the lock and atomic-write mechanics (internal/fsutil) use its names.
package expdir

import (
	"fmt"
	"path/filepath"
)

// Dir is an experiment directory, by its path.
type Dir string

// Path is the directory itself.
func (d Dir) Path() string { return string(d) }

func (d Dir) join(name string) string { return filepath.Join(string(d), name) }

// Config is the configuration as last run there.
func (d Dir) Config() string { return d.join("config.json") }

// Runs is the folder of run files.
func (d Dir) Runs() string { return d.join("runs") }

// Scores is the score file of the attack stage.
func (d Dir) Scores() string { return d.join("scores.arrow") }

// CanaryScores is the canary score file of the attack stage (runs with canaries).
func (d Dir) CanaryScores() string { return d.join("canary-scores.arrow") }

// Findings is the analysis (findings.Analysis as JSON).
func (d Dir) Findings() string { return d.join("findings.json") }

// Rounds is the per-round training summaries (findings.RoundSummary as JSON).
func (d Dir) Rounds() string { return d.join("rounds.json") }

// Reconstructions is the attack stage's images for the report's gallery (findings.Gallery as
// JSON); absent when the samples are not images or no attack reconstructs them.
func (d Dir) Reconstructions() string { return d.join("reconstructions.json") }

// OutputsImport is the summary that `audit import --outputs` writes beside the score file
// (importer/outputs.Summary as JSON); its presence marks a directory of imported model outputs,
// which has a score file and no run files.
func (d Dir) OutputsImport() string { return d.join("outputs.json") }

// ImportRecord is where `audit import` records where the runs came from (importer.Record); its
// presence marks runs trained elsewhere, which no stage may train again.
func (d Dir) ImportRecord() string { return d.join("import.json") }

// Check is the outcome of the grey-box checks (`audit check`), written by it.
func (d Dir) Check() string { return d.join("check.json") }

// Sequential records the looks of a sequential run (`audit run --sequential`).
func (d Dir) Sequential() string { return d.join("sequential.json") }

// ReportHTML is the self-contained report page.
func (d Dir) ReportHTML() string { return d.join("report.html") }

// ReportMarkdown is the report in Markdown.
func (d Dir) ReportMarkdown() string { return d.join("report.md") }

// Figures is the folder of the report's figures.
func (d Dir) Figures() string { return d.join("figures") }

// Figure is the file of one figure, ext "svg" or "png".
func (d Dir) Figure(name, ext string) string { return filepath.Join(d.Figures(), name+"."+ext) }

// Tables is the folder of the report's tables.
func (d Dir) Tables() string { return d.join("tables") }

// Table is the file of one table, ext "csv" or "tex".
func (d Dir) Table(name, ext string) string { return filepath.Join(d.Tables(), name+"."+ext) }

// Written are the folders that writers put files in (through temporary files that a killed
// writer may leave behind): the directory, its runs, figures and tables.
func (d Dir) Written() []string {
	return []string{d.Path(), d.Runs(), d.Figures(), d.Tables()}
}

// ShardLockPrefix begins the name of every shard lock file.
const ShardLockPrefix = ".lock-shard-"

// Lock is the lock file of the whole directory.
func (d Dir) Lock() string { return d.join(".lock") }

// ConfigLock is the lock file that serializes the check and the write of config.json between the
// shard jobs of a directory.
func (d Dir) ConfigLock() string { return d.join(".lock-config") }

// ShardLock is the lock file of shard index of count.
func (d Dir) ShardLock(index, count int) string {
	return d.join(fmt.Sprintf("%s%05d-of-%05d", ShardLockPrefix, index, count))
}
