// Package zoo holds the bug zoo (zoo.py: a PyTorch Noisy-FedAvg deployment with one flag per
// privacy bug shipped in the field, recorded with tools/recorder) and the test that trains every
// variant, imports it with `audit import` and runs `audit check` on it: each bug must fail the
// check (exit status 3), the correct variant pass it (exit status 0), over several seeds.
//
//	FEDAUDIT_REQUIRE_TORCH=1 go test ./tools/zoo            5 seeds (FEDAUDIT_ZOO_SEEDS=100 for 100)
//	tools/zoo/table.sh results/zoo                        the zoo table (FEDAUDIT_ZOO_TABLE)
package zoo

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedaudit/fedaudit/dataexport"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

// The variants zoo.py trains, "none" the correct one, and where each bug was shipped.
var variants = []struct{ name, source string }{
	{"none", "the correct algorithm"},
	{"no-clip", "Opacus #664"},
	{"clip-per-parameter", "fedbiomed #1443"},
	{"noise-twice", "fedbiomed #1443"},
	{"variance-as-std", "sigma^2 passed as the std"},
	{"noise-on-average", "server-side noise, bare uploads"},
	{"reuse-noise", "one draw reused every round"},
	{"unnoised-bias", "a parameter group left unnoised"},
	{"clip-after-noise", "noise added before clipping"},
	{"passthrough", "NVFlare #343"},
	{"shared-client-noise", "one draw shared by every client"},
}

const (
	envSeeds = "FEDAUDIT_ZOO_SEEDS" // how many seeds (default 5)
	envTable = "FEDAUDIT_ZOO_TABLE" // a folder: write the zoo table and every --json output there
	envAlpha = "FEDAUDIT_ZOO_ALPHA" // the checks' family-wise level (default 0.01)
)

var (
	pythonOnce sync.Once
	pythonPath string
)

// python finds an interpreter with torch and numpy: Debian's /usr/bin/python3 first. Without
// one the test skips, or fails when FEDAUDIT_REQUIRE_TORCH=1 (as CI sets).
func python(t *testing.T) string {
	t.Helper()
	pythonOnce.Do(func() {
		for _, p := range []string{"/usr/bin/python3", "python3"} {
			if exec.Command(p, "-c", "import torch, numpy").Run() == nil {
				pythonPath = p
				return
			}
		}
	})
	if pythonPath != "" {
		return pythonPath
	}
	msg := "no python3 with torch and numpy (apt-get install python3-torch python3-numpy)"
	if os.Getenv("FEDAUDIT_REQUIRE_TORCH") == "1" {
		t.Fatal(msg + ", and FEDAUDIT_REQUIRE_TORCH=1 requires this test")
	}
	t.Skip(msg)
	return ""
}

// importSummary is what `audit import --json` prints, the fields the zoo reads.
type importSummary struct {
	Pairs    int      `json:"pairs"`
	Rounds   []int    `json:"rounds"`
	Uploads  int      `json:"uploads"`
	Replayed bool     `json:"replayed"`
	Warnings []string `json:"warnings"`
}

// checkReport is the contract of `audit check DIR --json`.
type checkReport struct {
	Passed bool    `json:"passed"`
	Alpha  float64 `json:"alpha"`
	Checks []struct {
		Name      string  `json:"name"`
		Observer  string  `json:"observer"` // global or upload, for the noise checks
		Tensor    string  `json:"tensor"`
		Statistic float64 `json:"statistic"`
		PValue    float64 `json:"p_value"`
		Passed    bool    `json:"passed"`
		Meaning   string  `json:"meaning"`
	} `json:"checks"`
}

// zooRun is one variant at one seed, imported.
type zooRun struct {
	bug     string
	seed    int
	snaps   string
	dir     string // the imported directory
	err     string // why the import failed
	imports importSummary
}

type fixture struct {
	bin, work string
	seeds     int
	runs      []*zooRun
	err       error
	timing    string
}

var (
	fixOnce sync.Once
	fix     fixture
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fix.work != "" && os.Getenv(envTable) == "" {
		os.RemoveAll(fix.work)
	}
	os.Exit(code)
}

func seeds(t *testing.T) int {
	s := os.Getenv(envSeeds)
	if s == "" {
		return 5
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of seeds >= 1", envSeeds, s)
	}
	return n
}

