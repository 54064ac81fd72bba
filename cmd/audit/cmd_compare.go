package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/fedaudit/fedaudit/experiment"
)

func init() {
	register(&command{
		name:    "compare",
		summary: "tabulate analyzed experiments side by side (rows: experiments, columns: T), as Markdown",
		usage:   "compare DIR... [--metrics auc,mu_lower,...] [--label name|sigma|alpha]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			metrics := fs.String("metrics", "auc,tpr_at_fpr_0.01,mu_lower", "comma-separated metrics: "+strings.Join(experiment.CompareMetrics, ", ")+", an attack's own metric (label_accuracy, psnr, ...), or a training measurement: "+strings.Join(experiment.RoundMetrics, ", "))
			label := fs.String("label", "name", "row label: name, sigma (noise std) or alpha (FedProx)")
			return func(_ context.Context, e *env, args []string) error {
				if len(args) == 0 {
					return usagef("compare: give one or more analyzed experiment directories")
				}
				var lab func(*experiment.Config) string
				switch *label {
				case "name":
					lab = func(c *experiment.Config) string { return c.Name }
				case "sigma":
					lab = func(c *experiment.Config) string { return fmt.Sprintf("sigma = %g", c.Train.NoiseStd) }
				case "alpha":
					lab = func(c *experiment.Config) string {
						if c.Train.Algorithm != "fedprox" {
							return c.Train.Algorithm
						}
						return fmt.Sprintf("fedprox alpha = %g", c.Train.ProxAlpha)
					}
				default:
					return usagef("--label: %q is not name, sigma or alpha", *label)
				}
				var exps []*experiment.Analyzed
				for _, dir := range args {
					a, err := experiment.LoadAnalyzed(dir)
					if err != nil {
						return err
					}
					exps = append(exps, a)
				}
				return experiment.WriteComparison(e.stdout, exps, splitList(*metrics), lab)
			}
		},
	})
}
