package dataexport

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/train/canary"
)

const base = `name: export-%s
seed: 7
pairs: 4
data: {source: %s, clients: 3, per_client: 5, test_samples: %d}
adjacency: {kind: %s, client: %d, index: %d%s}
train:
  algorithm: %s
  model: {kind: %s}
  rounds: 2
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.1
  checkpoints: [2]
`

// configs covers every adjacency kind, sample shapes of rank 1 and 3, with and without a test set.
var configs = map[string]string{
	"replace":        fmt.Sprintf(base, "replace", "synthetic", 12, "replace", 1, 2, ", canary: dirac", "fedavg", "softmax"),
	"add":            fmt.Sprintf(base, "add", "synthetic", 0, "add", 0, 4, ", canary: heldout", "fedavg", "softmax"),
	"remove":         fmt.Sprintf(base, "remove", "synthetic", 0, "remove", 2, 0, "", "fedavg", "softmax"),
	"replace-client": fmt.Sprintf(base, "replace-client", "synthetic", 0, "replace-client", 1, 3, ", canary: dirac", "fedavg", "softmax"),
	"images":         fmt.Sprintf(base, "images", "synthetic-images", 4, "replace", 0, 1, ", canary: blank", "fedavg", "lenet5"),
	"remove-client": `name: export-remove-client
seed: 7
pairs: 4
data: {source: synthetic, clients: 4, per_client: 3}
adjacency: {kind: remove-client, client: 1, index: 0}
train:
  algorithm: dp-fedavg
  model: {kind: quadratic, curvature: 1}
  rounds: 2
  local_steps: 1
  learning_rate: 0.5
  sampling_rate: 0.5
  noise_multiplier: 1
  update_clip: 0.1
  checkpoints: [2]
`,
}

func prepare(t *testing.T, yaml string) (*spec.Config, *spec.Data) {
	t.Helper()
	cfg, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	d, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, d
}

// want is every tensor the file must hold, built from spec.Prepare's data directly (not
// through Tensors): name -> float bits or ints, and shape.
type wantTensor struct {
	shape []int
	bits  []uint32 // float32 features
	ints  []int64  // labels and scalars
}

func expected(d *spec.Data) map[string]wantTensor {
	out := map[string]wantTensor{}
	add := func(prefix string, c *datasets.Dataset) {
		bits := make([]uint32, len(c.Features))
		for i, v := range c.Features {
			bits[i] = math.Float32bits(v)
		}
		y := make([]int64, len(c.Labels))
		for i, l := range c.Labels {
			y[i] = int64(l)
		}
		out[prefix+"/x"] = wantTensor{shape: append([]int{c.Len()}, c.Shape...), bits: bits}
		out[prefix+"/y"] = wantTensor{shape: []int{c.Len()}, ints: y}
	}
	for i, c := range d.Pair.C {
		add(fmt.Sprintf("c/client%d", i), c)
	}
	k := 0
	for i := range d.Pair.C {
		if d.Target.Absent && i == d.Target.Client {
			continue // remove-client: C' lacks the client; the others keep their numbers
		}
		add(fmt.Sprintf("cprime/client%d", i), d.Pair.CPrime[k])
		k++
	}
	if d.Test != nil {
		add("test", d.Test)
	}
	out["classes"] = wantTensor{shape: []int{}, ints: []int64{int64(d.Classes)}}
	out["canary/client"] = wantTensor{shape: []int{}, ints: []int64{int64(d.Target.Client)}}
	out["canary/index"] = wantTensor{shape: []int{}, ints: []int64{int64(d.Target.Index)}}
	return out
}

func check(t *testing.T, got []ingest.Tensor, want map[string]wantTensor) {
	t.Helper()
	seen := map[string]bool{}
	for _, g := range got {
		w, ok := want[g.Name]
		if !ok {
			t.Errorf("unexpected tensor %q", g.Name)
			continue
		}
		seen[g.Name] = true
		if !slices.Equal(g.Shape, w.shape) {
			t.Errorf("%s: shape %v, want %v", g.Name, g.Shape, w.shape)
		}
		if w.ints != nil {
			if !g.Integer || !slices.Equal(g.Ints, w.ints) {
				t.Errorf("%s: integer %v %v, want %v", g.Name, g.Integer, g.Ints, w.ints)
			}
			continue
		}
		bits := make([]uint32, len(g.Data))
		for i, v := range g.Data {
			bits[i] = math.Float32bits(v)
		}
		if g.Integer || !slices.Equal(bits, w.bits) {
			t.Errorf("%s: features differ from spec.Prepare's (integer %v, %d values, want %d)", g.Name, g.Integer, len(bits), len(w.bits))
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("tensor %q missing", name)
		}
	}
}

