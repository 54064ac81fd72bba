package main

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/dataexport"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/ingest"
)

// TestDatasetsExportFile: the file `audit datasets export` writes holds, bit for bit, the
// tensors package dataexport lays out from spec.Prepare's data (whose content
// package dataexport's tests check), in both formats.
func TestDatasetsExportFile(t *testing.T) {
	cfg, err := spec.Load("testdata/run_small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := spec.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := dataexport.Tensors(data)
	for _, name := range []string{"data.npz", "data.safetensors"} {
		path := filepath.Join(t.TempDir(), name)
		if _, errOut, code := runCLI("datasets", "export", "--config", "testdata/run_small.yaml", "--out", path); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		got, err := ingest.ReadDataFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d tensors, want %d", name, len(got), len(want))
		}
		byName := map[string]ingest.Tensor{}
		for _, g := range got {
			byName[g.Name] = g
		}
		for _, w := range want {
			g := byName[w.Name]
			same := g.Integer == w.Integer && slices.Equal(g.Shape, w.Shape) && slices.Equal(g.Ints, w.Ints) &&
				slices.EqualFunc(g.Data, w.Data, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
			if !same {
				t.Errorf("%s: tensor %q differs", name, w.Name)
			}
		}
	}
}
