package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/runs"
)

// statusShard is one line of `audit status --json`.
type statusShard struct {
	Shard string `json:"shard,omitempty"` // "i/n"; empty for files whose shard is unknown
	State string `json:"state"`
	File  string `json:"file"` // base name; for a missing shard, the name it will have
	Error string `json:"error,omitempty"`
	// Unverified: with --verify, a complete file without checksums (written before they were
	// introduced), whose rows decoded but whose values could not be checked.
	Unverified bool `json:"unverified,omitempty"`
}

// statusReport is the whole of `audit status --json`.
type statusReport struct {
	Dir      string         `json:"dir"`
	Shards   int            `json:"shards"`
	Complete int            `json:"complete"`
	Counts   map[string]int `json:"counts"`
	Files    []statusShard  `json:"files"`
	OK       bool           `json:"ok"`
}

// runsDirOf accepts an experiment directory (run files in DIR/runs) or the run-file directory
// itself, so users can pass either of the paths they see.
func runsDirOf(dir string) string {
	if st, err := os.Stat(expdir.Dir(dir).Runs()); err == nil && st.IsDir() {
		return expdir.Dir(dir).Runs()
	}
	return dir
}

func shardStatus(ctx context.Context, dir string, shards int, verify bool) (statusReport, error) {
	rdir := runsDirOf(dir)
	var infos []runs.ShardInfo
	var err error
	if verify {
		infos, err = runs.VerifyShards(ctx, rdir, shards)
	} else {
		infos, err = runs.ShardStatus(rdir, shards)
	}
	if err != nil {
		return statusReport{}, err
	}
	rep := statusReport{Dir: rdir, Shards: shards, Counts: map[string]int{}, Files: []statusShard{}}
	for _, in := range infos {
		line := statusShard{State: in.State.String(), File: filepath.Base(in.Path)}
		if in.Shard.Count > 0 {
			line.Shard = in.Shard.String()
			if rep.Shards == 0 {
				rep.Shards = in.Shard.Count
			}
		}
		if in.State == runs.ShardMissing {
			line.File = in.Shard.FileName()
		}
		if in.Err != nil {
			line.Error = in.Err.Error()
		}
		line.Unverified = in.Unverified
		rep.Counts[line.State]++
		rep.Files = append(rep.Files, line)
	}
	// The score files of an experiment directory are checked too: a damaged one is recomputed
	// by the next `audit run` (or `audit attack`).
	for _, sp := range []string{expdir.Dir(dir).Scores(), expdir.Dir(dir).CanaryScores()} {
		if !verify || rdir == dir {
			break
		}
		if _, statErr := os.Stat(sp); statErr == nil {
			line := statusShard{Shard: strings.TrimSuffix(filepath.Base(sp), ".arrow"), State: runs.ShardComplete.String(), File: filepath.Base(sp)}
			checked, err := runs.VerifyFile(sp)
			if err != nil {
				line.State, line.Error = runs.ShardDamaged.String(), err.Error()
				rep.Counts[line.State]++
			}
			line.Unverified = !checked && err == nil
			rep.Files = append(rep.Files, line)
		}
	}
	rep.Complete = rep.Counts[runs.ShardComplete.String()]
	// Duplicates and files of another experiment fail the check too: the stages after it
	// (attack, analyze, run) refuse such a directory, and a finish job's guard that passed it
	// would hand them a set they cannot read.
	rep.OK = rep.Shards > 0 && rep.Complete == rep.Shards
	for _, st := range statusFailures {
		rep.OK = rep.OK && rep.Counts[st.String()] == 0
	}
	return rep, nil
}

// statusError is the exit-1 summary of an incomplete directory.
// statusFailures are the states of a file that fail the check.
var statusFailures = []runs.ShardState{runs.ShardMissing, runs.ShardCorrupt, runs.ShardDamaged, runs.ShardDuplicate, runs.ShardMismatch}

