package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/bounds"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/report"
	"github.com/fedaudit/fedaudit/runs"
)

// ReportOptions tune the report stage.
type ReportOptions struct {
	// PNG also writes every figure as PNG.
	PNG bool
	// ToolVersion is printed in the report's footer.
	ToolVersion string
}

// Report writes the analysis of an experiment directory: findings.json, the report (report.html,
// report.md, figures/, tables/) from the analysis and the run files, and the per-round training
// summaries (rounds.json) that `audit compare` tabulates. findings.json and the report always
// come from the same analysis, so they never disagree.
//
// A directory of imported model outputs (`audit import --outputs`) has no run files, config or
// theory to draw: it gets findings.json only, and ErrOutputsOnly says so.
func Report(ctx context.Context, dir string, a *findings.Analysis, opts ReportOptions, allowPartial bool) error {
	if IsOutputsDir(dir) {
		if err := WriteFindings(dir, a); err != nil {
			return err
		}
		return ErrOutputsOnly
	}
	ed, err := openExperimentDir(ctx, dir, allowPartial)
	if err != nil {
		return err
	}
	defer ed.Close()
	return ed.writeAnalysis(ctx, a, opts)
}

func (e *experimentDir) writeAnalysis(ctx context.Context, a *findings.Analysis, opts ReportOptions) error {
	if err := WriteFindings(e.dir, a); err != nil {
		return err
	}
	if err := e.report(ctx, a, opts); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

func (e *experimentDir) report(ctx context.Context, a *findings.Analysis, opts ReportOptions) error {
	dir, tab, cfg, data := e.dir, e.tab, e.cfg, e.data
	sums, err := e.roundSummaries(ctx)
	if err != nil {
		return err
	}
	raw, err := findings.MarshalRounds(sums)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(expdir.Dir(dir).Rounds(), append(raw, '\n')); err != nil {
		return err
	}
	sm, err := e.smoothness(ctx)
	if err != nil {
		return err
	}
	in := report.Input{
		Title:       fmt.Sprintf("fedaudit report: %s", cfg.Name),
		Name:        cfg.Name,
		ConfigJSON:  cfg.JSON(),
		DatasetHash: data.Hash,
		ToolVersion: tab.Meta().ToolVersion,
		Pairs:       trainedPairs(cfg, tab),
		Runs:        2 * trainedPairs(cfg, tab),
		Delta:       cfg.Audit.Delta,
		Smoothness:  smoothnessLabel(sm),
		NoiseLabel:  noiseLabel(cfg),
		Generated:   fmt.Sprintf("fedaudit %s, audit report %s", opts.ToolVersion, dir),
	}
	fs := a.Findings
	if len(fs) > 0 {
		in.Confidence = fs[0].Result.Confidence
		in.Method = string(fs[0].Result.Method)
		in.Delta = fs[0].Result.Delta
	}
	h := a.Headline
	in.Headline, in.Family = &h, a.Family
	in.ClaimMu, _, in.ClaimLabel = claimed(fs, "mu")
	if in.ClaimMu == 0 {
		in.ClaimEps, in.ClaimDelta, in.ClaimLabel = claimed(fs, "epsilon")
	}
	in.Findings, in.Rounds = fs, sums
	if in.Gallery, err = readGallery(dir); err != nil {
		return err
	}
	if in.Check, err = ReadCheck(dir); err != nil {
		return err
	}
	return report.Write(dir, in, report.Options{PNG: opts.PNG})
}

// readGallery reads DIR/reconstructions.json, nil when absent.
func readGallery(dir string) (*findings.Gallery, error) {
	raw, err := os.ReadFile(expdir.Dir(dir).Reconstructions())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	g, err := findings.UnmarshalGallery(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expdir.Dir(dir).Reconstructions(), err)
	}
	return g, nil
}

// trainedPairs is the number of pairs the run files of tab hold: every pair of the config, or
// those of the shards present (a sequential run that stopped early, --allow-partial).
func trainedPairs(cfg *spec.Config, tab *runs.Table) int {
	files := tab.Shards()
	if len(files) == 0 || len(files) == max(files[0].Shard.Count, 1) {
		return cfg.Pairs
	}
	shards := make([]runs.Shard, len(files))
	for i, f := range files {
		shards[i] = f.Shard
	}
	return pairsOfShards(cfg.Pairs, shards)
}

// partialNote says that an analysis read only part of the experiment's shards (--allow-partial),
// so that its headline, and a report or a table copied from it, cannot be taken for the whole
// audit; "" when every shard is there. The bounds are valid for the pairs analyzed: which
// shards are missing does not depend on the scores.
func partialNote(cfg *spec.Config, tab *runs.Table) string {
	if tab == nil {
		return ""
	}
	files := tab.Shards()
	if len(files) == 0 || len(files) >= files[0].Shard.Count {
		return ""
	}
	return fmt.Sprintf("partial analysis (--allow-partial): %d of %d shards, %d of the config's %d pairs; the bounds hold for the pairs analyzed, the missing shards' pairs are left out",
		len(files), files[0].Shard.Count, trainedPairs(cfg, tab), cfg.Pairs)
}

// ReadCheck reads DIR/check.json, the grey-box checks `audit check` wrote; nil when absent.
func ReadCheck(dir string) (*findings.CheckReport, error) {
	raw, err := os.ReadFile(expdir.Dir(dir).Check())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := findings.UnmarshalCheck(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expdir.Dir(dir).Check(), err)
	}
	return c, nil
}

// claimed is the deployment's one claim of the quantity ("mu", or "epsilon" with its delta)
// over the rows judged against it, with the source that names it; zeros where no row was
// judged against such a claim or the rows were judged against different ones.
func claimed(fs []findings.Finding, quantity string) (value, delta float64, source string) {
	for _, f := range fs {
		if f.Verdict == nil || f.ClaimKind != findings.ClaimDeployment {
			continue
		}
		for _, c := range f.Verdict.Checks {
			if c.Quantity != quantity {
				continue
			}
			if value != 0 && (c.Claimed != value || c.Delta != delta) {
				return 0, 0, ""
			}
			value, delta, source = c.Claimed, c.Delta, f.ClaimSource
		}
	}
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 {
		return 0, 0, ""
	}
	return value, delta, source
}

func smoothnessLabel(sm bounds.Smoothness) string {
	switch sm.Source {
	case "certified":
		return fmt.Sprintf("L = %.4g (certified from the model and data; a convergent bound after T = 1 is still an estimate: docs/theory.md)", sm.L)
	case "given":
		return fmt.Sprintf("L = %.4g (given: convergent bounds are estimates)", sm.L)
	case "estimated":
		return fmt.Sprintf("L = %.4g (Hessian power iteration at recorded parameters: convergent bounds are estimates)", sm.L)
	}
	return "L unknown: no convergent bound (the composition bound needs none)"
}

// noiseLabel names the noise of the deployment: the clients' sigma for Noisy-FedAvg, FedProx
// and DP-SGD; the server's noise multiplier for the DP-FedAvg family, whose sigma field is
// unused (or the privacy plan, where per-client budgets set the noise).
func noiseLabel(cfg *spec.Config) string {
	tc := cfg.Train
	switch {
	case !tc.IsClientDP():
		return fmt.Sprintf("sigma = %g", tc.NoiseStd)
	case tc.NoiseMultiplier != 0:
		return fmt.Sprintf("server z = %g, clip c = %g", tc.NoiseMultiplier, tc.UpdateClip)
	default:
		return "server noise per privacy plan"
	}
}
