package experiment

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// experiment is orchestration below the importers and exporters (they import it) and the CLI:
// none of its non-test files, nor those of its sub-packages, may import them back, the arrow
// that ran back up when it read the outputs importer's summary through that package
// (docs/architecture.md). Its sub-packages sit either above it (they import experiment, and
// experiment never imports them: cost) or below it (experiment imports them, and they import
// neither experiment nor a package above it: spec, the config and its data; bounds, the
// config mapped onto the theory; headline, the rows summed up).
func TestImportsStayBelow(t *testing.T) {
	const module = "github.com/fedaudit/fedaudit/"
	aboveExperiment := map[string]bool{"cost": true}
	dirs := []string{"."}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "testdata" {
			dirs = append(dirs, e.Name())
		}
	}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, a := range []string{"importer", "export", "cmd"} {
					if p := module + a; path == p || strings.HasPrefix(path, p+"/") {
						t.Errorf("%s imports %s, which imports experiment", f, path)
					}
				}
				sub, ok := strings.CutPrefix(path, module+"experiment/")
				switch {
				case dir == "." && ok && aboveExperiment[sub]:
					t.Errorf("%s imports %s, which sits above experiment", f, path)
				case dir != "." && !aboveExperiment[dir] && (path == module+"experiment" || ok && aboveExperiment[sub]):
					t.Errorf("%s imports %s, above the package experiment imports", f, path)
				}
			}
		}
	}
}
