package importer

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment/spec"
)

// Sample-level add and remove change a client's sample count between the worlds, which the
// evaluation of a known model cannot run side by side: the import refuses them as a config
// error before it reads anything (it failed after reading every snapshot), and nothing is
// written.
func TestImportRefusesUnevenAdjacency(t *testing.T) {
	for _, adj := range []string{
		"adjacency: {kind: add, client: 0, canary: dirac}",
		"adjacency: {kind: remove, client: 0, index: 1}",
	} {
		cfg, err := spec.Parse([]byte(strings.Replace(smallYAML, "adjacency: {kind: replace, client: 0, index: 1, canary: dirac}", adj, 1)))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "imp")
		_, err = Import(context.Background(), Options{Manifest: &Manifest{}, Config: cfg, Out: out, ToolVersion: "test"})
		var ce *spec.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "changes client 0's number of samples") {
			t.Errorf("%s: err = %v, want a config error naming the adjacency", adj, err)
		}
	}
}

// A config whose checkpoints hold no round after 0 imported and then left the analysis no
// round to score: it is a config error before anything is read.
func TestImportRefusesRoundZeroAlone(t *testing.T) {
	cfg, err := spec.Parse([]byte(smallYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Train.Checkpoints = []int{0}
	_, err = Import(context.Background(), Options{Manifest: &Manifest{}, Config: cfg, Out: filepath.Join(t.TempDir(), "imp"), ToolVersion: "test"})
	var ce *spec.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "lists no round after 0") {
		t.Errorf("checkpoints [0]: err = %v, want a config error", err)
	}
}
