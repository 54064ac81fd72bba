package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/fedaudit/fedaudit/check"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/internal/fsutil"
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
			"residuals equal. The statistical checks share the family-wise level --alpha (Bonferroni).\n" +
			"Checks the directory lacks the data for are listed with what would enable them. The\n" +
			"report is kept as DIR/check.json, which `audit report` shows.\n" +
			"Exit status: 0 every check passed, 1 failure, 2 usage error, 3 a check failed.",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			pairs := fs.Int("pairs", 8, "check the pairs with the smallest ids, at most this many (every round of them is held in memory)")
			alpha := fs.Float64("alpha", 0.05, "family-wise error level of the statistical checks")
			asJSON := fs.Bool("json", false, "machine-readable output")
			return func(ctx context.Context, e *env, args []string) error {
				var dirs []string
				for len(args) > 0 {
					dirs = append(dirs, args[0])
					if err := fs.Parse(args[1:]); err != nil {
						return usagef("check: %v (see 'audit check --help')", err)
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
				} else {
					printCheck(e, rep)
				}
				if n := len(rep.Failed()); n > 0 {
					return &checkFailedError{failed: n}
				}
				return nil
			}
		},
	})
}

// printCheck writes the human form of a check report: one line per check, failures explained.
func printCheck(e *env, rep *findings.CheckReport) {
	fmt.Fprintf(e.stdout, "Grey-box checks of %d pair(s), rounds 0..%d: %d statistical tests at family-wise level %g (each at p >= %.3g), %d exact checks.\n\n",
		rep.Pairs, rep.Rounds, rep.Family, rep.Alpha, rep.Threshold, len(rep.Checks)-rep.Family)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tobserver\ttensor\tstatistic\tp-value\tresult")
	for _, c := range rep.Checks {
		p := fmt.Sprintf("%.3g", c.PValue)
		if c.Exact {
			p = "exact"
		}
		result := "pass"
		if !c.Passed {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, dash(c.Observer), dash(c.Tensor), formatStat(c.Statistic), p, result)
	}
	tw.Flush()
	if failed := rep.Failed(); len(failed) > 0 {
		fmt.Fprintf(e.stdout, "\n%d check(s) FAILED:\n", len(failed))
		for _, c := range failed {
			fmt.Fprintf(e.stdout, "  %s: %s\n", c.Where(), c.Meaning)
		}
	} else {
		fmt.Fprintln(e.stdout, "\nEvery check passed: nothing in these rounds departs from the declared mechanism.")
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintln(e.stdout, "\nNot checked:")
		for _, s := range rep.Skipped {
			fmt.Fprintf(e.stdout, "  %s: %s\n", s.Check, s.Why)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, " ", "_")
}

func formatStat(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("%.4g", x)
}
