package importer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/ingest"
)

// flatImport writes a manifest of flat .npy snapshots for smallConfig-like configs (checkpoints
// 0, 1, 3): snap gives each snapshot's vector (nil: a good one) and file name; extra columns
// per row come from cols. It returns the manifest path.
type flatSpec struct {
	cfg *spec.Config
	// vec returns the vector of pair p, world w, round r (an empty one: a missing file), or nil
	// for good, the vector of every other snapshot.
	vec func(p, w, r int, good []float32) []float32
	// header and cols add manifest columns (e.g. ",canary" and a value per row).
	header string
	cols   func(p, w, r int) string
	// shared lists the good snapshot's one file, ok.npy, for every run at every round (a
	// manifest whose runs are copies); otherwise only round 0 shares it, and each later
	// snapshot is the good vector with its first parameter moved by the run's own amount.
	shared bool
}

func (s flatSpec) write(t *testing.T, dir string) string {
	t.Helper()
	data, err := spec.Prepare(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	lay, err := LayoutOf(s.cfg.Train.Model, data.Pair.C[0].Shape, data.Classes)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]float32, lay.D)
	for i := range good {
		good[i] = float32(i%7) / 10
	}
	put := func(name string, v []float32) {
		b, err := ingest.WriteNPY([]int{len(v)}, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("ok.npy", good)
	lines := []string{"file,world,pair,round" + s.header}
	for p := 0; p < s.cfg.Pairs; p++ {
		for w, wn := range []string{"C", "C'"} {
			for _, r := range s.cfg.Train.Checkpoints {
				name := "ok.npy" // round 0 may share a file (w_0 is one); later rounds may not
				v := []float32(nil)
				if s.vec != nil {
					v = s.vec(p, w, r, good)
				}
				if v == nil && r > 0 && !s.shared {
					// After a noisy round no two runs agree (checkCopies), nor lie closer than
					// the round's noise allows (checkNearCopies): each run its own draw,
					// larger than the configs' noise.
					v = ownDraw(good, p, w, r)
				}
				if v != nil {
					name = fmt.Sprintf("p%d_w%d_r%d.npy", p, w, r)
					if len(v) > 0 {
						put(name, v)
					}
				}
				extra := ""
				if s.cols != nil {
					extra = s.cols(p, w, r)
				}
				lines = append(lines, fmt.Sprintf("%s,%s,%d,%d%s", name, wn, p, r, extra))
			}
		}
	}
	path := filepath.Join(dir, "m.csv")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ownDraw is good plus run (p, w)'s own noise of round r, of standard deviation 0.1 a
// parameter (larger than the test configs' noise).
func ownDraw(good []float32, p, w, r int) []float32 {
	v := slices.Clone(good)
	rng := rand.New(rand.NewPCG(uint64(2*p+w), uint64(r)))
	for i := range v {
		v[i] += float32(0.1 * rng.NormFloat64())
	}
	return v
}

// importFlat writes spec's manifest and imports it, returning the result, the error and the log.
func importFlat(t *testing.T, spec flatSpec) (*Result, error, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := ReadManifest(spec.write(t, dir))
	if err != nil {
		return nil, err, ""
	}
	var log []string
	logf := func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
	res, err := Import(context.Background(), Options{Manifest: m, Config: spec.cfg, Out: filepath.Join(dir, "out"), Workers: 2, Logf: logf})
	return res, err, strings.Join(log, "\n")
}

// The manifest's canary column follows one convention, fedaudit's: the canary (epsilon') is in
// C'. A manifest that marks it in C (whether its world labels or its canary column are the
// wrong way round) is refused, since the audit would read every score backwards; for the
// remove adjacencies the differing record is C's, and the column must say so.
func TestCanaryConvention(t *testing.T) {
	cfg := smallConfig(t)
	mark := func(c, cp string) func(p, w, r int) string {
		return func(p, w, r int) string { return "," + []string{c, cp}[w] }
	}
	cases := []struct {
		name  string
		c, cp string
		want  []string // empty: accepted
	}{
		{"canary in C'", "false", "true", nil},
		{"only C' marked", "", "true", nil},
		{"canary in C", "true", "false", []string{"line 2: canary true in world C and line 5: canary false in world C' (72 rows of C and 72 of C' say so)",
			"canary is in C'", "swapped"}},
		{"only C marked", "true", "", []string{"line 2: canary true in world C"}},
		{"C' unmarked", "", "false", []string{"line 5: canary false in world C'"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err, _ := importFlat(t, flatSpec{cfg: cfg, header: ",canary", cols: mark(c.c, c.cp)})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want one containing %q", err, w)
				}
			}
		})
	}
	// The adjacency decides the convention: Import derives Expect.CanaryInC from it.
	entries := func(c, cp bool) []Entry {
		return []Entry{{File: "a", World: 0, Client: -1, Canary: &c, Line: "line 2"}, {File: "b", World: 1, Client: -1, Canary: &cp, Line: "line 3"}}
	}
	for _, c := range []struct {
		adj   string
		c, cp bool
		want  string
	}{
		{"add", false, true, ""},
		{"add", true, false, "line 2: canary true in world C and line 3: canary false in world C' (1 rows of C and 1 of C' say so), but fedaudit's canary is in C' (adjacency add"},
		{"remove", true, false, ""},
		{"remove-client", true, false, ""},
		{"remove", false, true, "line 2: canary false in world C and line 3: canary true in world C' (1 rows of C and 1 of C' say so), but under adjacency remove the differing record is in C"},
	} {
		ex := Expect{Pairs: 1, Rounds: []int{0}, Clients: 1, Adjacency: c.adj, CanaryInC: c.adj == "remove" || c.adj == "remove-client"}
		_, err := (&Manifest{Path: "m", Entries: entries(c.c, c.cp)}).Validate(ex)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("adjacency %s, canary %v in C, %v in C': error %v, want %q", c.adj, c.c, c.cp, err, c.want)
		}
	}
}

