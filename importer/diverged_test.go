package importer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The manifest's diverged column is read (true/false, 1/0, empty), a bad value names its line,
// and a run flagged at a round stays flagged at its later rounds in the plan.
func TestManifestDivergedColumn(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "m.csv")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := ReadManifest(write("file,world,pair,round,diverged\na,C,0,1,maybe\n")); err == nil || !strings.Contains(err.Error(), `diverged "maybe"`) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad diverged value: err = %v", err)
	}
	m, err := ReadManifest(write("file,world,pair,round,diverged\na0,C,0,0,\na1,C,0,1,1\na2,C,0,2,false\nb0,C',0,0,0\nb1,C',0,1,\nb2,C',0,2,\n"))
	if err != nil {
		t.Fatal(err)
	}
	plan, probs := m.validate(Expect{Pairs: 1, Rounds: []int{0, 1, 2}, Clients: 1})
	if probs.len() > 0 {
		t.Fatal(probs.err("manifest"))
	}
	if got := plan.Diverged; got == nil || !slices.Equal(got[0][0], []bool{false, true, true}) || !slices.Equal(got[0][1], []bool{false, false, false}) {
		t.Errorf("plan.Diverged = %v, want C [false true true], C' all false", got)
	}
}