func (r statusReport) err() error {
	if r.OK {
		return nil
	}
	if r.Shards == 0 {
		return fmt.Errorf("status: no run files in %s (give --shards n to list the missing shards)", r.Dir)
	}
	var parts []string
	for _, st := range statusFailures {
		if n := r.Counts[st.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return fmt.Errorf("status: %s: %d of %d shards complete (%s)", r.Dir, r.Complete, r.Shards, strings.Join(parts, ", "))
}

func printStatus(e *env, r statusReport) {
	if r.Shards == 0 {
		// No file was read whole, so no count of shards is known ("0 of 0 shards" read as an
		// empty experiment that is complete).
		fmt.Fprintf(e.stdout, "%s: no complete run file, so the number of shards is unknown (give --shards n)\n", r.Dir)
	} else {
		fmt.Fprintf(e.stdout, "%s: %d of %d shards complete\n", r.Dir, r.Complete, r.Shards)
	}
	for _, f := range r.Files {
		shard := f.Shard
		if shard == "" {
			shard = "?"
		}
		fmt.Fprintf(e.stdout, "  %-9s %-9s %s", shard, f.State, f.File)
		if f.Unverified {
			fmt.Fprint(e.stdout, " (unverified: written before checksums)")
		}
		if f.Error != "" {
			fmt.Fprintf(e.stdout, ": %s", f.Error)
		}
		fmt.Fprintln(e.stdout)
	}
	var notes []string
	for _, st := range []runs.ShardState{runs.ShardMissing, runs.ShardCorrupt, runs.ShardDamaged, runs.ShardDuplicate, runs.ShardMismatch, runs.ShardWriting, runs.ShardStale} {
		if n := r.Counts[st.String()]; n > 0 {
			notes = append(notes, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(e.stdout, "problems: %s\n", strings.Join(notes, ", "))
	}
}

func init() {
	register(&command{
		name:    "status",
		summary: "list the complete, missing, corrupt and in-progress shards of a run directory",
		usage: "status DIR [--shards n] [--verify] [--json]\n\n" +
			"DIR is an experiment directory (run files in DIR/runs) or a run-file directory. Exit\n" +
			"status: 0 when every shard is complete, 1 when any shard is missing, corrupt or damaged,\n" +
			"when a shard has two files or a file belongs to another experiment (the later stages\n" +
			"refuse such a set), or when no run file is there; 2 on a usage error. In-progress and\n" +
			"stale temporary files are listed but do not fail the check on their own. Without\n" +
			"--verify only the files' footers are read; --verify reads every byte and checks the\n" +
			"checksums of every record batch of the run files and of the score files (DIR/scores.arrow,\n" +
			"DIR/canary-scores.arrow), naming each damaged file (`audit run` retrains a damaged shard\n" +
			"and rescores a damaged, cut or emptied score file).",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			shards := fs.Int("shards", 0, "expected number of shards (0: take it from the first readable file)")
			asJSON := fs.Bool("json", false, "machine-readable output")
			verify := fs.Bool("verify", false, "read every file in full and verify its checksums")
			return func(ctx context.Context, e *env, args []string) error {
				// Flags may follow DIR (audit status DIR --json), as in the usage line.
				var dirs []string
				for len(args) > 0 {
					dirs = append(dirs, args[0])
					if err := fs.Parse(args[1:]); err != nil {
						return usagef("status: %v (see 'audit status --help')", flagError(err))
					}
					args = fs.Args()
				}
				if len(dirs) != 1 {
					return usagef("status: give one run directory")
				}
				if *shards < 0 {
					return usagef("--shards must be >= 0")
				}
				rep, err := shardStatus(ctx, dirs[0], *shards, *verify)
				if err != nil {
					return err
				}
				if *asJSON {
					if err := writeJSON(e.stdout, rep); err != nil {
						return err
					}
				} else {
					printStatus(e, rep)
				}
				return rep.err()
			}
		},
	})
}