// An import with many broken snapshots names every one of them, in every round, in one pass
// (the message lists the first ones and counts the rest); the manifest's checks count what they
// do not list too.
func TestEveryProblemListed(t *testing.T) {
	cfg := smallConfig(t)
	bad := map[string]bool{}
	spec := flatSpec{cfg: cfg, vec: func(p, w, r int, good []float32) []float32 {
		v := slices.Clone(good)
		switch {
		case r == 1 && w == 0 && p < 4: // NaN parameters in round 1
			v[3] = float32(math.NaN())
		case r == 3 && p == 5 && w == 1: // missing file in round 3
			v = []float32{}
		case r == 0 && p == 6 && w == 1: // wrong length in round 0
			v = v[:10]
		case r == 3 && p == 7 && w == 0: // wrong length in round 3
			v = v[:11]
		default:
			return nil
		}
		bad[fmt.Sprintf("p%d_w%d_r%d.npy", p, w, r)] = true
		return v
	}}
	_, err, _ := importFlat(t, spec)
	if err == nil {
		t.Fatal("accepted")
	}
	if len(bad) != 7 {
		t.Fatalf("%d bad snapshots planted", len(bad))
	}
	for f := range bad {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("the error does not name %s:\n%v", f, err)
		}
	}
	if !strings.Contains(err.Error(), "7 problems") {
		t.Errorf("the error does not count the problems:\n%v", err)
	}

	// Validate lists its first problems and counts the rest.
	var es []Entry
	for p := range 30 {
		es = append(es, Entry{File: "f", Pair: 100 + p, Round: 0, Client: -1, Line: fmt.Sprintf("line %d", p+2)})
	}
	_, err = (&Manifest{Path: "m", Entries: es}).Validate(Expect{Pairs: 1, Rounds: []int{0}, Clients: 1})
	if err == nil || !strings.Contains(err.Error(), "line 2: pair 100") || !strings.Contains(err.Error(), "and 12 more problems") {
		t.Fatalf("error %v, want the first problems and a count of the rest (32 in all)", err)
	}
}

// Every run starts from the same public w_0: a round-0 snapshot that differs from the others
// (one world of a pair edited, or both worlds of a pair) is refused, naming the pair, the file
// and the first parameter that differs.
func TestSharedInitialModel(t *testing.T) {
	cfg := smallConfig(t)
	edit := func(p, w, r int, good []float32) []float32 {
		if r != 0 || !(p == 3 && w == 1 || p == 5) {
			return nil
		}
		v := slices.Clone(good)
		v[40] += 1e-3
		return v
	}
	_, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: edit})
	for _, w := range []string{
		"pair 3: world C' starts from another w_0 than world C", "p3_w1_r0.npy", "parameter 40 (layer 2 weight",
		"pair 5: w_0 (", "p5_w0_r0.npy, both worlds) differs from the w_0 most runs start from (", "ok.npy, 45 of 48 runs)",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v, want one containing %q", err, w)
		}
	}
}

