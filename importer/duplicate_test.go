package importer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment/spec"
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

// Copies of one training listed as other pairs under their own file names (or as links) pass
// the manifest's check of file names, and were imported as independent pairs: 20 trainings
// listed ten times each certified a violation that the 20 did not. After a noisy round no two
// runs of different pairs agree bit for bit, so such runs are refused, naming both files. The
// two runs of one pair may agree (shared noise, and the target client may sit the round out),
// and without noise equal runs can be a real deterministic training.
func TestCopiedRunsRefused(t *testing.T) {
	cfg := smallConfig(t)
	// Pairs 3 and 4 hold pair 0's models at round 3, under their own names.
	var pair0 [2][]float32
	copies := func(p, w, r int, good []float32) []float32 {
		if r != 3 {
			return nil
		}
		v := ownDraw(good, p, w, r)
		if p == 0 {
			pair0[w] = v
		}
		if p == 3 || p == 4 {
			return pair0[w]
		}
		return v
	}
	_, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: copies})
	for _, want := range []string{
		"round 3: pair 0 world C (", "p0_w0_r3.npy) and pair 3 world C (", "p3_w0_r3.npy) hold the same model bit for bit (and 1 more runs of other pairs)",
		"round 3: pair 0 world C' (", "copies of one training", "(2 problems)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}

	// Runs declared diverged keep earlier parameters, which may agree: accepted.
	diverged := func(p, w, r int) string {
		return fmt.Sprintf(",%v", r == 3 && (p == 0 || p == 3 || p == 4))
	}
	if _, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: copies, header: ",diverged", cols: diverged}); err != nil {
		t.Errorf("equal runs declared diverged refused: %v", err)
	}

	// Both worlds of a pair equal at a round: accepted.
	same := func(p, w, r int, good []float32) []float32 {
		if r == 0 {
			return nil
		}
		if p < 3 {
			return ownDraw(good, p, 0, r)
		}
		return ownDraw(good, p, w, r)
	}
	if _, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: same}); err != nil {
		t.Errorf("a pair whose worlds agree refused: %v", err)
	}

	// Without noise, runs of different pairs may agree.
	quiet := smallConfig(t)
	quiet.Train.NoiseStd = 0
	if _, err, _ := importFlat(t, flatSpec{cfg: quiet, vec: copies}); err != nil {
		t.Errorf("equal runs refused without noise: %v", err)
	}
}

// The copies check ran only where noise_std or noise_multiplier was set, and idp-fedavg and
// adaptive-fedavg take their noise from train.privacy with both 0: copies of one training were
// imported as independent pairs and certified a violation no training showed (grad-align mu
// 1.45, AUC 1.0).
func TestCopiedRunsRefusedUnderPrivacyBudgets(t *testing.T) {
	cfg, err := spec.Parse([]byte(strings.NewReplacer(
		"adjacency: {kind: replace, client: 0, index: 1, canary: dirac}", "adjacency: {kind: remove-client, client: 0, index: 0}",
		"  algorithm: fedavg\n", "  algorithm: idp-fedavg\n  sampling_rate: 0.5\n  update_clip: 1\n  privacy: {delta: 1.0e-5, groups: [{clients: 2, epsilon: 2}, {clients: 1, epsilon: 6}]}\n",
		"  clip_norm: 1\n  noise_std: 0.02\n", "",
		"attacks: [loss, margin, grad-align, linear]", "attacks: [loss, margin]",
	).Replace(smallYAML)))
	if err != nil {
		t.Fatal(err)
	}
	copies := func(p, w, r int, good []float32) []float32 {
		if r != 3 {
			return nil
		}
		v := slices.Clone(good)
		v[1] += float32(2*min(p, 1)+w+1) / 512 // pairs 1 and later: one training
		return v
	}
	if _, err, _ := importFlat(t, flatSpec{cfg: cfg, vec: copies}); err == nil || !strings.Contains(err.Error(), "copies of one training") {
		t.Errorf("copies under idp-fedavg: %v, want them refused", err)
	}
}

// An import that drops every attack its config lists would leave the list empty, which means
// every attack the run files support: the analysis scored seven attacks the config never chose,
// or failed (exit 1) on one that needs w_0. Both are config errors now, before anything is
// written, as are attacks that need w_0 without round 0 among the snapshots.
func TestImportRefusesAttacksItCannotScore(t *testing.T) {
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"every listed attack dropped", "  checkpoints: [0, 1, 3]\n  record_params: true\n", "  checkpoints: [0, 1, 2, 3]\n  record_params: true\n  informed: true\n  participants: 2\n",
			"audit.attacks: no attack of informed-all can score the imported runs"},
		{"w_0 without round 0", "  checkpoints: [0, 1, 3]\n", "  checkpoints: [1, 3]\n", "read the initial model w_0"},
	} {
		yaml := strings.Replace(smallYAML, c.from, c.to, 1)
		if c.name == "every listed attack dropped" {
			yaml = strings.Replace(yaml, "attacks: [loss, margin, grad-align, linear]", "attacks: [informed-all]", 1)
		}
		cfg, err := spec.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, err, _ = importFlat(t, flatSpec{cfg: cfg})
		var ce *spec.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a config error saying %q", c.name, err, c.want)
		}
	}
}
