package experiment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
)

// ErrOutputsOnly is returned by Report for a directory of imported model outputs: its
// findings.json is written, but there is no HTML report without run files and a config.
var ErrOutputsOnly = errors.New("imported model outputs: findings.json written; no HTML report without run files and a config")

// IsOutputsDir reports whether dir was written by `audit import --outputs`.
func IsOutputsDir(dir string) bool {
	_, err := os.Stat(expdir.Dir(dir).OutputsImport())
	return err == nil
}

// outputsSummary holds the fields of the summary `audit import --outputs` writes
// (importer/outputs.Summary) that the analysis logs. experiment sits below the importers (they
// import it), so it reads the file, not their package.
type outputsSummary struct {
	Threat  string   `json:"threat_model"`
	Ran     []string `json:"attacks"`
	Skipped []struct {
		Attack string `json:"attack"`
		Why    string `json:"why"`
	} `json:"skipped"`
}

// analyzeOutputsDir analyzes a directory written by `audit import --outputs`: it has a score
// file and no run files, config or data to rebuild, so there is no theory, exact mu or
// config claim beside the scores; the claim comes from the options. ok is false for any other
// directory.
func analyzeOutputsDir(ctx context.Context, dir string, opts AnalyzeOptions, logf func(string, ...any)) (a *findings.Analysis, ok bool, err error) {
	marker := expdir.Dir(dir).OutputsImport()
	if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	raw, err := os.ReadFile(marker)
	if err != nil {
		return nil, true, err
	}
	var sum outputsSummary
	if err := json.Unmarshal(raw, &sum); err != nil {
		return nil, true, fmt.Errorf("%s: %w", marker, err)
	}
	sf, err := runs.ReadScoreFile(expdir.Dir(dir).Scores())
	if err != nil {
		return nil, true, err
	}
	if logf != nil {
		logf("analyze: %s holds imported model outputs (%s): attacks %v", dir, sum.Threat, sum.Ran)
		for _, s := range sum.Skipped {
			logf("analyze: %s not run: %s", s.Attack, s.Why)
		}
	}
	a, err = AnalyzeScores(ctx, sf, opts, nil)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", dir, err)
	}
	return a, true, nil
}

// OnDiskClaimNote compares the claim of an analysis of a directory of imported model outputs
// with the claim its findings.json (written by an earlier `audit report DIR`) was judged with.
// Such a directory has no config.json to record a command line's claim in, so a later analyze
// judges what its own flags say; when that differs from the files on disk, the returned note
// (added to a's headline) says so. It is "" when they agree, or without findings.json.
func OnDiskClaimNote(dir string, a *findings.Analysis) string {
	raw, err := os.ReadFile(expdir.Dir(dir).Findings())
	if err != nil {
		return ""
	}
	dec, err := findings.Decode(raw)
	if err != nil || dec.Headline == nil || dec.Headline.Claim == a.Headline.Claim {
		return ""
	}
	was, now := cmp.Or(dec.Headline.Claim, "no claim"), cmp.Or(a.Headline.Claim, "no claim")
	note := fmt.Sprintf("%s was judged against %s (%s); this analysis judges %s: imported model outputs have no config.json to record a claim in, so give the same flag again to judge what the files on disk were judged with",
		expdir.Dir(dir).Findings(), was, dec.Headline.Status, now)
	a.Headline.Notes = append(a.Headline.Notes, note)
	return note
}