// TestRoundTrip writes every config's data in both formats and reads it back with ingest's
// reader: every tensor equals spec.Prepare's data bit for bit.
func TestRoundTrip(t *testing.T) {
	for name, yaml := range configs {
		t.Run(name, func(t *testing.T) {
			cfg, d := prepare(t, yaml)
			want := expected(d)
			for _, ext := range []string{".npz", ".safetensors"} {
				path := filepath.Join(t.TempDir(), "data"+ext)
				if err := Write(context.Background(), path, cfg, d); err != nil {
					t.Fatal(err)
				}
				got, err := ingest.ReadDataFile(path)
				if err != nil {
					t.Fatal(err)
				}
				check(t, got, want)
				entries, _ := os.ReadDir(filepath.Dir(path))
				if len(entries) != 1 {
					t.Errorf("%s: the folder holds %d entries, want only the file", ext, len(entries))
				}
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	cfg, d := prepare(t, configs["replace"])
	dir := t.TempDir()
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "data.npy"), "extension must be .npz or .safetensors"},
		{filepath.Join(dir, "data"), "extension must be .npz or .safetensors"},
		{filepath.Join(dir, "missing", "data.npz"), "cannot create a file in " + filepath.Join(dir, "missing") + ": no such file or directory"},
	} {
		if err := Write(context.Background(), c.path, cfg, d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write(%s): %v, want %q", c.path, err, c.want)
		}
	}
	// A directory in the way: refused, and no temporary file is left.
	os.Mkdir(filepath.Join(dir, "taken.npz"), 0o755)
	if err := Write(context.Background(), filepath.Join(dir, "taken.npz"), cfg, d); err == nil {
		t.Error("Write over a directory succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Write(ctx, filepath.Join(dir, "cancelled.safetensors"), cfg, d); err != context.Canceled {
		t.Errorf("cancelled Write: %v, want context.Canceled", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "taken.npz" {
		t.Errorf("the folder holds %v, want only taken.npz", entries)
	}
	// Worlds that differ by what the trainer crafts have no data to export.
	for name, edit := range map[string]func(*spec.Config){
		"a gradient canary": func(c *spec.Config) { c.Train.GradientCanary = &canary.Gradient{Norm: 1} },
		"a crafted update":  func(c *spec.Config) { c.Train.CraftedUpdate = &canary.Update{Direction: canary.GaussianDirection} },
	} {
		crafted := *cfg
		edit(&crafted)
		if err := Write(context.Background(), filepath.Join(dir, "crafted.npz"), &crafted, d); err == nil || !strings.Contains(err.Error(), "crafted gradient or client update") {
			t.Errorf("Write with %s: %v, want a refusal", name, err)
		}
	}
	// Format names the formats; the extension's case does not matter.
	if f, err := FormatOf("X.SafeTensors"); err != nil || f != Safetensors {
		t.Errorf("FormatOf(X.SafeTensors) = %q, %v", f, err)
	}
}

// python finds Debian's python3 with numpy, which reads the files independently of Go.
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import numpy").Run() == nil {
			return p
		}
	}
	msg := "no python3 with numpy (apt-get install python3-numpy)"
	if os.Getenv("FEDAUDIT_REQUIRE_TORCH") == "1" {
		t.Fatal(msg + ", and FEDAUDIT_REQUIRE_TORCH=1 requires this test")
	}
	t.Skip(msg)
	return ""
}

// readPy loads an .npz with numpy.load and a .safetensors file by its specification (8-byte
// header length, JSON, numpy.frombuffer), and prints, per tensor, the numpy dtype, the shape
// and the SHA-256 of its little-endian bytes.
const readPy = `
import json, struct, sys, hashlib
import numpy as np
path = sys.argv[1]
out = {}
def put(name, a):
    out[name] = {"dtype": a.dtype.str, "shape": list(a.shape),
                 "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()}
if path.endswith(".npz"):
    with np.load(path, allow_pickle=False) as z:
        for name in z.files:
            put(name, z[name])
else:
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out["__metadata__"] = meta
    body = raw[8 + n:]
    dt = {"F32": "<f4", "I64": "<i8"}
    for name, e in header.items():
        b, en = e["data_offsets"]
        put(name, np.frombuffer(body[b:en], dtype=dt[e["dtype"]]).reshape(e["shape"]))
print(json.dumps(out))
`

// TestNumPyReads checks the files with numpy: every tensor is there with numpy's dtype <f4 or
// <i8, its shape and the bytes of spec.Prepare's data.
func TestNumPyReads(t *testing.T) {
	py := python(t)
	for _, name := range []string{"replace", "images", "remove-client"} {
		cfg, d := prepare(t, configs[name])
		want := expected(d)
		for _, ext := range []string{".npz", ".safetensors"} {
			path := filepath.Join(t.TempDir(), "data"+ext)
			if err := Write(context.Background(), path, cfg, d); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(py, "-c", readPy, path).Output()
			if err != nil {
				t.Fatalf("%s%s: numpy: %v", name, ext, err)
			}
			var got map[string]struct {
				DType  string `json:"dtype"`
				Shape  []int  `json:"shape"`
				SHA256 string `json:"sha256"`
			}
			var meta struct {
				Meta map[string]string `json:"__metadata__"`
			}
			json.Unmarshal(out, &meta)
			if ext == ".safetensors" && (meta.Meta["format"] != FormatVersion || meta.Meta["data_hash"] != d.Hash) {
				t.Errorf("%s%s: metadata %v", name, ext, meta.Meta)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s%s: %v\n%s", name, ext, err, out)
			}
			delete(got, "__metadata__")
			if len(got) != len(want) {
				t.Errorf("%s%s: numpy reads %d tensors, want %d", name, ext, len(got), len(want))
			}
			for tn, w := range want {
				g, ok := got[tn]
				h := sha256.New()
				var b [8]byte
				dtype := "<f4"
				if w.ints != nil {
					dtype = "<i8"
					for _, v := range w.ints {
						binary.LittleEndian.PutUint64(b[:], uint64(v))
						h.Write(b[:])
					}
				} else {
					for _, v := range w.bits {
						binary.LittleEndian.PutUint32(b[:4], v)
						h.Write(b[:4])
					}
				}
				sum := hex.EncodeToString(h.Sum(nil))
				if !ok || g.DType != dtype || !slices.Equal(g.Shape, w.shape) || g.SHA256 != sum {
					t.Errorf("%s%s: numpy reads %s as %+v, want %s %v sha256 %s", name, ext, tn, g, dtype, w.shape, sum)
				}
			}
		}
	}
}

// cleaningCtx runs a cleaner of stale temporary files in dir the first time the writer asks
// whether it is cancelled, that is while the file is being written.
type cleaningCtx struct {
	context.Context
	t       *testing.T
	dir     string
	cleaned bool
}

func (c *cleaningCtx) Err() error {
	if !c.cleaned {
		c.cleaned = true
		if removed, err := fsutil.CleanStale(c.dir); err != nil || len(removed) != 0 {
			c.t.Errorf("a cleaner during Write removed %v (%v): the file being written counts as stale", removed, err)
		}
	}
	return c.Context.Err()
}

// A cleaner of stale temporary files (another command's fsutil.CleanStale) in the same folder
// leaves the file being written alone: Write holds its lock.
func TestWriteSurvivesCleaner(t *testing.T) {
	cfg, d := prepare(t, configs["replace"])
	dir := t.TempDir()
	ctx := &cleaningCtx{Context: context.Background(), t: t, dir: dir}
	if err := Write(ctx, filepath.Join(dir, "data.npz"), cfg, d); err != nil {
		t.Fatal(err)
	}
	if !ctx.cleaned {
		t.Fatal("the cleaner never ran")
	}
}