// Where two w_0 are held by equally many runs, the earliest run's is the reference: the later
// pairs are named, not the earlier ones.
func TestSharedInitialModelTie(t *testing.T) {
	cfg := smallConfig(t)
	var pairs int
	edit := func(p, w, r int, good []float32) []float32 {
		pairs = max(pairs, p+1)
		if r != 0 || p < 12 {
			return nil
		}
		v := slices.Clone(good)
		v[40] += 1e-3
		return v
	}
	_, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: edit})
	if pairs != 24 {
		t.Fatalf("%d pairs, the test wants 24 (half of them edited)", pairs)
	}
	if err == nil || !strings.Contains(err.Error(), "pair 12: w_0 (") || !strings.Contains(err.Error(), "24 of 48 runs") ||
		strings.Contains(err.Error(), "pair 0: w_0 (") {
		t.Errorf("error %v, want pairs 12 to 23 named against the w_0 of pair 0 (24 of 48 runs)", err)
	}
}

const uploadMLPYAML = `
name: import-upload-kind
seed: 7
pairs: 12
data:
  source: synthetic
  synthetic: {dim: 6, classes: 3}
  clients: 3
  per_client: 8
  test_samples: 20
adjacency: {kind: replace, client: 0, index: 1, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [8], activation: tanh}
  rounds: 3
  local_steps: 2
  learning_rate: 0.05
  clip_norm: 1
  noise_std: 0.005
  checkpoints: [0, 1, 2, 3]
  record_params: true
  record_upload: true
`

// Uploads saved as updates (upload - w_{t-1}) but imported as models (or the other way round)
// would feed the uploads observer's attacks nonsense: the import warns, in the log and in its
// result, when the norms say which kind the files hold.
func TestUploadKindWarning(t *testing.T) {
	cfg := parse(t, uploadMLPYAML)
	own := trainOwn(t, cfg)
	for _, c := range []struct {
		saved, read bool // updates saved, updates read
		want        string
	}{
		{false, false, ""},
		{true, true, ""},
		{true, false, "--uploads update"},
		{false, true, "--uploads model"},
	} {
		t.Run(fmt.Sprintf("saved updates %v, read updates %v", c.saved, c.read), func(t *testing.T) {
			m, err := ReadManifest(exportSnapshots(t, cfg, own, t.TempDir(), c.saved))
			if err != nil {
				t.Fatal(err)
			}
			var log []string
			logf := func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }
			res, err := Import(context.Background(), Options{Manifest: m, Config: cfg, Out: filepath.Join(t.TempDir(), "imp"), UploadUpdates: c.read, Workers: 2, Logf: logf})
			if err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(log, "\n")
			warned := strings.Contains(joined, "warning")
			if c.want == "" {
				if warned || len(res.Warnings) > 0 {
					t.Fatalf("warned on a right import: %v\n%s", res.Warnings, joined)
				}
				return
			}
			if !warned || !strings.Contains(joined, c.want) {
				t.Fatalf("log lacks a warning with %q:\n%s", c.want, joined)
			}
			if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], c.want) {
				t.Fatalf("result's warnings %q, want one with %q", res.Warnings, c.want)
			}
		})
	}
}

// A manifest with problems of its own still has the snapshots it lists read and checked, so one
// run lists the manifest's problems and the snapshots' together.
func TestManifestAndSnapshotProblemsTogether(t *testing.T) {
	cfg := smallConfig(t)
	spec := flatSpec{cfg: cfg, vec: func(p, w, r int, good []float32) []float32 {
		if p == 2 && w == 0 && r == 3 {
			v := slices.Clone(good)
			v[0] = float32(math.Inf(1))
			return v
		}
		return nil
	}}
	dir := t.TempDir()
	path := spec.write(t, dir)
	raw, _ := os.ReadFile(path)
	os.WriteFile(path, append(raw, "ok.npy,C,0,2\n"...), 0o644) // round 2 is not a checkpoint
	m, err := ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Import(context.Background(), Options{Manifest: m, Config: cfg, Out: filepath.Join(dir, "out"), Workers: 2})
	for _, w := range []string{"(2 problems)", "line 146: round 2 is not a checkpoint", "p2_w0_r3.npy (pair 2, world C, round 3): parameter 0 (layer 1 weight, element 0) is +Inf"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v, want one containing %q", err, w)
		}
	}
}

