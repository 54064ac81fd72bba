package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of the CLI tests")

// TestCLIGolden runs every testdata/cli/NAME.args case through run and compares stdout, stderr
// and the exit code with NAME.stdout, NAME.stderr and NAME.code. An .args file holds one
// argument per line; $TMP expands to a fresh temporary directory and $TESTDATA to the absolute
// testdata directory. Outputs have the temporary directory replaced by $TMP before comparison.
// Run `go test ./cmd/audit -run CLIGolden -update` to rewrite the golden files after an
// intended change, and read the diff.
func TestCLIGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "cli", "*.args"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no CLI golden cases found")
	}
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, argsPath := range cases {
		name := strings.TrimSuffix(filepath.Base(argsPath), ".args")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(argsPath)
			if err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			var args []string
			for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
				if line == "" {
					continue
				}
				line = strings.ReplaceAll(line, "$TMP", tmp)
				line = strings.ReplaceAll(line, "$TESTDATA", testdata)
				args = append(args, line)
			}
			var stdout, stderr bytes.Buffer
			code := exitCode(&stderr, run(context.Background(), args, &stdout, &stderr))
			clean := func(s string) string {
				s = strings.ReplaceAll(s, tmp, "$TMP")
				return strings.ReplaceAll(s, testdata, "$TESTDATA")
			}
			got := map[string]string{
				".stdout": clean(stdout.String()),
				".stderr": clean(stderr.String()),
				".code":   strconv.Itoa(code) + "\n",
			}
			base := strings.TrimSuffix(argsPath, ".args")
			for ext, g := range got {
				path := base + ext
				if *update {
					if err := os.WriteFile(path, []byte(g), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if string(want) != g {
					t.Errorf("%s differs from golden file\n--- got ---\n%s\n--- want ---\n%s", path, g, want)
				}
			}
		})
	}
}
