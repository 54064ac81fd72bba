// Package torch holds the reference external trainer (noisy_fedavg.py) and the tests that audit
// its runs through `audit import`.
package torch

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fedaudit/fedaudit/audit"
	"github.com/fedaudit/fedaudit/dataexport"
	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/importer"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/runs"
)

var (
	pythonOnce sync.Once
	pythonPath string
)

// python finds an interpreter with torch and numpy: Debian's /usr/bin/python3 first (python3 on
// PATH may be another installation without them).
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

// deployment is one experiment both trainers run: its config, data (as .npz for PyTorch) and the
// trainer flags that say the same as the config.
type deployment struct {
	cfg  *spec.Config
	data *spec.Data
	npz  string
	work string
}

func newDeployment(t *testing.T, yaml string) *deployment {
	t.Helper()
	cfg, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// The data as an external trainer gets it: `audit datasets export`'s file.
	npz := filepath.Join(work, "data.npz")
	if err := dataexport.Write(context.Background(), npz, cfg, data); err != nil {
		t.Fatal(err)
	}
	return &deployment{cfg: cfg, data: data, npz: npz, work: work}
}

// torchFlags are noisy_fedavg.py's flags for the deployment's training config.
func (d *deployment) torchFlags() []string {
	tc := d.cfg.Train
	cps := ""
	for i, c := range tc.Checkpoints {
		if i > 0 {
			cps += ","
		}
		cps += fmt.Sprint(c)
	}
	args := []string{"--data", d.npz, "--pairs", fmt.Sprint(d.cfg.Pairs), "--rounds", fmt.Sprint(tc.Rounds),
		"--local-steps", fmt.Sprint(tc.LocalSteps), "--lr", fmt.Sprint(tc.LearningRate), "--clip", fmt.Sprint(tc.ClipNorm),
		"--checkpoints", cps}
	switch tc.Model.Kind {
	case "mlp":
		args = append(args, "--model", "mlp", "--hidden", fmt.Sprint(tc.Model.Hidden[0]), "--activation", tc.Model.Activation)
	case "lenet5":
		args = append(args, "--model", "lenet5")
		if tc.Model.Classic {
			args = append(args, "--classic")
		}
	}
	if tc.RecordUpload {
		args = append(args, "--uploads", fmt.Sprint(d.cfg.Adjacency.Client))
	}
	return args
}

