package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cmd/audit/internal/tables"
	"github.com/fedaudit/fedaudit/theory"
)

// maxBoundRounds caps --rounds: the bound takes O(T K) time, and a T beyond this is almost
// surely a typo.
const maxBoundRounds = 1_000_000_000

// boundFlagOf maps the fields of theory.Config to the flags that set them, so that validation
// errors name what the user typed.
var boundFlagOf = map[string]string{
	"Algo": "algo", "ScheduleName": "schedule", "Schedule": "schedule-file", "Eta": "eta",
	"L": "L", "K": "K", "M": "m", "N": "n", "Sigma": "sigma", "Clip": "clip", "Alpha": "alpha",
	"Delta": "delta", "ProxConstant": "prox-constant", "Batch": "batch",
}

func init() {
	register(&command{
		name:    "bound",
		summary: "theoretical privacy bounds per T: the final model (mu_T), every iterate (composition), one upload",
		usage: "bound --algo fedavg|fedprox|dpsgd [--schedule constant|cyclic|stage|iterative | --schedule-file F] " +
			"--eta E --L L --K K --m M [--n N] --sigma S --clip V [--alpha A] [--prox-constant] [--batch B] --rounds 1,10,100 [--delta 1e-5] [--json]",
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			algoName := fs.String("algo", "", "training algorithm: fedavg, fedprox or dpsgd (dpsgd is m = n = 1) (required)")
			schedule := fs.String("schedule", "constant", "learning-rate schedule: constant eta, cyclic eta/(k+1), stage eta/(t+1), iterative eta/(tK+k+1)")
			scheduleFile := fs.String("schedule-file", "", "CSV table of rates eta_{k,t}: one line per round, K rates per line (instead of --schedule and --eta)")
			eta := fs.Float64("eta", 0, "base learning rate of the schedule (required unless --schedule-file)")
			L := fs.Float64("L", 0, "smoothness constant of the local losses (required); for dpsgd, of the batch's summed loss (B times one sample's)")
			K := fs.Int("K", 0, "local steps per round (required)")
			m := fs.Int("m", 0, "number of clients (required except for dpsgd)")
			n := fs.Int("n", 0, "clients taking part in each round (default: all m)")
			sigma := fs.Float64("sigma", 0, "std of the Gaussian noise each client adds to its upload (required)")
			clip := fs.Float64("clip", 0, "clipping norm V of the gradients (required)")
			alpha := fs.Float64("alpha", 0, "FedProx proximal coefficient, > L (required for fedprox)")
			proxConstant := fs.Bool("prox-constant", false, "FedProx: use the paper's constant rho = alpha/(alpha-L), gamma = 2V/(n alpha) (Theorem 4) instead of the exact per-round values")
			rounds := fs.String("rounds", "", "comma-separated numbers of rounds T at which to report the bound (required)")
			delta := fs.Float64("delta", theory.DefaultDelta, "delta at which mu is converted to epsilon")
			batch := fs.Int("batch", 0, "dpsgd: the most examples a local step sums over (required with --K 2 or more: from the second step on the other examples' clipped gradients differ between the worlds too)")
			asJSON := fs.Bool("json", false, "machine-readable output: a JSON array with one object per T")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("bound: unexpected argument %q", args[0])
				}
				set := map[string]bool{}
				fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
				required := []string{"algo", "L", "K", "sigma", "clip", "rounds"}
				if !set["schedule-file"] {
					required = append(required, "eta")
				}
				if *algoName != string(algo.DPSGD) {
					required = append(required, "m")
				}
				if *algoName == string(algo.FedProx) {
					required = append(required, "alpha")
				}
				var missing []string
				for _, name := range required {
					if !set[name] {
						missing = append(missing, "--"+name)
					}
				}
				if len(missing) > 0 {
					return usagef("bound: missing required flag %s (see 'audit bound --help')", strings.Join(missing, ", "))
				}
				if set["alpha"] && *algoName != string(algo.FedProx) {
					return usagef("bound: --alpha applies to fedprox only")
				}
				if set["batch"] && *algoName != string(algo.DPSGD) {
					return usagef("bound: --batch applies to dpsgd only")
				}
				if set["schedule-file"] && set["schedule"] {
					return usagef("bound: --schedule and --schedule-file exclude each other")
				}
				if set["schedule-file"] && set["eta"] {
					return usagef("bound: --eta does not apply with --schedule-file, whose table gives every rate")
				}
				Ts, err := parseRounds(*rounds)
				if err != nil {
					return err
				}
				cfg := theory.Config{
					Algo: algo.Algorithm(*algoName), ScheduleName: *schedule, Eta: *eta, L: *L, K: *K,
					M: *m, N: *n, Sigma: *sigma, Clip: *clip, Alpha: *alpha,
					ProxConstant: *proxConstant, Delta: *delta, Batch: *batch,
				}
				if *scheduleFile != "" {
					if cfg.Schedule, err = readScheduleFile(*scheduleFile); err != nil {
						return err
					}
				}
				bounds, err := theory.BoundsContext(ctx, cfg, Ts)
				var fe *theory.FieldError
				if errors.As(err, &fe) {
					return usagef("bound: --%s: %s", boundFlagOf[fe.Field], fe.Reason)
				}
				if err != nil {
					return fmt.Errorf("bound: %w", err)
				}
				if *asJSON {
					return tables.BoundsJSON(e.stdout, bounds)
				}
				return tables.Bounds(e.stdout, cfg, *scheduleFile, bounds)
			}
		},
	})
}

func parseRounds(s string) ([]int, error) {
	items := splitList(s)
	if len(items) == 0 {
		return nil, usagef("bound: --rounds: no rounds given")
	}
	Ts := make([]int, len(items))
	for i, item := range items {
		T, err := strconv.Atoi(item)
		if err != nil || T < 1 || T > maxBoundRounds {
			return nil, usagef("bound: --rounds: %q is not a number of rounds in [1, %d]", item, maxBoundRounds)
		}
		Ts[i] = T
	}
	return Ts, nil
}

func readScheduleFile(path string) (*theory.TableSchedule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bound: %w", err)
	}
	defer f.Close()
	s, err := theory.ReadScheduleTable(f)
	if err != nil {
		// The table is the caller's to fix, as a flag's value is (exit status 2); a file that
		// cannot be read is a failure (1).
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("bound: --schedule-file %s: %w", path, pe.Err)
		}
		return nil, inputf("bound: --schedule-file %s: %v", path, err)
	}
	return s, nil
}
