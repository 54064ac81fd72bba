package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fedaudit/fedaudit/expdir"
)

// experimentDirArg refuses, as a usage error (exit 2), a path given where an experiment
// directory belongs that is none: a file (a run or score file given in place of its
// directory), the run files' own folder, or a directory that holds nothing fedaudit wrote. The
// stages failed on such a path with status 1 and an error about a file inside it ("open
// X/runs: no such file or directory", "open X.arrow/outputs.json: not a directory"). A missing
// path stays a failure (exit 1): a finish job started before its directory exists has the
// right command line.
func experimentDirArg(cmd, dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %s: no such directory", cmd, dir)
	case err != nil:
		return nil // unreadable: the stage's own error says why
	case !st.IsDir():
		hint := ""
		if strings.HasSuffix(dir, ".arrow") || strings.HasSuffix(dir, ".csv") {
			parent := filepath.Dir(dir)
			if filepath.Base(parent) == "runs" {
				parent = filepath.Dir(parent)
			}
			hint = "; give the experiment directory that holds it (" + parent + ")"
			if cmd == "analyze" {
				hint += ", or --scores FILE for a score file"
			}
		}
		return usagef("%s: %s is a file, not an experiment directory%s", cmd, dir, hint)
	}
	if isExperimentDir(dir) {
		return nil
	}
	clean := filepath.Clean(dir)
	if filepath.Base(clean) == "runs" && isExperimentDir(filepath.Dir(clean)) {
		return usagef("%s: %s is the run files' folder of an experiment: give the experiment directory, %s", cmd, dir, filepath.Dir(clean))
	}
	return usagef("%s: %s is not an experiment directory: it holds no runs/, scores.arrow or findings.json (what audit run, train and import write)", cmd, dir)
}

// isExperimentDir says whether dir holds anything an experiment's stages write.
func isExperimentDir(dir string) bool {
	d := expdir.Dir(dir)
	for _, p := range []string{d.Runs(), d.Scores(), d.Findings(), d.OutputsImport()} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}