// run runs a command and returns its stdout, stderr and exit status (-1 when it did not run).
func run(ctx context.Context, name string, args ...string) (stdout, stderr string, code int, err error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return o.String(), e.String(), 0, nil
	case errors.As(err, &ee):
		return o.String(), e.String(), ee.ExitCode(), nil
	}
	return o.String(), e.String(), -1, err
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// zoo trains every variant at every seed, once per test binary, and imports each run.
func zoo(t *testing.T) *fixture {
	t.Helper()
	py := python(t)
	fixOnce.Do(func() { fix = build(py, seeds(t)) })
	if fix.err != nil {
		t.Fatal(fix.err)
	}
	return &fix
}

func build(py string, nSeeds int) fixture {
	f := fixture{seeds: nSeeds}
	if dir := os.Getenv(envTable); dir != "" {
		f.work = filepath.Join(dir, "work")
		os.RemoveAll(f.work)
		if err := os.MkdirAll(f.work, 0o755); err != nil {
			f.err = err
			return f
		}
	} else {
		w, err := os.MkdirTemp("", "fedaudit-zoo-")
		if err != nil {
			f.err = err
			return f
		}
		f.work = w
	}
	ctx := context.Background()
	t0 := time.Now()
	f.bin = filepath.Join(f.work, "audit")
	if _, e, code, err := run(ctx, goTool(), "build", "-o", f.bin, "github.com/fedaudit/fedaudit/cmd/audit"); code != 0 {
		f.err = fmt.Errorf("go build ./cmd/audit: %v %s", err, e)
		return f
	}
	data := filepath.Join(f.work, "data.npz")
	if _, e, code, err := run(ctx, f.bin, "datasets", "export", "--config", "zoo.yaml", "--out", data); code != 0 {
		f.err = fmt.Errorf("audit datasets export: exit %d %v: %s", code, err, e)
		return f
	}
	tBuild := time.Since(t0)
	snaps := filepath.Join(f.work, "snaps")
	seedList := fmt.Sprintf("0-%d", nSeeds-1)
	t1 := time.Now()
	if o, e, code, err := run(ctx, py, "zoo.py", "--data", data, "--out", snaps, "--bugs", "all", "--seeds", seedList); code != 0 {
		f.err = fmt.Errorf("zoo.py: exit %d %v: %s%s", code, err, o, e)
		return f
	}
	tTrain := time.Since(t1)
	for seed := 0; seed < nSeeds; seed++ {
		for _, v := range variants {
			f.runs = append(f.runs, &zooRun{bug: v.name, seed: seed, snaps: filepath.Join(snaps, v.name, fmt.Sprintf("seed%d", seed))})
		}
	}
	t2 := time.Now()
	parallel(len(f.runs), func(i int) { f.runs[i].importRun(ctx, f.bin, filepath.Join(f.work, "imported")) })
	f.timing = fmt.Sprintf("build and data export %.1fs; PyTorch, %d variants x %d seeds: %.1fs; imports: %.1fs",
		tBuild.Seconds(), len(variants), nSeeds, tTrain.Seconds(), time.Since(t2).Seconds())
	return f
}

