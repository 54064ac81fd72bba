package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"
)

// gaussianOutputs simulates a Gaussian mechanism's black-box outputs with known mu: the
// canary's loss is N(-mu, 1) in world C (trained on it) and N(0, 1) in C', coupled: both runs
// of a pair share their noise draw, as coupled seeds make them.
func gaussianOutputs(pairs int, mu float64, seed uint64) (pair []int64, world []string, loss []float64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	for p := 0; p < pairs; p++ {
		z := rng.NormFloat64()
		pair = append(pair, int64(p), int64(p))
		world = append(world, "C", "C'")
		loss = append(loss, z-mu, z)
	}
	return pair, world, loss
}

func writeOutputsCSV(t *testing.T, path string, pair []int64, world []string, loss []float64) {
	var b strings.Builder
	b.WriteString("pair_id,world,loss\n")
	for i := range pair {
		fmt.Fprintf(&b, "%d,%s,%v\n", pair[i], world[i], loss[i])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeOutputsParquet(t *testing.T, path string, pair []int64, world []string, loss []float64) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "pair_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "world", Type: arrow.BinaryTypes.String},
		{Name: "loss", Type: arrow.PrimitiveTypes.Float32}, // float32, as a model computes it
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for i := range pair {
		b.Field(0).(*array.Int64Builder).Append(pair[i])
		b.Field(1).(*array.StringBuilder).Append(world[i])
		b.Field(2).(*array.Float32Builder).Append(float32(loss[i]))
	}
	rec := b.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImportOutputsGaussian is the end-to-end check of black-box audits: outputs of a Gaussian
// mechanism with mu = 1 at 1000 coupled pairs, as CSV and as Parquet, imported and analyzed
// through the CLI. Every certified mu must be at or below the truth (a bound above it would be
// unsound) and the strongest above half of it (the audit has power), and a claim below the
// truth (mu = 0.5) must be violated (exit status 3).
func TestImportOutputsGaussian(t *testing.T) {
	const mu = 1.0
	pair, world, loss := gaussianOutputs(1000, mu, 1)
	dir := t.TempDir()
	call := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
		return code, stdout.String(), stderr.String()
	}
	for _, format := range []string{"csv", "parquet"} {
		t.Run(format, func(t *testing.T) {
			in := filepath.Join(dir, "outputs."+format)
			if format == "csv" {
				writeOutputsCSV(t, in, pair, world, loss)
			} else {
				writeOutputsParquet(t, in, pair, world, loss)
			}
			out := filepath.Join(dir, "audit-"+format)
			code, stdout, stderr := call("import", "--outputs", in, "--out", out)
			if code != 0 || !strings.Contains(stdout, "attacks scored: [loss lira-offline lira-online]") ||
				!strings.Contains(stdout, "not run: margin: needs logits") {
				t.Fatalf("import: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			// No run files to export: said so, not "open DIR/runs: no such file".
			if code, _, stderr := call("export", "--format", "parquet", out, "--out", filepath.Join(dir, "px-"+format)); code != 1 ||
				!strings.Contains(stderr, "holds imported model outputs") {
				t.Errorf("export of imported outputs: exit %d, %s", code, stderr)
			}
			code, stdout, stderr = call("analyze", out, "--json")
			if code != 0 {
				t.Fatalf("analyze: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			var got struct {
				Findings []struct {
					Attack  string  `json:"attack"`
					MuLower float64 `json:"mu_lower"`
				} `json:"findings"`
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Findings) != 3 {
				t.Fatalf("analyze --json: %v, %d findings\n%s", err, len(got.Findings), stdout)
			}
			best := 0.0
			for _, f := range got.Findings {
				t.Logf("%s: %s mu_lower %.4f (truth %g)", format, f.Attack, f.MuLower, mu)
				if f.MuLower > mu {
					t.Errorf("%s certifies mu >= %.4f above the truth %g", f.Attack, f.MuLower, mu)
				}
				best = max(best, f.MuLower)
			}
			if best <= mu/2 {
				t.Errorf("strongest certified mu %.4f, want above %g", best, mu/2)
			}
			code, stdout, stderr = call("analyze", out, "--claim-mu", "0.5")
			if code != 3 || !strings.HasPrefix(stdout, "VIOLATED") {
				t.Fatalf("claim 0.5 < truth: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			if code, stdout, _ = call("analyze", out, "--claim-mu", "2"); code != 0 || !strings.HasPrefix(stdout, "CONSISTENT") {
				t.Fatalf("claim 2 > truth: code %d\nstdout %s", code, stdout)
			}
			// `audit report` on the same directory gives the same verdicts and writes findings.json
			// (there is no HTML report without run files).
			code, stdout, stderr = call("report", out, "--claim-mu", "0.5")
			if code != 3 || !strings.HasPrefix(stdout, "VIOLATED") || !strings.Contains(stdout, "Findings written") {
				t.Fatalf("report, claim 0.5: code %d\nstdout %s\nstderr %s", code, stdout, stderr)
			}
			if _, err := os.Stat(filepath.Join(out, "findings.json")); err != nil {
				t.Fatalf("report wrote no findings.json: %v", err)
			}
			if code, stdout, _ = call("report", out, "--claim-mu", "2"); code != 0 || !strings.HasPrefix(stdout, "CONSISTENT") {
				t.Fatalf("report, claim 2: code %d\nstdout %s", code, stdout)
			}
			// Commands that need run files or a config say what the directory is and what
			// judges it, not to run `audit run` there, which cannot apply.
			for _, args := range [][]string{{"attack", "--runs", out}, {"compare", out}} {
				code, _, stderr := call(args...)
				if code == 0 || !strings.Contains(stderr, "holds imported model outputs") || !strings.Contains(stderr, "audit analyze "+out) {
					t.Errorf("%s on an outputs directory: code %d\nstderr %s", args[0], code, stderr)
				}
			}
		})
	}
	// A table with a pair missing its world C' exits with status 2, naming the pair, and leaves
	// no directory.
	bad := filepath.Join(dir, "bad.csv")
	writeOutputsCSV(t, bad, pair[:5], world[:5], loss[:5])
	out := filepath.Join(dir, "bad-out")
	code, _, stderr := call("import", "--outputs", bad, "--out", out)
	if code != 2 || !strings.Contains(stderr, "pair 2 round 0: missing world C'") {
		t.Fatalf("bad table: code %d\nstderr %s", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed import left %s: %v", out, err)
	}
	if code, _, stderr = call("import", "--outputs", bad, "--manifest", "m.csv", "--out", out); code != 2 || !strings.Contains(stderr, "give one kind") {
		t.Fatalf("--outputs with --manifest: code %d\nstderr %s", code, stderr)
	}
}

// A flag of the other kind of import is refused, not ignored.
func TestImportFlagsOfTheOtherKindRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"import", "--outputs", "o.csv", "--out", t.TempDir(), "--names", "a,b"}, "--names applies to snapshots"},
		{[]string{"import", "--outputs", "o.csv", "--out", t.TempDir(), "--uploads", "update"}, "--uploads applies to snapshots"},
		{[]string{"import", "--manifest", "m.csv", "--config", "testdata/run_small.yaml", "--out", t.TempDir(), "--shadow-every", "3"}, "--shadow-every applies to --outputs"},
	} {
		_, errOut, code := runCLI(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 saying %q", tc.args, code, errOut, tc.want)
		}
	}
}
