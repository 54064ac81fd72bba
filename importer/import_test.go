package importer

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/runs"
)

const smallYAML = `
name: import-small
seed: 5
pairs: 24
data:
  source: synthetic
  synthetic: {dim: 6, classes: 3}
  clients: 3
  per_client: 8
  test_samples: 20
adjacency: {kind: replace, client: 0, index: 1, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [5], activation: tanh}
  rounds: 3
  local_steps: 2
  learning_rate: 0.2
  clip_norm: 1
  noise_std: 0.02
  checkpoints: [0, 1, 3]
  record_params: true
audit:
  attacks: [loss, margin, grad-align, linear]
`

func smallConfig(t testing.TB) *spec.Config {
	t.Helper()
	cfg, err := spec.Parse([]byte(smallYAML))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// exportSnapshots writes every row of the run files of dir as a safetensors file named like a
// PyTorch state_dict, and every recorded upload of the target client (as the upload, or with
// updates as the upload minus w_{t-1}), with a CSV manifest; it returns the manifest path.
func exportSnapshots(t testing.TB, cfg *spec.Config, dir, out string, updates bool) string {
	t.Helper()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lay, err := LayoutOf(cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := runs.Open(expdir.Dir(dir).Runs())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	write := func(name string, v []float32) error {
		var ts []ingest.Tensor
		for i, s := range lay.Slots {
			n := 1
			for _, d := range s.Shape {
				n *= d
			}
			kind := "weight"
			if i%2 == 1 {
				kind = "bias"
			}
			ts = append(ts, ingest.Tensor{Name: fmt.Sprintf("fc%d.%s", i/2+1, kind), Shape: s.Shape, Data: v[s.Offset : s.Offset+n]})
		}
		b, err := ingest.WriteSafetensors(ts, nil)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, name), b, 0o644)
	}
	lines := []string{"file,world,pair,round,client"}
	prev := map[int64][]float32{}
	err = tab.Scan(context.Background(), func(r runs.Row) error {
		world := "C"
		if r.World == 1 {
			world = "C'"
		}
		name := fmt.Sprintf("p%03d_w%d_r%d.safetensors", r.PairID, r.World, r.Round)
		if err := write(name, r.Params); err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s,%s,%d,%d,", name, world, r.PairID, r.Round))
		if len(r.Upload) > 0 && !math.IsNaN(float64(r.Upload[0])) {
			up := r.Upload
			if updates {
				up = slices.Clone(up)
				for i, w := range prev[r.RunID] {
					up[i] -= w
				}
			}
			name := fmt.Sprintf("p%03d_w%d_r%d_up.safetensors", r.PairID, r.World, r.Round)
			if err := write(name, up); err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s,%s,%d,%d,%d", name, world, r.PairID, r.Round, cfg.Adjacency.Client))
		}
		prev[r.RunID] = r.Params
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "manifest.csv")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type scoreKey struct {
	run           int64
	round         int32
	attack, threa string
}

func scoresOf(t testing.TB, dir string) map[scoreKey]float64 {
	t.Helper()
	sf, err := experiment.AttackDir(context.Background(), dir, experiment.AttackOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	out := map[scoreKey]float64{}
	for _, s := range sf.Scores {
		out[scoreKey{s.RunID, s.Round, s.Attack, s.Threat}] = s.Score
	}
	return out
}

// TestRoundTrip trains with fedaudit's own trainer, exports every checkpoint as a safetensors
// snapshot, imports them and checks that the attacks score both directories identically: the
// import evaluates the loss and margin with train's own evaluation (train.Evaluate).
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	cfg := smallConfig(t)
	own := t.TempDir()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.SetUpDirectory(cfg, own, 1); err != nil {
		t.Fatal(err)
	}
	if err := experiment.TrainShards(ctx, cfg, data, own, experiment.AllShards(1), experiment.TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	snap := t.TempDir()
	m, err := ReadManifest(exportSnapshots(t, cfg, own, snap, false))
	if err != nil {
		t.Fatal(err)
	}
	imp := filepath.Join(t.TempDir(), "imported")
	res, err := Import(ctx, Options{Manifest: m, Config: cfg, Out: imp, ToolVersion: "test", Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pairs != 24 || res.Snapshots != 24*2*3 {
		t.Fatalf("result %+v", res)
	}
	a, b := scoresOf(t, own), scoresOf(t, imp)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d scores of own runs, %d of imported", len(a), len(b))
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok {
			t.Fatalf("imported runs lack score %+v", k)
		}
		if va != vb {
			t.Errorf("%+v: own %v, imported %v", k, va, vb)
		}
	}
}

// writeTransposedFirstWeight writes to path a safetensors snapshot of layout lay whose first
// tensor, named fc1.weight, has its two dimensions swapped (a (in, out) weight as in Keras),
// all values zero. It is its own piece because it builds a whole snapshot file of named
// tensors, where TestRefusals' other cases edit a line of the manifest.
func writeTransposedFirstWeight(t *testing.T, path string, lay Layout) {
	t.Helper()
	var ts []ingest.Tensor
	for i, sl := range lay.Slots {
		shape := sl.Shape
		if i == 0 {
			shape = []int{shape[1], shape[0]} // transposed: a (in, out) weight as in Keras
		}
		n := shape[0]
		if len(shape) == 2 {
			n *= shape[1]
		}
		ts = append(ts, ingest.Tensor{Name: fmt.Sprintf("fc%d.%d", i/2+1, i%2), Shape: shape, Data: make([]float32, n)})
	}
	ts[0].Name = "fc1.weight"
	b, err := ingest.WriteSafetensors(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, b, 0o644)
}

// TestRefusals checks that a broken import says what is wrong and leaves nothing behind.
func TestRefusals(t *testing.T) {
	cfg := smallConfig(t)
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lay, err := LayoutOf(cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]float32, lay.D)
	write := func(dir, name string, v []float32, shape []int) {
		b, err := ingest.WriteNPY(shape, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// manifest builds a full manifest of flat .npy snapshots, then lets edit break it.
	manifest := func(dir string, edit func(lines []string) []string) string {
		write(dir, "ok.npy", good, []int{lay.D})
		lines := []string{"file,world,pair,round"}
		for p := 0; p < cfg.Pairs; p++ {
			for _, w := range []string{"C", "C'"} {
				for _, r := range []int{0, 1, 3} {
					f := "ok.npy" // w_0, one for every run; each run has its own later snapshots
					if r > 0 {
						f = fmt.Sprintf("ok_%d_%s_%d.npy", p, w, r)
						write(dir, f, good, []int{lay.D})
					}
					lines = append(lines, fmt.Sprintf("%s,%s,%d,%d", f, w, p, r))
				}
			}
		}
		lines = edit(lines)
		path := filepath.Join(dir, "m.csv")
		os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		return path
	}
	// setFile lists file f on manifest line l instead of its own snapshot.
	setFile := func(l, f string) string { return f + l[strings.IndexByte(l, ','):] }
	nan := append([]float32(nil), good...)
	nan[lay.D-1] = float32(math.NaN())
	cases := []struct {
		name, want string
		edit       func(dir string, lines []string) []string
	}{
		{"missing world", "pair 0 world C' round 0: no snapshot", func(_ string, l []string) []string { return append(l[:4:4], l[7:]...) }},
		{"duplicate", "listed twice", func(_ string, l []string) []string { return append(l, l[1]) }},
		{"round not a checkpoint", "round 2 is not a checkpoint", func(_ string, l []string) []string { return append(l, "ok.npy,C,0,2") }},
		{"pair out of range", "pair 24 outside 0..23", func(_ string, l []string) []string { return append(l, "ok.npy,C,24,0") }},
		{"bad world", `world "D"`, func(_ string, l []string) []string { return append(l, "ok.npy,D,0,0") }},
		{"wrong shape", `tensor "fc1.weight" has shape [6 5], the model's layer 1 weight needs [5 6]`, func(dir string, l []string) []string {
			writeTransposedFirstWeight(t, filepath.Join(dir, "bad.safetensors"), lay)
			l[1] = setFile(l[1], "bad.safetensors")
			return l
		}},
		{"flat of wrong length", "1 tensors", func(dir string, l []string) []string {
			write(dir, "short.npy", good[:10], []int{10})
			l[5] = setFile(l[5], "short.npy")
			return l
		}},
		{"NaN", "is NaN", func(dir string, l []string) []string {
			write(dir, "nan.npy", nan, []int{lay.D})
			l[len(l)-1] = setFile(l[len(l)-1], "nan.npy")
			return l
		}},
		{"missing file", "no such file", func(dir string, l []string) []string {
			l[2] = setFile(l[2], "gone.npy")
			return l
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := manifest(dir, func(l []string) []string { return c.edit(dir, l) })
			out := filepath.Join(dir, "out")
			m, err := ReadManifest(path)
			if err == nil {
				_, err = Import(context.Background(), Options{Manifest: m, Config: cfg, Out: out, Workers: 2})
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() == "out" || strings.HasPrefix(e.Name(), ".out") {
					t.Fatalf("a failed import left %s behind", e.Name())
				}
			}
		})
	}
}
