package spec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds the config parser arbitrary bytes: a config is outside data (a user's file,
// or one copied between nodes), so Parse must answer every input with a config or an error,
// never a panic or a hang. A config it accepts must come back the same from its own JSON form
// (JSON is a subset of YAML), since run files store that form and later stages compare it.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"../../results/*/config.yaml", "../../results/*/*/config.yaml", "../../cmd/audit/testdata/*.yaml"} {
		paths, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			raw, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	f.Add([]byte("pairs: 1e3\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := Parse(raw)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned a config beside the error %v", err)
			}
			return
		}
		again, err := Parse(cfg.JSON())
		if err != nil {
			t.Fatalf("the accepted config's own JSON is refused: %v\n%s", err, cfg.JSON())
		}
		if !bytes.Equal(again.JSON(), cfg.JSON()) {
			t.Fatalf("the config changed on a round trip through its JSON:\n%s\n%s", cfg.JSON(), again.JSON())
		}
	})
}
