package cost

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

// fashionMLP is a small MLP on Fashion-MNIST of the given pairs (its data is not loaded).
func fashionMLP(t *testing.T, pairs int) *spec.Config {
	t.Helper()
	cfg, err := spec.Parse([]byte(fmt.Sprintf(`
name: named
pairs: %d
data: {source: fashion-mnist, clients: 4, per_client: 20, test_samples: 10}
adjacency: {kind: replace, client: 0, index: 1, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [64], activation: tanh}
  rounds: 2
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.1
  checkpoints: [2]
`, pairs)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMemoryRefusalBeforeTheData: refused before a named dataset is loaded, the message does
// not give the parameter count of a model on one input feature (it said "d = 258 parameters"
// of a 784-64-10 MLP, which has 50,890) and calls the estimate a lower bound; with the data
// known it gives the count.
func TestMemoryRefusalBeforeTheData(t *testing.T) {
	cfg := fashionMLP(t, 10)
	_, err := CheckMemory(cfg, nil, 1)
	if err == nil || !strings.Contains(err.Error(), "its parameters not yet counted") || !strings.Contains(err.Error(), "needs at least") || strings.Contains(err.Error(), "d = ") {
		t.Errorf("before the data: %v", err)
	}
	cfg.Data = spec.DataConfig{Source: "synthetic", Synthetic: spec.SyntheticConfig{Dim: 784, Classes: 10}, Clients: 4, PerClient: 20, TestSamples: 10}
	if _, err = CheckMemory(cfg, nil, 1); err == nil || !strings.Contains(err.Error(), "d = 50890 parameters") {
		t.Errorf("synthetic data of 784 features: %v", err)
	}
}

// TestMemAvailableHonoursTheCgroup: the budget is the smaller of the node's MemAvailable and
// what the process's control group leaves it, over the group and its ancestors (a Slurm job's
// limit holds in its step's group), in cgroup v2 and v1; "max" and v1's near-2^63 are no limit.
// Without it a task under --mem=4G planned with the node's 200 GiB and was killed.
func TestMemAvailableHonoursTheCgroup(t *testing.T) {
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	meminfo := filepath.Join(dir, "meminfo")
	write(meminfo, "MemTotal:       263000000 kB\nMemAvailable:   209715200 kB\n") // 200 GiB
	const gib = int64(1) << 30
	for _, c := range []struct {
		name, self string
		files      map[string]string
		want       int64
	}{
		{"no cgroup file", "", nil, 200 * gib},
		{"v2 without a limit", "0::/slurm/job_7/step_0\n", map[string]string{"slurm/job_7/step_0/memory.max": "max\n", "slurm/job_7/step_0/memory.current": "1000\n"}, 200 * gib},
		{"v2 limit on the job's group", "0::/slurm/job_7/step_0\n", map[string]string{
			"slurm/job_7/step_0/memory.max": "max\n", "slurm/job_7/step_0/memory.current": "1073741824\n",
			"slurm/job_7/memory.max": "4294967296\n", "slurm/job_7/memory.current": "1073741824\n"}, 3 * gib},
		{"v1 memory controller", "12:memory:/kubepods/pod1\n3:cpu,cpuacct:/kubepods/pod1\n", map[string]string{
			"memory/kubepods/pod1/memory.limit_in_bytes": "8589934592\n", "memory/kubepods/pod1/memory.usage_in_bytes": "2147483648\n",
			"memory/kubepods/memory.limit_in_bytes": "9223372036854771712\n", "memory/kubepods/memory.usage_in_bytes": "5\n"}, 6 * gib},
		// Not 0, which skips the checks as where nothing is known.
		{"over its limit", "0::/a\n", map[string]string{"a/memory.max": "100\n", "a/memory.current": "200\n"}, 1},
		// Page cache of files just read is reclaimed before a kill: not counted (a budget of
		// 4.9 MB of 4 GiB after reading the run files).
		{"v2 page cache", "0::/job\n", map[string]string{"job/memory.max": "4294967296\n", "job/memory.current": "4289000000\n",
			"job/memory.stat": "anon 220000000\nfile 4069000000\ninactive_file 4000000000\nactive_file 69000000\n"}, 4294967296 - 289000000},
		{"v1 page cache", "5:memory:/job\n", map[string]string{"memory/job/memory.limit_in_bytes": "4294967296\n", "memory/job/memory.usage_in_bytes": "4289000000\n",
			"memory/job/memory.stat": "cache 4069000000\ntotal_inactive_file 4000000000\n"}, 4294967296 - 289000000},
	} {
		root := filepath.Join(dir, c.name)
		self := filepath.Join(root, "self-cgroup")
		if c.self != "" {
			write(self, c.self)
		}
		for f, text := range c.files {
			write(filepath.Join(root, "fs", f), text)
		}
		if got := memAvailable(meminfo, self, filepath.Join(root, "fs")); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}

// The memory estimate left out the source dataset a stage loads before it splits it: a
// training of 8 pairs of a small MLP on Fashion-MNIST was estimated at 206 MiB and peaked at
// 497 MiB (its attack stage 515 MiB against 160 MiB), so a --memory the plan accepted killed
// the job. The source's stored bytes and float32 features, twice for Go's collector, bound
// both stages now (545 MiB there); a path is sized from its file, a gzip file from its
// trailer.
func TestMemoryCountsTheSource(t *testing.T) {
	cfg := fashionMLP(t, 8)
	est, err := EstimateMemory(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const measuredTrain, measuredAttack = 497 << 20, 515 << 20
	if est.MinTrainBytes < measuredTrain || est.AttackBytes < measuredAttack {
		t.Errorf("training %s, attack %s: below the measured peaks of 497 and 515 MiB", FormatBytes(est.MinTrainBytes), FormatBytes(est.AttackBytes))
	}
	if _, err := CheckMemory(cfg, nil, 300<<20); err == nil || !strings.Contains(err.Error(), "loading the source, fashion-mnist, peaks there") {
		t.Errorf("300 MiB for Fashion-MNIST: %v", err)
	}

	// A gzip'd IDX pair named by path: 1000 images of 28x28 and their labels.
	dir := t.TempDir()
	images := filepath.Join(dir, "x-images-idx3-ubyte.gz")
	labels := filepath.Join(dir, "x-labels-idx1-ubyte.gz")
	for _, f := range []struct {
		path string
		size int
	}{{images, 16 + 1000*784}, {labels, 8 + 1000}} {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(make([]byte, f.size)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := datasets.SourceBytes(images), int64(5*(16+1000*784+8+1000)); got != want {
		t.Errorf("a gzip'd IDX pair of 1000 images: %d bytes, want %d", got, want)
	}
	if got := datasets.SourceBytes("synthetic"); got != 0 {
		t.Errorf("synthetic: %d bytes, want 0 (made at the config's size)", got)
	}
}

// The attack stage was estimated from the run files' rows alone, and the analysis not at all:
// 4,000 pairs of an MLP (21 checkpoints, 13 attacks: 2.08 million score rows) peaked at
// 1.31-1.43 GB attacking and 0.96-1.02 GB analyzing where the plan said 399 MiB, and a finish
// job sized by it ran out of memory. The score rows count now, in both stages.
func TestMemoryCountsTheScores(t *testing.T) {
	cfg, err := spec.Parse([]byte(`
name: scale-mlp
seed: 7
pairs: 4000
data:
  source: synthetic
  synthetic: {dim: 8, classes: 2}
  clients: 3
  per_client: 4
  test_samples: 20
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [3], activation: tanh}
  rounds: 20
  local_steps: 1
  learning_rate: 0.1
  batching: full
  clip_norm: 1
  noise_std: 0.05
  checkpoints: [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]
  informed: true
  record_params: true
  record_upload: true
audit:
  attacks: [informed-all, informed-last, informed-upload, loss, margin, lira-online, grad-align, linear, label, inversion, param-lda, param-cosine, upload-lda]
`))
	if err != nil {
		t.Fatal(err)
	}
	est, err := EstimateMemory(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if est.Scores != 2*4000*20*13 {
		t.Errorf("%d score rows, want 2 x 4000 pairs x 20 rounds x 13 attacks", est.Scores)
	}
	if est.AttackBytes < 1430e6 || est.AnalyzeBytes < 1020e6 {
		t.Errorf("attack %s, analysis %s: below the measured 1.43 and 1.02 GB", FormatBytes(est.AttackBytes), FormatBytes(est.AnalyzeBytes))
	}
	if est.AttackBytes > 3*1430e6 || est.AnalyzeBytes > 3*1020e6 {
		t.Errorf("attack %s, analysis %s: more than 3 times the measured 1.43 and 1.02 GB", FormatBytes(est.AttackBytes), FormatBytes(est.AnalyzeBytes))
	}
}

// The attack stage keeps a run file's vectors only where an attack reads them: an MLP audit
// recording parameters (d = 34,308; 300 pairs, 5 checkpoints, 390 MB of run files) peaked at
// 367 MiB with attacks that read only statistics and at 961 MiB with param-lda beside them
// (`/usr/bin/time -f %M audit attack --runs DIR --attacks ...`). The estimates must cover both
// and tell them apart: every vector counted said 947 MiB for the first (and 23.3 GiB, "may not
// fit", for the LeNet-5 cluster config of results/lenet5-fmnist), and the rows alone, without
// the batch the reader decodes, 167 MiB.
func TestAttackMemoryCountsTheVectorsKept(t *testing.T) {
	estimate := func(attacks string) int64 {
		cfg, err := spec.Parse([]byte(`
name: memcheck
seed: 3
pairs: 300
data: {source: synthetic, synthetic: {dim: 128, classes: 4, separation: 3, noise: 1}, clients: 4, per_client: 8, test_samples: 50}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [256], activation: tanh}
  rounds: 5
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.5
  checkpoints: [1, 2, 3, 4, 5]
  informed: true
  record_params: true
audit:
  attacks: ` + attacks + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		est, err := EstimateMemory(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return est.AttackBytes
	}
	const mib = 1 << 20
	statsOnly, withParams := estimate("[informed-all, loss, margin]"), estimate("[param-lda, loss]")
	if statsOnly < 367*mib || statsOnly > 700*mib {
		t.Errorf("statistics only: attack stage estimated at %d MiB, measured 367 MiB", statsOnly/mib)
	}
	if withParams < 961*mib {
		t.Errorf("with param-lda: attack stage estimated at %d MiB, measured 961 MiB", withParams/mib)
	}
}
