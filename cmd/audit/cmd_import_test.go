package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/runs"
)

const importYAML = `name: imported
seed: 2
pairs: 12
data: {source: synthetic, synthetic: {dim: 8, classes: 2}, clients: 2, per_client: 5, test_samples: 10}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: softmax}
  rounds: 2
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.5
  checkpoints: [0, 2]
  informed: true
audit:
  attacks: [informed-all, loss]
`

// TestImportCLI imports random snapshots of a softmax model (18 parameters) through the CLI,
// then scores them with `audit attack`, which must say which attacks it skipped and why; a
// manifest that lists a snapshot twice exits with status 2 and writes nothing.
func TestImportCLI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfgPath, []byte(importYAML), 0o644)
	rng := rand.New(rand.NewPCG(1, 2))
	lines := []string{"file,world,pair,round,canary"}
	for p := 0; p < 12; p++ {
		for w, name := range []string{"C", "C'"} {
			for _, r := range []int{0, 2} {
				v := make([]float32, 18)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
					if r == 0 {
						v[i] = float32(i) / 18 // w_0: the same for every run
					}
				}
				b, _ := ingest.WriteNPY([]int{18}, v)
				f := fmt.Sprintf("s%d_%d_%d.npy", p, w, r)
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
				lines = append(lines, fmt.Sprintf("%s,%s,%d,%d,%v", f, name, p, r, w == 1)) // fedaudit's canary is in C'
			}
		}
	}
	man := filepath.Join(dir, "m.csv")
	os.WriteFile(man, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	call := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		return code, stdout.String(), stderr.String()
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := call("import", "--manifest", man, "--config", cfgPath, "--out", out)
	if code != 0 || !strings.Contains(stdout, "imported 12 pairs") || !strings.Contains(stderr, "dropping informed-all") {
		t.Fatalf("import: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, stdout, stderr = call("attack", "--runs", out)
	// The import dropped informed-all from the config's list and said so; the attack stage
	// mentions no attack the list does not name.
	if code != 0 || !strings.Contains(stdout, "scores written") || strings.Contains(stderr, "informed-all") {
		t.Fatalf("attack: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if code, stdout, stderr = call("analyze", out, "--json"); code != 0 && code != 3 {
		t.Fatalf("analyze: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	// `audit run` resumes the imported directory with the config the import recorded: nothing
	// to train, the report is written.
	if code, stdout, stderr = call("run", "--config", filepath.Join(out, "config.json"), "--out", out); (code != 0 && code != 3) || !strings.Contains(stderr, "already complete") {
		t.Fatalf("run: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	os.WriteFile(man, []byte(strings.Join(append(lines, lines[1]), "\n")+"\n"), 0o644)
	out2 := filepath.Join(dir, "out2")
	code, _, stderr = call("import", "--manifest", man, "--config", cfgPath, "--out", out2)
	if code != 2 || !strings.Contains(stderr, "listed twice") {
		t.Fatalf("duplicate: code %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Fatalf("a refused import created %s", out2)
	}
	if code, _, stderr = call("import", "--manifest", man, "--config", cfgPath, "--out", out); code != 2 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("existing out: code %d, stderr %s", code, stderr)
	}
}

const roundTripYAML = `name: round-trip
seed: 9
pairs: 60
data: {source: synthetic, synthetic: {dim: 6, classes: 3}, clients: 3, per_client: 8, test_samples: 20}
adjacency: {kind: replace, client: 1, index: 0, canary: relabel}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [5], activation: tanh}
  rounds: 3
  local_steps: 2
  learning_rate: 0.3
  batching: fixed
  batch_size: 4
  clip_norm: 0.5
  noise_std: 0.05
  checkpoints: [0, 1, 2, 3]
  record_params: true
  record_upload: true
audit:
  claim_mu: 1
`

// TestImportRoundTripCLI runs fedaudit's own audit end to end, exports its runs as snapshots
// with their manifest and config (`audit export --format safetensors`), imports them (`audit
// import`) and audits the import (`audit run` on the imported directory): the score files hold
// the same scores and findings.json is the same file, byte for byte, for every attack the
// default selects (final-model, parameter-space and uploads attacks).
func TestImportRoundTripCLI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfgPath, []byte(roundTripYAML), 0o644)
	call := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		return code, stdout.String(), stderr.String()
	}
	own, snaps, imp := filepath.Join(dir, "own"), filepath.Join(dir, "snaps"), filepath.Join(dir, "imported")
	if code, stdout, stderr := call("run", "--config", cfgPath, "--out", own); code != 0 && code != 3 {
		t.Fatalf("run: code %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := call("export", "--format", "safetensors", own, "--out", snaps); code != 0 || !strings.Contains(stdout, "manifest.csv") {
		t.Fatalf("export: code %d\n%s\n%s", code, stdout, stderr)
	}
	// The manifest carries the canary column (in C'), which the import checks the worlds by, and
	// the trainer's divergence flag of each global model.
	if man, _ := os.ReadFile(filepath.Join(snaps, "manifest.csv")); !bytes.HasPrefix(man, []byte("file,world,pair,round,client,canary,diverged\n")) ||
		!bytes.Contains(man, []byte("p00000_C_r0000.safetensors,C,0,0,,false,false\n")) || !bytes.Contains(man, []byte("p00000_Cprime_r0001_client1.safetensors,Cprime,0,1,1,true,\n")) {
		t.Fatalf("exported manifest:\n%.400s", man)
	}
	code, stdout, stderr := call("import", "--manifest", filepath.Join(snaps, "manifest.csv"), "--config", filepath.Join(snaps, "config.json"), "--out", imp)
	if code != 0 || !strings.Contains(stdout, "uploads: 360 of the target client") {
		t.Fatalf("import: code %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := call("run", "--config", filepath.Join(imp, "config.json"), "--out", imp); code != 0 && code != 3 {
		t.Fatalf("run on the import: code %d\n%s\n%s", code, stdout, stderr)
	}
	a, err := runs.ReadScoreFile(filepath.Join(own, "scores.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := runs.ReadScoreFile(filepath.Join(imp, "scores.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	attacks := map[string]bool{}
	for _, s := range a.Scores {
		attacks[s.Attack] = true
	}
	if len(a.Scores) != len(b.Scores) {
		t.Fatalf("%d scores of own runs, %d of imported", len(a.Scores), len(b.Scores))
	}
	for i := range a.Scores {
		sa, sb := a.Scores[i], b.Scores[i]
		if sa.RunID != sb.RunID || sa.Round != sb.Round || sa.Attack != sb.Attack || math.Float64bits(sa.Score) != math.Float64bits(sb.Score) {
			t.Fatalf("score %d: own %+v, imported %+v", i, sa, sb)
		}
	}
	for _, want := range []string{"loss", "grad-align", "linear", "label", "param-lda", "upload-lda"} {
		if !attacks[want] {
			t.Errorf("the round trip did not score %s (scored %v)", want, attacks)
		}
	}
	fa, _ := os.ReadFile(filepath.Join(own, "findings.json"))
	fb, _ := os.ReadFile(filepath.Join(imp, "findings.json"))
	if len(fa) == 0 || !bytes.Equal(fa, fb) {
		t.Fatalf("findings.json differ:\nown %s\nimported %s", fa, fb)
	}
}

const externalYAML = `name: external
seed: 2
pairs: 30
data: {source: synthetic, synthetic: {dim: 8, classes: 2}, clients: 2, per_client: 5, test_samples: 10}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: external}
  rounds: 2
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.5
  checkpoints: [0, 2]
audit:
  claim_mu: 0.3
`

// TestImportExternalCLI imports snapshots of an architecture fedaudit does not know (two named
// tensors) and audits them through the CLI: `audit attack` runs the parameter-space attacks,
// logs the one-shot estimate and says which attacks it skipped and why; `audit run` writes the
// report (no statistics, no smoothness, the theory of the config).
func TestImportExternalCLI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfgPath, []byte(externalYAML), 0o644)
	rng := rand.New(rand.NewPCG(3, 4))
	lines := []string{"file,world,pair,round"}
	for p := 0; p < 30; p++ {
		noise := make([]float32, 7)
		for i := range noise {
			noise[i] = float32(rng.NormFloat64())
		}
		for w, name := range []string{"C", "C'"} {
			for _, r := range []int{0, 2} {
				v := slices.Clone(noise)
				if r == 0 {
					clear(v)
				} else if w == 0 {
					v[0] += 1.5 // world C moves: mu 1.5 along one coordinate
				}
				b, _ := ingest.WriteSafetensors([]ingest.Tensor{{Name: "body.kernel", Shape: []int{2, 3}, Data: v[:6]}, {Name: "head.scale", Shape: []int{1}, Data: v[6:]}}, nil)
				f := fmt.Sprintf("s%d_%d_%d.safetensors", p, w, r)
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
				lines = append(lines, fmt.Sprintf("%s,%s,%d,%d", f, name, p, r))
			}
		}
	}
	man := filepath.Join(dir, "m.csv")
	os.WriteFile(man, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	call := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		return code, stdout.String(), stderr.String()
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := call("import", "--manifest", man, "--config", cfgPath, "--out", out)
	if code != 0 || !strings.Contains(stdout, "model external, layout: body.kernel [2 3], head.scale [1]") {
		t.Fatalf("import: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, stdout, stderr = call("attack", "--runs", out)
	for _, want := range []string{"attacks: scoring [param-lda param-cosine]", "skipped grad-align: it evaluates the model, and the architecture of an external model is unknown",
		"attacks: not run, the run files record nothing they read: informed-all, informed-last, informed-diff, informed-upload, loss,", "param-cosine at T = 2: one-shot estimate epsilon"} {
		if code != 0 || !strings.Contains(stderr, want) {
			t.Fatalf("attack: code %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
	if code, stdout, stderr = call("run", "--config", filepath.Join(out, "config.json"), "--out", out); code != 3 || !strings.Contains(stdout, "VIOLATED") {
		t.Fatalf("run: code %d (want 3: mu 1.5 against the claim 0.3)\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Fatal(err)
	}
}

// Runs with canaries are not exported as snapshots, and a config with train.canaries is not
// imported: neither the snapshots nor their manifest can hold the canaries, and runs that lost
// them would be audited without the one-run rows (a different verdict from the same training).
func TestCanariesNeitherExportedNorImported(t *testing.T) {
	dir := t.TempDir()
	call := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		return code, stderr.String()
	}
	trained := filepath.Join(dir, "trained")
	if code, stderr := call("train", "--config", "testdata/run_onerun.yaml", "--out", trained); code != 0 {
		t.Fatalf("train: code %d, %s", code, stderr)
	}
	if code, stderr := call("export", "--format", "safetensors", trained, "--out", filepath.Join(dir, "snap")); code == 0 || !strings.Contains(stderr, "carries 300 canaries per run") {
		t.Fatalf("export of runs with canaries: code %d, stderr %s", code, stderr)
	}
	man := filepath.Join(dir, "m.csv")
	os.WriteFile(man, []byte("file,world,pair,round\nx.npy,C,0,3\nx.npy,C',0,3\n"), 0o644)
	out := filepath.Join(dir, "imported")
	code, stderr := call("import", "--manifest", man, "--config", "testdata/run_onerun.yaml", "--out", out)
	if code != 2 || !strings.Contains(stderr, "declares 300 canaries") {
		t.Fatalf("import under a config with canaries: code %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused import created %s", out)
	}
}

const uploadsImportYAML = `name: imported-uploads
seed: 2
pairs: 12
data: {source: synthetic, synthetic: {dim: 8, classes: 2}, clients: 2, per_client: 5, test_samples: 10}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: softmax}
  rounds: 1
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.01
  checkpoints: [0, 1]
`

// TestImportChecksCLI: uploads saved as updates but imported as models succeed with a warning on
// stderr (even with --quiet) and in the summary; a manifest whose canary column puts the canary
// in C, and a pair whose worlds start from different w_0, exit with status 2 naming the line and
// the file, and write nothing.
func TestImportChecksCLI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfgPath, []byte(uploadsImportYAML), 0o644)
	rng := rand.New(rand.NewPCG(5, 6))
	put := func(name string, v []float32) {
		b, _ := ingest.WriteNPY([]int{len(v)}, v)
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	w0 := make([]float32, 18)
	for i := range w0 {
		w0[i] = float32(rng.NormFloat64())
	}
	put("w0.npy", w0)
	lines := []string{"file,world,pair,round,client,canary"}
	for p := 0; p < 12; p++ {
		for w, name := range []string{"C", "C'"} {
			up, w1 := make([]float32, 18), make([]float32, 18)
			for i := range up {
				up[i] = 0.02 * float32(rng.NormFloat64()) // an update, small beside w_0
				w1[i] = w0[i] + up[i]
			}
			put(fmt.Sprintf("w1_%d_%d.npy", p, w), w1)
			put(fmt.Sprintf("u1_%d_%d.npy", p, w), up)
			lines = append(lines, fmt.Sprintf("w0.npy,%s,%d,0,,%v", name, p, w == 1),
				fmt.Sprintf("w1_%d_%d.npy,%s,%d,1,,%v", p, w, name, p, w == 1),
				fmt.Sprintf("u1_%d_%d.npy,%s,%d,1,0,%v", p, w, name, p, w == 1))
		}
	}
	man := filepath.Join(dir, "m.csv")
	write := func(lines []string) { os.WriteFile(man, []byte(strings.Join(lines, "\n")+"\n"), 0o644) }
	write(lines)
	call := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		return code, stdout.String(), stderr.String()
	}
	const warning = "warning: the target client's upload files look like updates"
	code, stdout, stderr := call("import", "--quiet", "--manifest", man, "--config", cfgPath, "--out", filepath.Join(dir, "as-models"))
	if code != 0 || !strings.Contains(stdout, warning) || !strings.Contains(stdout, "--uploads update") || !strings.Contains(stderr, "audit: import: "+warning) {
		t.Fatalf("updates read as models: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, stdout, stderr = call("import", "--manifest", man, "--config", cfgPath, "--out", filepath.Join(dir, "as-updates"), "--uploads", "update")
	if code != 0 || strings.Contains(stdout+stderr, "warning") {
		t.Fatalf("updates read as updates: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	refused := func(name string, lines []string, want ...string) {
		t.Helper()
		write(lines)
		out := filepath.Join(dir, name)
		code, _, stderr := call("import", "--manifest", man, "--config", cfgPath, "--out", out, "--uploads", "update")
		for _, w := range want {
			if code != 2 || !strings.Contains(stderr, w) {
				t.Errorf("%s: code %d, stderr lacks %q:\n%s", name, code, w, stderr)
			}
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: a refused import created %s", name, out)
		}
	}
	swapped := slices.Clone(lines)
	for i := 1; i < len(swapped); i++ {
		swapped[i] = strings.NewReplacer(",true", ",false", ",false", ",true").Replace(swapped[i])
	}
	refused("canary-in-C", swapped, "line 2: canary true in world C and line 5: canary false in world C'", "swapped")
	w0[7] += 0.5
	put("w0_edited.npy", w0)
	edited := slices.Clone(lines)
	edited[3*(2*4+1)+1] = strings.Replace(edited[3*(2*4+1)+1], "w0.npy", "w0_edited.npy", 1) // pair 4, C'
	refused("edited-w0", edited, "pair 4: world C' starts from another w_0 than world C", "w0_edited.npy", "parameter 7")
}
