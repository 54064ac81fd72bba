package importer

import (
	"strings"
	"testing"
)

// A manifest that names one snapshot file for two runs after round 0 (a trainer whose file
// names lack the pair id, so that each pair overwrote the last, or a copy-paste in the manifest)
// makes those runs one: N pairs listing one pair's files are audited as N independent pairs,
// and a single pair that happens to separate its worlds certifies a large mu, a violation no
// training showed. Round 0 may share its file (w_0 is one for every run); later rounds may not.
func TestSameFileForTwoRuns(t *testing.T) {
	cfg := smallConfig(t)
	// Every run's snapshots are one file, ok.npy: after round 0 every run is a copy of the first.
	copied := flatSpec{cfg: cfg, shared: true}
	_, err, _ := importFlat(t, copied)
	for _, want := range []string{"line 3 and line 6: pair 0 world C and pair 0 world C' at round 1 are one file, ", "ok.npy (and 46 more runs)",
		"line 4 and line 7: pair 0 world C and pair 0 world C' at round 3", "no two runs hold the same model after a noisy round", "(2 problems)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}

	// Validate refuses it for uploads too, and across pairs; round 0 may share its file.
	ex := Expect{Pairs: 2, Rounds: []int{0, 1}, Clients: 2, TargetClient: 1}
	es := []Entry{
		{File: "w0", World: 0, Pair: 0, Round: 0, Client: -1, Line: "line 2"},
		{File: "w0", World: 1, Pair: 0, Round: 0, Client: -1, Line: "line 3"},
		{File: "w0", World: 0, Pair: 1, Round: 0, Client: -1, Line: "line 4"},
		{File: "w0", World: 1, Pair: 1, Round: 0, Client: -1, Line: "line 5"},
		{File: "a", World: 0, Pair: 0, Round: 1, Client: -1, Line: "line 6"},
		{File: "b", World: 1, Pair: 0, Round: 1, Client: -1, Line: "line 7"},
		{File: "./a", World: 0, Pair: 1, Round: 1, Client: -1, Line: "line 8"},
		{File: "d", World: 1, Pair: 1, Round: 1, Client: -1, Line: "line 9"},
		{File: "u", World: 0, Pair: 0, Round: 1, Client: 1, Line: "line 10"},
		{File: "u2", World: 1, Pair: 0, Round: 1, Client: 1, Line: "line 11"},
		{File: "u3", World: 0, Pair: 1, Round: 1, Client: 1, Line: "line 12"},
		{File: "u", World: 1, Pair: 1, Round: 1, Client: 1, Line: "line 13"},
	}
	_, err = (&Manifest{Path: "m", Entries: es}).Validate(ex)
	for _, want := range []string{"line 6 and line 8: pair 0 world C and pair 1 world C at round 1 are one file, a:",
		"line 10 and line 13: the upload of pair 0 world C and pair 1 world C' at round 1 are one file, u:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "w0") {
		t.Errorf("round 0's shared w_0 refused: %v", err)
	}
	es[6].File, es[11].File = "c", "u4"
	if _, err := (&Manifest{Path: "m", Entries: es}).Validate(ex); err != nil {
		t.Errorf("distinct files refused: %v", err)
	}
}
