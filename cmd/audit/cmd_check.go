package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/fedaudit/fedaudit/check"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/report"
)

// checkFailedError marks grey-box checks that ran and found the deployment doing something other
// than it declares: the table is printed, and the exit status is 3, as for a violated claim.
type checkFailedError struct{ failed int }

func (c *checkFailedError) Error() string {
	return fmt.Sprintf("check: %d check(s) failed (exit status 3)", c.failed)
}

func init() {
	register(&command{
		name:    "check",
		summary: "grey-box checks of a deployment's recorded rounds: sensitivity, noise, coupling",
		usage: "check DIR [--pairs n] [--alpha a] [--json]\n\n" +
			"DIR is an experiment directory whose runs record the global model of every round (and,\n" +
			"for the upload checks, the target client's uploads): `audit import` of a deployment's\n" +
			"snapshots, or `audit run` with record_params, record_upload and every round a checkpoint.\n" +
			"The checks (docs/check.md): one shared w_0; each pair's coupled difference against the\n" +
			"declared sensitivity; where the rounds replay without noise, the noise residuals of the\n" +
			"global models and of the uploads per tensor against the declared Gaussian (mean, scale by\n" +
			"chi-square, shape by Anderson-Darling, independence across rounds) and the two worlds'\n" +
			"residuals equal; where clients are sampled, how often the target took part in round 1,\n" +
			"over every pair, against the declared sampling rate (the accountant's where the config\n" +
			"gives one). The statistical checks share the family-wise level --alpha (Bonferroni).\n" +
			"Checks the directory lacks the data for are listed with what would enable them. The\n" +
			"report is kept as DIR/check.json, which `audit report` shows.\n" +
			"Exit status: 0 every check passed, 1 failure (no check could run included), 2 usage error,\n" +
			"3 a check failed.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			pairs := fs.Int("pairs", 8, "check the pairs with the smallest ids, at most this many (every round of them is held in memory)")
			alpha := fs.Float64("alpha", 0.05, "family-wise error level of the statistical checks")
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(ctx context.Context, e *env, args []string) error {
				var dirs []string
				for len(args) > 0 {
					dirs = append(dirs, args[0])
					if err := fs.Parse(args[1:]); err != nil {
						return usagef("check: %v (see 'audit check --help')", flagError(err))
					}
					args = fs.Args()
				}
				if len(dirs) != 1 {
					return usagef("check: give one experiment directory")
				}
				if *pairs < 1 {
					return usagef("check: --pairs must be >= 1")
				}
				if !(*alpha > 0 && *alpha < 1) {
					return usagef("check: --alpha must be in (0, 1)")
				}
				if err := experimentDirArg("check", dirs[0]); err != nil {
					return err
				}
				lock, err := lockWriter(e, dirs[0], "audit check")
				if err != nil {
					return err
				}
				defer lock.Unlock()
				if err := experiment.NoRunFiles(dirs[0], "check"); err != nil {
					return fmt.Errorf("check: %w", err)
				}
				rep, err := check.Run(ctx, dirs[0], check.Options{Alpha: *alpha, MaxPairs: *pairs, Logf: e.logf})
				if err != nil {
					return err
				}
				// The report of the directory (audit report, audit run) shows the last check.
				raw, err := findings.MarshalCheck(rep)
				if err != nil {
					return err
				}
				if err := fsutil.WriteFile(expdir.Dir(dirs[0]).Check(), append(raw, '\n')); err != nil {
					return fmt.Errorf("check: %w", err)
				}
				if *asJSON {
					if err := writeJSON(e.stdout, rep); err != nil {
						return err
					}
				} else if err := report.WriteCheck(e.stdout, rep); err != nil {
					return err
				}
				if n := len(rep.Failed()); n > 0 {
					return &checkFailedError{failed: n}
				}
				if len(rep.Checks) == 0 {
					// A pipeline gating on the checks must not pass on runs that allowed none.
					return fmt.Errorf("check: no check could run on the runs of %s: nothing was verified (each check is listed with what would enable it)", dirs[0])
				}
				return nil
			}
		},
	})
}