// parallel runs fn(0..n-1) on as many goroutines as there are cores.
func parallel(n int, fn func(int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// importRun imports the run as the recorder wrote it: its manifest and config.json.
func (r *zooRun) importRun(ctx context.Context, bin, root string) {
	r.dir = filepath.Join(root, fmt.Sprintf("%s-seed%d", r.bug, r.seed))
	os.RemoveAll(r.dir)
	o, e, code, err := run(ctx, bin, "import", "--manifest", filepath.Join(r.snaps, "manifest.csv"),
		"--config", filepath.Join(r.snaps, "config.json"), "--out", r.dir, "--workers", "1", "--json")
	if code != 0 {
		r.err = fmt.Sprintf("audit import: exit %d %v: %s", code, err, e)
		return
	}
	if err := json.Unmarshal([]byte(o), &r.imports); err != nil {
		r.err = fmt.Sprintf("audit import --json: %v: %s", err, o)
	}
}

// TestZooImports: every variant's runs, written by the recorder, import as a replayable
// experiment: 2 pairs, every round 0..T, the target's uploads of rounds 1..T in both worlds, the
// informed adversary replayed (what `audit check` reads), no warning, but for noise-on-average:
// its bare uploads of round 1 (from the shared w_0) agree across the pairs bit for bit, which
// the import warns of (copies, or uploads without noise) and check then fails; and for
// variance-as-std, whose runs of different pairs lie closer than the declared noise allows
// (sigma^2 drawn for sigma), which the import warns of and goes on to audit.
func TestZooImports(t *testing.T) {
	f := zoo(t)
	t.Logf("%s", f.timing)
	for _, r := range f.runs {
		if r.err != "" {
			t.Errorf("%s, seed %d: %s", r.bug, r.seed, r.err)
			continue
		}
		s := r.imports
		T := len(s.Rounds) - 1
		warned := len(s.Warnings) > 0
		if r.bug == "noise-on-average" {
			warned = !slices.ContainsFunc(s.Warnings, func(w string) bool {
				return strings.Contains(w, "round 1: the uploads of pair 0 world C (") && strings.Contains(w, "or the uploads carry no noise")
			}) || slices.ContainsFunc(s.Warnings, func(w string) bool { return !strings.Contains(w, "same bit for bit") })
		}
		if r.bug == "variance-as-std" {
			warned = len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "may add less noise than it declares")
		}
		if s.Pairs != 2 || T < 1 || s.Uploads != 2*2*T || !s.Replayed || warned {
			t.Errorf("%s, seed %d: imported %+v: want 2 pairs, uploads of every round in both worlds, replayed, no warning (noise-on-average: that its uploads agree across pairs)", r.bug, r.seed, s)
		}
	}
}

// checked is one `audit check --json` of an imported run.
type checked struct {
	code   int
	report checkReport
	raw    string
	err    string
}

func check(ctx context.Context, bin, dir string, pairs int, alpha float64) checked {
	o, e, code, err := run(ctx, bin, "check", dir, "--pairs", strconv.Itoa(pairs), "--alpha", strconv.FormatFloat(alpha, 'g', -1, 64), "--json")
	c := checked{code: code, raw: o}
	switch {
	case err != nil:
		c.err = err.Error()
	case code != 0 && code != 3:
		c.err = fmt.Sprintf("exit %d: %s", code, strings.TrimSpace(e))
	default:
		if err := json.Unmarshal([]byte(o), &c.report); err != nil {
			c.err = fmt.Sprintf("--json output: %v: %.300s", err, o)
		} else if c.report.Passed != (code == 0) {
			c.err = fmt.Sprintf("exit %d but passed %v", code, c.report.Passed)
		}
	}
	return c
}

// alpha is the family-wise error level the zoo runs `audit check` at: FEDAUDIT_ZOO_ALPHA, by
// default 0.01 (the bugs' p-values are far below any level; the level sets how often the correct
// variant fails by chance).
func alpha(t *testing.T) float64 {
	s := os.Getenv(envAlpha)
	if s == "" {
		return 0.01
	}
	a, err := strconv.ParseFloat(s, 64)
	if err != nil || !(a > 0 && a < 1) {
		t.Fatalf("%s=%q: want a level in (0, 1)", envAlpha, s)
	}
	return a
}

// falseAlarms is the most false alarms of the correct variant over n seeds that a check of
// family-wise level alpha explains: the smallest k with P(Binomial(n, alpha) > k) < 0.001. At
// level 0.01 that is 1 of 5 seeds and 5 of 100.
func falseAlarms(n int, alpha float64) int {
	tail := 1.0 // P(X > k), from k = -1 up
	pk := math.Pow(1-alpha, float64(n))
	for k := 0; k <= n; k++ {
		tail -= pk
		if tail < 1e-3 {
			return k
		}
		pk *= float64(n-k) / float64(k+1) * alpha / (1 - alpha)
	}
	return n
}

// TestZooCheck: `audit check DIR --json` fails every bug (exit status 3) from 2 coupled pairs at
// every seed, and passes the correct variant (exit status 0). The checks are statistical tests at
// a family-wise level alpha, so the correct variant fails at about an alpha fraction of the seeds
// by chance (each failure is logged with its p-value); the test allows as many as that level
// explains (falseAlarms) and no more. With FEDAUDIT_ZOO_TABLE it also checks every run with pair
// 0 alone (--pairs 1) and writes the zoo table there.
func TestZooCheck(t *testing.T) {
	f := zoo(t)
	t.Logf("%s", f.timing)
	a := alpha(t)
	ctx := context.Background()
	type key struct {
		run, pairs int
	}
	var jobs []key
	for i := range f.runs {
		jobs = append(jobs, key{i, 2})
		if os.Getenv(envTable) != "" {
			jobs = append(jobs, key{i, 1})
		}
	}
	var mu sync.Mutex
	res := map[key]checked{}
	t0 := time.Now()
	parallel(len(jobs), func(i int) {
		r := f.runs[jobs[i].run]
		if r.err != "" {
			return
		}
		c := check(ctx, f.bin, r.dir, jobs[i].pairs, a)
		mu.Lock()
		res[jobs[i]] = c
		mu.Unlock()
	})
	t.Logf("%d checks in %.1fs (alpha %g)", len(jobs), time.Since(t0).Seconds(), a)
	alarms := 0
	for i, r := range f.runs {
		c, ok := res[key{i, 2}]
		switch {
		case !ok:
			t.Errorf("%s, seed %d: not imported: %s", r.bug, r.seed, r.err)
		case c.err != "":
			t.Errorf("%s, seed %d: audit check: %s", r.bug, r.seed, c.err)
		case r.bug == "none" && c.code != 0:
			alarms++
			t.Logf("correct variant, seed %d: a false alarm: %s", r.seed, failedChecks(c.report))
		case r.bug != "none" && c.code != 3:
			t.Errorf("%s, seed %d: audit check exits %d, want 3 (the bug is not caught)", r.bug, r.seed, c.code)
		}
	}
	if most := falseAlarms(f.seeds, a); alarms > most {
		t.Errorf("the correct variant fails the check at %d of %d seeds: more than level %g explains (%d)", alarms, f.seeds, a, most)
	}
	if dir := os.Getenv(envTable); dir != "" {
		byBug := map[string]map[int][2]checked{}
		for k, c := range res {
			r := f.runs[k.run]
			if byBug[r.bug] == nil {
				byBug[r.bug] = map[int][2]checked{}
			}
			v := byBug[r.bug][r.seed]
			v[k.pairs-1] = c
			byBug[r.bug][r.seed] = v
		}
		if err := writeTable(dir, f.seeds, a, byBug); err != nil {
			t.Fatal(err)
		}
		t.Logf("zoo table written to %s (zoo.md, zoo.csv, json/)", dir)
	}
}

func failedChecks(r checkReport) string {
	var s []string
	for _, c := range r.Checks {
		if !c.Passed {
			s = append(s, fmt.Sprintf("%s %s %s (p %.3g)", c.Name, c.Observer, c.Tensor, c.PValue))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// writeTable writes the zoo table (zoo.md, zoo.csv) and every --json output (json/) into dir:
// per variant, the seeds that fail the check with 2 pairs, the pairs needed (the fewest, 1 or 2,
// with which every seed fails), the checks that failed in at least half of the seeds, the check
// of the smallest p-value, and the median over seeds of that p-value. For the correct variant
// the failing seeds are false alarms.
func writeTable(dir string, nSeeds int, alpha float64, byBug map[string]map[int][2]checked) error {
	if err := os.MkdirAll(filepath.Join(dir, "json"), 0o755); err != nil {
		return err
	}
	header := []string{"variant", "models", fmt.Sprintf("seeds failing the check (2 pairs, alpha %g)", alpha), "pairs needed", "checks that caught it (x tensors and observers, in at least half the seeds)", "smallest p-value's check (most seeds)", "smallest p-value (median over seeds)"}
	var rows [][]string
	for _, v := range variants {
		caught := [2]int{}
		var ps []float64
		counts := map[string]int{}    // "name observer tensor" -> seeds where it failed
		strongest := map[string]int{} // the failing check of the smallest p-value -> seeds
		for seed := 0; seed < nSeeds; seed++ {
			cs := byBug[v.name][seed]
			for pi, c := range cs {
				if c.raw != "" {
					p := filepath.Join(dir, "json", v.name, fmt.Sprintf("seed%d-pairs%d.json", seed, pi+1))
					os.MkdirAll(filepath.Dir(p), 0o755)
					if err := os.WriteFile(p, []byte(c.raw), 0o644); err != nil {
						return err
					}
				}
				if c.err != "" || c.code != 3 {
					continue
				}
				caught[pi]++
				if pi != 1 {
					continue
				}
				minP, best := math.Inf(1), ""
				for _, ch := range c.report.Checks {
					if !ch.Passed {
						k := strings.Join(strings.Fields(ch.Name+" "+ch.Observer+" "+ch.Tensor), " ")
						counts[k]++
						if ch.PValue < minP || best == "" {
							minP, best = ch.PValue, k
						}
					}
				}
				ps = append(ps, minP)
				strongest[best]++
			}
		}
		needed := ">2"
		switch {
		case caught[0] == nSeeds:
			needed = "1"
		case caught[1] == nSeeds:
			needed = "2"
		}
		names := checksCaught(counts, nSeeds)
		best := mostSeeds(strongest)
		p := ""
		if len(ps) > 0 {
			sort.Float64s(ps)
			p = fmt.Sprintf("%.2g", ps[len(ps)/2])
		}
		caughtCell := fmt.Sprintf("%d/%d", caught[1], nSeeds)
		if v.name == "none" {
			needed, caughtCell = "", fmt.Sprintf("%d/%d (false alarms)", caught[1], nSeeds)
		}
		rows = append(rows, []string{v.name, v.source, caughtCell, needed, strings.Join(names, ", "), best, p})
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat(" --- |", len(header)))
	for _, r := range rows {
		fmt.Fprintf(&md, "| %s |\n", strings.Join(r, " | "))
	}
	if err := os.WriteFile(filepath.Join(dir, "zoo.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(header)
	w.WriteAll(rows)
	return os.WriteFile(filepath.Join(dir, "zoo.csv"), b.Bytes(), 0o644)
}

// checksCaught returns the checks that failed in at least half of the nSeeds seeds (counts:
// seeds per "name observer tensor"), by name with how many tensors and observers ("name xN"),
// most first, then by name. It is its own piece because it is the summary of one table cell,
// apart from the tally of the seeds' reports.
func checksCaught(counts map[string]int, nSeeds int) []string {
	byName := map[string]int{}
	for k, n := range counts {
		if 2*n >= nSeeds {
			byName[strings.Fields(k)[0]]++
		}
	}
	var names []string
	for k := range byName {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if byName[names[i]] != byName[names[j]] {
			return byName[names[i]] > byName[names[j]]
		}
		return names[i] < names[j]
	})
	for i, k := range names {
		names[i] = fmt.Sprintf("%s x%d", k, byName[k])
	}
	return names
}

// mostSeeds returns the check of the smallest p-value in most seeds (strongest: seeds per
// check), the first by name on a tie, "" for none. It is its own piece because it is another
// table cell's summary, picked deterministically from a map.
func mostSeeds(strongest map[string]int) string {
	best, bestN := "", 0
	for k, n := range strongest {
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	return best
}

// TestFalseAlarms pins the false alarms the zoo test allows the correct variant.
func TestFalseAlarms(t *testing.T) {
	for _, c := range []struct {
		n     int
		alpha float64
		want  int
	}{{5, 0.01, 1}, {100, 0.01, 5}, {5, 0.05, 3}, {1, 0.01, 1}, {1000, 1e-9, 0}} {
		if got := falseAlarms(c.n, c.alpha); got != c.want {
			t.Errorf("falseAlarms(%d, %g) = %d, want %d", c.n, c.alpha, got, c.want)
		}
	}
}

// TestZooRefusesWhatItDoesNotTrain: zoo.py reads the deployment it declares from --config, and
// the recorder copies that config's train fields into config.json, so a field the zoo does not
// train (a learning-rate schedule, partial participation) must be refused, not declared: with
// `schedule: cyclic` the correct variant's runs, trained at a constant rate, fail `audit check`
// as a bug would.
func TestZooRefusesWhatItDoesNotTrain(t *testing.T) {
	py := python(t)
	raw, err := os.ReadFile("zoo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := spec.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	npz := filepath.Join(work, "data.npz")
	if err := dataexport.Write(context.Background(), npz, cfg, data); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ field, line string }{{"schedule", "  schedule: cyclic\n"}, {"participants", "  participants: 3\n"}} {
		y := strings.Replace(string(raw), "  batching: full\n", "  batching: full\n"+c.line, 1)
		path := filepath.Join(work, c.field+".yaml")
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(work, "snaps-"+c.field)
		o, e, code, err := run(context.Background(), py, "zoo.py", "--data", npz, "--config", path, "--out", out, "--bugs", "none", "--seeds", "0")
		if err != nil || code == 0 || !strings.Contains(e, "train."+c.field) {
			t.Errorf("zoo.py with %q: exit %d (%v), want a refusal naming train.%s: %s%s", strings.TrimSpace(c.line), code, err, c.field, o, e)
		}
		if _, err := os.Stat(filepath.Join(out, "none", "seed0", "manifest.csv")); err == nil {
			t.Errorf("zoo.py with %q wrote a manifest", strings.TrimSpace(c.line))
		}
	}
}