// Every bad row of a manifest is named, not just the first (CSV and JSON).
func TestManifestRowsAllListed(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "m.csv")
	os.WriteFile(csvPath, []byte("file,world,pair,round\na.npy,D,0,0\nb.npy,C,x,0\nc.npy,C,0\nd.npy,C',0,0\ne.npy,C,0,1.5\n"), 0o644)
	_, err := ReadManifest(csvPath)
	for _, w := range []string{"(4 problems)", `line 2: world "D"`, `line 3: pair "x" is not an integer`, "line 4", "wrong number of fields", `line 6: round "1.5" is not an integer`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("CSV: error %v, want one containing %q", err, w)
		}
	}
	jsonPath := filepath.Join(dir, "m.json")
	os.WriteFile(jsonPath, []byte(`[{"file":"a","world":"D","pair":0,"round":0},{"file":"b","world":"C","pair":0,"round":0},{"file":"c","world":"C","round":0},{"file":"d","world":1,"pair":0,"round":0,"client":-1}]`), 0o644)
	_, err = ReadManifest(jsonPath)
	for _, w := range []string{"(3 problems)", `entry 0: world "D"`, "entry 2: file, world, pair and round are required", "entry 3: client -1 is negative"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("JSON: error %v, want one containing %q", err, w)
		}
	}
	os.WriteFile(jsonPath, []byte(`[{"file":"a","world":"C","pair":"x","round":0}]`), 0o644)
	_, err = ReadManifest(jsonPath)
	for _, w := range []string{"entry 0: field pair: a string where a number belongs"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("JSON: error %v, want one containing %q", err, w)
		}
	}
}

// A manifest that is no manifest is named with what it lacks: not "header: EOF" or "stat ...".
func TestManifestFileRefused(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "m.csv")
	os.WriteFile(empty, nil, 0o644)
	for _, c := range []struct{ path, want string }{
		{empty, "manifest " + empty + ": empty: a CSV manifest starts with a header naming its columns"},
		{dir, "manifest " + dir + ": is a directory"},
		// The files that cannot be read stay path errors (exit status 1 in the CLI).
		{filepath.Join(dir, "none.csv"), "manifest " + filepath.Join(dir, "none.csv") + ": no such file or directory"},
	} {
		_, err := ReadManifest(c.path)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
		var pe *fs.PathError
		if c.path != empty && !errors.As(err, &pe) {
			t.Errorf("%s: %T is no path error", c.path, err)
		}
	}
}

// uploadKindWarning on norms alone: uploads whose file or w_{t-1} is zero say nothing (their
// ratio is undefined), so a round of zero files among model-like uploads warns of nothing.
func TestUploadKindWarningNorms(t *testing.T) {
	model := uploadNorms{file: 10, prev: 10, diff: 0.5}  // an uploaded model: near w_{t-1}
	update := uploadNorms{file: 0.5, prev: 10, diff: 10} // an update: near 0
	zeroFile := uploadNorms{file: 0, prev: 10, diff: 10}
	zeroPrev := uploadNorms{file: 3, prev: 0, diff: 3}
	for _, c := range []struct {
		norms   []uploadNorms
		updates bool
		want    string
	}{
		{[]uploadNorms{model, model, zeroFile, zeroFile, zeroFile}, false, ""},
		{[]uploadNorms{model, model, zeroPrev, zeroPrev, zeroPrev}, true, "look like uploaded models"},
		{[]uploadNorms{update, update, zeroFile}, false, "look like updates"},
		{[]uploadNorms{model, model, zeroPrev}, true, "look like uploaded models"},
		{[]uploadNorms{zeroFile, zeroPrev}, false, ""},
		{[]uploadNorms{{file: 10, prev: 10, diff: 10}}, false, ""}, // ratio 1: undecided
	} {
		got := uploadKindWarning(c.norms, c.updates)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("uploadKindWarning(%v, updates %v) = %q, want %q", c.norms, c.updates, got, c.want)
		}
	}
}

// An error lists one problem without a count, several with their count, and past maxListed
// counts the rest.
func TestProblemsErr(t *testing.T) {
	var p problems
	if p.err("head") != nil {
		t.Fatal("an error without problems")
	}
	p.add("first %d", 1)
	if got := p.err("head").Error(); got != "head:\n  first 1" {
		t.Errorf("one problem: %q", got)
	}
	for i := 2; i <= maxListed+5; i++ {
		p.add("problem %d", i)
	}
	got := p.err("head").Error()
	lines := strings.Split(got, "\n")
	if lines[0] != fmt.Sprintf("head (%d problems):", maxListed+5) || len(lines) != maxListed+2 ||
		lines[maxListed] != fmt.Sprintf("  problem %d", maxListed) || lines[maxListed+1] != "  ... and 5 more problems" {
		t.Errorf("%d problems:\n%s", maxListed+5, got)
	}
}
