package outputs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
)

// Summary is what the import writes to expdir.Dir.OutputsImport, the file that marks a
// directory as an import of outputs: `audit analyze DIR` then reads the directory's score file
// instead of run files. (experiment reads its threat_model, attacks and skipped fields.)
type Summary struct {
	Source string `json:"source"`
	Result
	// Threat says what the bounds mean.
	Threat string `json:"threat_model"`
}

// ImportOptions configure Import.
type ImportOptions struct {
	Input, Out  string
	ToolVersion string
	Options
}

// Import reads the outputs table at Input, scores it and writes DIR = Out with the score file
// (expdir's scores.arrow) and the summary (expdir's outputs.json). Nothing is left at Out on failure: both files are
// written into a temporary directory beside it, renamed into place at the end. Out must not
// exist or be empty.
func Import(ctx context.Context, o ImportOptions) (*Summary, error) {
	if err := checkOut(o.Out); err != nil {
		return nil, err
	}
	t, err := ReadFile(ctx, o.Input)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Input, err)
	}
	res, err := Score(ctx, t, o.Options)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Input, err)
	}
	sum := &Summary{Source: o.Input, Result: *res,
		Threat: "black-box: one query per record of the final model (the losses or logits given); the bounds hold for that observer only"}
	parent := filepath.Dir(filepath.Clean(o.Out))
	// Locked while it is filled; killed imports' staging directories are removed.
	tmp, lock, _, err := fsutil.StagingDir(parent, "."+filepath.Base(filepath.Clean(o.Out))+".import-", "audit import --outputs")
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
		lock.Unlock()
	}()
	w, err := runs.CreateScores(expdir.Dir(tmp).Scores(), runs.ScoreMeta{ToolVersion: o.ToolVersion})
	if err != nil {
		return nil, err
	}
	if err := w.Write(res.Scores...); err != nil {
		w.Abort()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(expdir.Dir(tmp).OutputsImport(), append(js, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	// An empty Out (checked above) is replaced; os.Rename cannot replace a directory.
	if err := os.Remove(o.Out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("import: %w", err)
	}
	if err := os.Rename(tmp, o.Out); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	done = true
	return sum, nil
}

func checkOut(out string) error {
	if out == "" {
		return errors.New("import: no output directory")
	}
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("import: %w", err)
	case len(ents) > 0:
		return &InputError{Msg: fmt.Sprintf("%s exists and is not empty; the import writes a new directory", out), N: 1}
	}
	return nil
}
