package results

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The prose of README.md quotes certified lower bounds too ("certifies mu >= 0.586 after 10
// rounds", "certify eps 0.660"). TestReadmeProseLowerBounds finds each such number by the words
// around it and checks it against the reports, rounded down at the digit the README prints, as
// the key-numbers table is; TestReadmeProseLowerBoundsAreChecked makes sure no certified number
// in the prose escapes that list.

// quantity is one number the README's prose quotes: how to compute it from the committed
// reports, and how the README must round it.
type quantity struct {
	what string
	get  func() (float64, error)
	// format is lower for certified lower bounds and their ratios to an exact or estimated
	// mu (a ratio of a lower bound to a fixed value is a lower bound too), nearest for exact
	// values and estimates.
	format func(float64, string) string
}

// proseClaim is a README passage in which each {} stands for a number: values[i] for the i-th.
// Whitespace in the pattern matches any run of whitespace (the README wraps its lines).
type proseClaim struct {
	pattern string
	values  []quantity
}

var (
	findingsMu    sync.Mutex
	findingsCache = map[string][]finding{}
)

func loadFindings(folder string) ([]finding, error) {
	findingsMu.Lock()
	defer findingsMu.Unlock()
	if fs, ok := findingsCache[folder]; ok {
		return fs, nil
	}
	raw, err := os.ReadFile(filepath.Join(filepath.FromSlash(folder), "findings.json"))
	if err != nil {
		return nil, err
	}
	fs, err := decodeFindings(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", folder, err)
	}
	findingsCache[folder] = fs
	return fs, nil
}

// findingOf is the row of attack at round T in folder (an attack has one threat model).
func findingOf(folder, attack string, T int) (finding, error) {
	fs, err := loadFindings(folder)
	if err != nil {
		return finding{}, err
	}
	for _, f := range fs {
		if f.Attack == attack && f.Round == T {
			return f, nil
		}
	}
	return finding{}, fmt.Errorf("%s: no finding for %s at T = %d", folder, attack, T)
}

func fromFinding(what string, format func(float64, string) string, folder, attack string, T int, field func(finding) (float64, error)) quantity {
	return quantity{
		what:   fmt.Sprintf("%s of %s %s T=%d", what, folder, attack, T),
		format: format,
		get: func() (float64, error) {
			f, err := findingOf(folder, attack, T)
			if err != nil {
				return 0, err
			}
			return field(f)
		},
	}
}

func muLower(folder, attack string, T int) quantity {
	return fromFinding("mu_lower", lower, folder, attack, T, func(f finding) (float64, error) { return f.MuLower, nil })
}

func epsLower(folder, attack string, T int) quantity {
	return fromFinding("eps_lower", lower, folder, attack, T, func(f finding) (float64, error) { return f.EpsLower, nil })
}

// reversedMuLower is what a row pointing the wrong way certifies read the other way round.
func reversedMuLower(folder, attack string, T int) quantity {
	return fromFinding("reversed_mu_lower", lower, folder, attack, T, func(f finding) (float64, error) {
		if f.ReversedMuLower == nil {
			return 0, fmt.Errorf("no reversed_mu_lower")
		}
		return *f.ReversedMuLower, nil
	})
}

func muExact(folder, attack string, T int) quantity {
	return fromFinding("mu_exact", nearest, folder, attack, T, func(f finding) (float64, error) {
		if f.MuExact == nil {
			return 0, fmt.Errorf("no mu_exact")
		}
		return *f.MuExact, nil
	})
}

// ofExact is mu_lower / mu_exact, a certified lower bound on the fraction of the truth.
func ofExact(folder, attack string, T int) quantity {
	return fromFinding("mu_lower/mu_exact", lower, folder, attack, T, func(f finding) (float64, error) {
		if f.MuExact == nil || *f.MuExact <= 0 {
			return 0, fmt.Errorf("no mu_exact")
		}
		return f.MuLower / *f.MuExact, nil
	})
}

// ofHeuristic is mu_lower / mu_heuristic (the last-iterate heuristic's mu, a fixed value).
func ofHeuristic(folder, attack string, T int) quantity {
	return fromFinding("mu_lower/mu_heuristic", lower, folder, attack, T, func(f finding) (float64, error) {
		if f.MuHeuristic == nil || *f.MuHeuristic <= 0 {
			return 0, fmt.Errorf("no mu_heuristic")
		}
		return f.MuLower / *f.MuHeuristic, nil
	})
}

// extreme is the smallest (or largest) of qs, for "certifies X at every T" and ranges "X-Y";
// all of qs must round the same way.
func extreme(largest bool, qs ...quantity) quantity {
	name := "min"
	if largest {
		name = "max"
	}
	whats := make([]string, len(qs))
	for i, q := range qs {
		whats[i] = q.what
	}
	return quantity{
		what:   name + "(" + strings.Join(whats, ", ") + ")",
		format: qs[0].format,
		get: func() (float64, error) {
			best := math.NaN()
			for _, q := range qs {
				v, err := q.get()
				if err != nil {
					return 0, err
				}
				if math.IsNaN(best) || (largest && v > best) || (!largest && v < best) {
					best = v
				}
			}
			return best, nil
		},
	}
}

func minOf(qs ...quantity) quantity { return extreme(false, qs...) }
func maxOf(qs ...quantity) quantity { return extreme(true, qs...) }

// overRounds is q at each of the rounds.
func overRounds(q func(folder, attack string, T int) quantity, folder, attack string, rounds ...int) []quantity {
	qs := make([]quantity, len(rounds))
	for i, T := range rounds {
		qs[i] = q(folder, attack, T)
	}
	return qs
}

// costEpsLower is eps_lowers[seed] of the measured one-run row of cost/<file>.json with the
// given number of canaries: one training's certified eps.
func costEpsLower(file string, canaries, seed int) quantity {
	return quantity{
		what:   fmt.Sprintf("eps_lowers[%d] of cost/%s.json with %d canaries", seed, file, canaries),
		format: lower,
		get: func() (float64, error) {
			raw, err := os.ReadFile(filepath.Join("cost", file+".json"))
			if err != nil {
				return 0, err
			}
			var m struct {
				Measurements []struct {
					Canaries int `json:"canaries"`
					Rows     []struct {
						EpsLowers []float64 `json:"eps_lowers"`
					} `json:"rows"`
				} `json:"measurements"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return 0, err
			}
			for _, ms := range m.Measurements {
				if ms.Canaries == canaries && len(ms.Rows) == 1 && seed < len(ms.Rows[0].EpsLowers) {
					return ms.Rows[0].EpsLowers[seed], nil
				}
			}
			return 0, fmt.Errorf("no single row with %d seeds at %d canaries", seed+1, canaries)
		},
	}
}

// costOfTruth is mu_lower / truth (the exact or realized mu) of the measured one-run row of
// cost/<file>.json for attack at round T with the given number of canaries: the median
// training's certified fraction of the truth.
func costOfTruth(file string, canaries int, attack string, T int) quantity {
	return quantity{
		what:   fmt.Sprintf("mu_lower/truth of cost/%s.json %s T=%d with %d canaries", file, attack, T, canaries),
		format: lower,
		get: func() (float64, error) {
			raw, err := os.ReadFile(filepath.Join("cost", file+".json"))
			if err != nil {
				return 0, err
			}
			var m costMeasured
			if err := json.Unmarshal(raw, &m); err != nil {
				return 0, err
			}
			for _, ms := range m.Measurements {
				if ms.Canaries != canaries {
					continue
				}
				for _, r := range ms.Rows {
					if r.Attack == attack && r.Round == T && r.Truth != nil && *r.Truth > 0 {
						return r.MuLower / *r.Truth, nil
					}
				}
			}
			return 0, fmt.Errorf("no row with a truth")
		},
	}
}

func costEpsLowers(file string, canaries, seeds int) []quantity {
	qs := make([]quantity, seeds)
	for i := range qs {
		qs[i] = costEpsLower(file, canaries, i)
	}
	return qs
}

// onerunMLPOfTruth is every measured row of cost/onerun-mlp.json as a fraction of the truth.
func onerunMLPOfTruth() []quantity {
	var q []quantity
	for _, k := range []int{100, 200, 300} {
		for _, a := range []string{"canary-loss", "canary-margin"} {
			q = append(q, costOfTruth("onerun-mlp", k, a, 100))
		}
	}
	return q
}

func qs(q ...quantity) []quantity { return q }

// proseClaims are the README passages that quote a certified lower bound (or its ratio to an
// exact value) found in the committed reports. A number the README quotes that the committed
// files do not hold (an `audit analyze` with other thresholds, further seeds, a ceiling) is in
// uncheckedProse instead.
var proseClaims = []proseClaim{
	// The introduction: bounds that rose when the default became dkw+band.
	{"on convergence-mlp at T = 200 2.668 -> {}", qs(muLower("convergence-mlp", "informed-all", 200))},
	{"on lenet5-fmnist 1.791 -> {}", qs(muLower("lenet5-fmnist", "informed-all", 20))},
	{"dp-fedavg-noclip 3.543 -> {}", qs(muLower("dp-fedavg-noclip", "informed-all", 10))},

	// "What each shows".
	{"(ratio {}-{} for the final model's linear distinguisher from T = 10 on", qs(
		minOf(overRounds(ofExact, "convergence-quadratic", "linear", 10, 20, 50, 100, 200, 300)...),
		maxOf(overRounds(ofExact, "convergence-quadratic", "linear", 10, 20, 50, 100, 200, 300)...))},
	{"certified on the other 1600; {} at T = 300 for all iterates", qs(ofExact("convergence-quadratic", "informed-all", 300))},
	{"(the loss attack certifies {} at T = 20, {} at T = 200)", qs(
		muLower("convergence-mlp", "loss", 20), muLower("convergence-mlp", "loss", 200))},
	{"(certified mu {} at T = 5, nothing at T = 20)", qs(muLower("lenet5-fmnist", "loss", 5))},
	{"at the 100-pair ceiling from T = 1 (mu >= {})", qs(muLower("lenet5-fmnist", "informed-all", 1))},
	{"read the other way round they would give mu >= {} and {}, a diagnostic", qs(
		reversedMuLower("lenet5-fmnist", "loss", 1), reversedMuLower("lenet5-fmnist", "margin", 1))},
	{"(at the 30-pair ceiling of its family, mu >= {})", qs(minOf(
		muLower("resnet-synthetic", "informed-all", 1), muLower("resnet-synthetic", "loss", 1), muLower("resnet-synthetic", "margin", 1)))},
	{"informed adversary certifies mu >= {} after 10 rounds, the loss attack on the final model {}", qs(
		muLower("fashion-mnist", "informed-all", 10), muLower("fashion-mnist", "loss", 10))},
	{"the band lifts DKW's ceiling: {} of the exact mu at both sizes, where DKW certifies {} and {}", qs(
		minOf(ofExact("band-quadratic/n2000-band", "informed-all", 300), ofExact("band-quadratic/mu5-band", "informed-all", 300)),
		ofExact("band-quadratic/n2000-dkw", "informed-all", 300), ofExact("band-quadratic/mu5-dkw", "informed-all", 300))},
	{"with the band the informed adversary certifies eps {}: **violated**; with DKW {}, not caught", qs(
		epsLower("dp-fedavg-10x/band", "informed-all", 8), epsLower("dp-fedavg-10x/dkw", "informed-all", 8))},
	{"one run certifies eps {} from the canaries (canary-llr)", qs(epsLower("dp-fedavg-one-run", "canary-llr", 8))},
	{"one training certifies mu {} / {} / {} (about half the truth", overRounds(muLower, "onerun-quadratic", "canary-llr", 1, 2, 4)},
	{"certify little from one run: mu {} at T = 100", qs(muLower("onerun-mlp", "canary-loss", 100))},
	{"Quadratic: {} / {} / {} of the exact final-model mu at T = 20 / 100 / 300 ({} / {} / {} of {} / {} / {})", append(append(
		overRounds(ofExact, "gradcanary/quadratic", "grad-canary", 20, 100, 300),
		overRounds(muLower, "gradcanary/quadratic", "grad-canary", 20, 100, 300)...),
		overRounds(muExact, "gradcanary/quadratic", "grad-canary", 20, 100, 300)...)},
	{"where convergence-quadratic's linear distinguisher on an input canary gets {}", qs(
		maxOf(overRounds(ofExact, "convergence-quadratic", "linear", 10, 20, 50, 100, 200, 300)...))},
	{"MLP: {} at T = 20 and every later T", qs(
		minOf(overRounds(muLower, "gradcanary/mlp", "grad-canary", 20, 50, 100, 200)...))},
	{"the loss attack's {} on convergence-mlp", qs(muLower("convergence-mlp", "loss", 20))},
	{"at T = 20 and certifies {} ({} of it)", qs(
		muLower("gradcanary/mlp-sigma0.4", "grad-canary", 20), ofHeuristic("gradcanary/mlp-sigma0.4", "grad-canary", 20))},
	{"LeNet-5 on Fashion-MNIST: {} at every T from 1 to 20", qs(
		minOf(overRounds(muLower, "gradcanary/lenet5-fmnist", "grad-canary", 1, 2, 5, 10, 15, 20)...))},
	{"where lenet5-fmnist's loss attack certifies {} at T = 5", qs(muLower("lenet5-fmnist", "loss", 5))},
	{"certifies {} and {} where every canary's exact mu is {} and {} (T = 5, 20)", qs(
		muLower("gradcanary/onerun-quadratic", "canary-cos", 5), muLower("gradcanary/onerun-quadratic", "canary-cos", 20),
		muExact("gradcanary/onerun-quadratic", "canary-cos", 5), muExact("gradcanary/onerun-quadratic", "canary-cos", 20))},
	{"At T = 10 the learned attacks certify eps {}, the crafted canary client {} (1.28x), and on the linear model {}", qs(
		maxOf(epsLower("dp-fedavg-final/learned", "param-cosine", 10), epsLower("dp-fedavg-final/learned", "param-lda", 10)),
		epsLower("dp-fedavg-final/crafted", "grad-canary", 10), epsLower("dp-fedavg-final/crafted-linear", "grad-canary", 10))},
	{"loss-attack mu {} against {} at T = 20 on the MLP; on LeNet-5 the best final-model row {} (T = 2) against {}", qs(
		muLower("pretrain/mlp-pretrained", "loss", 20), muLower("pretrain/mlp-seeded", "loss", 20),
		muLower("pretrain/lenet5-fmnist", "lira-online", 2), muLower("lenet5-fmnist", "loss", 5))},
	{"MLP at T = 20: loss-attack mu {} against the Dirac canary's {} from the seeded w_0, and {} against {} from the pretrained one", qs(
		muLower("canife/mlp", "loss", 20), muLower("pretrain/mlp-seeded", "loss", 20),
		muLower("canife/mlp-pretrained", "loss", 20), muLower("pretrain/mlp-pretrained", "loss", 20))},
	{"peaks no higher than the held-out one ({} at T = 5 against {})", qs(
		muLower("canife/lenet5-fmnist", "margin", 5), muLower("lenet5-fmnist", "loss", 5))},
	{"its margin attack certifies {} at T = 10, the 100-pair ceiling, and {} at T = 20 (the loss attack {} and {})", qs(
		muLower("canife/lenet5-fmnist-pretrained", "margin", 10), muLower("canife/lenet5-fmnist-pretrained", "margin", 20),
		muLower("canife/lenet5-fmnist-pretrained", "loss", 10), muLower("canife/lenet5-fmnist-pretrained", "loss", 20))},
	{"as tightly as the gradient canary (gradcanary/lenet5-fmnist, {})", qs(
		minOf(overRounds(muLower, "gradcanary/lenet5-fmnist", "grad-canary", 1, 2, 5, 10, 15, 20)...))},

	// The cost of an audit.
	{"about half of the quadratic instance's exact mu with 500-1000 canaries ({} and {} at T = 4)", qs(
		costOfTruth("onerun-quadratic", 500, "canary-llr", 4), costOfTruth("onerun-quadratic", 1000, "canary-llr", 4))},
	{"record canaries certify {}-{} of the informed adversary's realized mu", qs(
		minOf(onerunMLPOfTruth()...), maxOf(onerunMLPOfTruth()...))},

	// Goals of issue 15.
	{"{} of {} ({}) in convergence-quadratic's own family of 27 rows ({} at three decimals)", qs(
		muLower("convergence-quadratic", "informed-all", 300), muExact("convergence-quadratic", "informed-all", 300),
		ofExact("convergence-quadratic", "informed-all", 300), ofExact("convergence-quadratic", "informed-all", 300))},
	{"the rank band alone {} (band-quadratic/n2000-band)", qs(muLower("band-quadratic/n2000-band", "informed-all", 300))},
	{"DKW alone {} ({}) in one row", qs(
		muLower("band-quadratic/n2000-dkw", "informed-all", 300), ofExact("band-quadratic/n2000-dkw", "informed-all", 300))},
	{"the band alone {} ({}), DKW alone {} ({})", qs(
		muLower("band-quadratic/mu5-band", "informed-all", 300), ofExact("band-quadratic/mu5-band", "informed-all", 300),
		muLower("band-quadratic/mu5-dkw", "informed-all", 300), ofExact("band-quadratic/mu5-dkw", "informed-all", 300))},
	{"2000 pairs with the rank band certify eps {} (dp-fedavg-10x/band", qs(epsLower("dp-fedavg-10x/band", "informed-all", 8))},
	{"DKW alone gives {} (not caught)", qs(epsLower("dp-fedavg-10x/dkw", "informed-all", 8))},
	{"One run of 1000 canary clients certifies eps {} (dp-fedavg-one-run, violated)", qs(epsLower("dp-fedavg-one-run", "canary-llr", 8))},
	{"over 5 trainings {} / {} / {} / {} / {}, so 4 of 5", costEpsLowers("dp-fedavg-one-run", 1000, 5)},
	{"with 2000 canaries 5 of 5 ({}-{})", qs(
		minOf(costEpsLowers("dp-fedavg-one-run", 2000, 5)...), maxOf(costEpsLowers("dp-fedavg-one-run", 2000, 5)...))},

	// Goals of issue 28.
	{"the default thresholds over 10 rows ({}, {}; {} at T = 100)", overRounds(ofExact, "gradcanary/quadratic", "grad-canary", 20, 300, 100)},
	{"Met: {} against {} (6.3x), at the ceiling of 500 pairs", qs(
		muLower("gradcanary/mlp", "grad-canary", 20), muLower("convergence-mlp", "loss", 20))},
	{"(heuristic 2.000) {} = {} (gradcanary/mlp-sigma0.4, T = 20)", qs(
		muLower("gradcanary/mlp-sigma0.4", "grad-canary", 20), ofHeuristic("gradcanary/mlp-sigma0.4", "grad-canary", 20))},
	{"Met: grad-canary certifies {} at T = 1, 2, 5, 10, 15, 20", qs(
		minOf(overRounds(muLower, "gradcanary/lenet5-fmnist", "grad-canary", 1, 2, 5, 10, 15, 20)...))},
	{"the loss attack certifies {} from the pretrained w_0 against {} from the seeded one", qs(
		muLower("pretrain/mlp-pretrained", "loss", 20), muLower("pretrain/mlp-seeded", "loss", 20))},
	{"{} against {} at T = 10. LeNet-5", qs(
		muLower("pretrain/mlp-pretrained", "loss", 10), muLower("pretrain/mlp-seeded", "loss", 10))},
	{"the best final-model row certifies {} (lira-online, T = 2) against lenet5-fmnist's {} (loss, T = 5)", qs(
		muLower("pretrain/lenet5-fmnist", "lira-online", 2), muLower("lenet5-fmnist", "loss", 5))},
	{"the loss attack certifies {} with the crafted input against {} with the Dirac one (seeded w_0), and {} with a pretrained w_0", qs(
		muLower("canife/mlp", "loss", 20), muLower("pretrain/mlp-seeded", "loss", 20), muLower("canife/mlp-pretrained", "loss", 20))},
	{"w_0 certifies {} at T = 10 (the margin attack, at the 100-pair ceiling) and {} at T = 20", qs(
		muLower("canife/lenet5-fmnist-pretrained", "margin", 10), muLower("canife/lenet5-fmnist-pretrained", "margin", 20))},
	{"it peaks at {} (T = 5, against {})", qs(
		muLower("canife/lenet5-fmnist", "margin", 5), muLower("lenet5-fmnist", "loss", 5))},
	{"the learned attacks on the natural client certify eps {}, the crafted canary client {}, and the same on a linear model {}", qs(
		maxOf(epsLower("dp-fedavg-final/learned", "param-cosine", 10), epsLower("dp-fedavg-final/learned", "param-lda", 10)),
		epsLower("dp-fedavg-final/crafted", "grad-canary", 10), epsLower("dp-fedavg-final/crafted-linear", "grad-canary", 10))},
}

// uncheckedProse are README passages whose certified numbers the committed files do not hold,
// so that no test can check them: each says why.
var uncheckedProse = []string{
	// Targets, not results.
	"how many trainings each method needs to certify 0.8 of",
	"certified >= 0.9 of exact.",
	"f-DP mu >= 0.6 of the truth",
	// Ceilings: the most a row can certify, computed for the text, not a bound of a report.
	"with dkw+band: 1.54 at 30 pairs",
	// An `audit analyze` with other thresholds, or seeds that are not committed.
	"in one row, 3.147 ({}) (`audit analyze results/band-quadratic/n2000-dkw",
	"and 2.811 ({}) in the family (before the default changed)",
	"4.581 of 4.999 ({}, `audit analyze",
	"1.34-1.67 in one row over 5 further seeds",
	"the default dkw+band 1.243 (caught:",
	// Tests of package audit (go test ./audit), not committed reports.
	"certifies a median 1.157 (0.58) over 200",
	"1.245 (0.62); the equal-weight grid",
	"a perfect separation certifies 1.586 at m = 1000",
	"at mu = 4 the row certifies 1.586 (0.40)",
	"certifies 0.916 (`TestGradientCanaryFinalModelOnQuadraticInstance`)",
}

var numberRE = `(-?[0-9]+(?:\.[0-9]+)?)`

// claimRE compiles a pattern: {} is a number, whitespace any run of whitespace.
func claimRE(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "{}")
	for i, part := range parts {
		parts[i] = spaceRE.ReplaceAllString(regexp.QuoteMeta(part), `\s+`)
	}
	return regexp.MustCompile(strings.Join(parts, numberRE))
}

var spaceRE = regexp.MustCompile(`\s+`)

func readReadme(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestReadmeProseLowerBounds checks each proseClaim: the passage is in the README, and each of
// its numbers is the report's value rounded as the quantity says (down for certified bounds).
func TestReadmeProseLowerBounds(t *testing.T) {
	readme := readReadme(t)
	for _, c := range proseClaims {
		re := claimRE(c.pattern)
		if re.NumSubexp() != len(c.values) {
			t.Fatalf("claim %q: %d numbers, %d values", c.pattern, re.NumSubexp(), len(c.values))
		}
		ms := re.FindAllStringSubmatch(readme, -1)
		if len(ms) == 0 {
			t.Errorf("README.md no longer says %q: update proseClaims", c.pattern)
			continue
		}
		for _, m := range ms {
			for i, q := range c.values {
				v, err := q.get()
				if err != nil {
					t.Errorf("README %q: %s: %v (regenerate with results/regenerate.sh)", c.pattern, q.what, err)
					continue
				}
				if got := q.format(v, m[i+1]); got != m[i+1] {
					t.Errorf("README %q: says %s, the reports give %s (%s = %.6g)", strings.Join(strings.Fields(m[0]), " "), m[i+1], got, q.what, v)
				}
			}
		}
	}
}

// certifiedRE finds the numbers the prose presents as certified: "certifies 0.71", "certified
// mu 0.71", "certify eps 1.280", "mu >= 2.504", "eps >= 1.28".
var certifiedRE = regexp.MustCompile(`(?:\bcertif(?:y|ies|ied)\s+(?:(?:mu|eps|epsilon)\s+)?(?:>=\s*)?|\b(?:mu|eps|epsilon)\s*>=\s*)([0-9]+\.[0-9]+)`)

// TestReadmeProseLowerBoundsAreChecked finds every number the README's prose presents as
// certified and requires it to lie in a passage of proseClaims (checked) or uncheckedProse
// (which says why not): a new certified number in the prose fails here until it is listed.
func TestReadmeProseLowerBoundsAreChecked(t *testing.T) {
	readme := readReadme(t)
	type span struct{ from, to int }
	var covered []span
	for _, p := range proseClaims {
		for _, loc := range claimRE(p.pattern).FindAllStringIndex(readme, -1) {
			covered = append(covered, span{loc[0], loc[1]})
		}
	}
	for _, p := range uncheckedProse {
		locs := claimRE(p).FindAllStringIndex(readme, -1)
		if len(locs) == 0 {
			t.Errorf("README.md no longer says %q: update uncheckedProse", p)
		}
		for _, loc := range locs {
			covered = append(covered, span{loc[0], loc[1]})
		}
	}
	for _, m := range certifiedRE.FindAllStringSubmatchIndex(readme, -1) {
		from, to := m[2], m[3]
		ok := false
		for _, s := range covered {
			if s.from <= from && to <= s.to {
				ok = true
				break
			}
		}
		if !ok {
			line := 1 + strings.Count(readme[:from], "\n")
			t.Errorf("README.md:%d: %q presents %s as certified, but no proseClaim checks it: add one (or to uncheckedProse, saying why)",
				line, strings.Join(strings.Fields(readme[m[0]:m[1]]), " "), readme[from:to])
		}
	}
}
