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
	"github.com/fedaudit/fedaudit/train/model"
)

// trainOwn trains cfg with fedaudit's trainer into a new directory.
func trainOwn(t *testing.T, cfg *spec.Config) string {
	t.Helper()
	dir := t.TempDir()
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.SetUpDirectory(cfg, dir, 1); err != nil {
		t.Fatal(err)
	}
	if err := experiment.TrainShards(context.Background(), cfg, data, dir, experiment.AllShards(1), experiment.TrainOptions{ToolVersion: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func parse(t testing.TB, yaml string) *spec.Config {
	t.Helper()
	cfg, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// rowsOf reads every row of a directory's run files, by (run, round).
func rowsOf(t *testing.T, dir string) (runs.Meta, map[[2]int64]runs.Row) {
	t.Helper()
	tab, err := runs.Open(expdir.Dir(dir).Runs())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	out := map[[2]int64]runs.Row{}
	err = tab.Scan(context.Background(), func(r runs.Row) error {
		out[[2]int64{r.RunID, int64(r.Round)}] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab.Meta(), out
}

const uploadYAML = `
name: import-uploads
seed: 3
pairs: 30
data:
  source: synthetic
  synthetic: {dim: 5, classes: 3}
  clients: 3
  per_client: 6
  test_samples: 10
adjacency: {kind: replace, client: 1, index: 0, canary: relabel}
train:
  algorithm: fedavg
  model: {kind: softmax}
  rounds: 3
  local_steps: 2
  learning_rate: 0.5
  batching: fixed
  batch_size: 3
  clip_norm: 0.5
  noise_std: 0.05
  checkpoints: [0, 1, 2, 3]
  record_params: true
  record_upload: true
audit:
  attacks: [loss, label, inversion, upload-lda, param-lda]
`

// The target client's uploads travel through the import: fedaudit's own runs with their uploads
// exported as client rows and imported give the same scores for the uploads observer's attacks
// (label, inversion, upload-lda) and the others, exactly; given as updates (upload - w_{t-1})
// they give the same to float32 rounding of the sum.
func TestImportUploadsRoundTrip(t *testing.T) {
	cfg := parse(t, uploadYAML)
	own := trainOwn(t, cfg)
	want := scoresOf(t, own)
	for _, updates := range []bool{false, true} {
		snap := t.TempDir()
		m, err := ReadManifest(exportSnapshots(t, cfg, own, snap, updates))
		if err != nil {
			t.Fatal(err)
		}
		imp := filepath.Join(t.TempDir(), "imported")
		res, err := Import(context.Background(), Options{Manifest: m, Config: cfg, Out: imp, UploadUpdates: updates, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Uploads != 30*2*3 {
			t.Fatalf("updates %v: %d uploads imported, want %d", updates, res.Uploads, 30*2*3)
		}
		got := scoresOf(t, imp)
		uploadScores := 0
		for k, va := range want {
			vb, ok := got[k]
			if !ok {
				t.Fatalf("updates %v: imported runs lack score %+v", updates, k)
			}
			tol := 0.0
			if updates {
				tol = 1e-4 * (1 + math.Abs(va))
			}
			if math.Abs(va-vb) > tol {
				t.Errorf("updates %v: %+v: own %v, imported %v", updates, k, va, vb)
			}
			if k.threa == runs.ThreatUploads {
				uploadScores++
			}
		}
		if len(got) != len(want) || uploadScores == 0 {
			t.Fatalf("updates %v: %d scores imported, %d own, %d of the uploads observer", updates, len(got), len(want), uploadScores)
		}
	}
}

// An upload manifest that does not fit the deployment is refused with every problem named.
func TestUploadRefusals(t *testing.T) {
	rounds := []int{0, 1, 3}
	base := func(rounds ...int) []Entry {
		var es []Entry
		for p := 0; p < 2; p++ {
			for w := int8(0); w < 2; w++ {
				for _, r := range rounds {
					es = append(es, Entry{File: fmt.Sprintf("g p%d w%d r%d", p, w, r), World: w, Pair: p, Round: r, Client: -1, Line: "g"})
					if r > 0 {
						up := fmt.Sprintf("u p%d w%d r%d", p, w, r)
						es = append(es, Entry{File: up, World: w, Pair: p, Round: r, Client: 1, Line: up})
					}
				}
			}
		}
		return es
	}
	ex := Expect{Pairs: 2, Rounds: rounds, Clients: 3, TargetClient: 1}
	drop := func(es []Entry, line string) []Entry {
		return slices.DeleteFunc(es, func(e Entry) bool { return e.Line == line })
	}
	cases := []struct {
		name string
		es   []Entry
		ex   Expect
		want []string
	}{
		{"predecessor", base(0, 1, 3), ex, []string{"uploads at round 3 need the global model w_2"}},
		{"one world", drop(base(0, 1), "u p1 w0 r1"), Expect{Pairs: 2, Rounds: []int{0, 1}, Clients: 3, TargetClient: 1, Partial: true},
			[]string{"pair 1 round 1: the target client's upload is missing in world C only"}},
		{"both worlds", drop(drop(base(0, 1), "u p1 w0 r1"), "u p1 w1 r1"), Expect{Pairs: 2, Rounds: []int{0, 1}, Clients: 3, TargetClient: 1},
			[]string{"pair 1 round 1: no upload of the target client 1"}},
		{"round 0", append(base(0, 1, 3), Entry{File: "u", Round: 0, Client: 1, Line: "up0"}), ex, []string{"up0: an upload at round 0"}},
		{"client out of range", append(base(0, 1, 3), Entry{File: "u", Round: 1, Client: 3, Line: "c3"}), ex, []string{"c3: client 3 outside 0..2"}},
		{"twice", append(base(0, 1, 3), Entry{File: "u", Round: 1, Client: 1, Line: "again"}), ex, []string{"again: upload of pair 0 world C round 1 is listed twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &Manifest{Path: "m", Entries: c.es}
			_, err := m.Validate(c.ex)
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want one containing %q", err, w)
				}
			}
		})
	}
	// With partial participation a round both worlds of a pair sat out is fine; other clients'
	// uploads are counted and skipped.
	es := append(drop(drop(base(0, 1), "u p1 w0 r1"), "u p1 w1 r1"), Entry{File: "o", Round: 1, Client: 0, Line: "other"})
	plan, err := (&Manifest{Entries: es}).Validate(Expect{Pairs: 2, Rounds: []int{0, 1}, Clients: 3, TargetClient: 1, Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	if plan.OtherUploads != 1 || plan.Uploads[1][0][1] != "" || plan.Uploads[0][1][1] != "u p0 w1 r1" {
		t.Fatalf("plan %+v", plan)
	}
}

const externalYAML = `
name: import-external
seed: 4
pairs: 40
data:
  source: synthetic
  synthetic: {dim: 8, classes: 2}
  clients: 2
  per_client: 5
  test_samples: 10
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: external}
  rounds: 4
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.1
  checkpoints: [0, 4]
  informed: true
audit:
  attacks: [param-lda, param-cosine, grad-align, loss]
`

// writeExternalSnapshots writes to dir the safetensors snapshots (rounds 0 and 4) of pairs
// pairs of runs of a model of unknown architecture, two named tensors of 8 values in all,
// world C moving one coordinate at round 4, and returns their manifest's path. It is its own
// piece because it is the external trainer's output, which TestImportExternal imports and
// then edits.
func writeExternalSnapshots(t *testing.T, dir string, pairs int) string {
	t.Helper()
	lines := []string{"file,world,pair,round"}
	for p := 0; p < pairs; p++ {
		for w := 0; w < 2; w++ {
			for _, r := range []int{0, 4} {
				enc := make([]float32, 6)
				for i := range enc {
					enc[i] = float32(i) / 10 // w_0: the same for every run
					if r > 0 {
						enc[i] += float32(p % 7)
					}
				}
				if r == 4 && w == 0 {
					enc[2] += 1 // world C moves one coordinate: the attacks must see it
				}
				// After round 0 each pair's own noise: no two pairs agree (checkCopies).
				bias := float32(-1)
				if r > 0 {
					bias -= float32(p) / 1024
				}
				ts := []ingest.Tensor{{Name: "encoder.w", Shape: []int{2, 3}, Data: enc}, {Name: "head.b", Shape: []int{2}, Data: []float32{float32(r), bias}}}
				b, err := ingest.WriteSafetensors(ts, nil)
				if err != nil {
					t.Fatal(err)
				}
				f := fmt.Sprintf("s%d_%d_%d.safetensors", p, w, r)
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
				lines = append(lines, fmt.Sprintf("%s,%d,%d,%d", f, w, p, r))
			}
		}
	}
	man := filepath.Join(dir, "m.csv")
	os.WriteFile(man, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	return man
}

// A model of unknown architecture: its named tensors are imported as they are (the layout of
// the first snapshot), the runs carry no statistics, the attacks that need a model or
// statistics are dropped with the reason, and the parameter-space attacks score the runs. A
// snapshot with other tensors is refused; training such a config is refused before anything is
// written.
func TestImportExternal(t *testing.T) {
	cfg := parse(t, externalYAML)
	dir := t.TempDir()
	man := writeExternalSnapshots(t, dir, cfg.Pairs)
	m, err := ReadManifest(man)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	logf := func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	out := filepath.Join(dir, "out")
	res, err := Import(context.Background(), Options{Manifest: m, Config: cfg, Out: out, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Params != 8 || res.Layout != "encoder.w [2 3], head.b [2]" || res.Statistics || res.Replayed || !slices.Equal(res.Dropped, []string{"grad-align", "loss"}) {
		t.Fatalf("result %+v", res)
	}
	joined := strings.Join(log, "\n")
	for _, w := range []string{"dropping grad-align: it evaluates the model, and the architecture of an external model is unknown", "an external model cannot be replayed"} {
		if !strings.Contains(joined, w) {
			t.Errorf("log lacks %q:\n%s", w, joined)
		}
	}
	meta, rows := rowsOf(t, out)
	if len(meta.StatNames) != 0 || !meta.HasParams {
		t.Fatalf("meta %+v", meta)
	}
	r := rows[[2]int64{0, 4}]
	if !slices.Equal(r.Params, []float32{0, 0.1, 1.2, 0.3, 0.4, 0.5, 4, -1}) || !math.IsNaN(r.TrainLoss) {
		t.Fatalf("row %+v", r)
	}
	sc := scoresOf(t, out)
	aucs := map[string][2]float64{}
	for k, v := range sc {
		a := aucs[k.attack]
		if k.run%2 == 0 {
			a[0] += v
		} else {
			a[1] += v
		}
		aucs[k.attack] = a
	}
	for _, name := range []string{"param-lda", "param-cosine"} {
		if a := aucs[name]; !(a[0] > a[1]) {
			t.Errorf("%s: world C's scores sum to %v, C''s to %v: the moved coordinate is not seen", name, a[0], a[1])
		}
	}
	if len(aucs) != 2 {
		t.Errorf("attacks scored: %v", aucs)
	}

	// Another tensor in one snapshot.
	b, _ := ingest.WriteSafetensors([]ingest.Tensor{{Name: "encoder.w", Shape: []int{2, 3}, Data: make([]float32, 6)}, {Name: "head.bias", Shape: []int{2}, Data: make([]float32, 2)}}, nil)
	os.WriteFile(filepath.Join(dir, "s3_1_4.safetensors"), b, 0o644)
	if _, err := Import(context.Background(), Options{Manifest: m, Config: cfg, Out: filepath.Join(dir, "out2")}); err == nil ||
		!strings.Contains(err.Error(), `tensor "head.bias" is not in the layout taken from the first snapshot`) {
		t.Fatalf("other tensor: %v", err)
	}
	// Training an external model is refused before the directory is written.
	fresh := filepath.Join(dir, "train")
	if _, err := experiment.SetUpDirectory(cfg, fresh, 1); err == nil || !strings.Contains(err.Error(), "model kind external") {
		t.Fatalf("set up training of an external model: %v", err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("a refused training created %s", fresh)
	}
	// An imported external directory resumes with the config the import recorded: its run files
	// are complete.
	imported, err := spec.Load(expdir.Dir(out).Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.CheckDirectory(imported, out, 1); err != nil {
		t.Fatalf("check the imported directory: %v", err)
	}
}

// TestLayoutNN pins the layout of package nn's models to PyTorch's state_dict order and shapes:
// LeNet-5 as nn.Conv2d / nn.Linear layers, and a residual block that changes shape (conv1,
// norm1, conv2, norm2, then the 1x1 shortcut and its norm).
func TestLayoutNN(t *testing.T) {
	lenet, err := LayoutOf(model.Config{Kind: "lenet5"}, []int{1, 28, 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := "layer 1 conv2d weight [6 1 5 5], layer 1 conv2d bias [6], layer 4 conv2d weight [16 6 5 5], layer 4 conv2d bias [16], " +
		"layer 8 dense weight [120 400], layer 8 dense bias [120], layer 10 dense weight [84 120], layer 10 dense bias [84], " +
		"layer 12 dense weight [10 84], layer 12 dense bias [10]"
	if lenet.Describe() != want || lenet.D != 61706 {
		t.Fatalf("lenet5: %s (%d)\nwant %s (61706)", lenet.Describe(), lenet.D, want)
	}
	res, err := LayoutOf(model.Config{Kind: "resnet", Stages: 2, Blocks: 1, Width: 4, Groups: 2}, []int{3, 8, 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want = "layer 1 conv2d weight [4 3 3 3], layer 1 conv2d bias [4], layer 2 groupnorm gamma [4], layer 2 groupnorm beta [4], " +
		"layer 4 residual conv1 weight [4 4 3 3], layer 4 residual conv1 bias [4], layer 4 residual norm1 gamma [4], layer 4 residual norm1 beta [4], " +
		"layer 4 residual conv2 weight [4 4 3 3], layer 4 residual conv2 bias [4], layer 4 residual norm2 gamma [4], layer 4 residual norm2 beta [4], " +
		"layer 5 residual conv1 weight [8 4 3 3], layer 5 residual conv1 bias [8], layer 5 residual norm1 gamma [8], layer 5 residual norm1 beta [8], " +
		"layer 5 residual conv2 weight [8 8 3 3], layer 5 residual conv2 bias [8], layer 5 residual norm2 gamma [8], layer 5 residual norm2 beta [8], " +
		"layer 5 residual shortcut weight [8 4 1 1], layer 5 residual shortcut bias [8], layer 5 residual shortcut norm gamma [8], layer 5 residual shortcut norm beta [8], " +
		"layer 8 dense weight [3 8], layer 8 dense bias [3]"
	if res.Describe() != want {
		t.Fatalf("resnet:\n%s\nwant\n%s", res.Describe(), want)
	}
	if _, err := LayoutOf(model.Config{Kind: model.External}, []int{3}, 2); err == nil {
		t.Fatal("an external model has a layout before its snapshots")
	}
}
