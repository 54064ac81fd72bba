package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/internal/fsutil"
)

func parseCheckpoints(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		r, err := strconv.Atoi(p)
		if err != nil || r < 0 {
			return nil, usagef("--rounds: %q is not a round number", p)
		}
		out = append(out, r)
	}
	return out, nil
}

func init() {
	register(&command{
		name:    "attack",
		summary: "score the runs of an experiment directory with attacks into a score file",
		usage:   "attack --runs DIR [--attacks a,b,...] [--rounds 1,10] [--out FILE] [--workers n] [--allow-partial] [--list]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			dir := fs.String("runs", "", "experiment directory (its run files are in DIR/runs)")
			names := fs.String("attacks", "", "comma-separated attacks (default: every attack the run files support)")
			rounds := fs.String("rounds", "", "comma-separated checkpoints to score (default: all but round 0)")
			out := fs.String("out", "", "score file to write (default: DIR/scores.arrow)")
			workers := fs.Int("workers", 0, "parallel workers (0: all cores); scores do not depend on it")
			partial := fs.Bool("allow-partial", false, "score a directory with missing shards")
			list := fs.Bool("list", false, "list the attacks and what they need, then exit")
			return func(ctx context.Context, e *env, args []string) error {
				if *list {
					// Columns as wide as the longest name and threat (informed-upload's 15
					// characters overflowed a fixed width and shifted its row).
					tw := tabwriter.NewWriter(e.stdout, 0, 0, 1, ' ', 0)
					for _, a := range attacks.Names() {
						summary := a.Summary
						if a.ByName != "" {
							summary += " (by name only: " + a.ByName + ")"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Name, a.Threat, summary)
					}
					for _, a := range attacks.CanaryNames() {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Name, a.Threat, a.Summary)
					}
					return tw.Flush()
				}
				if len(args) > 0 {
					return usagef("attack: unexpected argument %q", args[0])
				}
				if *dir == "" {
					return usagef("attack: --runs DIR is required")
				}
				if err := experimentDirArg("attack", *dir); err != nil {
					return err
				}
				// Where the scores go is checked before the runs are scored, not after (a
				// directory given as --out failed at the rename, every attack run).
				if *out != "" {
					if st, err := os.Stat(*out); err == nil && st.IsDir() {
						return usagef("attack: --out %s is a directory: give the score file to write (default: DIR/scores.arrow)", *out)
					}
					if err := fsutil.CanWrite(*out); err != nil {
						return fmt.Errorf("attack: --out: %w", err)
					}
				}
				lock, err := lockWriter(e, *dir, "audit attack")
				if err != nil {
					return err
				}
				defer lock.Unlock()
				rs, err := parseCheckpoints(*rounds)
				if err != nil {
					return err
				}
				// A name no attack has is a mistake on the command line, refused before the
				// run files are read (the attack stage failed with status 1 on it).
				for _, n := range splitList(*names) {
					if _, err := attacks.Lookup(n); err != nil && !attacks.IsCanaryAttack(n) {
						return usagef("attack: --attacks: unknown attack %q (see 'audit attack --list')", n)
					}
				}
				scores, path, err := experiment.AttackTo(ctx, *dir, *out, experiment.AttackOptions{
					Attacks: splitList(*names), Rounds: rs, Workers: *workers, AllowPartial: *partial, Logf: e.logf,
				})
				var notCheckpoint *attacks.NotACheckpointError
				if errors.As(err, &notCheckpoint) {
					return usagef("attack: --rounds: %v", notCheckpoint)
				}
				if err != nil {
					return err
				}
				if scores != nil {
					fmt.Fprintf(e.stdout, "%d scores written to %s\n", len(scores), path)
				}
				n, cpath, err := experiment.AttackCanaries(ctx, *dir, experiment.AttackOptions{
					Attacks: splitList(*names), Rounds: rs, Workers: *workers, AllowPartial: *partial, Logf: e.logf,
				})
				if err != nil {
					return err
				}
				if n > 0 {
					fmt.Fprintf(e.stdout, "%d canary scores written to %s\n", n, cpath)
				}
				return nil
			}
		},
	})
}
