package experiment

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// experiment is orchestration below the importers and exporters (they import it) and the CLI:
// none of its non-test files may import them back, the arrow that ran back up when it read the
// outputs importer's summary through that package (docs/architecture.md).
func TestImportsStayBelow(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	above := []string{"importer", "export", "cmd"}
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
			for _, a := range above {
				if p := "github.com/fedaudit/fedaudit/" + a; path == p || strings.HasPrefix(path, p+"/") {
					t.Errorf("%s imports %s, which imports experiment", f, path)
				}
			}
		}
	}
}