// torch trains the deployment in PyTorch with noise sigma (and extra flags) and imports the
// snapshots; it returns the imported directory.
func (d *deployment) torch(t *testing.T, name string, sigma float64, extra ...string) string {
	t.Helper()
	py := python(t)
	snaps := filepath.Join(d.work, "snap-"+name)
	args := append(append([]string{"noisy_fedavg.py", "--out", snaps, "--sigma", fmt.Sprint(sigma), "--seed", "3"}, d.torchFlags()...), extra...)
	cmd := exec.Command(py, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("noisy_fedavg.py %v: %v\n%s", args, err, out.String())
	}
	t.Logf("PyTorch %s: %d pairs in %.1fs", name, d.cfg.Pairs, time.Since(t0).Seconds())
	m, err := importer.ReadManifest(filepath.Join(snaps, "manifest.csv"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.work, "imported-"+name)
	res, err := importer.Import(context.Background(), importer.Options{Manifest: m, Config: d.cfg, Out: dir, ToolVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) > 0 {
		t.Fatalf("the import of PyTorch's %s runs warns: %q", name, res.Warnings)
	}
	if res.Uploads > 0 {
		// PyTorch's uploads are the uploaded models: read as updates, their norms give them away.
		wrong, err := importer.Import(context.Background(), importer.Options{Manifest: m, Config: d.cfg, Out: dir + "-as-updates", UploadUpdates: true})
		if err != nil || len(wrong.Warnings) != 1 || !strings.Contains(wrong.Warnings[0], "look like uploaded models") {
			t.Fatalf("PyTorch's %s uploads read as updates: error %v, warnings %v", name, err, wrong)
		}
		os.RemoveAll(dir + "-as-updates")
	}
	return dir
}

// initFrom writes the w_0 of fedaudit's runs in dir (every run's round-0 model) as a .npy
// vector for noisy_fedavg.py --init and returns its path.
func (d *deployment) initFrom(t *testing.T, dir string) string {
	t.Helper()
	w0 := paramsAt(t, dir, 0)[0]
	b, err := ingest.WriteNPY([]int{len(w0)}, w0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.work, "w0.npy")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// own trains the deployment (edited by edit) with fedaudit's trainer.
func (d *deployment) own(t *testing.T, name string, edit func(*spec.Config)) string {
	t.Helper()
	cfg := *d.cfg
	if edit != nil {
		edit(&cfg)
	}
	dir := filepath.Join(d.work, "own-"+name)
	if _, err := experiment.SetUpDirectory(&cfg, dir, 1); err != nil {
		t.Fatal(err)
	}
	if err := experiment.TrainShards(context.Background(), &cfg, d.data, dir, experiment.AllShards(1), experiment.TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

type summary struct {
	status string
	// by "attack/threat" at the last round: certified mu_lower, mu estimate, the row's confidence
	res map[string]*audit.Result
}

func analyze(t *testing.T, dir string, round int) summary {
	t.Helper()
	a, err := experiment.AnalyzeDir(context.Background(), dir, experiment.AnalyzeOptions{}, experiment.AttackOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := summary{status: a.Headline.Status, res: map[string]*audit.Result{}}
	for _, f := range a.Findings {
		if f.Round == round && f.Result != nil {
			s.res[f.Attack+"/"+f.Threat] = f.Result
		}
	}
	t.Logf("%s: %s; %s", filepath.Base(dir), a.Headline.Status, a.Headline.Text)
	for k, v := range s.res {
		t.Logf("  %-26s mu_lower %.3f  mu_est %.3f", k, v.MuLower, v.MuEstimate)
	}
	return s
}

// paramsAt reads every run's parameters at a round.
func paramsAt(t *testing.T, dir string, round int32) map[int64][]float32 {
	t.Helper()
	tab, err := runs.Open(expdir.Dir(dir).Runs())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	out := map[int64][]float32{}
	err = tab.Scan(context.Background(), func(r runs.Row) error {
		if r.Round == round {
			out[r.RunID] = slices.Clone(r.Params)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const parityMLP = `name: torch-parity-mlp
seed: 5
pairs: 2
data: {source: synthetic, synthetic: {dim: 10, classes: 3}, clients: 3, per_client: 6, test_samples: 20}
adjacency: {kind: replace, client: 1, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [8], activation: tanh}
  rounds: 4
  local_steps: 3
  learning_rate: 0.5
  batching: full
  clip_norm: 0.05
  noise_std: 0
  checkpoints: [0, 4]
  record_params: true
`

const parityLeNet = `name: torch-parity-lenet5
seed: 5
pairs: 2
data: {source: synthetic-images, clients: 3, per_client: 4, test_samples: 20}
adjacency: {kind: replace, client: 0, index: 1, canary: blank}
train:
  algorithm: fedavg
  model: {kind: lenet5}
  rounds: 3
  local_steps: 2
  learning_rate: 0.2
  batching: full
  clip_norm: 0.5
  noise_std: 0
  checkpoints: [0, 3]
  record_params: true
`

// TestTorchMatchesFedauditWithoutNoise trains an MLP and LeNet-5 without noise from fedaudit's
// w_0 in PyTorch and with fedaudit's trainer: training is then deterministic, so the imported
// models must equal fedaudit's own to float32 rounding. This pins that the reference trainer
// runs fedaudit's algorithm (clipping of the whole gradient, local steps, averaging) and that
// the import maps PyTorch's state_dict (nn.Linear, nn.Conv2d, flatten) onto fedaudit's layout.
// The MLP is also trained with clip_norm 0, which disables clipping (docs/training.md): a
// trainer that took 0 for a bound would zero every step and never move from w_0.
func TestTorchMatchesFedauditWithoutNoise(t *testing.T) {
	python(t)
	noClip := strings.Replace(parityMLP, "clip_norm: 0.05", "clip_norm: 0", 1)
	for _, tc := range []struct{ name, yaml string }{{"mlp", parityMLP}, {"lenet5", parityLeNet}, {"mlp-clip0", noClip}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(t, tc.yaml)
			own := d.own(t, "parity", nil)
			w0 := paramsAt(t, own, 0)[0]
			imp := d.torch(t, "parity", 0, "--init", d.initFrom(t, own))
			T := int32(d.cfg.Train.Rounds)
			a, b2 := paramsAt(t, own, T), paramsAt(t, imp, T)
			var scale, worst, moved float64
			for id, wa := range a {
				wb := b2[id]
				for i := range wa {
					scale = math.Max(scale, math.Abs(float64(wa[i])))
					worst = math.Max(worst, math.Abs(float64(wa[i])-float64(wb[i])))
					moved = math.Max(moved, math.Abs(float64(wa[i])-float64(w0[i])))
				}
			}
			t.Logf("%s: %d parameters, largest |w| %.3g, moved by up to %.3g, PyTorch vs fedaudit differ by up to %.3g", tc.name, len(w0), scale, moved, worst)
			// float32 rounding in different orders of summation over a few rounds: 1e-6 of the
			// parameters' scale is ample, and a thousand times less than what training moved.
			if len(a) != 2*d.cfg.Pairs || worst > 1e-5*scale || worst > 1e-3*moved {
				t.Fatalf("%s: PyTorch's models differ from fedaudit's by %.3g (scale %.3g, moved %.3g)", tc.name, worst, scale, moved)
			}
		})
	}
}

// The deployment of the planted bugs: Noisy-FedAvg of a small tanh MLP, clipping to V = 0.01
// and noise sigma = 0.03 on each upload; the composition bound for all five global models is
// 2 V K eta sqrt(T) / (sigma sqrt(m)) = 0.67, so the claim mu = 1 holds for the correct
// algorithm. Without clipping the canary moves the model about a hundred times further; with the
// noise reused, the informed adversary's differenced residuals (informed-diff) vanish in the
// true world. Every round is a checkpoint, so the import replays the informed adversary.
const bugDeployment = `name: torch-reference
seed: 11
pairs: 200
data: {source: synthetic, synthetic: {dim: 10, classes: 3}, clients: 5, per_client: 10, test_samples: 100}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [8], activation: tanh}
  rounds: 5
  local_steps: 2
  learning_rate: 0.5
  batching: full
  clip_norm: 0.01
  noise_std: 0.03
  checkpoints: [0, 1, 2, 3, 4, 5]
  informed: true
  record_params: true
audit:
  attacks: [informed-all, informed-diff, loss, grad-align, linear]
  rounds: [5]
  claim_mu: 1
`

// TestTorchPlantedBugs: the correct PyTorch deployment is consistent with its claim, each
// planted bug is violated, and without clipping fedaudit's own trainer (clip_norm 0) is caught
// the same way.
func TestTorchPlantedBugs(t *testing.T) {
	python(t)
	if testing.Short() {
		t.Skip("trains 3 x 200 pairs in PyTorch")
	}
	start := time.Now()
	d := newDeployment(t, bugDeployment)
	sigma := d.cfg.Train.NoiseStd
	res := map[string]summary{}
	for _, bug := range []string{"none", "no-clip", "reuse-noise"} {
		res[bug] = analyze(t, d.torch(t, bug, sigma, "--bug", bug), 5)
	}
	// fedaudit's trainer records no informed-diff (its noise is fresh by construction).
	res["own-noclip"] = analyze(t, d.own(t, "noclip", func(c *spec.Config) {
		c.Train.ClipNorm = 0
		c.Audit.Attacks = slices.DeleteFunc(slices.Clone(c.Audit.Attacks), func(a string) bool { return a == "informed-diff" })
	}), 5)
	want := map[string]string{"none": findings.StatusConsistent, "no-clip": findings.StatusViolated,
		"reuse-noise": findings.StatusViolated, "own-noclip": findings.StatusViolated}
	for k, w := range want {
		if res[k].status != w {
			t.Errorf("%s: verdict %s, want %s", k, res[k].status, w)
		}
	}
	// The reused noise is what informed-diff sees: it separates the worlds perfectly (the most
	// 200 pairs certify), while on the correct runs it certifies far less.
	rd, cd := res["reuse-noise"].res["informed-diff/all-iterates"], res["none"].res["informed-diff/all-iterates"]
	if rd == nil || cd == nil || rd.MuLower < d.cfg.Audit.ClaimMu || cd.MuLower >= d.cfg.Audit.ClaimMu {
		t.Errorf("informed-diff: reuse-noise %+v, correct %+v", rd, cd)
	}
	t.Logf("whole test: %.1fs", time.Since(start).Seconds())
}

// The deployment of the comparison, at a moderate mu: the same MLP with a larger clip (0.05) and
// smaller noise (0.01), 300 pairs, every round a checkpoint so the informed adversary is replayed
// from the imported rounds, and the target client's uploads. Its mu is about 1.2 for every
// observer here (measured; the composition bound, 10, assumes the canary's clipped gradient
// points against all others').
const moderateDeployment = `name: torch-moderate
seed: 12
pairs: 300
data: {source: synthetic, synthetic: {dim: 10, classes: 3}, clients: 5, per_client: 10, test_samples: 100}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [8], activation: tanh}
  rounds: 5
  local_steps: 2
  learning_rate: 0.5
  batching: full
  clip_norm: 0.05
  noise_std: 0.01
  checkpoints: [0, 1, 2, 3, 4, 5]
  informed: true
  record_params: true
  record_upload: true
audit:
  attacks: [informed-all, loss, informed-upload, upload-lda]
  rounds: [5]
`

// muBootstrap returns the Gaussian mu of an attack's AUC at a round (mu = sqrt 2 Phi^-1(AUC), the
// findings' mu estimate) and its standard error by the bootstrap over pairs (both runs of a pair
// resampled together: they share their noise).
func muBootstrap(t *testing.T, dir, attack string, round int32, seed uint64) (mu, se float64) {
	t.Helper()
	sf, err := runs.ReadScoreFile(expdir.Dir(dir).Scores())
	if err != nil {
		t.Fatal(err)
	}
	byPair := map[int64]*[2]float64{}
	for _, s := range sf.Scores {
		if s.Attack != attack || s.Round != round {
			continue
		}
		p := byPair[s.PairID]
		if p == nil {
			p = &[2]float64{}
			byPair[s.PairID] = p
		}
		p[s.World] = s.Score
	}
	var pairs [][2]float64
	for _, p := range byPair {
		pairs = append(pairs, *p)
	}
	slices.SortFunc(pairs, func(a, b [2]float64) int { return cmpPair(a, b) })
	muOf := func(ps [][2]float64) float64 {
		var c, cp []float64
		for _, p := range ps {
			c, cp = append(c, p[0]), append(cp, p[1])
		}
		slices.Sort(cp)
		var wins float64
		for _, x := range c {
			lo, _ := slices.BinarySearch(cp, x)
			hi := lo
			for hi < len(cp) && cp[hi] == x {
				hi++
			}
			wins += float64(lo) + float64(hi-lo)/2
		}
		auc := wins / float64(len(c)*len(cp))
		auc = math.Min(math.Max(auc, 1e-6), 1-1e-6)
		return math.Sqrt2 * distuv.UnitNormal.Quantile(auc)
	}
	mu = muOf(pairs)
	rng := rand.New(rand.NewPCG(seed, 1))
	const B = 400
	var sum, sum2 float64
	re := make([][2]float64, len(pairs))
	for b := 0; b < B; b++ {
		for i := range re {
			re[i] = pairs[rng.IntN(len(pairs))]
		}
		v := muOf(re)
		sum += v
		sum2 += v * v
	}
	mean := sum / B
	return mu, math.Sqrt(sum2/B - mean*mean)
}

func cmpPair(a, b [2]float64) int {
	switch {
	case a[0] < b[0]:
		return -1
	case a[0] > b[0]:
		return 1
	case a[1] < b[1]:
		return -1
	case a[1] > b[1]:
		return 1
	}
	return 0
}

// TestTorchMatchesFedauditAtModerateMu: at a moderate mu the correct PyTorch deployment's
// imported runs give bounds statistically equal to fedaudit's own trainer on the same config
// (the same w_0), for the informed adversary of all iterates (replayed from the imported rounds
// vs recorded by the trainer), the final model's loss attack, and the uploads observer
// (informed-upload replayed vs recorded, upload-lda on the imported uploads): the mu estimates
// differ by less than three standard errors of their difference (bootstrap over pairs), and each
// certified lower bound lies below the other's estimate plus three standard errors. Every
// certified mu is clearly above 0 (0.3) and below 0.8 of what 300 pairs can certify at most. The
// comparison can fail: PyTorch runs with 1.5 times the noise (a mis-scaled noise) are told apart
// by it, for every attack.
func TestTorchMatchesFedauditAtModerateMu(t *testing.T) {
	python(t)
	if testing.Short() {
		t.Skip("trains 2 x 300 pairs in PyTorch")
	}
	start := time.Now()
	d := newDeployment(t, moderateDeployment)
	sigma := d.cfg.Train.NoiseStd
	own := d.own(t, "correct", nil)
	// w_0 is part of the deployment (public, the same for every run): how much the canary moves
	// the model depends on it, so PyTorch starts from fedaudit's.
	init := d.initFrom(t, own)
	dirs := map[string]string{
		"torch":       d.torch(t, "correct", sigma, "--init", init),
		"own":         own,
		"torch-noisy": d.torch(t, "noisy", 1.5*sigma, "--init", init),
	}
	sum := map[string]summary{}
	for k, dir := range dirs {
		sum[k] = analyze(t, dir, 5)
	}
	type est struct{ mu, se, lower float64 }
	get := func(k, attack string) est {
		mu, se := muBootstrap(t, dirs[k], attack, 5, 1)
		r := sum[k].res[attack+"/"+map[string]string{"informed-all": "all-iterates", "loss": "final", "informed-upload": "uploads", "upload-lda": "uploads"}[attack]]
		if r == nil {
			t.Fatalf("%s: no finding of %s at round 5", k, attack)
		}
		if math.Abs(r.MuEstimate-mu) > 1e-9 {
			t.Fatalf("%s %s: the findings' mu estimate %.6f is not the AUC's %.6f", k, attack, r.MuEstimate, mu)
		}
		return est{mu, se, r.MuLower}
	}
	// The most 300 pairs certify: perfectly separated scores at the findings' own confidence.
	ceiling := ceilingMu(t, d.cfg.Pairs, sum["own"])
	for _, attack := range []string{"informed-all", "loss", "informed-upload", "upload-lda"} {
		a, b, c := get("torch", attack), get("own", attack), get("torch-noisy", attack)
		z := (a.mu - b.mu) / math.Hypot(a.se, b.se)
		zNoisy := (c.mu - b.mu) / math.Hypot(c.se, b.se)
		t.Logf("%-13s PyTorch mu_lower %.3f est %.3f +- %.3f | fedaudit mu_lower %.3f est %.3f +- %.3f | z %.2f | PyTorch 1.5 sigma est %.3f +- %.3f, z %.2f (ceiling %.3f)",
			attack, a.lower, a.mu, a.se, b.lower, b.mu, b.se, z, c.mu, c.se, zNoisy, ceiling)
		if math.Abs(z) > 3 {
			t.Errorf("%s: PyTorch mu %.3f +- %.3f, fedaudit %.3f +- %.3f: differ by %.1f standard errors", attack, a.mu, a.se, b.mu, b.se, z)
		}
		if a.lower > b.mu+3*b.se || b.lower > a.mu+3*a.se {
			t.Errorf("%s: certified bounds %.3f (PyTorch), %.3f (fedaudit) above the other's estimate", attack, a.lower, b.lower)
		}
		for _, e := range []est{a, b} {
			if e.lower < 0.3 || e.lower > 0.8*ceiling {
				t.Errorf("%s certifies %.3f: not clearly inside (0, %.3f), the comparison says little", attack, e.lower, ceiling)
			}
		}
		if zNoisy > -3 {
			t.Errorf("%s: PyTorch with 1.5 times the noise: mu %.3f +- %.3f against fedaudit's %.3f: not told apart (z %.2f)", attack, c.mu, c.se, b.mu, zNoisy)
		}
	}
	t.Logf("whole test: %.1fs", time.Since(start).Seconds())
}

// ceilingMu is the most n coupled pairs certify: perfectly separated scores, at the row
// confidence and with the threshold method of the findings of s.
func ceilingMu(t *testing.T, n int, s summary) float64 {
	t.Helper()
	var r *audit.Result
	for _, v := range s.res {
		r = v
		break
	}
	if r == nil {
		t.Fatal("no finding to take the confidence from")
	}
	c, cp := make([]float64, n), make([]float64, n)
	for i := range c {
		c[i] = 1
	}
	res, err := audit.Analyze(c, cp, audit.Options{Confidence: r.Confidence, Method: r.Method, Paired: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.MuLower
}
