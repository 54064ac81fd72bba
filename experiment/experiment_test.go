package experiment

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment/bounds"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/canary"
)

func smallConfig() *spec.Config {
	cfg := spec.Demo()
	cfg.Pairs = 6
	cfg.Train.Rounds = 3
	cfg.Train.Checkpoints = []int{0, 1, 3}
	cfg.Data.TestSamples = 20
	return cfg
}

func readRows(t *testing.T, path string) []runs.Row {
	t.Helper()
	tab, err := runs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	var rows []runs.Row
	if err := tab.Scan(context.Background(), func(r runs.Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// Sharded and one-shard jobs must produce identical rows, and rerunning a finished shard must
// not touch its file.
func TestShardingIsInvisible(t *testing.T) {
	cfg := smallConfig()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	one, three := t.TempDir(), t.TempDir()
	if _, _, err := TrainShard(ctx, cfg, data, runs.Shard{Index: 0, Count: 1}, one, TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, _, err := TrainShard(ctx, cfg, data, runs.Shard{Index: i, Count: 3}, three, TrainOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	whole := readRows(t, expdir.Dir(one).Runs())
	sharded := readRows(t, expdir.Dir(three).Runs())
	key := func(r runs.Row) [2]int64 { return [2]int64{r.RunID, int64(r.Round)} }
	index := map[[2]int64]runs.Row{}
	for _, r := range whole {
		index[key(r)] = r
	}
	if len(whole) != 2*cfg.Pairs*len(cfg.Train.Checkpoints) || len(sharded) != len(whole) {
		t.Fatalf("rows: one shard %d, three shards %d, want %d", len(whole), len(sharded), 2*cfg.Pairs*len(cfg.Train.Checkpoints))
	}
	for _, r := range sharded {
		if !reflect.DeepEqual(index[key(r)], r) {
			t.Fatalf("run %d round %d differs between one and three shards:\n%+v\n%+v", r.RunID, r.Round, index[key(r)], r)
		}
	}

	path := filepath.Join(expdir.Dir(one).Runs(), runs.Shard{Index: 0, Count: 1}.FileName())
	before, _ := os.Stat(path)
	_, skipped, err := TrainShard(ctx, cfg, data, runs.Shard{Index: 0, Count: 1}, one, TrainOptions{})
	if err != nil || !skipped {
		t.Fatalf("rerun of a complete shard: skipped=%v err=%v", skipped, err)
	}
	after, _ := os.Stat(path)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("rerun rewrote a complete shard")
	}

	other := smallConfig()
	other.Seed++
	other.Train.Seed = other.Seed
	otherData, err := spec.Prepare(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := TrainShard(ctx, other, otherData, runs.Shard{Index: 0, Count: 1}, one, TrainOptions{}); err == nil || !strings.Contains(err.Error(), "another experiment") {
		t.Fatalf("shard of another experiment: err = %v", err)
	}

	// Shard 0/3's file copied under shard 1/3's name: this experiment's, but another shard.
	rdir := expdir.Dir(three).Runs()
	raw, err := os.ReadFile(filepath.Join(rdir, runs.Shard{Index: 0, Count: 3}.FileName()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rdir, runs.Shard{Index: 1, Count: 3}.FileName()), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = TrainShard(ctx, cfg, data, runs.Shard{Index: 1, Count: 3}, three, TrainOptions{})
	if err == nil || !strings.Contains(err.Error(), "holds shard 0/3 of this experiment, not shard 1/3") {
		t.Fatalf("shard 0/3 under shard 1/3's name: err = %v", err)
	}
}

// TestImportedRunsNeverTrained: a directory of imported runs (DIR/import.json) whose run file
// was damaged or deleted was resumed by training the shard with fedaudit's own trainer, and an
// audit of another mechanism went on under the import's name (VIOLATED became CONSISTENT).
// The shard is refused instead, damaged or missing, and the file is left as it was; a complete
// shard is still taken as it is.
func TestImportedRunsNeverTrained(t *testing.T) {
	cfg := smallConfig()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	s := runs.Shard{Index: 0, Count: 1}
	if _, _, err := TrainShard(ctx, cfg, data, s, dir, TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(expdir.Dir(dir).ImportRecord(), []byte(`{"manifest": "m.csv"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, skipped, err := TrainShard(ctx, cfg, data, s, dir, TrainOptions{}); err != nil || !skipped {
		t.Fatalf("a complete imported shard: skipped %v, %v", skipped, err)
	}
	path := filepath.Join(expdir.Dir(dir).Runs(), s.FileName())
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 1
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = TrainShard(ctx, cfg, data, s, dir, TrainOptions{})
	if err == nil || !strings.Contains(err.Error(), "is not a complete run file") || !strings.Contains(err.Error(), "import the runs again") {
		t.Errorf("a damaged imported shard: %v", err)
	}
	if after, _ := os.ReadFile(path); !reflect.DeepEqual(after, raw) {
		t.Error("the damaged imported file was replaced")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, _, err = TrainShard(ctx, cfg, data, s, dir, TrainOptions{})
	if err == nil || !strings.Contains(err.Error(), "is missing") || !strings.Contains(err.Error(), "holds runs trained elsewhere") {
		t.Errorf("a deleted imported shard: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a deleted imported shard was trained: %v", err)
	}
}

func TestParseRejectsTyposAndBadValues(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown field", "pairs: 2\npiars: 3\n", "piars"},
		// A stated 0 would silently become the default (the same data, the same hash).
		{"synthetic separation 0", "pairs: 1\ndata: {source: synthetic, synthetic: {separation: 0}, clients: 2, per_client: 4}\n", "data.synthetic.separation: 0 reads as unset and would give the default 4"},
		{"synthetic noise 0", "pairs: 1\ndata: {source: synthetic, synthetic: {noise: 0}, clients: 2, per_client: 4}\n", "data.synthetic.noise: 0 reads as unset"},
		{"dirichlet alpha underflows", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4, split: dirichlet, dirichlet_alpha: 1e-310}\n", "data.dirichlet_alpha: 1e-310 is below 1e-300"},
		{"negative limit", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4, limit: -5}\n", "data.limit: negative"},
		{"custom canary NaN", "pairs: 1\ndata: {source: synthetic, synthetic: {dim: 2}, clients: 2, per_client: 4}\nadjacency: {canary: custom, features: [1, .nan], label: 0}\n", "adjacency.features: feature 1 is NaN"},
		{"replace-client pattern", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: replace-client, canary: pattern}\n", "a replace-client canary client is built from dirac, relabel, heldout or custom, not pattern"},
		{"relabel on the quadratic model", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {canary: relabel}\ntrain: {model: {kind: quadratic}}\n", "relabel changes only a label, which the quadratic model ignores"},
		{"bad split", "pairs: 2\ndata: {source: synthetic, clients: 2, per_client: 4, split: nope}\n", "data.split"},
		{"no pairs", "data: {source: synthetic, clients: 2, per_client: 4}\n", "pairs"},
		{"bad confidence", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\naudit: {confidence: 2}\n", "audit.confidence"},
		{"bonferroni on coupled pairs", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\naudit: {method: bonferroni}\n", "audit.method: bonferroni assumes independent worlds"},
		{"train seed", "pairs: 1\nseed: 3\ndata: {source: synthetic, clients: 2, per_client: 4}\ntrain: {seed: 4}\n", "train.seed"},
		{"invgrad pairs", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\naudit: {invgrad_pairs: -2}\n", "audit.invgrad_pairs"},
		{"invgrad iterations", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\naudit: {invgrad_iterations: -1}\n", "audit.invgrad_iterations"},
		{"gradient without its gradient", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: gradient}\n", "adjacency.gradient"},
		{"gradient of another kind", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: replace, gradient: {norm: 3}}\n", "adjacency.gradient"},
		{"gradient canary set by hand", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\ntrain: {gradient_canary: {norm: 3}}\n", "train.gradient_canary"},
		{"gradient canary for dpsgd", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: gradient, gradient: {norm: 3}}\ntrain: {algorithm: dpsgd, clip_norm: 1, noise_std: 1}\n", "gradient_canary.algorithm"},
		{"gradient canary norm", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: gradient, gradient: {norm: -3}}\n", "gradient_canary.norm"},
		{"crafted update of another kind", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: replace-client, crafted_update: {direction: gaussian}}\ntrain: {algorithm: dp-fedavg, sampling_rate: 0.5, noise_multiplier: 1, update_clip: 1}\n", "adjacency.crafted_update"},
		{"crafted update set by hand", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\ntrain: {crafted_update: {direction: gaussian}}\n", "train.crafted_update"},
		{"crafted update for fedavg", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: remove-client, crafted_update: {}}\ntrain: {algorithm: fedavg}\n", "crafted_update: a client's crafted update"},
		{"pretrain rounds", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\ntrain: {algorithm: fedavg, pretrain: {rounds: 0}}\n", "pretrain.rounds"},
		{"crafted update direction", "pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\nadjacency: {kind: remove-client, crafted_update: {direction: up}}\ntrain: {algorithm: dp-fedavg, sampling_rate: 0.5, noise_multiplier: 1, update_clip: 1}\n", "crafted_update.direction"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want mention of %q", err, c.want)
			}
		})
	}
}

// The stated zeros of the synthetic section are refused for the synthetic source only: a
// config of another source carries that section's zeros in its JSON (config.json, run files),
// and must read back.
func TestSyntheticZerosOnlyForTheSyntheticSource(t *testing.T) {
	cfg := spec.Demo()
	cfg.Data.Source = "images"
	cfg.Data.Synthetic = spec.SyntheticConfig{}
	raw := cfg.JSON()
	if !strings.Contains(string(raw), `"separation":0`) {
		t.Fatalf("the JSON does not state the zero separation: %s", raw)
	}
	if _, err := spec.Parse(raw); err != nil && strings.Contains(err.Error(), "data.synthetic") {
		t.Errorf("a config of source images refused for its synthetic zeros: %v", err)
	}
	if _, err := spec.FromJSON(raw); err != nil && strings.Contains(err.Error(), "data.synthetic") {
		t.Errorf("FromJSON refused a config of source images for its synthetic zeros: %v", err)
	}
}

// A config is one YAML document: a second one (another config pasted below, or text that does
// not parse) is refused rather than dropped, and a document marker with nothing after it, at the
// start or the end, leaves the one config.
func TestParseTakesOneDocument(t *testing.T) {
	demo := string(spec.Demo().JSON()) + "\n"
	for _, raw := range []string{"---\n" + demo, demo + "---\n", demo + "---\n# a comment\n...\n"} {
		if _, err := spec.Parse([]byte(raw)); err != nil {
			t.Errorf("%q: %v", raw, err)
		}
	}
	for _, c := range []struct{ raw, want string }{
		{demo + "---\npairs: 5\n", "a second YAML document starts at line 2"},
		{demo + "---\nthis is: [not valid\n", "after the config's document"},
		// An empty file, or comments alone, said "decode: EOF".
		{"", "the config is empty"},
		{"# nothing yet\n", "the config is empty"},
	} {
		if _, err := spec.Parse([]byte(c.raw)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want mention of %q", c.raw, err, c.want)
		}
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	cfg := spec.Demo()
	back, err := spec.FromJSON(cfg.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, back) {
		t.Fatalf("round trip changed the config:\n%+v\n%+v", cfg, back)
	}
}

// An MLP without a given smoothness gets L estimated from its recorded parameters, and a
// convergent bound labelled as such; without parameters it gets none.
func TestSmoothnessEstimatedForMLP(t *testing.T) {
	cfg := smallConfig()
	cfg.Audit.Smoothness = 0
	cfg.Train.RecordParams = true
	cfg.Audit.Attacks = []string{"loss"}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	findings, err := runFindings(cfg, dir, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := runs.Open(expdir.Dir(dir).Runs())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	sm, err := bounds.EstimateSmoothness(context.Background(), tab, cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	if sm.Source != "estimated" || !(sm.L > 0) {
		t.Fatalf("smoothness %+v, want an estimated L > 0", sm)
	}
	for _, f := range findings {
		if f.Round >= 1 && (f.Theory == nil || math.IsNaN(f.Theory.Mu)) {
			t.Errorf("T=%d: no convergent bound with an estimated L", f.Round)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "Hessian power iteration") {
		t.Error("report does not say the smoothness is estimated")
	}
}

// runFindings runs an experiment and returns its rows.
func runFindings(cfg *spec.Config, dir string, opts RunOptions) ([]findings.Finding, error) {
	a, err := Run(context.Background(), cfg, dir, opts)
	if err != nil {
		return nil, err
	}
	return a.Findings, nil
}

// Run files without canaries under a config that declares them (runs imported or written by
// another trainer) are refused when opened for the attack and analysis stages, instead of
// being audited without the one-run rows the config promises; the same files under their own
// config open.
func TestDeclaredCanariesMustBeInTheRuns(t *testing.T) {
	cfg := smallConfig()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, _, err := TrainShard(context.Background(), cfg, data, runs.Shard{Index: 0, Count: 1}, dir, TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := openPrepared(dir, false, 0, cfg, data)
	if err != nil {
		t.Fatalf("the runs under their own config: %v", err)
	}
	e.Close()
	declared := *cfg
	declared.Train.Canaries = &canary.Config{Count: 100, Kind: "relabel"}
	if _, err := openPrepared(dir, false, 0, &declared, data); err == nil || !strings.Contains(err.Error(), "declares 100 canaries") {
		t.Fatalf("runs without canaries under a config with 100: err %v", err)
	}
}
