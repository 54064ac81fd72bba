package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/findings"
	"github.com/fedaudit/fedaudit/runs"
)

// runsTestdata describes the run files behind the runs_* CLI cases: name (under testdata) ->
// files to write. They are committed so the golden cases read fixed bytes; TestRunsTestdata
// checks that the writer still produces them byte for byte (`-update` rewrites them).
func runsTestdata() map[string]func(dir string) error {
	meta := func(config string, s runs.Shard) runs.Meta {
		return runs.Meta{
			Config:      []byte(config),
			DatasetHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			ToolVersion: "0.1.0-test",
			Shard:       s,
			StatNames:   []string{"target_loss_c", "llr_all_iterates"},
			HasParams:   true,
		}
	}
	const config = `{"algo": "fedavg", "rounds": 3, "clients": 4, "sigma": 0.5, "pairs": 2}`
	// rows: pairs [first, first+n), both worlds, rounds 0..2; run 3 diverges at round 2.
	rows := func(first, n int) []runs.Row {
		var out []runs.Row
		for p := first; p < first+n; p++ {
			for w := int8(0); w < 2; w++ {
				id := int64(2*p) + int64(w)
				for r := int32(0); r < 3; r++ {
					out = append(out, runs.Row{
						RunID: id, PairID: int64(p), World: w, Seed: uint64(1000 + p), Round: r,
						Diverged: id == 3 && r == 2, TrainLoss: 2.3 / float64(r+1), TestAccuracy: 0.1 * float64(r+1),
						Stats:  []float64{float64(r) + 0.5, float64(w) - 0.25*float64(r)},
						Params: []float32{float32(id), float32(r), 0.5, -0.5},
					})
				}
			}
		}
		return out
	}
	write := func(path string, m runs.Meta, rs []runs.Row) error {
		w, err := runs.Create(path, m, runs.WithBatchRows(4))
		if err != nil {
			return err
		}
		defer w.Abort()
		if err := w.Write(rs...); err != nil {
			return err
		}
		return w.Close()
	}
	return map[string]func(string) error{
		"runs_tiny.arrow": func(path string) error {
			return write(path, meta(config, runs.Shard{}), rows(0, 2))
		},
		"runs_sharded": func(dir string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for i := 0; i < 2; i++ {
				s := runs.Shard{Index: i, Count: 2}
				if err := write(filepath.Join(dir, s.FileName()), meta(config, s), rows(i, 1)); err != nil {
					return err
				}
			}
			return nil
		},
		"runs_mixed": func(dir string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for i, cfg := range []string{config, `{"algo": "fedprox"}`} {
				s := runs.Shard{Index: i, Count: 2}
				if err := write(filepath.Join(dir, s.FileName()), meta(cfg, s), rows(i, 1)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func TestRunsTestdata(t *testing.T) {
	for name, gen := range runsTestdata() {
		t.Run(name, func(t *testing.T) {
			fresh := filepath.Join(t.TempDir(), name)
			if err := gen(fresh); err != nil {
				t.Fatal(err)
			}
			committed := filepath.Join("testdata", name)
			if *update {
				if err := os.RemoveAll(committed); err != nil {
					t.Fatal(err)
				}
				if err := gen(committed); err != nil {
					t.Fatal(err)
				}
			}
			want, err := readTree(committed)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			got, err := readTree(fresh)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("generated %d files, %s holds %d", len(got), committed, len(want))
			}
			for rel, b := range got {
				if !bytes.Equal(b, want[rel]) {
					t.Errorf("%s: the writer no longer produces the committed bytes (run with -update after an intended change)", filepath.Join(committed, rel))
				}
			}
		})
	}
}

// readTree reads a file, or every file under a directory, keyed by path relative to root.
func readTree(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		out[rel] = b
		return err
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%s: no files", root)
	}
	return out, err
}

// The run summary of idp-fedavg names the noise of each privacy group; "noise multiplier 0"
// read as no noise at all.
func TestRunSummaryPrivacyGroups(t *testing.T) {
	cfg, err := spec.Load(filepath.Join("..", "..", "results", "idp-fedavg", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printRunSummary(&out, cfg, t.TempDir(), &findings.Analysis{})
	first, _, _ := strings.Cut(out.String(), "\n")
	want := "noise per privacy group (5 clients at epsilon 2; 5 clients at epsilon 6, delta 1e-05), update clip 1"
	if !strings.Contains(first, want) || strings.Contains(first, "noise multiplier") {
		t.Errorf("summary %q, want it to say %q", first, want)
	}
}
