package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/report"
)

func init() {
	register(&command{
		name:    "compare",
		summary: "tabulate analyzed experiments side by side (rows: experiments, columns: T), as Markdown; --out also writes the attack-success table and galleries",
		usage:   "compare DIR... [--metrics auc,mu_lower,...] [--label name|sigma|alpha|group|claim] [--out FOLDER [--mi-attack loss] [--inversion-attack invgrad]]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			metrics := fs.String("metrics", "auc,tpr_at_fpr_0.01,mu_lower", "comma-separated metrics: "+strings.Join(report.CompareMetrics, ", ")+", an attack's own metric (label_accuracy, psnr, ...), or a training measurement: "+strings.Join(report.RoundMetrics, ", "))
			label := fs.String("label", "name", "row label: name, sigma (noise std; the noise multiplier z for the DP-FedAvg family), alpha (FedProx), group (the target client's privacy group) or claim (the accountant's claimed epsilon for the target)")
			out := fs.String("out", "", "also write into this folder the attack-success table across the experiments (tables/attack_success.csv, .tex, .md: rows per measure and experiment, columns T) and, where experiments have image reconstructions, the gallery across them (figures/gallery_ATTACK.png)")
			mi := fs.String("mi-attack", "loss", "the membership-inference attack of the attack-success table's AUC and TPR rows")
			inv := fs.String("inversion-attack", "", "the reconstructing attack of the attack-success table's PSNR, SSIM and L2 rows (default invgrad, or inversion when no experiment has invgrad)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("compare: give one or more analyzed experiment directories")
				}
				var lab func(*spec.Config) string
				switch *label {
				case "name":
					lab = func(c *spec.Config) string { return c.Name }
				case "sigma":
					lab = func(c *spec.Config) string {
						if c.Train.IsClientDP() {
							// The DP-FedAvg family's noise is the server's, set by the
							// noise multiplier (noise_std is 0 there).
							return fmt.Sprintf("z = %g", c.Train.NoiseMultiplier)
						}
						return fmt.Sprintf("sigma = %g", c.Train.NoiseStd)
					}
				case "alpha":
					lab = func(c *spec.Config) string {
						if c.Train.Algorithm != algo.FedProx {
							return string(c.Train.Algorithm)
						}
						return fmt.Sprintf("fedprox alpha = %g", c.Train.ProxAlpha)
					}
				case "group":
					lab = func(c *spec.Config) string { return groupLabel(ctx, c) }
				case "claim":
					lab = func(c *spec.Config) string { return claimLabel(ctx, c) }
				default:
					return usagef("--label: %q is not name, sigma, alpha, group or claim", *label)
				}
				// An attack name no attack has would give the attack-success table rows with
				// no value in them, written without a word.
				for _, f := range []struct{ flag, name string }{{"mi-attack", *mi}, {"inversion-attack", *inv}} {
					if _, err := attacks.Lookup(f.name); f.name != "" && err != nil && !attacks.IsCanaryAttack(f.name) {
						return usagef("compare: --%s: unknown attack %q (see 'audit attack --list')", f.flag, f.name)
					}
				}
				var exps []report.Compared
				for _, dir := range args {
					a, err := experiment.LoadAnalyzed(dir)
					if err != nil {
						return err
					}
					exps = append(exps, a.Compared(lab))
				}
				distinctLabels(exps, args)
				// The folder is checked before the comparison is printed, not after (a file
				// given as --out printed every table, then failed).
				if *out != "" {
					if st, err := os.Stat(*out); err == nil && !st.IsDir() {
						return usagef("compare: --out %s is a file: give the folder to write the tables and figures into", *out)
					}
				}
				ms := splitList(*metrics)
				if err := checkMetrics(ms, exps); err != nil {
					return err
				}
				if err := report.WriteComparison(e.stdout, exps, ms); err != nil {
					return err
				}
				if *out == "" {
					return nil
				}
				paths, err := report.WriteComparisonFiles(*out, exps, report.SuccessAttacks{MI: *mi, Inversion: *inv})
				if err != nil {
					return fmt.Errorf("compare: %w", err)
				}
				for _, p := range paths {
					e.logf("compare: wrote %s", p)
				}
				return nil
			}
		},
	})
}

// checkMetrics refuses metrics that no table can show: neither a finding's or a training
// measurement's, nor an attack's own metric in any of the experiments. report.WriteComparison
// leaves such a metric out without a word, so a misspelt --metrics printed nothing and exited 0.
func checkMetrics(metrics []string, exps []report.Compared) error {
	if len(metrics) == 0 {
		return usagef("compare: --metrics names no metric")
	}
	known := slices.Concat(report.CompareMetrics, report.RoundMetrics)
	for _, e := range exps {
		for _, f := range e.Findings {
			for m := range f.Metrics {
				if !slices.Contains(known, m) {
					known = append(known, m)
				}
			}
		}
	}
	for _, m := range metrics {
		if !slices.Contains(known, m) {
			return usagef("compare: --metrics: no experiment has the metric %q (have %s)", m, strings.Join(known, ", "))
		}
	}
	return nil
}

// groupLabel names the target client's privacy group and its budget (idp-fedavg and
// adaptive-fedavg), or the experiment when it has no groups.
func groupLabel(ctx context.Context, c *spec.Config) string {
	if c.Train.Privacy == nil {
		return c.Name
	}
	plan, err := c.Train.Plan(ctx, c.Data.Clients)
	if err != nil || c.Adjacency.Client >= len(plan.Group) {
		return c.Name + " (no plan)"
	}
	g := plan.Group[c.Adjacency.Client]
	return fmt.Sprintf("%s group %d (budget %g)", c.Train.Algorithm, g, c.Train.Privacy.Groups[g].Epsilon)
}

// claimLabel is the accountant's claimed epsilon for the target client (experiment.ClaimFor),
// or the explicit claim of the config.
func claimLabel(ctx context.Context, c *spec.Config) string {
	if c.Audit.ClaimEpsilon > 0 {
		a := c.Audit
		a.FillDefaults()
		return fmt.Sprintf("claim eps = %.3g at delta %g", a.ClaimEpsilon, cmp.Or(a.ClaimDelta, a.Delta))
	}
	if c.Audit.ClaimMu > 0 {
		return fmt.Sprintf("claim mu = %.3g", c.Audit.ClaimMu)
	}
	data, err := spec.PrepareContext(ctx, c)
	if err != nil {
		return c.Name + " (no data)"
	}
	claim, _, err := experiment.ClaimFor(ctx, c, data, c.Audit.Delta)
	if err != nil || claim.Epsilon == 0 {
		return c.Name + " (no accountant claim)"
	}
	return fmt.Sprintf("%s: claim eps = %.3g at delta %g", c.Name, claim.Epsilon, claim.Delta)
}

// distinctLabels adds its directory to each label that more than one experiment has: rows of
// one label ("sigma = 0.05" three times, or two directories of one name) cannot be told apart.
func distinctLabels(exps []report.Compared, dirs []string) {
	count := map[string]int{}
	for _, e := range exps {
		count[e.Label]++
	}
	for i := range exps {
		if count[exps[i].Label] > 1 {
			exps[i].Label = fmt.Sprintf("%s (%s)", exps[i].Label, dirs[i])
		}
	}
}
